package main

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// copylat prints the kernel alone beside each mapping test, and nothing
// beside the cuMemcpy baseline.
func TestCopyLatText(t *testing.T) {
	var out bytes.Buffer
	e := &env{o: &globalOptions{format: "text", stdout: &out}, rep: &report{}}
	l := func(med, min float64) *latencyJSON { return &latencyJSON{MedianUS: med, MinUS: min} }
	rows := []latRow{
		{Size: 8, ToMapping: l(0.02, 0.01), ToKernel: l(0.015, 0.01), FromMapping: l(0.5, 0.4), FromKernel: l(0.45, 0.4), HtoD: l(2, 1.5)},
	}
	if err := (&copyLatOptions{}).write(e, rows); err != nil {
		t.Fatal(err)
	}
	want := `Test                    Size(B)   Median Time(us)   Min. Time(us)   Kernel alone: Median(us)   Min.(us)
gdr_copy_to_mapping     8         0.020             0.010           0.015                      0.010
gdr_copy_from_mapping   8         0.500             0.400           0.450                      0.400
cuMemcpyHtoD            8         2.000             1.500
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("copylat text (-want +got):\n%s", diff)
	}
}
