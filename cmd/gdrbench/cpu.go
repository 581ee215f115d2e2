package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// cpuEnv is the variable of the peer protocol that names the CPU a peer is
// to time its copies on (apiperf --copies --cpu sets it; see peer.go).
const cpuEnv = "GDRBENCH_CPU"

// checkCPU returns the CPUs this process may run on and, with them, an
// error if cpu is neither -1 (none) nor one of them.
func checkCPU(cpu int) ([]int, error) {
	cpus, err := allowedCPUs()
	if err != nil {
		return nil, err
	}
	if cpu >= 0 && !slices.Contains(cpus, cpu) {
		return cpus, fmt.Errorf("CPU %d is not one this process may run on (%s)", cpu, cpuList(cpus))
	}
	return cpus, nil
}

// envCPU returns the CPU that cpuEnv names, or -1 where it is unset or
// empty.
func envCPU() (int, error) {
	v := os.Getenv(cpuEnv)
	if v == "" {
		return -1, nil
	}
	cpu, err := strconv.Atoi(v)
	if err != nil || cpu < 0 {
		return -1, fmt.Errorf("%s=%q is not a CPU number", cpuEnv, v)
	}
	return cpu, nil
}

// cpuList writes sorted CPU numbers as the kernel's cpulist format does
// ("0-3,8"; Documentation/admin-guide/cputopology.rst).
func cpuList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}
