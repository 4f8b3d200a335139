package fairqueue

import (
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/jobplane/jobplane/lib/fairorder"
)

// BenchmarkQueue compares the fair queue with client-go's plain one, both as
// the controller builds them (rate-limiting, delaying): 10,000 keys over 1,000
// namespaces stay queued, and one op is a worker's cycle, Get, Done and the
// key's Add again (its pods' events requeue it). fairqueue has two namespaces
// weighted, fairqueue-weighted all of them, fairqueue-annotated all of them
// by their annotations.
//
//	go test -run '^$' -bench BenchmarkQueue -count 5 ./lib/fairqueue/
func BenchmarkQueue(b *testing.B) {
	const namespaces, jobsPerNamespace = 1000, 10
	keys := make([]string, 0, namespaces*jobsPerNamespace)
	weighted := fairorder.Weights{}
	for j := range jobsPerNamespace {
		for ns := range namespaces {
			keys = append(keys, fmt.Sprintf("ns-%d/job-%d", ns, j))
			weighted[fmt.Sprintf("ns-%d", ns)] = 1 + ns%10
		}
	}
	for _, impl := range []struct {
		name string
		new  func() workqueue.TypedRateLimitingInterface[string]
	}{
		{name: "client-go", new: func() workqueue.TypedRateLimitingInterface[string] {
			return workqueue.NewTypedRateLimitingQueueWithConfig(newRateLimiter(), workqueue.TypedRateLimitingQueueConfig[string]{})
		}},
		{name: "fairqueue", new: func() workqueue.TypedRateLimitingInterface[string] {
			return New(newRateLimiter(), Config{Weights: fairorder.Weights{"ns-1": 4, "ns-2": 2}})
		}},
		// Every namespace weighted 1 to 10: passes spread over many buckets.
		{name: "fairqueue-weighted", new: func() workqueue.TypedRateLimitingInterface[string] {
			return New(newRateLimiter(), Config{Weights: weighted})
		}},
		// The same weights from the namespaces' annotations, as the
		// executor reads them by default.
		{name: "fairqueue-annotated", new: func() workqueue.TypedRateLimitingInterface[string] {
			shares := NewNamespaceShares(nil, slog.New(slog.DiscardHandler))
			for ns, w := range weighted {
				shares.set(namespaceWith(ns, map[string]string{WeightAnnotation: strconv.Itoa(w)}))
			}
			return New(newRateLimiter(), Config{Weights: shares})
		}},
	} {
		b.Run(impl.name, func(b *testing.B) {
			q := impl.new()
			defer q.ShutDown()
			for _, k := range keys {
				q.Add(k)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				key, _ := q.Get()
				q.Done(key)
				q.Add(key)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
		})
	}
}

// BenchmarkAddAfterOfAWaitingKey: pod events ask for their Job's sync a batch
// period later while one is already waiting; one op is such an AddAfter, for
// one of 100 keys. client-go's delaying queue takes each to its goroutine
// (a send, a wake-up, a new timer) to find it changes nothing; fairqueue
// does not pass it on.
//
//	go test -run '^$' -bench BenchmarkAddAfterOfAWaitingKey -count 5 ./lib/fairqueue/
func BenchmarkAddAfterOfAWaitingKey(b *testing.B) {
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("ns-%d/job", i)
	}
	for _, impl := range queues {
		b.Run(impl.name, func(b *testing.B) {
			q := impl.new(testingclock.NewFakeClock(time.Now()))
			defer q.ShutDown()
			for _, k := range keys {
				q.AddAfter(k, time.Hour)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				q.AddAfter(keys[i%len(keys)], time.Hour+time.Duration(i))
			}
		})
	}
}
