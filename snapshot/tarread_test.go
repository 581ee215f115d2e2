package snapshot

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tarEntry is what a reader made of one member: the header fields a snapshot keeps,
// the data read and how the read ended.
type tarEntry struct {
	Typeflag           byte
	Name, Linkname     string
	Mode, Size         int64
	Devmajor, Devminor int64
	Data               []byte
	ReadErr            string
}

// tarRead reads a whole stream through next and read, as ReadBudget does; with
// partial it reads only half of each member's data, so that Next skips the rest.
// It returns the entries and the error that ended the stream.
func tarRead(next func() (*tar.Header, error), read io.Reader, partial bool) ([]tarEntry, string) {
	var es []tarEntry
	for len(es) < 10_000 {
		hdr, err := next()
		if err != nil {
			return es, err.Error()
		}
		e := tarEntry{Typeflag: hdr.Typeflag, Name: hdr.Name, Linkname: hdr.Linkname, Mode: hdr.Mode,
			Size: hdr.Size, Devmajor: hdr.Devmajor, Devminor: hdr.Devminor}
		var r io.Reader = read
		if partial {
			r = io.LimitReader(read, hdr.Size/2)
		}
		e.Data, err = io.ReadAll(r)
		if err != nil {
			e.ReadErr = err.Error()
		}
		es = append(es, e)
	}
	return es, "too many members"
}

// diffTarReaders reads b with archive/tar's Reader and with tarReader and returns
// how they differ, "" when they read it alike, and how many headers tarReader
// unpacked itself.
func diffTarReaders(b []byte, partial bool) (diff string, unpacked int) {
	want := tar.NewReader(bytes.NewReader(b))
	got := newTarReader(bytes.NewReader(b))
	next := func() (*tar.Header, error) {
		hdr, err := got.Next()
		if err == nil && got.sub == nil {
			unpacked++
		}
		return hdr, err
	}
	we, werr := tarRead(want.Next, want, partial)
	ge, gerr := tarRead(next, got, partial)
	if !reflect.DeepEqual(we, ge) {
		return "entries (-archive/tar +tarReader):\n" + cmp.Diff(we, ge), unpacked
	}
	if werr != gerr {
		return fmt.Sprintf("end: archive/tar %q, tarReader %q", werr, gerr), unpacked
	}
	return "", unpacked
}

