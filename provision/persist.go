package provision

import (
	"fmt"
	"os"
	"strings"

	"github.com/p2pkit/p2pkit/internal/atomicfile"
)

// DropInPath is where `p2pcheck fix --persist` writes the boot loader drop-in,
// relative to the root: GRUB's grub-mkconfig on Debian and Ubuntu sources
// /etc/default/grub.d/*.cfg after /etc/default/grub.
const DropInPath = "etc/default/grub.d/60-p2pcheck-acs.cfg"

// GrubDropIn returns the drop-in that adds the plan's boot parameter to
// GRUB_CMDLINE_LINUX, or "" when no parameter keeps the plan. The parameter is
// quoted inside the value: GRUB's script syntax would otherwise take the semicolons
// between device specifiers for command separators, and the kernel's own
// command-line parser (next_arg() in lib/cmdline.c) strips the quotes.
func (p Plan) GrubDropIn() string {
	if !p.Boot.Usable() {
		return ""
	}
	var b strings.Builder
	b.WriteString("# Written by `p2pcheck fix --persist`: the ACS Control values of its plan at every\n")
	fmt.Fprintf(&b, "# boot, with pci=%s= (see the kernel's Documentation/admin-guide/kernel-parameters.txt).\n", p.Boot.Form)
	b.WriteString("# Devices are named by their path from the root bus, which the kernel calls more\n")
	b.WriteString("# robust against bus renumbering than a plain address; root bus numbers come from the firmware.\n")
	if g := p.IOMMUGroups(); len(g) > 0 && p.Mode != ModeVirtHost {
		fmt.Fprintf(&b, "# Isolation given up: IOMMU groups %s (as read before the change) may merge.\n", joinInts(g))
	}
	b.WriteString("# Apply with update-grub (Debian, Ubuntu) or grub2-mkconfig -o /boot/grub2/grub.cfg.\n")
	fmt.Fprintf(&b, "GRUB_CMDLINE_LINUX=\"${GRUB_CMDLINE_LINUX} \\\"%s\\\"\"\n", p.Boot.Param)
	return b.String()
}

// GrubbyArgs returns the grubby command that adds the boot parameter to every
// installed kernel, for systems that manage boot entries with grubby (Fedora, RHEL),
// or nil when no parameter keeps the plan.
func (p Plan) GrubbyArgs() []string {
	if !p.Boot.Usable() {
		return nil
	}
	return []string{"grubby", "--update-kernel=ALL", "--args=\"" + p.Boot.Param + "\""}
}

// WriteDropIn writes GrubDropIn to DropInPath below root (the directory that stands
// for /), creating /etc/default/grub.d if needed. It writes nothing for a plan
// without a boot parameter.
func (p Plan) WriteDropIn(root string) error {
	text := p.GrubDropIn()
	if text == "" {
		return nil
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return fmt.Errorf("provision: %w", err)
	}
	defer r.Close()
	if err := r.MkdirAll("etc/default/grub.d", 0o755); err != nil {
		return fmt.Errorf("provision: %w", err)
	}
	err = atomicfile.WriteIn(r, DropInPath, atomicfile.Options{Force: true}, func(f *os.File) error {
		_, err := f.WriteString(text)
		return err
	})
	if err != nil {
		return fmt.Errorf("provision: %w", err)
	}
	return nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
