package vmtest

import (
	"fmt"
	"strings"
)

// Capture is one command the guest runs and prints between console markers.
type Capture struct {
	Name  string // section name; also the file name under testdata/vm/<run>/
	Shell string // busybox sh command line
	// File, when set, is a file the command writes; its bytes (base64 on the console)
	// are the section, and the command's own output goes to a "<Name>.log" section.
	File string
}

// Standard captures, taken in every guest. They use busybox only, so they are an
// independent view of what the kernel exposes, next to p2pcheck's own.
var (
	// CaptureRelease is uname -r.
	CaptureRelease = Capture{Name: "uname", Shell: "uname -r"}
	// CaptureDmesg is the kernel log, which holds the oracle's lines.
	CaptureDmesg = Capture{Name: "dmesg", Shell: "dmesg"}
	// CapturePCI lists every function: see parsePCIDump for the format.
	CapturePCI = Capture{Name: "pci.txt", Shell: "pcidump"}
)

// guestFuncs are shell functions the init script defines.
//
// pcidump prints one line per PCI function:
//
//	<bdf> <path below /sys/devices> <vendor>:<device> hdr=<0x0e> bus=<0x18..0x1a>
//	exp=<port type|-> acs=<ctl|-> group=<n|-> numa=<n> physfn=<bdf|->
//
// exptype walks the capability list (bounded to 48 steps) to the PCI Express
// capability and prints its device/port type, or nothing without one. acsctl walks the extended capability list of a config file with od, the way setpci
// ECAP_ACS+6.w does, bounded to 480 steps, and prints the ACS Control word (hex) or
// nothing when there is no ACS capability.
const guestFuncs = `
exptype() {
	o=$(od -An -tu1 -j 52 -N 1 "$1" | tr -d ' ') n=0
	while [ "$o" -ge 64 ] && [ "$n" -lt 48 ]; do
		v=$(od -An -tu2 -j "$o" -N 2 "$1" | tr -d ' ')
		if [ $((v & 255)) = 16 ]; then
			v=$(od -An -tu2 -j $((o + 2)) -N 2 "$1" | tr -d ' ')
			echo $(((v >> 4) & 15))
			return
		fi
		o=$(((v >> 8) & 252)) n=$((n + 1))
	done
}
acsctl() {
	o=256 n=0
	while [ "$o" -ge 256 ] && [ "$n" -lt 480 ]; do
		v=$(od -An -tu4 -j "$o" -N 4 "$1" 2>/dev/null | tr -d ' ')
		[ -z "$v" ] || [ "$v" = 0 ] && return
		if [ $((v & 65535)) = 13 ]; then
			od -An -tx2 -j $((o + 6)) -N 2 "$1" | tr -d ' '
			return
		fi
		o=$((v >> 20)) n=$((n + 1))
	done
}
pcidump() {
	for d in /sys/bus/pci/devices/*; do
		p=$(readlink -f "$d")
		a=$(acsctl "$d/config") e=$(exptype "$d/config") g=- pf=-
		[ -e "$d/iommu_group" ] && g=$(basename "$(readlink "$d/iommu_group")")
		[ -e "$d/physfn" ] && pf=$(basename "$(readlink "$d/physfn")")
		echo "${d##*/} ${p#/sys/devices/} $(cut -c3- "$d/vendor"):$(cut -c3- "$d/device")" \
			"hdr=$(od -An -tx1 -j 14 -N 1 "$d/config" | tr -d ' ')" \
			"bus=$(od -An -tx1 -j 24 -N 3 "$d/config" | tr -d ' ') exp=${e:--}" \
			"acs=${a:--} group=$g numa=$(cat "$d/numa_node") physfn=$pf"
	done
}
capture() {
	echo "==P2PKIT-BEGIN $1 text=="
	( eval "$2" ) 2>&1
	echo "==P2PKIT-END $1 $?=="
}
capturefile() {
	echo "==P2PKIT-BEGIN $1.log text=="
	rm -f "$3"
	( eval "$2" ) 2>&1
	echo "==P2PKIT-END $1.log $?=="
	echo "==P2PKIT-BEGIN $1 base64=="
	base64 "$3"
	echo "==P2PKIT-END $1 $?=="
}
`

// InitScript returns the guest's /init: mount the pseudo file systems, quiet the
// console, run setup (each step's output is the "setup" section), take the captures,
// print the final marker and power off. -no-reboot on the QEMU side turns any kernel
// panic into an exit as well.
func InitScript(setup []string, captures []Capture) string {
	var b strings.Builder
	b.WriteString("#!/bin/busybox sh\n")
	b.WriteString("/bin/busybox --install -s /bin\n")
	b.WriteString("mount -t proc proc /proc\nmount -t sysfs sys /sys\nmount -t devtmpfs dev /dev\n")
	b.WriteString("mkdir -p /tmp && mount -t tmpfs tmp /tmp\n")
	// Only emergencies reach the console from here on; dmesg still has everything.
	b.WriteString("echo 1 > /proc/sys/kernel/printk\n")
	b.WriteString("export PATH=/bin HOME=/tmp TMPDIR=/tmp\n")
	b.WriteString(guestFuncs)
	if len(setup) > 0 {
		b.WriteString("capture setup " + ShellQuote(strings.Join(append([]string{"set -e"}, setup...), "\n")) + "\n")
	}
	for _, c := range captures {
		if c.File != "" {
			fmt.Fprintf(&b, "capturefile %s %s %s\n", c.Name, ShellQuote(c.Shell), ShellQuote(c.File))
		} else {
			fmt.Fprintf(&b, "capture %s %s\n", c.Name, ShellQuote(c.Shell))
		}
	}
	b.WriteString("echo " + markDone + "\n")
	b.WriteString("poweroff -f\n")
	return b.String()
}

// ShellQuote quotes s for sh as one word.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
