package render

import "testing"

func TestEscapeLines(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "",
		"a\nb\n":                "a\nb\n",
		"eth\x1b]0;x\x07\nok\r": `eth\x1b]0;x\x07` + "\n" + `ok\x0d`,
	} {
		if got := EscapeLines(in); got != want {
			t.Errorf("EscapeLines(%q) = %q, want %q", in, got, want)
		}
	}
}
