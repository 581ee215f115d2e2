package snapshot_test

import "github.com/p2pkit/p2pkit/internal/testtools/testsupport/roottest"

const h200Snapshot = "../testdata/h200-2gpu-vm/snapshot.tar.gz"

type entry = roottest.Entry

var (
	file      = roottest.File
	symlink   = roottest.Symlink
	directory = roottest.Dir
	charDev   = roottest.CharDev
	tarGz     = roottest.TarGz
)
