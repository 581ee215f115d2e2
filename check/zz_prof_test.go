package check_test

import (
	"os"
	"testing"

	"github.com/p2pkit/p2pkit/check"
	"github.com/p2pkit/p2pkit/node"
	snap "github.com/p2pkit/p2pkit/snapshot"
)

func TestZZProf(t *testing.T) {
	f := os.Getenv("ZZSNAP")
	if f == "" {
		t.Skip()
	}
	root, err := snap.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	nd, err := node.Load(root, node.Options{NoNames: true})
	if err != nil {
		t.Fatal(err)
	}
	fs := check.NewFacts(nd, check.Inputs{Source: check.Snapshot, NoNVML: "x"})
	if _, err := check.Run(fs, nil); err != nil {
		t.Fatal(err)
	}
}
