package check_test

import (
	"fmt"
	"log"
	"time"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/node"
)

// Judge a node from a snapshot the way p2pcheck does, for a node meant for
// GPUDirect RDMA and GDRCopy.
func ExampleRun() {
	n, err := node.LoadSnapshot("../testdata/h200-2gpu-vm/snapshot.tar.gz", node.Options{})
	if err != nil {
		log.Fatal(err)
	}
	f := check.NewFacts(n, check.Inputs{Source: check.Snapshot})
	results, err := check.Run(f, nil) // every check
	if err != nil {
		log.Fatal(err)
	}
	rep := check.NewReport(f, results, check.Meta{
		Timestamp: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		Require:   []check.Capability{check.CapP2P, check.CapGDR, check.CapGDRCopy},
	})
	fmt.Println("overall:", rep.Overall, "exit", rep.ExitCode)
	if rep.FixFirst != nil {
		fmt.Println("fix first:", rep.FixFirst.ID)
	}
	// Output:
	// overall: fail exit 1
	// fix first: gdrdrv
}
