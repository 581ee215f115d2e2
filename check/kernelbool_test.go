package check

import "testing"

// TestKernelBool reads every form lib/kstrtox.c kstrtobool knows, and some it
// rejects.
func TestKernelBool(t *testing.T) {
	for _, tt := range []struct {
		in      string
		val, ok bool
	}{
		{"1", true, true}, {"y", true, true}, {"Y", true, true}, {"yes", true, true},
		{"t", true, true}, {"T", true, true}, {"true", true, true}, {"on", true, true}, {"ON", true, true}, {"oN", true, true},
		{"0", false, true}, {"n", false, true}, {"N", false, true}, {"no", false, true},
		{"f", false, true}, {"F", false, true}, {"false", false, true}, {"off", false, true}, {"OFF", false, true},
		{"", false, false}, {"o", false, false}, {"ox", false, false}, {"2", false, false}, {"enable", false, false}, {" 1", false, false},
	} {
		if val, ok := kernelBool(tt.in); val != tt.val || ok != tt.ok {
			t.Errorf("kernelBool(%q) = %t, %t; want %t, %t", tt.in, val, ok, tt.val, tt.ok)
		}
	}
}
