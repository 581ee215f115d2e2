package main

import (
	"net"

	"github.com/p2pkit/p2pkit/node"
)

// netInterfaces names the interfaces that are up and have an IPv4 or IPv6 address
// other than IPv6 link-local, in index order, as getifaddrs shows them to NCCL's
// findInterfaces (src/misc/socket.cc).
func netInterfaces() []string {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var names []string
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLinkLocalUnicast() {
				names = append(names, ifc.Name)
				break
			}
		}
	}
	return names
}

// nodeOptions are what nccl reads: the tree and the platform, no device names.
func nodeOptions() node.Options { return node.Options{NoNames: true} }
