//go:build vmtest

package vmtest

// The provisioning steps of a Topology with Fix, in the order the guest runs them.
// Captures named here are kept under testdata/vm with the others.
const rerunOracle = "echo 1 > /sys/module/p2pdma/parameters/p2poracle_rerun && dmesg"

var (
	// fixBefore run after the standard captures and before the p2pmem proof.
	fixBefore = []Capture{
		{Name: "assume.json", Shell: "p2pcheck pairs --all --assume acs-redirect=off --format json"},
		{Name: "config-before.txt", Shell: "md5sum /sys/bus/pci/devices/*/config"},
		{Name: "fix-dry.json", Shell: "p2pcheck fix --format json"},
		{Name: "config-after-dry.txt", Shell: "md5sum /sys/bus/pci/devices/*/config"},
		{Name: "fix-apply.json", Shell: "p2pcheck fix --apply --format json"},
		{Name: "rerun.txt", Shell: rerunOracle},
		{Name: "pairs-after.json", Shell: "p2pcheck pairs --all --format json"},
	}
	// fixAfter runs after the p2pmem proof.
	fixAfter = []Capture{{Name: "fix-again.json", Shell: "p2pcheck fix --apply --format json"}}
	// fixPersisted runs on an entry booted with the persistent parameter.
	fixPersisted = Capture{Name: "fix-persisted.json", Shell: "p2pcheck fix --format json"}
)

// fixKept are the fix captures kept under testdata/vm.
var fixKept = []string{"assume.json", "config-before.txt", "fix-dry.json", "config-after-dry.txt",
	"fix-apply.json", "pairs-after.json", "fix-again.json", "fix-persisted.json", "virt-fix.json", "virt-apply.json"}
