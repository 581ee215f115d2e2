package snapshot

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"io"
	"path/filepath"
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
	octal(b[148:155], checksum(b))
	b[155] = ' '
	return true
}

// checksum is the sum of b's bytes with the checksum field counted as spaces, the
// header checksum of POSIX.1 ustar and archive/tar (format.go computeChecksum,
// unsigned). The bytes are added eight at a time, in four 16-bit lanes of a word:
// 64 words of at most 2×255 a lane stay below 2^16.
func checksum(b *[blockSize]byte) int64 {
	const low = 0x00ff00ff00ff00ff
	var lanes uint64
	for i := 0; i < blockSize; i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		lanes += w&low + w>>8&low
	}
	sum := int64(lanes&0xffff + lanes>>16&0xffff + lanes>>32&0xffff + lanes>>48)
	for _, c := range b[148:156] {
		sum += ' ' - int64(c)
	}
	return sum
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

// tarReader reads a tar stream as archive/tar's Reader does, for the header fields a
// snapshot keeps: name, link target, type, mode, size and device numbers. A block of
// the kind tarWriter packs (plainUSTAR) is unpacked here: tar.Reader checks every
// block for each format it knows, scanning it for non-ASCII bytes, and allocates a
// Header of two dozen fields, which was half of loading a snapshot. Any other block
// (a PAX or GNU extension, as a link target past 100 bytes takes, another magic, a
// number or checksum not in archive/tar's octal form, a member type a snapshot does
// not hold, a name that is not local) is read by an archive/tar Reader started at
// that block, with what it extends and the member's data; tarReader goes on after
// it where the block is USTAR's (as archive/tar's PAX extensions are) and the
// member's data is plainly laid out (not sparse), and otherwise leaves the rest of
// the stream to that Reader: an archive GNU tar wrote is read by archive/tar alone. So archive/tar stays the one reader of
// every format beyond plain USTAR. Errors are archive/tar's own and, as its
// Reader's, final.
type tarReader struct {
	r    io.Reader
	sub  *tar.Reader // reads the current member, or all the rest where rest is set
	rest bool
	blk  [blockSize]byte
	hdr  tar.Header // what Next returns until it is called again
	left int64      // bytes of the current member's data not yet read
	pad  int64      // zero bytes after its data, to the next block
	err  error
}

func newTarReader(r io.Reader) *tarReader { return &tarReader{r: r} }

// Next skips what is left of the current member and returns the next member's
// header, io.EOF at the end of the archive. The header is valid until Next is called
// again.
func (t *tarReader) Next() (*tar.Header, error) {
	if t.rest {
		return t.sub.Next()
	}
	if t.err != nil {
		return nil, t.err
	}
	hdr, err := t.next()
	t.err = err
	return hdr, err
}

