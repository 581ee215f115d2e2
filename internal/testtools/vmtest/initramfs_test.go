package vmtest

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"strconv"
	"testing"
)

// newcMember is a member as read back from an archive.
type newcMember struct {
	name string
	mode uint32
	data string
}

// readNewc decodes a gzip'd newc archive up to its trailer, checking the magic, the
// four-byte padding and that nothing follows the trailer but padding.
func readNewc(t *testing.T, b []byte) []newcMember {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	field := func(hdr []byte, i int) int {
		v, err := strconv.ParseUint(string(hdr[6+8*i:14+8*i]), 16, 32)
		if err != nil {
			t.Fatalf("header field %d: %v", i, err)
		}
		return int(v)
	}
	align := func(n int) int { return (n + 3) &^ 3 }
	var out []newcMember
	for off := 0; ; {
		if off+110 > len(raw) || string(raw[off:off+6]) != "070701" {
			t.Fatalf("no newc header at %d", off)
		}
		hdr := raw[off : off+110]
		size, nameSize := field(hdr, 6), field(hdr, 11)
		name := string(raw[off+110 : off+110+nameSize-1])
		if raw[off+110+nameSize-1] != 0 {
			t.Fatalf("%s: name not NUL-terminated", name)
		}
		dataOff := align(off + 110 + nameSize)
		if name == "TRAILER!!!" {
			if rest := raw[dataOff:]; len(bytes.Trim(rest, "\x00")) != 0 {
				t.Fatalf("%d bytes after the trailer", len(rest))
			}
			return out
		}
		out = append(out, newcMember{name, uint32(field(hdr, 1)), string(raw[dataOff : dataOff+size])})
		off = align(dataOff + size)
	}
}

func TestWriteInitramfs(t *testing.T) {
	var buf bytes.Buffer
	err := WriteInitramfs(&buf, []File{
		{Name: "init", Mode: 0o755, Data: []byte("#!/bin/sh\n")},
		{Name: "/bin/busybox", Mode: 0o755, Data: []byte("ELF.")}, // leading slash dropped
		{Name: "bin/sh", Mode: fs.ModeSymlink | 0o777, Data: []byte("busybox")},
		{Name: "tmp", Mode: fs.ModeDir | 0o777},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []newcMember{
		{"bin", 0o040755, ""}, // added: parent of bin/busybox, before its children
		{"bin/busybox", 0o100755, "ELF."},
		{"bin/sh", 0o120777, "busybox"},
		{"init", 0o100755, "#!/bin/sh\n"},
		{"tmp", 0o040777, ""},
	}
	got := readNewc(t, buf.Bytes())
	if len(got) != len(want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("member %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestWriteInitramfsErrors(t *testing.T) {
	for name, files := range map[string][]File{
		"empty name": {{Name: "/", Mode: 0o644}},
		"duplicate":  {{Name: "a", Mode: 0o644}, {Name: "/a", Mode: 0o644}},
	} {
		if err := WriteInitramfs(io.Discard, files); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
