// Package testtools holds nothing itself: its subdirectories are the project's test
// tooling (synthetic sysfs trees, the kernel-in-the-loop tier, test support, the
// README and lspci comparisons, the public-API checks and the benchmark commands).
// None of it ships in a binary; everything else under internal/ does.
package testtools
