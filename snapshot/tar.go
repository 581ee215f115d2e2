package snapshot

import (
	"archive/tar"
	"bytes"
	"io"
	"strconv"
	"strings"
	"time"
)

// tarWriter writes a tar stream byte for byte as archive/tar's Writer writes the
// same headers in the same order. A header that fits a plain USTAR block, as every
// name of a sysfs capture does, is packed here: tar.Writer looks for a format
// afresh for each header, building a map of PAX records on the way, which was a
// quarter of a capture's time. Any other header (a name or link past what USTAR
// holds, or not ASCII) goes through a tar.Writer of its own, whose bytes are then
// copied: archive/tar stays the one source of every format beyond USTAR.
//
// A member is written whole, its data padded to the block at once, where tar.Writer
// pads before the next header; the stream is the same.
type tarWriter struct {
	w   io.Writer
	n   int64 // bytes written: what the reader decompresses
	err error // the first write error; nothing is written after it
	blk [blockSize]byte
	// other holds what a tar.Writer writes for a header tarWriter does not pack.
	other bytes.Buffer
}

// Sizes of the tar format (POSIX.1-2001 pax, ustar interchange format; Go's
// archive/tar format.go).
const (
	blockSize  = 512
	nameSize   = 100 // name and linkname
	prefixSize = 155
)

// write writes m at name (a directory's ending in a slash): its header, its data
// and the data's padding.
func (t *tarWriter) write(name string, m *member) error {
	if t.err != nil {
		return t.err
	}
	if t.ustar(name, m) {
		t.put(t.blk[:])
	} else {
		t.other.Reset()
		tw := tar.NewWriter(&t.other)
		hdr := &tar.Header{
			Typeflag: m.typ, Name: name, Mode: int64(m.perm), ModTime: time.Unix(0, 0),
			Linkname: m.target, Devmajor: int64(m.major), Devminor: int64(m.minor), Size: int64(len(m.data)),
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err // a header tar cannot write: nothing of it is written
		}
		t.put(t.other.Bytes())
	}
	if len(m.data) > 0 {
		t.put(m.data)
		if pad := -len(m.data) & (blockSize - 1); pad > 0 {
			t.put(zeroBlock[:pad])
		}
	}
	return t.err
}

// close writes the end of the archive, two zero blocks.
func (t *tarWriter) close() error {
	t.put(zeroBlock[:])
	t.put(zeroBlock[:])
	return t.err
}

var zeroBlock [blockSize]byte

func (t *tarWriter) put(b []byte) {
	if t.err != nil {
		return
	}
	n, err := t.w.Write(b)
	t.n += int64(n)
	t.err = err
}

// ustar packs m, named full, into t.blk as archive/tar's writeUSTARHeader does,
// and reports whether tar.Writer would choose USTAR for it: ASCII name and link
// target without NULs, a name of at most 100 bytes or one it splits into prefix and
// name (splitUSTARPath), a link target of at most 100 bytes, and numbers that fit
// their octal fields. A file's name must not end in a slash (archive/tar refuses
// it). The modification time is zero and no owner is named.
func (t *tarWriter) ustar(full string, m *member) bool {
	mode, major, minor := int64(m.perm), int64(m.major), int64(m.minor)
	if !plainASCII(full) || !plainASCII(m.target) || len(m.target) > nameSize ||
		!fitsOctal(8, mode) || !fitsOctal(12, int64(len(m.data))) || !fitsOctal(8, major) || !fitsOctal(8, minor) {
		return false
	}
	switch m.typ {
	case tar.TypeReg, tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		if strings.HasSuffix(full, "/") {
			return false // archive/tar refuses it
		}
	}
	prefix, name := "", full
	if len(name) > nameSize {
		var ok bool
		if prefix, name, ok = splitUSTARPath(name); !ok {
			return false
		}
	}
	b := &t.blk
	*b = [blockSize]byte{}
	copy(b[0:nameSize], name)
	octal(b[100:108], mode)
	octal(b[108:116], 0) // uid
	octal(b[116:124], 0) // gid
	octal(b[124:136], int64(len(m.data)))
	octal(b[136:148], 0) // mtime
	b[156] = m.typ
	copy(b[157:257], m.target)
	copy(b[257:263], "ustar\x00")
	copy(b[263:265], "00")
	octal(b[329:337], major)
	octal(b[337:345], minor)
	copy(b[345:345+prefixSize], prefix)
	var sum int64
	for i, c := range b {
		if 148 <= i && i < 156 {
			c = ' ' // the checksum field counts as spaces
		}
		sum += int64(c)
	}
	octal(b[148:155], sum)
	b[155] = ' '
	return true
}

// splitUSTARPath splits a name longer than the name field at a slash into a prefix
// and a name that fit their fields, as archive/tar's splitUSTARPath does.
func splitUSTARPath(s string) (prefix, name string, ok bool) {
	n := len(s)
	switch {
	case n > prefixSize+1:
		n = prefixSize + 1
	case s[n-1] == '/':
		n--
	}
	i := strings.LastIndexByte(s[:n], '/')
	if i <= 0 || len(s)-i-1 > nameSize || len(s)-i-1 == 0 || i > prefixSize {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// plainASCII reports whether s is ASCII without NUL bytes.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 || s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// fitsOctal reports whether x fits an octal field of n bytes, its NUL included.
func fitsOctal(n int, x int64) bool { return x >= 0 && x < 1<<(3*(n-1)) }

// octal writes x into b as archive/tar's formatOctal does: zero-padded octal
// digits filling all but the last byte, which is NUL. x fits (fitsOctal).
func octal(b []byte, x int64) {
	var digits [24]byte
	s := strconv.AppendInt(digits[:0], x, 8)
	pad := len(b) - 1 - len(s)
	for i := range pad {
		b[i] = '0'
	}
	copy(b[max(pad, 0):], s)
	b[len(b)-1] = 0
}
