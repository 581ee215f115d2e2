// Package procfs reads what p2pkit needs from /proc beneath a [hostfs.Root]: CPU 0's
// identity, the kernel command line, release, modules, character device majors and
// build configuration (/proc/config.gz, or /boot/config-<release>), the NVIDIA and
// gdrdrv driver files, and one process's status, limits and environment. It also
// describes the device nodes under /dev ([FS.DevNode]), beside the /proc/devices
// majors that number them. It sits beside package sysfs around one root, as
// prometheus/procfs's procfs.FS and sysfs.FS do.
//
// Each file mirrors one kernel source file and names it: cpuinfo.go
// (arch/x86/kernel/cpu/proc.c), cmdline.go (fs/proc/cmdline.c), version.go
// (fs/proc/version.c), modules.go (kernel/module/procfs.c), devices.go
// (fs/proc/devices.c), config.go (kernel/configs.c), pid.go (fs/proc/array.c and
// fs/proc/base.c), nvidia.go and gdrdrv.go (the drivers' procfs files). Reading is
// split from parsing: methods of FS read, unexported parseX functions parse bytes and
// are tested and fuzzed on their own. Each FS method returns an error wrapping
// fs.ErrNotExist when its file is absent.
package procfs