// TestTarReaderMatchesArchiveTar reads archives written by tarWriter and by
// archive/tar in every format, whole, cut short and with bytes changed, with
// archive/tar's Reader and with tarReader, which must read the same members, the same
// data and end the same way.
func TestTarReaderMatchesArchiveTar(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var archives [][]byte
	for range 6 {
		archives = append(archives, ourTar(t, writable(t, randomMembers(rng, 12))))
	}
	// And capture-like ones, whose every header tarWriter packs.
	for range 6 {
		var ms []tarMember
		for j := range 30 {
			dir := fmt.Sprintf("sys/devices/pci0000:%02x/0000:%02x:%02x.%d", j%3, j, rng.IntN(32), rng.IntN(8))
			switch rng.IntN(4) {
			case 0:
				ms = append(ms, tarMember{dir + "/", member{typ: tar.TypeDir, perm: 0o755}})
			case 1:
				ms = append(ms, tarMember{dir + "/driver", member{typ: tar.TypeSymlink, perm: 0o777, target: "../../../bus/pci/drivers/nvme"}})
			case 2:
				ms = append(ms, tarMember{"dev/nvidia" + fmt.Sprint(j), member{typ: tar.TypeChar, perm: 0o666, major: 195, minor: uint32(j)}})
			default:
				data := make([]byte, rng.IntN(1100))
				for k := range data {
					data[k] = byte(rng.IntN(256))
				}
				ms = append(ms, tarMember{dir + "/config", member{typ: tar.TypeReg, perm: 0o644, data: data}})
			}
		}
		archives = append(archives, ourTar(t, ms))
	}
	// archive/tar in each format it writes, with plain members around the others.
	for _, format := range []tar.Format{tar.FormatUSTAR, tar.FormatPAX, tar.FormatGNU} {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for i, h := range []*tar.Header{
			{Typeflag: tar.TypeReg, Name: "a/config", Mode: 0o644, Size: 3},
			{Typeflag: tar.TypeReg, Name: strings.Repeat("long/", 40) + "file", Mode: 0o644, Size: 700},
			{Typeflag: tar.TypeSymlink, Name: "a/driver", Linkname: strings.Repeat("../", 60) + "x", Mode: 0o777},
			{Typeflag: tar.TypeReg, Name: "a/caf\u00e9", Mode: 0o644, Size: 1},
			{Typeflag: tar.TypeDir, Name: "a/dir/", Mode: 0o755},
			{Typeflag: tar.TypeReg, Name: "a/after", Mode: 0o644, Size: 512},
		} {
			if format == tar.FormatUSTAR && (i == 1 || i == 2 || i == 3) {
				continue // what USTAR cannot hold
			}
			h.Format = format
			if err := tw.WriteHeader(h); err != nil {
				t.Fatalf("%v %q: %v", format, h.Name, err)
			}
			tw.Write(bytes.Repeat([]byte{byte('A' + i)}, int(h.Size)))
		}
		tw.Close()
		archives = append(archives, b.Bytes())
	}
	// A block tarWriter packs, with each type archive/tar gives a meaning of its own
	// (extensions, hard links, FIFOs, the old regular file, sparse files), which
	// tarReader must hand over, and with the header-only types a snapshot holds
	// (links, devices, directories), whose size archive/tar ignores; the checksum
	// made right again.
	rec := "path=sys/devices/renamed\n"
	rec = fmt.Sprintf("%d %s", len(rec)+3, rec)
	for _, typ := range []byte("xgLKS1670A2345") {
		b := ourTar(t, []tarMember{
			{"sys/devices/a", member{typ: tar.TypeReg, perm: 0o644, data: []byte(rec)}},
			{"sys/devices/b", member{typ: tar.TypeReg, perm: 0o644, data: []byte("after")}},
		})
		b[156] = typ
		if typ == '0' {
			b[156] = 0 // TypeRegA
		}
		resum(b[:blockSize])
		archives = append(archives, b)
	}
	// Numbers in the other forms archive/tar reads, or refuses: padded with spaces or
	// NULs on either side, cut by a NUL, empty, with a space inside, in base-256.
	for _, field := range []string{
		"0000644\x00", "000644 \x00", "   0644 ", "\x00\x00\x00\x00644", "644\x00\x00\x00\x00\x00",
		"64\x004\x00\x00\x00\x00", "\x00\x00\x00\x00\x00\x00\x00\x00", "        ", "6 4\x00\x00\x00\x00\x00",
		"0000648\x00", "\x80\x00\x00\x00\x00\x00\x01\xa4",
	} {
		for _, at := range []int{100, 108, 329} { // mode, uid, devmajor
			b := ourTar(t, []tarMember{
				{"sys/devices/a", member{typ: tar.TypeReg, perm: 0o644, data: []byte("abcde")}},
				{"sys/devices/b", member{typ: tar.TypeReg, perm: 0o644, data: []byte("after")}},
			})
			copy(b[at:at+8], field)
			resum(b[:blockSize])
			archives = append(archives, b)
		}
	}
	unpacked := 0
	for i, b := range archives {
		check := func(what string, b []byte) {
			t.Helper()
			for _, partial := range []bool{false, true} {
				d, n := diffTarReaders(b, partial)
				if d != "" {
					t.Fatalf("archive %d, %s (partial reads %v): %s", i, what, partial, d)
				}
				unpacked += n
			}
		}
		check("whole", b)
		for range 60 {
			n := rng.IntN(len(b))
			check(fmt.Sprintf("cut at %d", n), b[:n])
		}
		// Bytes changed, in a header's fields mostly: a checksum that fails,
		// a magic, a type, a number that is not octal, a name.
		for range 150 {
			c := bytes.Clone(b)
			k := rng.IntN(len(c))
			if rng.IntN(2) == 0 {
				k = k&^(blockSize-1) + rng.IntN(345)
			}
			c[k] = byte(rng.IntN(256))
			if rng.IntN(2) == 0 {
				resum(c[k&^(blockSize-1):][:blockSize]) // past the checksum, to the fields
			}
			check(fmt.Sprintf("byte %d set to %#x", k, c[k]), c)
		}
	}
	// Both readers were compared on headers tarReader unpacks, not only on
	// archive/tar's own.
	if unpacked < 5000 {
		t.Errorf("tarReader unpacked %d headers itself, want at least 5,000", unpacked)
	}
}

