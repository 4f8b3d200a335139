package main

import (
	"math"
	"os"
	"runtime"
)

// requestsPerProcessor is the Kubernetes API budget one processor serves:
// the executor spends about 0.7 ms of CPU a write, following its watch
// events included (BENCHMARKS.md, "Processors"), so 500 requests a second
// keep one processor about a third busy.
const requestsPerProcessor = 500

// processors is how many processors the executor's Go runtime should use:
// one per requestsPerProcessor of its API budget, at least one, never more
// than the runtime's own default (the cores, or the container's CPU limit).
// The executor's work is bounded by that budget; every processor beyond it
// only costs CPU, as each request's goroutine hand-offs wake an idle one.
func processors(qps float64, runtimeDefault int) int {
	n := int(math.Ceil(qps / requestsPerProcessor))
	return max(1, min(n, runtimeDefault))
}

// limitProcessors applies processors unless GOMAXPROCS is set, which wins
// as it does for any Go program. It returns the processors set, 0 when left
// to GOMAXPROCS.
func limitProcessors(qps float64) int {
	if os.Getenv("GOMAXPROCS") != "" {
		return 0
	}
	n := processors(qps, runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(n)
	return n
}
