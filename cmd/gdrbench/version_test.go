package main

import (
	"regexp"
	"testing"
)

// TestVersion: --version prints one line with the version, the commit and
// whether CUDA support is built in, and exits 0.
func TestVersion(t *testing.T) {
	code, stdout, stderr := runCLI(t, "--version")
	want := regexp.MustCompile(`^gdrbench \S+ commit=\S+ cuda=(true|false) go=go\S+ platform=linux/\w+\n$`)
	if code != exitOK || !want.MatchString(stdout) || stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and a line matching %s", code, stdout, stderr, want)
	}
}
