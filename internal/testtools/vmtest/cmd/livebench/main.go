// Command livebench times `p2pcheck topo` against `lspci -tv` on a real sysfs: a
// QEMU guest (TCG) of the P2PDMA test kernel with about a thousand PCI functions
// (vmtest.ScaleTopology: SR-IOV NVMe controllers with their VFs enabled, behind
// switches), where the fixture trees topobench reads are files on the host's disk.
//
//	make build-static
//	go run ./internal/testtools/vmtest/cmd/livebench -p2pcheck bin/p2pcheck-static [-baseline OLD]
//
// In the guest, each command runs -rounds times, the commands interleaved; busybox
// time gives each run's wall, user and system time. Under TCG every instruction,
// the kernel's included, is emulated, so the seconds are the emulator's, tens of
// times a real machine's; the ratios between commands run in the same guest are what
// it measures. -baseline adds a second p2pcheck (an earlier build) to compare with.
// Outputs of the two p2pcheck builds are compared too. It is a measurement, not a
// test: nothing passes or fails on time.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/p2pkit/p2pkit/internal/cli"
	"github.com/p2pkit/p2pkit/internal/testtools/rusage"
	"github.com/p2pkit/p2pkit/internal/testtools/vmtest"
)

func main() {
	os.Exit(cli.ToolExit("livebench", run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("livebench", flag.ContinueOnError)
	fl.SetOutput(stderr)
	p2pcheck := fl.String("p2pcheck", "bin/p2pcheck-static", "the static p2pcheck to time")
	baseline := fl.String("baseline", "", "an earlier static p2pcheck to time beside it")
	lspci := fl.String("lspci", "/usr/bin/lspci", "the lspci to time it against (its shared libraries go into the guest)")
	pciIDs := fl.String("pci-ids", "/usr/share/misc/pci.ids", "the pci.ids both read")
	kernel := fl.String("kernel", cmp.Or(os.Getenv("P2PKIT_ORACLE_KERNEL"), vmtest.OracleKernelPath(".")), "the guest kernel: SR-IOV and NVMe built in, as in the P2PDMA test kernel (see docs/contributing.md)")
	qemu := fl.String("qemu", cmp.Or(os.Getenv("P2PKIT_QEMU"), "qemu-system-x86_64"), "QEMU")
	busybox := fl.String("busybox", cmp.Or(os.Getenv("P2PKIT_BUSYBOX"), "/bin/busybox"), "a static busybox")
	groups := fl.Int("groups", 8, "root ports, each with an SR-IOV NVMe")
	vfs := fl.Int("vfs", 120, "VFs enabled on each NVMe (at most 127)")
	rounds := fl.Int("rounds", 5, "timed rounds")
	timeout := fl.Duration("timeout", 30*time.Minute, "the guest's time limit")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() != 0 || *rounds < 1 {
		fl.Usage()
		return errors.New("want no arguments and -rounds of at least 1")
	}
	extra := map[string]string{"pci.ids": *pciIDs, "bin/lspci": *lspci}
	libs, err := sharedLibraries(*lspci)
	if err != nil {
		return err
	}
	for guest, host := range libs {
		extra[guest] = host
	}
	cmds := []bench{{name: "p2pcheck topo", sh: "/bin/p2pcheck --no-color --no-nvml --pci-ids /pci.ids topo"}}
	if *baseline != "" {
		extra["bin/p2pcheck-baseline"] = *baseline
		cmds = append(cmds, bench{name: "baseline topo", sh: "/bin/p2pcheck-baseline --no-color --no-nvml --pci-ids /pci.ids topo"})
	}
	cmds = append(cmds, bench{name: "lspci -tv", sh: "LD_LIBRARY_PATH=/lib/x86_64-linux-gnu /bin/lspci -tv -i /pci.ids"})
	work, err := os.MkdirTemp("", "livebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	b := vmtest.Boot{
		Topology: vmtest.ScaleTopology(*groups, *vfs),
		Kernel:   vmtest.Kernel{Name: vmtest.KernelOracle, Path: *kernel},
		Busybox:  *busybox, QEMU: *qemu,
		Bin:      vmtest.Binaries{P2PCheck: *p2pcheck},
		Captures: []vmtest.Capture{{Name: "bench", Shell: guestScript(cmds, *rounds)}},
		MemMiB:   2048, SMP: 2, Timeout: *timeout, WorkDir: work, Extra: extra,
	}
	start := time.Now()
	res, err := b.Run(context.Background())
	if err != nil {
		return fmt.Errorf("%w\n%s", err, tail(res.Raw, 3000))
	}
	sec := res.Console.Sections["bench"]
	if sec.Status != 0 {
		return fmt.Errorf("guest bench failed (status %d):\n%s", sec.Status, sec.Data)
	}
	return report(stdout, cmds, sec.Data, time.Since(start))
}

type bench struct {
	name, sh             string
	wall, cpu, user, sys []float64
}

// guestScript runs each command rounds times, interleaved (the order alternates),
// under busybox time -p, and prints "T <index> real R user U sys S" per run.
func guestScript(cmds []bench, rounds int) string {
	var b strings.Builder
	b.WriteString("echo functions $(ls /sys/bus/pci/devices | wc -l)\n")
	for i, c := range cmds {
		fmt.Fprintf(&b, "%s > /tmp/out%d 2>&1; echo sum %d $? $(md5sum < /tmp/out%d)\n", c.sh, i, i, i)
	}
	for r := range rounds {
		for j := range cmds {
			i := j
			if r%2 == 1 {
				i = len(cmds) - 1 - j
			}
			fmt.Fprintf(&b, "echo T %d $( (time -p sh -c %s) 2>&1 | tr '\\n' ' ')\n", i, vmtest.ShellQuote(cmds[i].sh+" >/dev/null 2>&1"))
		}
	}
	return b.String()
}

func report(w io.Writer, cmds []bench, out []byte, took time.Duration) error {
	sums := map[int]string{}
	functions := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "functions":
			functions = f[1]
		case len(f) >= 4 && f[0] == "sum":
			i, _ := strconv.Atoi(f[1])
			sums[i] = "exit " + f[2] + " md5 " + f[3]
		case len(f) == 8 && f[0] == "T":
			i, err := strconv.Atoi(f[1])
			if err != nil || i < 0 || i >= len(cmds) {
				return fmt.Errorf("bad line %q", sc.Text())
			}
			var v [3]float64
			for k, idx := range []int{3, 5, 7} {
				if v[k], err = strconv.ParseFloat(f[idx], 64); err != nil {
					return fmt.Errorf("bad line %q", sc.Text())
				}
			}
			c := &cmds[i]
			c.wall, c.user, c.sys, c.cpu = append(c.wall, v[0]), append(c.user, v[1]), append(c.sys, v[2]), append(c.cpu, v[1]+v[2])
		}
	}
	fmt.Fprintf(w, "live sysfs in a QEMU/TCG guest: %s PCI functions, %d rounds, medians in emulated seconds (%s in all)\n",
		functions, len(cmds[0].wall), took.Round(time.Second))
	for i, c := range cmds {
		if len(c.wall) == 0 {
			return fmt.Errorf("%s: no timed run in the guest's output:\n%s", c.name, out)
		}
		fmt.Fprintf(w, "  %-14s wall %6.2f s  CPU %6.2f s (user %5.2f, sys %5.2f)  %s\n",
			c.name, rusage.Median(c.wall), rusage.Median(c.cpu), rusage.Median(c.user), rusage.Median(c.sys), sums[i])
	}
	last := cmds[len(cmds)-1]
	for _, c := range cmds[:len(cmds)-1] {
		fmt.Fprintf(w, "  %s / %s: wall %.2f, CPU %.2f\n", c.name, last.name, rusage.Median(c.wall)/rusage.Median(last.wall), rusage.Median(c.cpu)/rusage.Median(last.cpu))
	}
	return nil
}

// sharedLibraries maps guest paths to host files for the libraries of an ELF
// program, as ldd resolves them.
func sharedLibraries(prog string) (map[string]string, error) {
	out, err := exec.Command("ldd", prog).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", prog, err)
	}
	libs := map[string]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		var p string
		switch {
		case len(f) >= 3 && f[1] == "=>":
			p = f[2]
		case len(f) >= 1 && filepath.IsAbs(f[0]):
			p = f[0]
		default:
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, err
		}
		libs[strings.TrimPrefix(p, "/")] = real
	}
	return libs, nil
}

func tail(b []byte, n int) []byte { return b[max(0, len(b)-n):] }
