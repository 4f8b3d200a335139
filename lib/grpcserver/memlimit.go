package grpcserver

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// cgroupMemoryFiles hold a container's memory limit: cgroup v2's, then v1's.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// memoryLimitShare is the part of the container's limit the Go runtime is
// held to when GOMEMLIMIT is not set: the rest is for what the runtime does
// not count (its own structures, fragmentation, thread stacks) before the
// kernel's OOM killer acts.
const memoryLimitShare = 0.9

// limitMemoryToContainer sets the Go runtime's memory limit from the
// container's cgroup limit when GOMEMLIMIT is not set, as the process
// would be given by hand: the collector then works harder near the limit
// instead of the kernel killing the process, and the admission budgets
// derived from the limit (half of it for requests in flight) follow the
// container's size. It returns the limit set, 0 when none (GOMEMLIMIT set,
// or no cgroup limit).
func limitMemoryToContainer(files []string) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// "max" (v2), or a page-rounded MaxInt64 (v1): no limit.
		n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || n <= 0 || n >= math.MaxInt64/2 {
			return 0
		}
		limit := int64(float64(n) * memoryLimitShare)
		debug.SetMemoryLimit(limit)
		return limit
	}
	return 0
}
