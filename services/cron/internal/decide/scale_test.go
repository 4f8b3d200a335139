package decide

import (
	"fmt"
	"runtime"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// manyActive syncs a CronJob listing n active Jobs, due at 02:00, with its
// Jobs: none (they went missing), running under Replace, or finished beyond
// a history limit of 0.
func manyActive(shape string, n int) func() Plan {
	cj := hourlyCronJob("Allow")
	var jobs []*batchv1.Job
	for i := range n {
		ref := corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: "ns", Name: fmt.Sprint("run-", i), UID: types.UID(fmt.Sprint("uid-", i))}
		cj.Status.Active = append(cj.Status.Active, ref)
		if shape == "missing" {
			continue
		}
		job := runningJob(cj, at("00:00:00"))
		job.Name, job.UID = ref.Name, ref.UID
		if shape == "finished" {
			job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
			job.Status.CompletionTime = &metav1.Time{Time: at("00:30:00")}
		}
		jobs = append(jobs, job)
	}
	switch shape {
	case "running":
		cj.Spec.ConcurrencyPolicy = batchv1.ReplaceConcurrent
	case "finished":
		cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](0)
	}
	in := Input{CronJob: cj, Jobs: jobs, Now: at("02:00:01")}
	return func() Plan { return Sync(in) }
}

// A status anyone allowed to write it may fill with thousands of active
// Jobs, and a namespace with thousands of a CronJob's Jobs, cost a sync
// memory in proportion (each dropped from the lists at once, not one pass
// each: 10,000 took 6 to 110 s): four times the Jobs, at most six times
// the bytes allocated.
func TestManyActiveJobsCostASyncInProportion(t *testing.T) {
	allocated := func(sync func() Plan) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		sync()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	for _, shape := range []string{"missing", "running", "finished"} {
		small, large := manyActive(shape, 1000), manyActive(shape, 4000)
		if a, b := allocated(small), allocated(large); b > 6*a {
			t.Errorf("%s: 1,000 active Jobs allocate %d bytes, 4,000 allocate %d (%.1f×)", shape, a, b, float64(b)/float64(a))
		}
	}
	sync := manyActive("running", 3)
	if p := sync(); len(deleted(p)) != 3 || len(p.Status.Active) != 1 {
		t.Errorf("Replace of 3 running Jobs deleted %v, active after %v", deleted(p), p.Status.Active)
	}
}

// BenchmarkSyncManyActive: a sync of a CronJob listing 10,000 active Jobs.
//
//	go test -run '^$' -bench SyncManyActive ./services/cron/internal/decide/
func BenchmarkSyncManyActive(b *testing.B) {
	for _, shape := range []string{"missing", "running", "finished"} {
		b.Run(shape, func(b *testing.B) {
			sync := manyActive(shape, 10000)
			for b.Loop() {
				sync()
			}
		})
	}
}
