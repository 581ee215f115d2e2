package node

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/p2pkit/p2pkit/hostfs"
	"github.com/p2pkit/p2pkit/pcie"
	"github.com/p2pkit/p2pkit/snapshot"
	"github.com/p2pkit/p2pkit/sysfs"
)

// liveRoot opens "/" of the machine running the test. Without a sysfs holding PCI
// functions the test is skipped, or fails under P2PKIT_REQUIRE_HW=1.
func liveRoot(t *testing.T) hostfs.Root {
	t.Helper()
	names, err := os.ReadDir("/sys/bus/pci/devices")
	if err != nil || len(names) == 0 {
		msg := "no PCI functions in /sys/bus/pci/devices"
		if err != nil {
			msg = err.Error()
		}
		if os.Getenv("P2PKIT_REQUIRE_HW") == "1" {
			t.Fatalf("P2PKIT_REQUIRE_HW=1 but %s", msg)
		}
		t.Skipf("live sysfs unavailable: %s", msg)
	}
	fsys, err := hostfs.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}

// TestLive reads the running machine, captures it and reads the capture back: the
// records must agree apart from what changes by itself (link status, the config
// registers that hold it).
func TestLive(t *testing.T) {
	live := liveRoot(t)
	start := time.Now()
	want, err := sysfs.New(live).PCIRecords()
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d functions read in %v", len(want), elapsed)
	for _, r := range want {
		if r.Err != nil {
			t.Errorf("%s: %v", r.Address, r.Err)
		}
		if r.Vendor == 0 || r.Path == "" || len(r.Config) < 64 {
			t.Errorf("%s: vendor %04x path %q config %d bytes", r.Address, r.Vendor, r.Path, len(r.Config))
		}
	}
	plat, err := ReadPlatform(live)
	if err != nil {
		t.Errorf("platform: %v", err)
	}
	// /proc/modules is absent from kernels built without module support.
	if plat.CPU == nil || plat.Cmdline == nil || plat.Kernel == nil || plat.CharDevices == nil {
		t.Errorf("platform lacks /proc facts: cpu %v, cmdline %v, kernel %v, char devices %v",
			plat.CPU, plat.Cmdline, plat.Kernel, plat.CharDevices)
	}
	t.Logf("kernel %+v, nvidia %+v, iommu groups %d, units %v, P2PDMA config %v (%s)", plat.Kernel, plat.NVIDIA,
		len(plat.IOMMUGroups), plat.IOMMUUnits, plat.KernelConfig.Value("CONFIG_PCI_P2PDMA"), plat.KernelConfig.Source)

	var buf bytes.Buffer
	sum, err := snapshot.WriteOptions(live, &buf, snapshot.Options{NoRedact: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("capture: %d members, %d bytes, %d skipped", sum.Members, buf.Len(), len(sum.Skipped))
	for _, e := range sum.Skipped {
		if !errors.Is(e, fs.ErrPermission) {
			t.Errorf("skipped: %v", e)
		}
	}
	if dir := os.Getenv("P2PKIT_SNAPSHOT_OUT"); dir != "" {
		if err := os.WriteFile(dir+"/snapshot.tar.gz", buf.Bytes(), 0o644); err != nil {
			t.Error(err)
		}
	}
	snap, err := snapshot.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sysfs.New(snap).PCIRecords()
	if err != nil {
		t.Fatal(err)
	}
	ignore := cmpopts.IgnoreFields(pcie.Record{}, "Config", "CurrentLink")
	if diff := cmp.Diff(want, got, ignore); diff != "" {
		t.Errorf("capture differs from the live machine (-live +capture):\n%s", diff)
	}
	for i := range min(len(want), len(got)) {
		if len(want[i].Config) != len(got[i].Config) {
			t.Errorf("%s: config %d bytes live, %d captured", want[i].Address, len(want[i].Config), len(got[i].Config))
		}
	}
	snapPlat, err := ReadPlatform(snap)
	if err != nil {
		t.Errorf("captured platform: %v", err)
	}
	if diff := cmp.Diff(plat, snapPlat, cmpopts.IgnoreFields(Platform{}, "CPU")); diff != "" {
		t.Errorf("captured platform differs (-live +capture):\n%s", diff)
	}
}
