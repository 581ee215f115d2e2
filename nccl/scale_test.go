package nccl

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
)

// flatXML is a topology of n GPUs: directly below one CPU when they and the NIC fit NCCL's
// 128 children of an element, else below PCI switches of up to 64 GPUs each.
func flatXML(n int) *Node {
	root := &Node{Name: "system", Attrs: []Attr{{"version", "1"}}}
	cpu := root.Add("cpu", Attr{"numaid", "0"}, Attr{"arch", "x86_64"}, Attr{"vendor", "GenuineIntel"}, Attr{"familyid", "6"}, Attr{"modelid", "143"})
	parent := cpu
	for i := range n {
		if n >= maxSubs && i%64 == 0 {
			parent = cpu.Add("pci", Attr{"busid", fmt.Sprintf("0000:%02x:00.0", 0x80+i/64)}, Attr{"class", "0x060400"},
				Attr{"link_speed", "32.0 GT/s PCIe"}, Attr{"link_width", "16"})
		}
		pci := parent.Add("pci", Attr{"busid", fmt.Sprintf("0000:%02x:%02x.%d", i/256, i/8%32, i%8)}, Attr{"class", "0x030200"},
			Attr{"link_speed", "32.0 GT/s PCIe"}, Attr{"link_width", "16"})
		pci.Add("gpu", Attr{"dev", strconv.Itoa(i)}, Attr{"sm", "90"}, Attr{"rank", strconv.Itoa(i)}, Attr{"gdr", "1"})
	}
	nic := cpu.Add("nic")
	nic.Add("net", Attr{"name", "eth0"}, Attr{"dev", "0"}, Attr{"speed", "10000"}, Attr{"gdr", "0"})
	return root
}

// TestPathWork bounds the work of a whole prediction, not its time: the links
// its path searches examine, summed over every engine it builds (the prediction,
// the topology alone, the settings tried), grow as G·(nodes+links), that is G² on
// a flat machine, where #21 measured the earlier code growing as G⁴ (16 GPUs
// 0.14 s, 64 GPUs 40 s).
func TestPathWork(t *testing.T) {
	work := map[int]int64{}
	for _, n := range []int{16, 32, 64, 128, 256} {
		r, err := Predict(Input{Topology: flatXML(n), Facts: Facts{NetPlugin: "Socket"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GPUPairs) != n*(n-1) {
			t.Fatalf("%d GPUs: %d pairs", n, len(r.GPUPairs))
		}
		sys, _ := NewSystem(flatXML(n))
		links := 0
		for _, x := range sys.all {
			links += len(x.links)
		}
		bases := len(sys.nodes[nodeGPU]) + len(sys.nodes[nodeCPU]) + len(sys.nodes[nodeNET]) + len(sys.nodes[nodeNVS])
		// One search examines every link once; a prediction builds at most 16
		// systems here (raw, prediction, and one per setting tried).
		if bound := int64(16 * bases * links); r.work > bound {
			t.Errorf("%d GPUs: %d links examined, more than 16 searches of every link from every base (%d)", n, r.work, bound)
		}
		work[n] = r.work
	}
	// Below 128 GPUs the machine is flat; from 128 its GPUs sit below switches.
	for _, n := range []int{32, 64, 256} {
		if ratio := float64(work[n]) / float64(work[n/2]); ratio > 4.5 {
			t.Errorf("doubling the GPUs from %d to %d multiplied the work by %.1f; want about 4 (G²)", n/2, n, ratio)
		}
	}
}

// TestNCCLLimits refuses what NCCL itself cannot hold, per release:
// NCCL_TOPO_MAX_NODES GPUs (256 before 2.27, 576 from 2.27, 640 from 2.29.7), and
// more than MAX_SUBS children of one XML element.
func TestNCCLLimits(t *testing.T) {
	for _, tt := range []struct {
		gpus int
		v    Version
		ok   bool
	}{
		{256, Version{2, 26, 6}, true}, {257, Version{2, 26, 6}, false},
		{576, Version{2, 28, 9}, true}, {577, Version{2, 28, 9}, false},
		{640, Version{2, 29, 7}, true}, {641, Version{2, 29, 7}, false},
	} {
		_, err := newSystem(flatXML(tt.gpus), tt.v)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrLimit) {
			t.Errorf("%d GPUs in NCCL %s: %v", tt.gpus, tt.v, err)
		}
	}
	x := flatXML(2)
	for i := range maxSubs {
		x.Subs[0].Add("pci", Attr{"busid", fmt.Sprintf("0001:%02x:00.0", i)}, Attr{"class", "0x060400"}, Attr{"link_speed", "8 GT/s"}, Attr{"link_width", "16"})
	}
	if _, err := NewSystem(x); !errors.Is(err, ErrLimit) {
		t.Errorf("an element with %d children: %v; want ErrLimit (MAX_SUBS)", len(x.Subs[0].Subs), err)
	}
}
