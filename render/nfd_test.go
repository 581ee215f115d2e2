package render_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/render"
)

// The rules of a node-feature-discovery features.d file ("local" source,
// docs/usage/customization-guide.md) and of Kubernetes labels.
var (
	nfdName   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	nfdValue  = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)
	nfdExpiry = regexp.MustCompile(`^# \+expiry-time=(.*)$`)
)

func TestNFD(t *testing.T) {
	for _, name := range []string{"dgx-h100", "dgx-h100-nonroot", "h200-2gpu-vm", "amd-epyc"} {
		t.Run(name, func(t *testing.T) {
			r := machineReport(t, name)
			expiry := r.Timestamp.Add(time.Hour)
			var b bytes.Buffer
			if err := render.NFDFeatures(&b, r, expiry); err != nil {
				t.Fatal(err)
			}
			if b.Len() > 64<<10 {
				t.Errorf("file is %d bytes, over NFD's 64 KiB limit", b.Len())
			}
			labels := checkNFD(t, b.String(), expiry)
			if got := labels[render.NFDNamespace+"/p2pcheck.overall"]; got != string(r.Overall) {
				t.Errorf("overall label %q, want %q", got, r.Overall)
			}
			if len(labels) != 11+len(r.Checks) {
				t.Errorf("%d labels, want %d", len(labels), 11+len(r.Checks))
			}
		})
	}
}

// checkNFD checks a features file line by line and returns its labels.
func checkNFD(t *testing.T, file string, expiry time.Time) map[string]string {
	t.Helper()
	labels := map[string]string{}
	sawExpiry := false
	for i, line := range strings.Split(strings.TrimSuffix(file, "\n"), "\n") {
		if m := nfdExpiry.FindStringSubmatch(line); m != nil {
			ts, err := time.Parse(time.RFC3339, m[1])
			if err != nil || !ts.Equal(expiry) {
				t.Errorf("line %d: expiry %q (%v), want %s", i+1, m[1], err, expiry.Format(time.RFC3339))
			}
			if len(labels) > 0 {
				t.Errorf("line %d: expiry after labels applies only to the labels below it", i+1)
			}
			sawExpiry = true
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		key, value, _ := strings.Cut(line, "=")
		ns, name, _ := strings.Cut(key, "/")
		switch {
		case !nfdName.MatchString(key) || ns != render.NFDNamespace:
			t.Errorf("line %d: %q is not a namespaced %s/ name", i+1, key, render.NFDNamespace)
		case len(name) > 63 || len(value) > 63:
			t.Errorf("line %d: %q longer than 63 characters", i+1, line)
		case !nfdValue.MatchString(value):
			t.Errorf("line %d: value %q is not a valid label value", i+1, value)
		case !strings.HasPrefix(name, "p2pcheck."):
			t.Errorf("line %d: name %q outside p2pcheck.", i+1, name)
		}
		if _, dup := labels[key]; dup {
			t.Errorf("line %d: duplicate %s", i+1, key)
		}
		labels[key] = value
	}
	if !sawExpiry {
		t.Error("no # +expiry-time line")
	}
	return labels
}

// TestNFDInvalidValue: a value that is not label-safe becomes "invalid".
func TestNFDInvalidValue(t *testing.T) {
	r := check.Report{Features: check.Features{Ready: "true", Overall: "pass", GPUs: "8", P2P: "true", ACS: "clear", IOMMU: "pt", GDR: "dma buf/peermem", GDRCopy: "true", VM: "false"}}
	var b bytes.Buffer
	if err := render.NFDFeatures(&b, r, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "/p2pcheck.gdr=invalid\n") {
		t.Errorf("unsafe value kept:\n%s", b.String())
	}
	checkNFD(t, b.String(), time.Unix(0, 0))
}
