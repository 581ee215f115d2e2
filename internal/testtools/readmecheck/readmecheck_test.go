package readmecheck

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const doc = "# T\n" +
	"\n" +
	"```sh\n" +
	"make run\n" +
	"```\n" +
	"\n" +
	"<!-- example: a.log b.txt -->\n" +
	"\n" +
	"```\n" +
	"$ p2pcheck matrix\n" +
	"GPU0 X\n" +
	"\n" +
	"$ nvidia-smi topo -m\n" +
	"...\n" +
	"GPU0\t X \n" +
	"```\n" +
	"text\n" +
	"~~~\n" +
	"$ p2pcheck --root /tmp/dgx pairs | head -2\n" +
	"```\n" +
	"x\n" +
	"$ echo $?\n" +
	"0\n" +
	"~~~\n"

func TestParse(t *testing.T) {
	got, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []Example{
		{Line: 9, Sources: []string{"a.log", "b.txt"}, Steps: []Step{
			{Line: 10, Command: "p2pcheck matrix", Output: []string{"GPU0 X"}, sep: true},
			{Line: 13, Command: "nvidia-smi topo -m", Output: []string{"...", "GPU0\t X "}},
		}, first: 9, end: 15},
		{Line: 18, Steps: []Step{
			{Line: 19, Command: "p2pcheck --root /tmp/dgx pairs | head -2", Output: []string{"```", "x"}},
			{Line: 22, Command: "echo $?", Output: []string{"0"}},
		}, first: 18, end: 23},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(Example{}, Step{}), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tt := range []struct{ name, md string }{
		{"unterminated", "```\n$ p2pcheck\n"},
		{"comment before text", "<!-- example: a -->\ntext\n```\n$ p2pcheck\n```\n"},
		{"comment before plain block", "<!-- example: a -->\n```\nx\n```\n"},
		{"comment at the end", "<!-- example: a -->\n"},
		{"two comments", "<!-- example: a -->\n<!-- example: b -->\n```\n$ x\n```\n"},
		{"comment without file", "<!-- example: -->\n```\n$ x\n```\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse([]byte(tt.md)); !errors.Is(err, ErrSyntax) {
				t.Errorf("Parse: %v, want ErrSyntax", err)
			}
		})
	}
}

// TestRender: rendering what Parse read gives the file back, and changed outputs
// land in their blocks only.
func TestRender(t *testing.T) {
	for _, md := range []string{doc, strings.TrimSuffix(doc, "\n"), "", "\n", "no examples\n"} {
		exs, err := Parse([]byte(md))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(Render([]byte(md), exs)); got != md {
			t.Errorf("Render(Parse(%q)) = %q", md, got)
		}
	}
	exs, _ := Parse([]byte(doc))
	exs[0].Steps[0].Output = []string{"a", "b"}
	exs[1].Steps[1].Output = []string{"1"}
	want := strings.Replace(doc, "GPU0 X\n", "a\nb\n", 1)
	want = strings.Replace(want, "$ echo $?\n0\n", "$ echo $?\n1\n", 1)
	if diff := cmp.Diff(want, string(Render([]byte(doc), exs))); diff != "" {
		t.Errorf("Render (-want +got):\n%s", diff)
	}
}

func TestParseCommand(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Command
		err  bool
	}{
		{in: "p2pcheck", want: Command{Args: []string{"p2pcheck"}}},
		{in: "sudo p2pcheck  --probe", want: Command{Args: []string{"p2pcheck", "--probe"}, Sudo: true}},
		{in: "p2pcheck pairs | head -5", want: Command{Args: []string{"p2pcheck", "pairs"}, Head: 5}},
		{in: "p2pcheck pairs | head -n 3", want: Command{Args: []string{"p2pcheck", "pairs"}, Head: 3}},
		{in: `p2pcheck --check 'a b' --x="c d"`, want: Command{Args: []string{"p2pcheck", "--check", "a b", "--x=c d"}}},
		{in: "echo $?", want: Command{Args: []string{"echo", "$?"}, ExitStatus: true}},
		{in: "p2pcheck | grep x", err: true},
		{in: "p2pcheck | head -0", err: true},
		{in: "p2pcheck | head -x", err: true},
		{in: "p2pcheck|head -1", err: true},
		{in: "p2pcheck > out", err: true},
		{in: "p2pcheck; echo", err: true},
		{in: `p2pcheck "$HOME"`, err: true},
		{in: "p2pcheck 'open", err: true},
		{in: "p2pcheck $(hostname)", err: true},
		{in: "sudo", err: true},
		{in: "  ", err: true},
		{in: "sudo echo $?", err: true},
	} {
		got, err := ParseCommand(tt.in)
		if tt.err {
			if !errors.Is(err, ErrSyntax) {
				t.Errorf("ParseCommand(%q) = %+v, %v; want ErrSyntax", tt.in, got, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseCommand(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseCommand(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestExcerpt(t *testing.T) {
	src := []string{"== report", "warning", "a", "b", "c", "d", "rc=1", "== next", "a", "x"}
	for _, tt := range []struct {
		name  string
		shown []string
		end   int
		err   string
	}{
		{"contiguous", []string{"a", "b", "c"}, 5, ""},
		{"elided", []string{"a", "...", "d"}, 6, ""},
		{"elision at both ends", []string{"...", "b", "..."}, 4, ""},
		{"second occurrence", []string{"a", "x"}, 10, ""},
		{"empty", nil, 0, ""},
		{"gap without elision", []string{"a", "c"}, 0, `shown line 2 "c": the file has "b" there (its line 4)`},
		{"order", []string{"c", "...", "b", "c", "d", "e"}, 0, `shown line 3 "b": the file has "d" there (its line 6)`},
		{"absent", []string{"zzz"}, 0, `shown line 1 "zzz": the file has "== report" there (its line 1)`},
		{"longer than the file", make([]string, 11), 0, "past the end of the file (10 lines)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			end, err := Excerpt(tt.shown, src)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("Excerpt: %v, want an error with %q", err, tt.err)
				}
				return
			}
			if err != nil || end != tt.end {
				t.Errorf("Excerpt = %d, %v; want %d", end, err, tt.end)
			}
		})
	}
}

func TestExitStatus(t *testing.T) {
	src := []string{"out", "gdrbench rc=2", "rc=1", "xrc=3"}
	for _, tt := range []struct {
		from, want int
		ok         bool
	}{{0, 2, true}, {2, 1, true}, {3, 0, false}, {9, 0, false}} {
		if got, ok := ExitStatus(src, tt.from); got != tt.want || ok != tt.ok {
			t.Errorf("ExitStatus(src, %d) = %d, %v; want %d, %v", tt.from, got, ok, tt.want, tt.ok)
		}
	}
}

func TestStripANSI(t *testing.T) {
	if got, want := StripANSI("\t\x1b[4mGPU0\tGPU1\x1b[0m"), "\tGPU0\tGPU1"; got != want {
		t.Errorf("StripANSI = %q, want %q", got, want)
	}
}

// FuzzParse: Parse never panics, and what it accepts renders back unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte(doc))
	f.Add([]byte("<!-- example: a -->\n```\n$ x\n\n\n$ y\n```"))
	f.Fuzz(func(t *testing.T, md []byte) {
		exs, err := Parse(md)
		if err != nil {
			return
		}
		for _, ex := range exs {
			for _, s := range ex.Steps {
				_, _ = ParseCommand(s.Command)
				_, _ = Excerpt(s.Output, s.Output)
			}
		}
		if got := Render(md, exs); string(got) != string(md) {
			t.Errorf("Render(Parse(%q)) = %q", md, got)
		}
	})
}
