package main

import (
	"regexp"
	"testing"
)

// TestVersion: --version prints one line with the version, the commit and
// whether NVML and CUDA support is built in, and exits 0.
func TestVersion(t *testing.T) {
	code, stdout, stderr := p2pcheck("--version")
	want := regexp.MustCompile(`^p2pcheck \S+ commit=\S+ nvml=(true|false) cuda=(true|false) go=go\S+ platform=linux/\w+\n$`)
	if code != exitOK || !want.MatchString(stdout) || stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and a line matching %s", code, stdout, stderr, want)
	}
}
