package render

import "testing"

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"mlx5_core", "mlx5_core"},
		{"NVIDIA Corporation GH100 [H200 SXM 141GB]", "NVIDIA Corporation GH100 [H200 SXM 141GB]"},
		{"Ünïcödé ok", "Ünïcödé ok"},
		{"\x1b]0;pwned\x07nvidia", `\x1b]0;pwned\x07nvidia`},
		{"eth0\r\x1b[2J", `eth0\x0d\x1b[2J`},
		{"tab\there\nnewline", `tab\x09here\x0anewline`},
		{"del\x7f", `del\x7f`},
		{"c1 \u009b31m", `c1 \u009b31m`},
		{"bad \xff utf8", `bad \xff utf8`},
		// #21 defect 14: f0912a0 escaped C0 and C1 only, so these reached the
		// terminal raw and could reorder or hide what follows.
		{"535.104\u202e50.21", `535.104\u202e50.21`},
		{"eth\u20660\u2069", `eth\u20660\u2069`},
		{"mlx5\u200b_core", `mlx5\u200b_core`},
		{"\ufeffNVIDIA\u2060H200\u200f", `\ufeffNVIDIA\u2060H200\u200f`},
		{"a\u202ab\u202bc\u202cd\u202de\u2067f\u2068g\u200ch\u200di\u200ej", `a\u202ab\u202bc\u202cd\u202de\u2067f\u2068g\u200ch\u200di\u200ej`},
		{"line\u2028sep\u2029", `line\u2028sep\u2029`},
		{"private \ue000", `private \ue000`},
		{"no\u00a0break ok", "no\u00a0break ok"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Escape(tt.in); got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzEscape checks that no output of Escape holds a control byte or invalid UTF-8,
// and that clean text is returned unchanged.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"mlx5_core", "\x1b[2J", "a\xffb", "\u009b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Escape(in)
		for _, r := range out {
			if needsEscape(r) {
				t.Fatalf("Escape(%q) = %q holds %U", in, out, r)
			}
		}
		if Escape(out) != out {
			t.Fatalf("Escape is not idempotent on %q", out)
		}
	})
}
