package main

import "github.com/p2pkit/p2pkit/nccl"

// runLog explains NCCL logs; it is built in the next commits.
func (no *ncclOptions) runLog(map[string]string, nccl.Version, string) error {
	return usageError("--log: not built yet")
}
