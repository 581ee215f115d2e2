package snapshot

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// tarMember is a member and its name, as the capture hands them to tarWriter.
type tarMember struct {
	name string
	member
}

// header is m as a tar.Header, as the capture wrote it before tarWriter.
func header(m tarMember) *tar.Header {
	return &tar.Header{
		Typeflag: m.typ, Name: m.name, Mode: int64(m.perm), ModTime: time.Unix(0, 0),
		Linkname: m.target, Devmajor: int64(m.major), Devminor: int64(m.minor), Size: int64(len(m.data)),
	}
}

// writable keeps the members archive/tar writes, and checks that tarWriter
// refuses the others, writing nothing of them.
func writable(t *testing.T, ms []tarMember) []tarMember {
	t.Helper()
	var keep []tarMember
	for _, m := range ms {
		if tar.NewWriter(io.Discard).WriteHeader(header(m)) == nil {
			keep = append(keep, m)
			continue
		}
		var b bytes.Buffer
		tw := &tarWriter{w: &b}
		if err := tw.write(m.name, &m.member); err == nil || b.Len() != 0 {
			t.Errorf("%q (type %c): archive/tar refuses it, tarWriter wrote %d bytes (error %v)", m.name, m.typ, b.Len(), err)
		}
	}
	return keep
}

