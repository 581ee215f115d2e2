package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
	"github.com/p2pkit/p2pkit/internal/testtools/readmecheck"
	"github.com/p2pkit/p2pkit/internal/testtools/testsupport"
)

// repoRoot is the repository root seen from this package's directory, where
// go test runs; README paths are relative to it.
const repoRoot = "../.."

// mkfixtureCommand is how the README says a synthetic machine was written:
// "go run ./internal/testtools/fixture/cmd/mkfixture -o /tmp/dgx dgx-h100".
var mkfixtureCommand = regexp.MustCompile(`mkfixture -o (/tmp/[\w.-]+) ([\w.-]+)`)

// TestREADMEExamples checks every command example of README.md, a fenced block
// whose first line is "$ command" (internal/testtools/readmecheck says how a block is
// read), so that the README cannot drift from what the programs print:
//
//   - A p2pcheck command that reads no live machine — --snapshot FILE, or
//     --root /tmp/NAME where the README writes the synthetic machine NAME with
//     mkfixture (or NAME is itself a machine of internal/testtools/fixture) — runs here, and
//     the block must show its output exactly, stderr included, after any
//     "| head -N"; a following "$ echo $?" shows its exit status.
//   - Any other command was captured on a real machine. The comment
//     "<!-- example: FILE... -->" above the block names the committed files its
//     commands' output was copied from, and the block must be an excerpt of them
//     ("..." marks elided lines; a log's "rc=N" line is the exit status).
//
// The runnable examples are regenerated from their output with one command
// (also "make readme"):
//
//	go test ./cmd/p2pcheck -run TestREADMEExamples -update
func TestREADMEExamples(t *testing.T) {
	path := filepath.Join(repoRoot, "README.md")
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	exs, err := readmecheck.Parse(md)
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if len(exs) == 0 {
		t.Fatal("README.md has no command examples")
	}
	names := map[string]string{} // /tmp/dgx -> dgx-h100
	for _, m := range mkfixtureCommand.FindAllStringSubmatch(string(md), -1) {
		names[m[1]] = m[2]
	}
	machines := writeMachines(t, exs, names)
	changed := false
	for i := range exs {
		ex := &exs[i]
		t.Run(fmt.Sprintf("line%d", ex.Line), func(t *testing.T) {
			if ex.Sources != nil {
				checkCapturedExample(t, ex)
				return
			}
			if runExample(t, ex, machines) {
				changed = true
			}
		})
	}
	if testsupport.Update() && changed {
		if err := os.WriteFile(path, readmecheck.Render(md, exs), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeMachines writes each synthetic machine that the examples' --root /tmp/NAME
// names, once, and returns their directories by /tmp path. A /tmp path the
// README does not write with mkfixture is taken as a machine's own name.
func writeMachines(t *testing.T, exs []readmecheck.Example, names map[string]string) map[string]string {
	t.Helper()
	dirs := map[string]string{}
	for _, ex := range exs {
		for _, s := range ex.Steps {
			c, err := readmecheck.ParseCommand(s.Command)
			if err != nil || ex.Sources != nil {
				continue // reported by the example's own test
			}
			for i, a := range c.Args {
				val, ok := strings.CutPrefix(a, "--root=")
				if !ok && a == "--root" && i+1 < len(c.Args) {
					val, ok = c.Args[i+1], true
				}
				if !ok && strings.HasPrefix(a, "/tmp/") && names[a] != "" {
					val, ok = a, true // a root named as an argument: diff GOLDEN
				}
				if !ok || !strings.HasPrefix(val, "/tmp/") || dirs[val] != "" {
					continue
				}
				name, ok := names[val]
				if !ok {
					name = filepath.Base(val)
				}
				if _, err := fixture.ByName(name); err != nil {
					continue // reported by the example's own test
				}
				dirs[val] = machineRoot(t, name)
			}
		}
	}
	return dirs
}

// runExample runs the commands of a block that needs no live machine and
// compares (or, with -update, replaces) what the block shows. It reports whether
// the block changed.
func runExample(t *testing.T, ex *readmecheck.Example, machines map[string]string) (changed bool) {
	t.Helper()
	lastCode, piped := -1, false
	for i := range ex.Steps {
		s := &ex.Steps[i]
		c, err := readmecheck.ParseCommand(s.Command)
		if err != nil {
			t.Errorf("README.md:%d: %v", s.Line, err)
			return false
		}
		var got []string
		switch {
		case c.ExitStatus && (lastCode < 0 || piped):
			t.Errorf("README.md:%d: echo $? must follow a p2pcheck command without a pipe", s.Line)
			return false
		case c.ExitStatus:
			got = []string{strconv.Itoa(lastCode)}
		default:
			var out string
			lastCode, out = runOffline(t, s.Line, c, machines)
			if lastCode < 0 {
				return false
			}
			piped = c.Head > 0
			got = readmecheck.Lines(out)
		}
		if testsupport.Update() {
			if !slices.Equal(s.Output, got) {
				s.Output, changed = got, true
			}
			continue
		}
		if diff := cmp.Diff(s.Output, got); diff != "" {
			t.Errorf("README.md:%d: $ %s (-README +output; go test -run TestREADMEExamples -update rewrites it):\n%s", s.Line, s.Command, diff)
		}
	}
	return changed
}

// runOffline runs one p2pcheck command of the README in-process, on the
// snapshot or synthetic machine it names, and returns its exit status and what
// a terminal would show: stdout and stderr as written, or with "| head -N" the
// first N lines of stdout after stderr, with the paths it ran on replaced by
// those the README shows. machines maps a /tmp root to the
// directory its synthetic machine was written to. It returns -1 for a command
// that needs a live machine.
func runOffline(t *testing.T, line int, c readmecheck.Command, machines map[string]string) (int, string) {
	t.Helper()
	if c.Args[0] != "p2pcheck" {
		t.Errorf("README.md:%d: %s runs only on a real machine: name the file its output was copied from in <!-- example: FILE --> above the block", line, c.Args[0])
		return -1, ""
	}
	args := append([]string(nil), c.Args[1:]...)
	offline := false
	var shown []string // replaced path, path the README shows: for strings.NewReplacer
	for i := range args {
		if dir := machines[args[i]]; dir != "" && (i == 0 || !strings.HasPrefix(args[i-1], "--")) {
			// a synthetic machine named as an argument (diff GOLDEN [NODE])
			shown = append(shown, dir, args[i])
			args[i], offline = dir, true
			continue
		}
		flag, val, inline := strings.Cut(args[i], "=")
		if !inline {
			if i+1 == len(args) {
				break
			}
			flag, val = args[i], args[i+1]
		}
		switch flag {
		case "--snapshot", "--root", "--pci-ids":
		default:
			continue
		}
		switch {
		case flag == "--root" && strings.HasPrefix(val, "/tmp/"):
			if machines[val] == "" {
				t.Errorf("README.md:%d: --root %s: no synthetic machine of that name, and the README writes none there (mkfixture -o %s NAME)", line, val, val)
				return -1, ""
			}
			shown = append(shown, machines[val], val)
			val, offline = machines[val], true
		case filepath.IsAbs(val):
			continue // the live machine, or a path only it has
		default:
			shown = append(shown, filepath.Join(repoRoot, val), val)
			val, offline = shown[len(shown)-2], offline || flag != "--pci-ids"
		}
		if inline {
			args[i] = flag + "=" + val
		} else {
			args[i+1] = val
		}
	}
	if !offline {
		t.Errorf("README.md:%d: %q reads the live machine: name the file its output was copied from in <!-- example: FILE --> above the block, or use --snapshot or --root", line, strings.Join(c.Args, " "))
		return -1, ""
	}
	var out, errb bytes.Buffer
	var code int
	if c.Head == 0 {
		code = run(args, &out, &out)
	} else {
		code = run(args, &out, &errb)
		lines := readmecheck.Lines(out.String())
		out.Reset()
		out.Write(errb.Bytes())
		for _, l := range lines[:min(c.Head, len(lines))] {
			out.WriteString(l + "\n")
		}
	}
	return code, strings.NewReplacer(shown...).Replace(out.String())
}

// checkCapturedExample checks a block copied from files captured on a real
// machine: each command's output is an excerpt of its file, and "echo $?" shows
// the "rc=N" the log recorded after it.
func checkCapturedExample(t *testing.T, ex *readmecheck.Example) {
	t.Helper()
	for _, f := range ex.Sources {
		if !filepath.IsLocal(f) {
			t.Fatalf("README.md:%d: example file %q is not a path inside the repository", ex.Line, f)
		}
	}
	var src []string
	var file string
	end, n := 0, 0
	for _, s := range ex.Steps {
		c, err := readmecheck.ParseCommand(s.Command)
		if err != nil {
			t.Errorf("README.md:%d: %v", s.Line, err)
			return
		}
		if c.ExitStatus {
			code, ok := readmecheck.ExitStatus(src, end)
			if !ok {
				t.Errorf("README.md:%d: %s records no rc=N after the output shown", s.Line, file)
				continue
			}
			if diff := cmp.Diff(s.Output, []string{strconv.Itoa(code)}); diff != "" {
				t.Errorf("README.md:%d: exit status (-README +%s):\n%s", s.Line, file, diff)
			}
			continue
		}
		file = ex.Sources[min(n, len(ex.Sources)-1)]
		n++
		b, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Errorf("README.md:%d: %v", ex.Line, err)
			return
		}
		src = readmecheck.Lines(string(b))
		for i, l := range src {
			src[i] = readmecheck.StripANSI(l)
		}
		if end, err = readmecheck.Excerpt(s.Output, src); err != nil {
			t.Errorf("README.md:%d: $ %s is not an excerpt of %s: %v", s.Line, s.Command, file, err)
		}
	}
	if n < len(ex.Sources) {
		t.Errorf("README.md:%d: the example comment names %d files for %d commands", ex.Line, len(ex.Sources), n)
	}
}

// TestRunExample: runExample resolves snapshot paths against the repository
// root in both flag forms and shows them as the README wrote them, applies "| head -N", shows stderr before a pipe's
// output and takes "echo $?" as the exit status, so a block written from those
// rules is unchanged.
func TestRunExample(t *testing.T) {
	_, pairs, _ := p2pcheck("--snapshot", h200Snapshot, "pairs")
	code, gdr, gdrErr := p2pcheck("gdr", "--snapshot="+h200Snapshot, "--format", "json", "--kernel-version", "x")
	if gdr != "" || code != exitUsage {
		t.Fatalf("gdr with a bad --kernel-version: exit %d, stdout %q", code, gdr)
	}
	code, _, missing := p2pcheck("--snapshot", "../../testdata/missing.tar.gz", "topo")
	if code != exitNoEval || !strings.Contains(missing, "../../testdata/missing.tar.gz") {
		t.Fatalf("missing snapshot: exit %d, stderr %q", code, missing)
	}
	md := "```\n" +
		"$ p2pcheck --snapshot testdata/missing.tar.gz topo\n" +
		strings.ReplaceAll(missing, "../../testdata/", "testdata/") +
		"$ p2pcheck --snapshot testdata/h200-2gpu-vm/snapshot.tar.gz pairs | head -2\n" +
		strings.Join(readmecheck.Lines(pairs)[:2], "\n") + "\n" +
		"\n" +
		"$ p2pcheck gdr --snapshot=testdata/h200-2gpu-vm/snapshot.tar.gz --format json --kernel-version x | head -1\n" +
		gdrErr +
		"$ p2pcheck gdr --snapshot=testdata/h200-2gpu-vm/snapshot.tar.gz --format json --kernel-version x\n" +
		gdrErr +
		"$ echo $?\n" +
		strconv.Itoa(exitUsage) + "\n" +
		"```\n"
	exs, err := readmecheck.Parse([]byte(md))
	if err != nil || len(exs) != 1 {
		t.Fatalf("Parse: %d examples, %v", len(exs), err)
	}
	if runExample(t, &exs[0], nil) {
		t.Error("runExample changed a block that shows the output")
	}
}

// TestDocumentPaths: every file of this repository that README.md or a document
// under docs/ points to, by a relative link or as a path in a code span, is here,
// so that moving or renaming one cannot leave a user at a dead reference. bin/
// and dist/ hold what make builds and are not checked.
func TestDocumentPaths(t *testing.T) {
	tops := map[string]bool{}
	ents, err := os.ReadDir(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && e.Name() != "bin" && e.Name() != "dist" {
			tops[e.Name()] = true
		}
	}
	docs := []string{"README.md"}
	err = filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(repoRoot, p)
			docs = append(docs, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, doc := range docs {
		md, err := os.ReadFile(filepath.Join(repoRoot, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range readmecheck.Paths(md, path.Dir(doc), func(s string) bool { return tops[s] }) {
			checked++
			if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(p))); err != nil {
				t.Errorf("%s points to %s, which is not in the repository: %v", doc, p, err)
			}
		}
	}
	if checked == 0 {
		t.Error("no paths found in README.md and docs/")
	}
}
