package sysfs

// Arm64 reports an arm64 CPU: /proc/cpuinfo has no x86 vendor_id and lists the
// arm64 "asimd" feature (hwcap_str in arch/arm64/kernel/cpuinfo.c). Grace Hopper
// and Grace Blackwell nodes are arm64.
func (c CPUInfo) Arm64() bool { return c.VendorID == "" && c.HasFlag("asimd") }
