package controller

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/executor/internal/jobstate"
)

// In drop-in mode the reference's metric names (job_controller_*) count
// what jobplane's do, with the same labels; otherwise there are none.
func TestReferenceMetricNamesInDropInMode(t *testing.T) {
	for _, dropIn := range []bool{false, true} {
		m := NewMetrics(dropIn)
		reg := prometheus.NewPedanticRegistry()
		if err := m.Register(reg); err != nil {
			t.Fatal(err)
		}
		m.recordSync(&plan.Plan{Metrics: plan.Metrics{CompletionMode: "NonIndexed", SyncAction: "pods_created"}}, nil, 0)
		m.recordPlan(&plan.Plan{Metrics: plan.Metrics{CompletionMode: "Indexed", FinishedResult: "succeeded", FinishedReason: "CompletionsReached", PodsSucceeded: 2}})
		m.recordCreations(plan.PodCreateNew, 3, 1)
		m.recordStaleSkip(jobstate.Jobs)
		m.recordTrackedTermination(true)
		m.recordExternalJob("example.com/other")

		want := `
# HELP PREFIXjob_syncs_total Job syncs.
# TYPE PREFIXjob_syncs_total counter
PREFIXjob_syncs_total{action="pods_created",completion_mode="NonIndexed",result="success"} 1
# HELP PREFIXjobs_finished_total Jobs finished.
# TYPE PREFIXjobs_finished_total counter
PREFIXjobs_finished_total{completion_mode="Indexed",reason="CompletionsReached",result="succeeded"} 1
# HELP PREFIXjob_pods_finished_total Finished pods counted in Job status.
# TYPE PREFIXjob_pods_finished_total counter
PREFIXjob_pods_finished_total{completion_mode="Indexed",result="succeeded"} 2
# HELP PREFIXjob_pods_creation_total Pods created for Jobs, by reason and status.
# TYPE PREFIXjob_pods_creation_total counter
PREFIXjob_pods_creation_total{reason="new",status="failed"} 1
PREFIXjob_pods_creation_total{reason="new",status="succeeded"} 4
# HELP PREFIXstale_sync_skips_total Syncs put off because a cache had not yet seen the executor's own last write, by the cache's API group and resource.
# TYPE PREFIXstale_sync_skips_total counter
PREFIXstale_sync_skips_total{group="batch",resource="jobs"} 1
# HELP PREFIXterminated_pods_tracking_finalizer_total Terminated pods (Succeeded or Failed) with the tracking finalizer: add when one is seen, delete when it is gone or lost the finalizer.
# TYPE PREFIXterminated_pods_tracking_finalizer_total counter
PREFIXterminated_pods_tracking_finalizer_total{event="add"} 1
# HELP PREFIXjobs_by_external_controller_total Jobs added whose spec.managedBy names another controller, by that name.
# TYPE PREFIXjobs_by_external_controller_total counter
PREFIXjobs_by_external_controller_total{controller_name="example.com/other"} 1
`
		names := []string{"job_syncs_total", "jobs_finished_total", "job_pods_finished_total", "job_pods_creation_total",
			"stale_sync_skips_total", "terminated_pods_tracking_finalizer_total", "jobs_by_external_controller_total"}
		for _, prefix := range []string{"jobplane_", ReferencePrefix} {
			var full []string
			for _, n := range names {
				full = append(full, prefix+n)
			}
			err := testutil.GatherAndCompare(reg, strings.NewReader(strings.ReplaceAll(want, "PREFIX", prefix)), full...)
			if present := prefix == "jobplane_" || dropIn; present && err != nil {
				t.Errorf("drop-in %v, %s*: %v", dropIn, prefix, err)
			}
			if n, _ := testutil.GatherAndCount(reg, full...); !(prefix == "jobplane_" || dropIn) && n > 0 {
				t.Errorf("drop-in %v: %d series named %s*", dropIn, n, prefix)
			}
		}
	}
}

// The pod and Job events counted as the reference counts them.
func TestTrackedTerminationsAndExternalJobsFromEvents(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewPedanticRegistry()
	if err := f.c.metrics.Register(reg); err != nil {
		t.Fatal(err)
	}
	job := newJob("job")
	running := newPod("pod", job)
	done := newPod("pod", job, succeeded)
	done.ResourceVersion = "2"
	released := done.DeepCopy()
	released.Finalizers, released.ResourceVersion = nil, "3"
	f.c.addPod(running)
	f.c.updatePod(running, done)
	f.c.updatePod(done, released)
	f.c.deletePod(released, true)
	f.c.addJob(newJob("other", managedBy(ptr.To("example.com/other"))))
	f.c.addJob(newJob("builtin", managedBy(nil)))
	for event, want := range map[string]float64{"add": 1, "delete": 1} {
		if got := counterValue(t, f.c.metrics.trackedTerminations.WithLabelValues(event)); got != want {
			t.Errorf("terminated pods with the finalizer, %s: %v, want %v", event, got, want)
		}
	}
	if got := counterValue(t, f.c.metrics.externalJobs.WithLabelValues("example.com/other")); got != 1 {
		t.Errorf("Jobs of example.com/other: %v, want 1", got)
	}
	if n := testutil.CollectAndCount(f.c.metrics.externalJobs); n != 1 {
		t.Errorf("%d controllers counted, want only example.com/other (a Job without managedBy is nobody's)", n)
	}
}

// A tenant creating Jobs with ever new spec.managedBy values does not grow
// the executor's metrics without bound: past maxExternalControllers names,
// Jobs count as "other".
func TestExternalControllerNamesAreBounded(t *testing.T) {
	m := NewMetrics(true)
	for i := range maxExternalControllers + 100 {
		m.recordExternalJob(fmt.Sprintf("tenant.example/controller-%d", i))
	}
	m.recordExternalJob("tenant.example/controller-0") // known: still its own
	for _, vec := range []*prometheus.CounterVec{m.externalJobs, m.reference.externalJobs} {
		if n := testutil.CollectAndCount(vec); n != maxExternalControllers+1 {
			t.Errorf("%d series, want %d names and other", n, maxExternalControllers)
		}
		if got := testutil.ToFloat64(vec.WithLabelValues("other")); got != 100 {
			t.Errorf("other counted %v, want 100", got)
		}
		if got := testutil.ToFloat64(vec.WithLabelValues("tenant.example/controller-0")); got != 2 {
			t.Errorf("a known name counted %v, want 2", got)
		}
	}
}