// resum writes the checksum of the header block b into it, as archive/tar writes it.
func resum(b []byte) {
	octal(b[148:155], naiveChecksum(b))
	b[155] = ' '
}

// naiveChecksum is the header checksum byte by byte, as POSIX.1 defines it.
func naiveChecksum(b []byte) int64 {
	var sum int64
	for i, c := range b {
		if 148 <= i && i < 156 {
			c = ' '
		}
		sum += int64(c)
	}
	return sum
}

// TestChecksum: checksum's sum in lanes is the byte-by-byte sum, on blocks of every
// byte value, all 0xff (the largest lanes) among them.
func TestChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var blocks [][blockSize]byte
	for v := range 256 {
		var b [blockSize]byte
		for i := range b {
			b[i] = byte(v)
		}
		blocks = append(blocks, b)
	}
	for range 1000 {
		var b [blockSize]byte
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		blocks = append(blocks, b)
	}
	for _, b := range blocks {
		if got, want := checksum(&b), naiveChecksum(b[:]); got != want {
			t.Fatalf("checksum of a block of % x...: %d, want %d", b[:8], got, want)
		}
	}
}

// TestTarReaderHandsOver: a PAX header among plain ones is read by archive/tar,
// and tarReader unpacks the plain ones after it again; after a member of another
// type (a global PAX header here; a sparse file's data is laid out otherwise too),
// archive/tar reads the rest.
func TestTarReaderHandsOver(t *testing.T) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeReg, Name: "before", Mode: 0o644, Size: 5},
		{Typeflag: tar.TypeReg, Name: "pax", Mode: 0o644, Size: 5, PAXRecords: map[string]string{"comment": "x"}, Format: tar.FormatPAX},
		{Typeflag: tar.TypeReg, Name: "after", Mode: 0o644, Size: 5},
		{Typeflag: tar.TypeSymlink, Name: "link", Linkname: strings.Repeat("../", 50) + "x", Mode: 0o777, Format: tar.FormatPAX},
		{Typeflag: tar.TypeReg, Name: "last", Mode: 0o644, Size: 5},
		{Typeflag: tar.TypeXGlobalHeader, Name: "global", PAXRecords: map[string]string{"comment": "g"}},
		{Typeflag: tar.TypeReg, Name: "final", Mode: 0o644, Size: 5},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte("hello"))
		}
	}
	tw.Close()
	r := newTarReader(bytes.NewReader(b.Bytes()))
	var got []string
	for {
		hdr, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		if err != nil || (hdr.Typeflag == tar.TypeReg && string(data) != "hello") {
			t.Fatalf("%s: %q, %v", hdr.Name, data, err)
		}
		by := "tarReader"
		if r.sub != nil {
			by = "archive/tar"
		}
		got = append(got, hdr.Name+" by "+by)
	}
	want := []string{"before by tarReader", "pax by archive/tar", "after by tarReader", "link by archive/tar", "last by tarReader",
		"global by archive/tar", "final by archive/tar"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("members (-want +got):\n%s", d)
	}
}

// TestTarReaderLeavesGNUToArchiveTar: an archive of GNU tar's format is read by
// archive/tar from its first block on, since none of its blocks is plain USTAR.
func TestTarReaderLeavesGNUToArchiveTar(t *testing.T) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, name := range []string{"a", "b", "c"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: 1, Format: tar.FormatGNU}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(name))
	}
	tw.Close()
	r := newTarReader(bytes.NewReader(b.Bytes()))
	for _, name := range []string{"a", "b", "c"} {
		hdr, err := r.Next()
		if err != nil || hdr.Name != name {
			t.Fatalf("member %q: %v, %v", name, hdr, err)
		}
		if !r.rest {
			t.Fatalf("member %q: tarReader still reads the archive itself", name)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after the last member: %v, want io.EOF", err)
	}
}

// FuzzTarReader: on any stream tarReader reads what archive/tar's Reader reads.
func FuzzTarReader(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 4 {
		var b bytes.Buffer
		tw := &tarWriter{w: &b}
		for _, m := range randomMembers(rng, 5) {
			tw.write(m.name, &m.member)
		}
		tw.close()
		f.Add(b.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, partial := range []bool{false, true} {
			if d, _ := diffTarReaders(b, partial); d != "" {
				t.Fatalf("partial reads %v: %s", partial, d)
			}
		}
	})
}
