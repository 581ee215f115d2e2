package p2pdma

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/p2pkit/p2pkit/pcie"
)

// TestOracleCaptures compares every verdict with the one the kernel printed on the
// same machine (testdata/*/oracle.txt, see testdata/README.md): map type and distance
// for every ordered pair of type-0 functions, self pairs included.
func TestOracleCaptures(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*/oracle.txt")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no oracle captures: %v", err)
	}
	for _, oracle := range dirs {
		dir := filepath.Dir(oracle)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			raw, err := os.ReadFile(oracle)
			if err != nil {
				t.Fatal(err)
			}
			want, cpuRule := parseOracle(t, raw)
			topo, plat := loadSnapshot(t, filepath.Join(dir, "snapshot.tar.gz"))
			if got := plat.cpuSupportsP2PDMA(); got != cpuRule {
				t.Errorf("cpu_supports_p2pdma: kernel %v, platform %+v gives %v", cpuRule, plat, got)
			}
			var fns []*pcie.Device
			for _, d := range topo.Devices {
				if d.Config != nil && d.Config.HeaderType == 0 {
					fns = append(fns, d)
				}
			}
			c := NewCalculator(topo, plat)
			var got []string
			for _, a := range fns {
				for _, b := range fns {
					v := c.Calc(a, b)
					got = append(got, fmt.Sprintf("%s %s %s %d", v.Provider, v.Client, v.MapType, v.Distance))
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("verdicts differ from the kernel's (-kernel +p2pdma):\n%s", diff)
			}
		})
	}
}

// parseOracle returns the verdict lines of a p2poracle log and its
// cpu_supports_p2pdma value.
func parseOracle(tb testing.TB, raw []byte) (lines []string, cpuRule bool) {
	tb.Helper()
	const tag = "p2poracle: "
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		_, rest, ok := strings.Cut(sc.Text(), tag)
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(rest, "begin "):
			cpuRule = strings.HasSuffix(rest, "cpu_supports_p2pdma=1")
		case rest == "end":
		default:
			lines = append(lines, rest)
		}
	}
	if len(lines) == 0 {
		tb.Fatal("no verdicts in the oracle log")
	}
	return lines, cpuRule
}
