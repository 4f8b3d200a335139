package sim

import (
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobplane/jobplane/services/planner/internal/engine"
)

// lifecycles is how many generated scenarios the convergence test plays.
const lifecycles = 600

var start = time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)

// Every generated lifecycle, with and without a lagging informer, ends finished, with the condition and reason its
// script implies, its counters matching the pods, and no pod left holding
// the tracking finalizer.
func TestLifecyclesConverge(t *testing.T) {
	for seed := range uint64(lifecycles) {
		sc := Generate(seed)
		for _, lag := range []bool{false, true} {
			name := sc.Name
			if lag {
				name += "-informer-lag"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				w := sc.Run(start, 3000, lag, checkParallelism(t))
				checkFinished(t, sc, w)
				checkNoFinalizerLeft(t, w)
				checkCounters(t, sc, w)
			})
		}
	}
}

// checkParallelism: after every sync, no more pods run than parallelism,
// even when the snapshot missed pods just created.
func checkParallelism(t *testing.T) func(*World) {
	return func(w *World) {
		t.Helper()
		var active int32
		for _, p := range w.Pods() {
			if !terminal(p) && p.DeletionTimestamp == nil {
				active++
			}
		}
		if active > *w.Job.Spec.Parallelism {
			t.Fatalf("%d pods active at %s, parallelism %d", active, w.Now, *w.Job.Spec.Parallelism)
		}
	}
}

func checkFinished(t *testing.T, sc Scenario, w *World) {
	t.Helper()
	if !w.Finished() {
		t.Fatalf("not finished after %d syncs: status %+v", w.Plans, w.Job.Status)
	}
	var terminal []batchv1.JobCondition
	for _, c := range w.Job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			terminal = append(terminal, c)
		}
	}
	if len(terminal) != 1 || terminal[0].Type != sc.WantCondition || terminal[0].Reason != sc.WantReason {
		t.Fatalf("terminal conditions %+v, want %s/%s", terminal, sc.WantCondition, sc.WantReason)
	}
	interim := batchv1.JobSuccessCriteriaMet
	if sc.WantCondition == batchv1.JobFailed {
		interim = batchv1.JobFailureTarget
	}
	if c := condition(w.Job, interim); c == nil || c.Reason != sc.WantReason {
		t.Errorf("interim condition %s missing or with another reason: %+v", interim, w.Job.Status.Conditions)
	}
	if (w.Job.Status.CompletionTime != nil) != (sc.WantCondition == batchv1.JobComplete) {
		t.Errorf("completionTime %v with %s", w.Job.Status.CompletionTime, sc.WantCondition)
	}
	if u := w.Job.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) > 0 {
		t.Errorf("uncounted pods left: %+v", u)
	}
	if w.Job.Status.Active != 0 || deref(w.Job.Status.Terminating) != 0 || deref(w.Job.Status.Ready) != 0 {
		t.Errorf("finished with active %d, terminating %v, ready %v", w.Job.Status.Active, w.Job.Status.Terminating, w.Job.Status.Ready)
	}
	if plan := engine.Sync(w.Snapshot()); len(plan.Actions) != 0 {
		t.Errorf("a finished Job still plans %d actions", len(plan.Actions))
	}
}

func checkNoFinalizerLeft(t *testing.T, w *World) {
	t.Helper()
	for _, p := range w.Pods() {
		if slices.Contains(p.Finalizers, engine.DefaultTrackingFinalizer) {
			t.Errorf("pod %s (%s) still holds the tracking finalizer", p.Name, p.Status.Phase)
		}
		if !terminal(p) {
			t.Errorf("pod %s still %s after the Job finished", p.Name, p.Status.Phase)
		}
	}
}

// checkCounters: each pod is counted at most once, succeeded pods are the
// ones counted as succeeded, and the counters equal what went through
// uncountedTerminatedPods.
func checkCounters(t *testing.T, sc Scenario, w *World) {
	t.Helper()
	everSucceeded, everFailed := map[types.UID]bool{}, map[types.UID]bool{}
	for _, s := range w.StatusWrites {
		if u := s.UncountedTerminatedPods; u != nil {
			for _, uid := range u.Succeeded {
				everSucceeded[uid] = true
			}
			for _, uid := range u.Failed {
				everFailed[uid] = true
			}
		}
	}
	for uid := range everSucceeded {
		if everFailed[uid] {
			t.Errorf("pod %s counted both as succeeded and failed", uid)
		}
	}
	var succeededPods, countableFailures, removedFailed int
	for _, r := range w.Ledger {
		if r.ByDeletion {
			continue
		}
		switch {
		case r.Phase == corev1.PodSucceeded:
			succeededPods++
		case sc.IgnoresEvictions && r.Evicted:
		case r.Phase == corev1.PodFailed:
			countableFailures++
			removedFailed++
		default:
			removedFailed++ // stopped while running: failed only if the Job failed
		}
	}
	status := w.Job.Status
	if indexed := w.Job.Spec.CompletionMode != nil && *w.Job.Spec.CompletionMode == batchv1.IndexedCompletion; indexed {
		if int(status.Succeeded) != distinctSucceededIndexes(w) {
			t.Errorf("succeeded %d, but %d indexes have a succeeded pod", status.Succeeded, distinctSucceededIndexes(w))
		}
		if len(everSucceeded) != 0 {
			t.Errorf("an Indexed Job tracked succeeded UIDs: %v", everSucceeded)
		}
	} else {
		if int(status.Succeeded) != len(everSucceeded) || int(status.Succeeded) != succeededPods {
			t.Errorf("succeeded %d, uncounted succeeded UIDs %d, succeeded pods released %d", status.Succeeded, len(everSucceeded), succeededPods)
		}
	}
	if int(status.Failed) != len(everFailed) {
		t.Errorf("failed %d, but %d UIDs went through uncountedTerminatedPods.failed", status.Failed, len(everFailed))
	}
	if int(status.Failed) < countableFailures || int(status.Failed) > removedFailed {
		t.Errorf("failed %d, want between %d (pods that failed) and %d (pods released unfinished)", status.Failed, countableFailures, removedFailed)
	}
}

func distinctSucceededIndexes(w *World) int {
	seen := map[int]bool{}
	for _, r := range w.Ledger {
		if r.Phase == corev1.PodSucceeded && !r.ByDeletion && r.Index >= 0 && r.Index < int(*w.Job.Spec.Completions) {
			seen[r.Index] = true
		}
	}
	return len(seen)
}

func condition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == t && j.Status.Conditions[i].Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
