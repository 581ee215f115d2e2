package snapshot

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/internal/testtools/fixture"
)

// TestReadAheadMatchesOneReader: a capture read ahead by several goroutines writes
// the archive one goroutine writes, byte for byte, and leaves out the same files in
// the same order, redacted (VPD pseudonyms are numbered in order) and not. The tree
// has what each path of the readers meets: VPD to redact, serial numbers to leave
// out when redacting, FIFOs left out, and a directory whose files are more than a
// reader records for one run, which the capture proper reads itself.
func TestReadAheadMatchesOneReader(t *testing.T) {
	dir := t.TempDir()
	m := fixture.GB300DataDirect().NoDeviceNodes()
	if err := m.Write(dir); err != nil {
		t.Fatal(err)
	}
	devices := filepath.Join(dir, "sys/bus/pci/devices")
	names, err := os.ReadDir(devices)
	if err != nil || len(names) < 2*dirsPerJob {
		t.Fatalf("%d functions, %v: want a machine of several runs", len(names), err)
	}
	big := filepath.Join(devices, names[len(names)/2].Name())
	for i := range jobBytes/captureLimit + 4 {
		if err := os.WriteFile(filepath.Join(big, fmt.Sprintf("large%02d", i)), bytes.Repeat([]byte{'x'}, captureLimit), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{1, len(names) / 3, len(names) - 1} {
		if err := syscall.Mkfifo(filepath.Join(devices, names[n].Name(), "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Redaction leaves these out.
	for _, n := range []int{2, len(names) - 2} {
		if err := os.WriteFile(filepath.Join(devices, names[n].Name(), "serial_number"), []byte("MT2412X00042\n"), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	root, err := hostfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()

	capture := func(readers int, opt Options) ([]byte, Summary) {
		defer func(f func() int) { captureReaders = f }(captureReaders)
		captureReaders = func() int { return readers }
		var b bytes.Buffer
		sum, err := WriteOptions(root, &b, opt)
		if err != nil {
			t.Fatal(err)
		}
		return b.Bytes(), sum
	}
	errText := func(errs []error) []string {
		var s []string
		for _, err := range errs {
			s = append(s, err.Error())
		}
		return s
	}
	for _, opt := range []Options{{}, {NoRedact: true}} {
		want, wantSum := capture(1, opt)
		zr, err := gzip.NewReader(bytes.NewReader(want))
		if err != nil {
			t.Fatal(err)
		}
		stream, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if len(wantSum.Skipped) != 3 || !bytes.Contains(stream, []byte("large00")) || !bytes.Contains(stream, []byte("/vpd")) {
			t.Fatalf("NoRedact %v: the capture left out %q (want the 3 FIFOs), or has no large or vpd file", opt.NoRedact, errText(wantSum.Skipped))
		}
		for _, readers := range []int{2, maxReaders} {
			got, sum := capture(readers, opt)
			if !bytes.Equal(got, want) {
				t.Errorf("NoRedact %v, %d readers: the archive differs from one reader's", opt.NoRedact, readers)
			}
			if diff := cmp.Diff(errText(wantSum.Skipped), errText(sum.Skipped)); diff != "" || sum.Members != wantSum.Members {
				t.Errorf("NoRedact %v, %d readers: %d members (want %d), left out (-one +several):\n%s", opt.NoRedact, readers, sum.Members, wantSum.Members, diff)
			}
		}
	}
}
