package fairlimit

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/util/flowcontrol"

	"github.com/jobplane/jobplane/lib/fairorder"
)

// BenchmarkThrottledRequests is what a request the budget holds back costs
// in CPU, beside client-go's token bucket (the reference's limiter): 64
// goroutines of 16 namespaces wait for LIMIT_QPS tokens a second (2,000),
// burst LIMIT_BURST (1), so that nearly every request waits for a token.
// It reports the process's CPU (user and system) per request; the time per
// request is the rate's, unless the limiter cannot keep it.
//
//	go test -run '^$' -bench ThrottledRequests -benchtime 4000x ./lib/fairlimit/
//	LIMIT_QPS=200 go test -run '^$' -bench ThrottledRequests -benchtime 600x ./lib/fairlimit/
func BenchmarkThrottledRequests(b *testing.B) {
	qps, waiters := float32(envInt("LIMIT_QPS", 2000)), 64
	limiters := []struct {
		name string
		make func() (flowcontrol.RateLimiter, func())
	}{
		{"client-go", func() (flowcontrol.RateLimiter, func()) {
			l := flowcontrol.NewTokenBucketRateLimiter(qps, envInt("LIMIT_BURST", 1))
			return l, l.Stop
		}},
		{"fairlimit", func() (flowcontrol.RateLimiter, func()) {
			l := New(qps, envInt("LIMIT_BURST", 1), fairorder.Weights{})
			return l, l.Stop
		}},
	}
	for _, lim := range limiters {
		b.Run("limiter="+lim.name, func(b *testing.B) {
			l, stop := lim.make()
			defer stop()
			requests := make(chan struct{}, b.N)
			for range b.N {
				requests <- struct{}{}
			}
			close(requests)
			before := cpuTime(b)
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range waiters {
				ctx := WithKey(context.Background(), fmt.Sprintf("ns-%d/job-%d", w%16, w))
				wg.Go(func() {
					for range requests {
						if err := l.Wait(ctx); err != nil {
							b.Error(err)
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-before).Nanoseconds())/float64(b.N)/1000, "cpu-µs/op")
		})
	}
}

// cpuTime is the process's user and system CPU so far.
func cpuTime(tb testing.TB) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// envInt is the integer in the environment variable name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}
