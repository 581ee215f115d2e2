package readmecheck

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPaths(t *testing.T) {
	md := "See [the history](benchmark-history.md#runs), [ours](../README.md), [a site](https://example.com/x), [here](#top)\n" +
		"and `testdata/bench/a.log`, `./scripts/run.sh`, `testdata/*/oracle.txt`, `internal/DIR/$X`,\n" +
		"`sys/bus/pci`, `/tmp/large`, `p2pcheck topo`, `testdata/bench/a.log` again, `docs/.../x.md`.\n"
	isTop := func(s string) bool { return s == "testdata" || s == "scripts" || s == "internal" || s == "docs" }
	got := Paths([]byte(md), "docs", isTop)
	want := []string{"docs/benchmark-history.md", "README.md", "testdata/bench/a.log", "scripts/run.sh"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Paths (-want +got):\n%s", diff)
	}
}