// referenceTar writes ms with archive/tar, as a capture wrote them before tarWriter.
func referenceTar(t *testing.T, ms []tarMember) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range ms {
		if err := tw.WriteHeader(header(m)); err != nil {
			t.Fatalf("archive/tar: %q: %v", m.name, err)
		}
		if _, err := tw.Write(m.data); err != nil {
			t.Fatalf("archive/tar: %q: %v", m.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// ourTar writes ms with tarWriter.
func ourTar(t *testing.T, ms []tarMember) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := &tarWriter{w: &b}
	for i := range ms {
		if err := tw.write(ms[i].name, &ms[i].member); err != nil {
			t.Fatalf("tarWriter: %q: %v", ms[i].name, err)
		}
	}
	if err := tw.close(); err != nil {
		t.Fatal(err)
	}
	if tw.n != int64(b.Len()) {
		t.Errorf("tarWriter counted %d bytes, wrote %d", tw.n, b.Len())
	}
	return b.Bytes()
}

// TestTarWriterMatchesArchiveTar: the edges of the USTAR fields, packed here or
// handed to archive/tar, come out byte for byte as archive/tar writes them.
func TestTarWriterMatchesArchiveTar(t *testing.T) {
	dirs := strings.Repeat("d/", 80) // 160 bytes of elements
	el := func(n int) string { return strings.Repeat("x", n) }
	names := []string{
		"sys/devices/pci0000:00/0000:00:01.0/config",
		el(100), el(101), el(99) + "/", el(100) + "/",
		el(155) + "/" + el(100), el(156) + "/" + el(100), el(155) + "/" + el(101),
		el(154) + "/" + el(100) + "/", dirs[:155] + el(5), dirs + el(100), "/" + el(100),
		el(200), strings.Repeat("sys/devices/", 30) + "vendor",
		"sys/bus/pci/devices/caf\u00e9", "sys/" + strings.Repeat("\u00e9", 60),
	}
	var ms []tarMember
	for i, name := range names {
		ms = append(ms,
			tarMember{name, member{typ: tar.TypeReg, perm: 0o444, data: bytes.Repeat([]byte{byte(i)}, i*37)}},
			tarMember{name + "/", member{typ: tar.TypeDir, perm: 0o755}},
			tarMember{name, member{typ: tar.TypeSymlink, perm: 0o777, target: "../../" + name}})
	}
	for _, target := range []string{el(100), el(101), "caf\u00e9", el(300)} {
		ms = append(ms, tarMember{"link", member{typ: tar.TypeSymlink, perm: 0o777, target: target}})
	}
	for _, dev := range []uint32{0, 195, 1<<21 - 1, 1 << 21, 1<<32 - 1} {
		ms = append(ms,
			tarMember{"dev/nvidia0", member{typ: tar.TypeChar, perm: 0o666, major: dev, minor: 255 - dev%256}},
			tarMember{"dev/sda", member{typ: tar.TypeBlock, perm: 0o660, major: 8, minor: dev}})
	}
	for _, mode := range []fs.FileMode{0, 0o7777, 1<<21 - 1, 1 << 21} {
		ms = append(ms, tarMember{"mode", member{typ: tar.TypeReg, perm: mode, data: []byte("x")}})
	}
	for _, size := range []int{511, 512, 513, 4096, 65537} {
		ms = append(ms, tarMember{"sized", member{typ: tar.TypeReg, perm: 0o644, data: make([]byte, size)}})
	}
	ms = writable(t, ms)
	if want, got := referenceTar(t, ms), ourTar(t, ms); !bytes.Equal(want, got) {
		t.Errorf("tarWriter wrote %d bytes unlike archive/tar's %d (first difference at %d)", len(got), len(want), firstDiff(want, got))
	}
}

// randomMembers returns n random members, of every length of name and link target
// about the USTAR limits, of every type a snapshot holds.
func randomMembers(rng *rand.Rand, n int) []tarMember {
	alphabet := []string{"a", "b", "0", ":", ".", "_", "-", "/", "\u00e9"}
	word := func(max int) string {
		var b strings.Builder
		for n := rng.IntN(max) + 1; n > 0; n-- {
			s := alphabet[rng.IntN(len(alphabet))]
			if s == "\u00e9" && rng.IntN(20) != 0 {
				s = "z" // mostly ASCII, as sysfs is
			}
			b.WriteString(s)
		}
		return b.String()
	}
	types := []byte{tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock}
	var ms []tarMember
	for range n {
		m := tarMember{word(300), member{typ: types[rng.IntN(len(types))], perm: fs.FileMode(rng.Int64N(1 << 22))}}
		switch m.typ {
		case tar.TypeReg:
			m.data = make([]byte, rng.IntN(1500))
			for i := range m.data {
				m.data[i] = byte(rng.IntN(256))
			}
		case tar.TypeDir:
			m.name += "/"
		case tar.TypeSymlink:
			m.target = word(160)
		default:
			m.major, m.minor = rng.Uint32N(1<<22), rng.Uint32N(1<<22)
		}
		ms = append(ms, m)
	}
	return ms
}

// TestTarWriterRandom: random members come out as archive/tar writes them.
func TestTarWriterRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	packed, handed := 0, 0
	for round := range 200 {
		ms := writable(t, randomMembers(rng, 50))
		if want, got := referenceTar(t, ms), ourTar(t, ms); !bytes.Equal(want, got) {
			t.Fatalf("round %d: tarWriter differs from archive/tar at byte %d", round, firstDiff(want, got))
		}
		for i := range ms {
			if (&tarWriter{}).ustar(ms[i].name, &ms[i].member) {
				packed++
			} else {
				handed++
			}
		}
	}
	// Both ways of writing a header were compared, each many times.
	if packed < 1000 || handed < 1000 {
		t.Errorf("%d headers packed, %d handed to archive/tar: want at least 1,000 of each", packed, handed)
	}
}

// TestTarWriterRefusesWhatTarRefuses: a name archive/tar cannot write (a NUL in
// it) is an error, and nothing of it is written.
func TestTarWriterRefusesWhatTarRefuses(t *testing.T) {
	var b bytes.Buffer
	tw := &tarWriter{w: &b}
	if err := tw.write("bad\x00name", &member{typ: tar.TypeReg, perm: 0o644, data: []byte("x")}); err == nil {
		t.Error("a name with a NUL was written")
	}
	if b.Len() != 0 || tw.n != 0 {
		t.Errorf("%d bytes written for a refused member", b.Len())
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
