package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/p2pkit/p2pkit/internal/testtools/testsupport/roottest"
	"github.com/p2pkit/p2pkit/nccl"
)

// ncclHostSeam makes a --root tree stand for the live machine, with h as its host
// facts, for the rest of the test.
func ncclHostSeam(t *testing.T, h nccl.Host) {
	t.Helper()
	old := probeNCCLHost
	probeNCCLHost, ncclOnRoot = func(*globalOptions, string) nccl.Host { return h }, true
	t.Cleanup(func() { probeNCCLHost, ncclOnRoot = old, false })
}

func writeTree(t *testing.T, root string, files map[string]string, links map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range links {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
}

// ncclOfflineEqualsLive runs 'p2pcheck nccl' on the tree at root as the live
// machine and on a snapshot of it, and compares every output: they must be the
// same but for the line that says where the NCCL version came from.
func ncclOfflineEqualsLive(t *testing.T, root string, variants ...[]string) {
	t.Helper()
	snap := filepath.Join(t.TempDir(), "snap.tar.gz")
	if code, _, stderr := p2pcheck("--root", root, "snapshot", "--no-redact", "-o", snap); code != 0 {
		t.Fatalf("snapshot: exit %d: %s", code, stderr)
	}
	for _, v := range variants {
		for _, format := range []string{"text", "json"} {
			args := append([]string{"nccl", "--format", format}, v...)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				liveCode, live, liveErr := p2pcheck(append([]string{"--root", root}, args...)...)
				snapCode, offline, snapErr := p2pcheck(append([]string{"--snapshot", snap}, args...)...)
				if liveCode != 0 || snapCode != 0 {
					t.Fatalf("exit %d live, %d on the snapshot (%s | %s)", liveCode, snapCode, liveErr, snapErr)
				}
				if diff := cmp.Diff(withoutVersionSource(live), withoutVersionSource(offline)); diff != "" {
					t.Errorf("live and snapshot outputs differ (-live +snapshot):\n%s", diff)
				}
			})
		}
	}
}

// withoutVersionSource drops the line naming where the NCCL version came from,
// the one line a snapshot gives differently ("..., as snapshot X recorded it").
func withoutVersionSource(out string) []string {
	var keep []string
	for i, l := range strings.Split(out, "\n") {
		if i == 0 && strings.HasPrefix(l, "NCCL ") || strings.HasPrefix(l, `  "version_source": `) {
			continue
		}
		keep = append(keep, l)
	}
	return keep
}

// TestSnapshotKeepsNCCL is #24's point 3 on captured and synthetic machines: a
// snapshot keeps what 'p2pcheck nccl' reads beyond the PCI tree (the interfaces,
// their devices and speeds, the RDMA devices' rates, the environment's NCCL_*
// variables, the configuration files, the libnccl.so found), so that every nccl
// output on it is the live one's.
func TestSnapshotKeepsNCCL(t *testing.T) {
	lib := &nccl.Lib{Version: "2.28.9", Path: "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
		Others: []string{"another NCCL, 2.28.3, is installed at /usr/lib/x86_64-linux-gnu/libnccl.so: a job that loads it follows its defaults (--nccl-lib or --nccl-version to choose)"}}
	t.Run("h200-1gpu", func(t *testing.T) {
		root := t.TempDir()
		roottest.Unpack(t, "../../testdata/nccl/h200-1gpu/snapshot.tar.gz", root)
		// The VM's virtio NIC as sysfs shows it, which that capture predates.
		writeTree(t, root, map[string]string{
			"etc/nccl.conf":                    "NCCL_P2P_LEVEL=SYS\nNCCL_IGNORE_CPU_AFFINITY=1\n",
			"root/job.conf":                    "NCCL_GDRCOPY_ENABLE=0\n",
			"sys/devices/virtual/net/lo/speed": "",
		}, map[string]string{
			"sys/class/net/eth0": "../../devices/pci0000:00/0000:00:03.0/virtio2/net/eth0",
			"sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/device": "../../../virtio2",
			"sys/devices/pci0000:00/0000:00:03.0/virtio2/subsystem":       "../../../../bus/virtio",
			"sys/class/net/lo": "../../devices/virtual/net/lo",
		})
		ncclHostSeam(t, nccl.Host{Env: map[string]string{"NCCL_CONF_FILE": "/root/job.conf", "NCCL_GDRCOPY_ENABLE": "1"}, Home: "/root",
			Interfaces: []string{"eth0"}, Lib: lib})
		ncclOfflineEqualsLive(t, root, nil, []string{"--assume", "NCCL_NET_GDR_LEVEL=SYS"})
		_, out, _ := p2pcheck("--root", root, "nccl")
		for _, want := range []string{"NET/0 eth0 (Socket, not PCI", "NCCL_P2P_LEVEL=SYS (/etc/nccl.conf)", "NCCL_GDRCOPY_ENABLE=1 (environment)", "another NCCL, 2.28.3"} {
			if !strings.Contains(out, want) {
				t.Errorf("the live output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("dgx-h100", func(t *testing.T) {
		root := machineRoot(t, "dgx-h100")
		files := map[string]string{}
		for i := range 8 {
			files[filepath.Join("sys/class/infiniband", "mlx5_"+string(rune('0'+i)), "ports/1/rate")] = "400 Gb/sec (4X NDR)\n"
		}
		// The class links lead into the functions' directories: write through them.
		for name, data := range files {
			real, err := filepath.EvalSymlinks(filepath.Join(root, filepath.Dir(filepath.Dir(filepath.Dir(name)))))
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(root, filepath.Join(real, "ports/1/rate"))
			delete(files, name)
			files[rel] = data
		}
		writeTree(t, root, files, nil)
		ncclHostSeam(t, nccl.Host{Env: map[string]string{"NCCL_NET_GDR_LEVEL": "PHB"}, Home: "/root", Interfaces: []string{"ibp0"}, Lib: lib})
		ncclOfflineEqualsLive(t, root, nil, []string{"--topo-xml", "-"})
		_, out, _ := p2pcheck("--root", root, "nccl")
		if !strings.Contains(out, "NCCL_NET_GDR_LEVEL=PHB (environment)") || strings.Contains(out, "link rates are not read") {
			t.Errorf("the live output lacks the environment's setting or the NICs' rates:\n%s", out)
		}
	})
}
