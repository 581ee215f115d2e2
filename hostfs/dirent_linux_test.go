package hostfs

import "testing"

// FuzzDirent: decoding getdents records of any bytes ends, never reads past the
// buffer, and each record it takes advances by at least its header.
func FuzzDirent(f *testing.F) {
	rec := func(name string, dtype byte) []byte {
		n := 19 + len(name) + 1
		n = (n + 7) &^ 7
		b := make([]byte, n)
		b[16], b[17], b[18] = byte(n), byte(n>>8), dtype
		copy(b[19:], name)
		return b
	}
	f.Add(append(append(rec(".", 4), rec("..", 4)...), rec("config", 8)...))
	f.Add([]byte{})
	f.Add(make([]byte, 19))
	f.Fuzz(func(t *testing.T, b []byte) {
		for len(b) > 0 {
			r, rest, ok := dirent(b)
			if !ok {
				return
			}
			if len(rest) > len(b)-19 {
				t.Fatalf("a record of %d bytes advanced by %d", len(b), len(b)-len(rest))
			}
			if len(r.name) > len(b) {
				t.Fatalf("name of %d bytes from a buffer of %d", len(r.name), len(b))
			}
			b = rest
		}
	})
}
