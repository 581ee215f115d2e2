package bytesize

import "testing"

func TestFormat(t *testing.T) {
	tests := []struct {
		n    uint64
		want string
	}{
		{0, "0 B"},
		{512, "512 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{4 << 10, "4 KiB"},
		{16 << 20, "16 MiB"},
		{1536 << 20, "1.5 GiB"},
		{256 << 30, "256 GiB"},
		{141 << 30, "141 GiB"},
		{3 << 40, "3 TiB"},
		{1<<30 + 1, "1.0 GiB"},
		{1<<64 - 1, "16 EiB"},
	}
	for _, tt := range tests {
		if got := Format(tt.n); got != tt.want {
			t.Errorf("Format(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
