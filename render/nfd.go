package render

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sync"
	"time"

	"github.com/p2pkit/p2pkit/check"
)

// NFDNamespace is the namespace of p2pcheck's node-feature-discovery labels. It is
// NFD's default label namespace, which nfd-master accepts without -extra-label-ns;
// every name starts with "p2pcheck." so the labels stay p2pcheck's own.
const NFDNamespace = "feature.node.kubernetes.io"

// nfdMaxFile is NFD's size limit for a features.d file; a larger one is ignored.
const nfdMaxFile = 64 << 10

// labelValue matches a valid Kubernetes label value: empty, or at most 63
// characters of [A-Za-z0-9._-] that start and end with an alphanumeric.
// It is compiled on first use: every p2pcheck command would pay for it at start.
var labelValue = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$`)
})

// NFDFeatures writes the report as a node-feature-discovery features.d file
// (kubernetes-sigs/node-feature-discovery, "local" feature source): a comment
// naming the writer, a "# +expiry-time=" line so that the labels disappear when
// p2pcheck stops refreshing them, and one "<namespace>/p2pcheck.<name>=<value>"
// line per feature and per check:
//
//	feature.node.kubernetes.io/p2pcheck.ready=true
//	feature.node.kubernetes.io/p2pcheck.gdr=dmabuf-peermem
//	feature.node.kubernetes.io/p2pcheck.check.acs_path=fail
//
// Values are label-safe (at most 63 characters, [A-Za-z0-9._-]); a value that is
// not is written as "invalid" rather than break the file.
//
// It fails without writing anything if the file would exceed NFD's 64 KiB limit.
func NFDFeatures(w io.Writer, r check.Report, expiry time.Time) error {
	var buf bytes.Buffer
	p := newPrinter(&buf)
	nfdHeader(p, r.ToolVersion, expiry)
	ft := r.Features
	for _, kv := range [][2]string{
		{"ready", ft.Ready}, {"overall", ft.Overall}, {"gpus", ft.GPUs}, {"rdma-nics", ft.RDMANICs}, {"nvme", ft.NVMe},
		{"p2p", ft.P2P}, {"acs", ft.ACS},
		{"iommu", ft.IOMMU}, {"gdr", ft.GDR}, {"gdrcopy", ft.GDRCopy}, {"vm", ft.VM},
	} {
		p.line(nfdLine(kv[0], kv[1]))
	}
	for _, c := range r.Checks {
		p.line(nfdLine("check."+c.ID, string(c.Status)))
	}
	if err := p.done(); err != nil {
		return err
	}
	if buf.Len() > nfdMaxFile {
		return fmt.Errorf("render: features file of %d bytes exceeds NFD's %d-byte limit", buf.Len(), nfdMaxFile)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func nfdLine(name, value string) string {
	if !labelValue().MatchString(value) {
		value = "invalid"
	}
	return fmt.Sprintf("%s/p2pcheck.%s=%s", NFDNamespace, name, value)
}

// sanitizeComment keeps a comment on one line.
func sanitizeComment(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < ' ' || c == 0x7f {
			b[i] = ' '
		}
	}
	return string(b)
}
