package load

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/planner/scalestate"
)

// BenchmarkSparseSmallSyncs is the planner process's CPU time a sync of a
// 4-pod Job costs when syncs come one at a time with a pause between them,
// as the executor's do when many small Jobs run (each finds the planner
// idle: its wake-ups are part of the cost), on the executor's stream to
// the planner binary. The 50 Jobs are synced in turn, each in full. Run
// with:
//
//	go test -run '^$' -bench SparseSmallSyncs -benchtime 3000x -count 3 ./services/planner/test/load/
func BenchmarkSparseSmallSyncs(b *testing.B) {
	planner, stream, _ := deployedPlanner(b)
	var requests []*plan.WireRequest
	for i := range 50 {
		s := withJobUID(scalestate.New(4), fmt.Sprintf("small-%d", i))
		requests = append(requests, wire(snapshotOf(s).WireRequest(fmt.Sprint(i))))
	}
	sync := func(i int) time.Duration {
		start := time.Now()
		if err := stream.SendMsg(requests[i%len(requests)]); err != nil {
			b.Fatal(err)
		}
		if resp, err := stream.Recv(); err != nil || resp.GetError() != nil {
			b.Fatalf("%v %v", err, resp.GetError())
		}
		return time.Since(start)
	}
	for i := range len(requests) { // every Job known, the process warm
		sync(i)
	}
	cpu := planner.CPUTime(b)
	var roundTrips time.Duration
	b.ResetTimer()
	for i := range b.N {
		roundTrips += sync(i)
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	used := planner.CPUTime(b) - cpu
	b.ReportMetric(float64(used.Microseconds())/float64(b.N), "planner-cpu-µs/sync")
	b.ReportMetric(float64(roundTrips.Microseconds())/float64(b.N), "round-trip-µs")
}

// withJobUID is s as the state of the Job uid.
func withJobUID(s scalestate.State, uid string) scalestate.State {
	s.Job = s.Job.DeepCopy()
	s.Job.UID = types.UID(uid)
	for i, p := range s.Pods {
		p = p.DeepCopy()
		p.OwnerReferences[0].UID = types.UID(uid)
		s.Pods[i] = p
	}
	return s
}
