package node_test

import (
	"fmt"
	"log"

	"github.com/p2pkit/p2pkit/node"
	"github.com/p2pkit/p2pkit/p2pdma"
)

// Load a snapshot and ask the kernel's P2PDMA question for its two GPUs.
func ExampleLoadSnapshot() {
	n, err := node.LoadSnapshot("../testdata/h200-2gpu-vm/snapshot.tar.gz", node.Options{NoNames: true})
	if err != nil {
		log.Fatal(err)
	}
	gpus := n.Topology.GPUs()
	calc := p2pdma.NewCalculator(n.Topology, n.P2P())
	v := calc.Calc(gpus[0], gpus[1])
	fmt.Println(len(gpus), "GPUs;", gpus[0].Address, "->", gpus[1].Address, v.MapType)
	// Output: 2 GPUs; 0000:00:06.0 -> 0000:00:07.0 not-supported
}
