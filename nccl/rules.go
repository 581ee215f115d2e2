package nccl

import "slices"

// The NCCL rules a decision cites, by the key of sourceLines.
const (
	ruleCheckP2P      = "ncclTopoCheckP2p"
	ruleCheckNet      = "ncclTopoCheckNet"
	ruleCheckGdr      = "ncclTopoCheckGdr"
	ruleComputePaths  = "ncclTopoComputePaths"
	ruleGetLevel      = "ncclGetLevel"
	ruleGdrEnabled    = "gdrEnabledForGPU"
	ruleGdrDisabled   = "gdrDisabledForGPU"
	ruleP2PCanConnect = "p2pCanConnect"
	ruleP2PLabel      = "p2pLabel"
	ruleP2PDirect     = "p2pDirectLabel"
	ruleP2PIndirect   = "p2pIndirectLabel"
	ruleSHMCanConnect = "shmCanConnect"
	ruleSHMLabel      = "shmLabel"
	ruleNetSendLabel  = "netSendLabel"
	ruleNetRecvLabel  = "netRecvLabel"
	ruleSelect        = "selectTransport"
	rulePopulateNics  = "ncclTopoPopulateNics"
	ruleInterCPU      = "ncclTopoGetInterCpuBw"
	ruleCuMem         = "ncclCuMemEnable"
	ruleInitGdrCopy   = "initGdrCopy"
	ruleGdrCopyLine   = "gdrcopyEnabled"
	ruleLoadParam     = "ncclLoadParam"
	ruleSocketPtr     = "socketPtrSupport"
	ruleIBPtr         = "ibPtrSupport"
	ruleHostHash      = "hostHash"
)

// ruleFuncs names the function each rule key stands for, where the key is an
// INFO line rather than the function.
var ruleFuncs = map[string]string{
	ruleGdrEnabled:    "ncclTopoCheckGdr's INFO line",
	ruleGdrDisabled:   "ncclTopoCheckGdr's INFO line",
	ruleP2PLabel:      "p2pSendSetup",
	ruleP2PDirect:     "p2pSendSetup",
	ruleP2PIndirect:   "p2pSendSetup",
	ruleSHMLabel:      "shmSendSetup",
	ruleNetSendLabel:  "sendSetup",
	ruleNetRecvLabel:  "recvSetup",
	rulePopulateNics:  "ncclTopoPopulateNics",
	ruleGdrCopyLine:   "ncclGdrInit",
	ruleLoadParam:     "ncclLoadParam",
	ruleSocketPtr:     "ncclNetSocketGetProperties",
	ruleIBPtr:         "ncclIbGetPhysProperties",
	ruleHostHash:      "getHostHash",
	ruleP2PCanConnect: "p2pCanConnect",
	ruleSHMCanConnect: "shmCanConnect",
}

// ruleFiles are the files of rules whose key sourceLines may lack for a release.
var ruleFiles = map[string]string{
	ruleCheckP2P: "src/graph/paths.cc", ruleCheckNet: "src/graph/paths.cc", ruleCheckGdr: "src/graph/paths.cc",
	ruleComputePaths: "src/graph/paths.cc", ruleGetLevel: "src/graph/paths.cc", ruleGdrEnabled: "src/graph/paths.cc",
	ruleGdrDisabled: "src/graph/paths.cc", ruleP2PCanConnect: "src/transport/p2p.cc", ruleP2PLabel: "src/transport/p2p.cc",
	ruleP2PDirect: "src/transport/p2p.cc", ruleP2PIndirect: "src/transport/p2p.cc", ruleSHMCanConnect: "src/transport/shm.cc",
	ruleSHMLabel: "src/transport/shm.cc", ruleNetSendLabel: "src/transport/net.cc", ruleNetRecvLabel: "src/transport/net.cc",
	ruleSelect: "src/transport.cc", rulePopulateNics: "src/graph/topo.cc", ruleInterCPU: "src/graph/topo.cc",
	ruleCuMem: "src/misc/cudawrap.cc", ruleInitGdrCopy: "src/init.cc", ruleGdrCopyLine: "src/include/gdrwrap.h",
	ruleLoadParam: "src/misc/param.cc", ruleSocketPtr: "src/transport/net_socket.cc", ruleIBPtr: "src/transport/net_ib.cc",
	ruleHostHash: "src/misc/utils.cc",
}

// cite names rule key as it is in release v's source: "ncclTopoCheckP2p
// (src/graph/paths.cc:272)". For a release whose lines are not known (one newer
// or older than the table, or a rule the release has elsewhere), the function and
// file are named without a line.
func cite(key string, v Version) string {
	fn := key
	if f, ok := ruleFuncs[key]; ok {
		fn = f
	}
	if at, ok := sourceLines()[v.String()][key]; ok {
		return fn + " (" + at + ")"
	}
	return fn + " (" + ruleFiles[key] + ")"
}

// cites formats rule keys for release v, in order, each once.
func cites(keys []string, v Version) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		c := cite(k, v)
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// sourceRelease says which release's line numbers a citation uses, for reports:
// v itself, or that the lines are not known for it.
func sourceRelease(v Version) string {
	if _, ok := sourceLines()[v.String()]; ok {
		return "source lines of NCCL " + v.String() + " (github.com/NVIDIA/nccl tag v" + v.String() + "-1)"
	}
	known := make([]string, 0, len(sourceLines()))
	for k := range sourceLines() {
		known = append(known, k)
	}
	slices.SortFunc(known, func(a, b string) int {
		va, _ := ParseVersion(a)
		vb, _ := ParseVersion(b)
		return va.compare(vb)
	})
	return "no source lines for NCCL " + v.String() + " (known: " + known[0] + " to " + known[len(known)-1] + "): functions and files are named"
}

// compare orders releases.
func (v Version) compare(o Version) int {
	switch {
	case v.Major != o.Major:
		return v.Major - o.Major
	case v.Minor != o.Minor:
		return v.Minor - o.Minor
	}
	return v.Patch - o.Patch
}