func (t *tarReader) next() (*tar.Header, error) {
	// As tar.Reader.next: the rest of the data, then its padding (tryReadFull), then
	// a block; two zero blocks end the archive.
	if t.sub != nil {
		if _, err := io.Copy(io.Discard, t.sub); err != nil {
			return nil, err
		}
		t.sub = nil
	} else if n, err := io.CopyN(io.Discard, t.r, t.left); err != nil {
		if err == io.EOF && n < t.left {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if err := readPadding(t.r, t.blk[:t.pad]); err != nil {
		return nil, err
	}
	t.left, t.pad = 0, 0
	if _, err := io.ReadFull(t.r, t.blk[:]); err != nil {
		return nil, err
	}
	if t.blk == zeroBlock {
		if _, err := io.ReadFull(t.r, t.blk[:]); err != nil {
			return nil, err
		}
		if t.blk == zeroBlock {
			return nil, io.EOF
		}
		return nil, tar.ErrHeader
	}
	if t.plainUSTAR() {
		return &t.hdr, nil
	}
	blk := t.blk
	sub := tar.NewReader(io.MultiReader(bytes.NewReader(blk[:]), t.r))
	hdr, err := sub.Next()
	if err != nil {
		return nil, err
	}
	t.sub = sub
	// A block without the USTAR magic (GNU tar's, V7) comes from another writer,
	// whose every block would be handed over: archive/tar reads the rest.
	t.rest = string(blk[257:263]) != "ustar\x00"
	switch hdr.Typeflag {
	case tar.TypeReg:
		// tar.Reader pads what it read of the data (handleRegularFile), unless
		// the file is sparse, whose data is laid out otherwise.
		t.pad = -hdr.Size & (blockSize - 1)
		for k := range hdr.PAXRecords {
			if strings.HasPrefix(k, "GNU.sparse.") {
				t.rest = true
			}
		}
	case tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeDir: // header-only
	default:
		t.rest = true
	}
	return hdr, nil
}

// plainUSTAR reports whether t.blk is a USTAR header in the form tarWriter packs and
// archive/tar's Writer writes, and if so unpacks it into t.hdr and the current
// member: the USTAR magic and version, nothing past the prefix field (no STAR
// trailer), every number in octal as archive/tar reads it (octalField), the checksum
// equal to the block's (unsigned) sum, a directory, regular file,
// symbolic link or device node, and a local name (filepath.IsLocal, which archive/tar
// checks under GODEBUG=tarinsecurepath=0). For such a block archive/tar reads the
// same fields the same way (reader.go readHeader and next, format.go getFormat).
func (t *tarReader) plainUSTAR() bool {
	b := &t.blk
	if string(b[257:265]) != "ustar\x0000" || [12]byte(b[500:512]) != [12]byte{} {
		return false
	}
	typ := b[156]
	switch typ {
	case tar.TypeReg, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeDir:
	default:
		return false
	}
	sum, ok := octalField(b[148:156])
	if !ok || sum != checksum(b) {
		return false
	}
	mode, ok1 := octalField(b[100:108])
	_, ok2 := octalField(b[108:116]) // uid
	_, ok3 := octalField(b[116:124]) // gid
	size, ok4 := octalField(b[124:136])
	_, ok5 := octalField(b[136:148]) // mtime
	major, ok6 := octalField(b[329:337])
	minor, ok7 := octalField(b[337:345])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) {
		return false
	}
	name := cString(b[0:nameSize])
	if prefix := cString(b[345 : 345+prefixSize]); len(prefix) > 0 {
		name = prefix + "/" + name
	}
	if !filepath.IsLocal(name) {
		return false
	}
	t.hdr = tar.Header{
		Typeflag: typ, Name: name, Linkname: cString(b[157 : 157+nameSize]),
		Mode: mode, Size: size, Devmajor: major, Devminor: minor, Format: tar.FormatUSTAR,
	}
	if typ == tar.TypeReg { // the others are header-only (isHeaderOnlyType)
		t.left, t.pad = size, -size&(blockSize-1)
	}
	return true
}

// Read reads the current member's data, as tar.Reader's Read does.
func (t *tarReader) Read(p []byte) (int, error) {
	if t.sub != nil {
		return t.sub.Read(p) // tar.Reader's errors are final of themselves
	}
	if t.err != nil {
		return 0, t.err
	}
	if int64(len(p)) > t.left {
		p = p[:t.left]
	}
	var n int
	var err error
	if len(p) > 0 {
		n, err = t.r.Read(p)
		t.left -= int64(n)
	}
	switch {
	case err == io.EOF && t.left > 0:
		err = io.ErrUnexpectedEOF
	case err == nil && t.left == 0:
		err = io.EOF
	}
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
}

// readPadding reads b whole, as tar.Reader reads the padding after a member's data
// (tryReadFull): a stream that ends before b is full ends with io.EOF, however much
// of b was read.
func readPadding(r io.Reader, b []byte) error {
	n := 0
	var err error
	for n < len(b) && err == nil {
		var m int
		m, err = r.Read(b[n:])
		n += m
	}
	if n == len(b) && err == io.EOF {
		err = nil
	}
	return err
}

// octalField parses a numeric field as archive/tar's parseNumeric reads one in octal
// (strconv.go parseOctal): NULs and spaces trimmed at both ends, the rest up to a NUL
// in octal digits, nothing at all for 0. A field in base-256 (its first bit set),
// or with anything else in it, is not one (false): archive/tar reads it, or refuses it.
func octalField(b []byte) (int64, bool) {
	b = bytes.Trim(b, " \x00")
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	var x int64
	for _, c := range b {
		if c < '0' || c > '7' {
			return 0, false
		}
		x = x<<3 | int64(c-'0')
	}
	return x, true
}

// cString is b up to its first NUL, as archive/tar's parseString reads a field.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
