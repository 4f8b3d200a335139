package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/plan"
)

// A worker's sync creating 100 pods, having held its worker for
// yieldAfterHeld, while another namespace's Job waits for a worker, gives its
// worker up at the token after its first yieldAfter creations: the creations
// still waiting for a token are not made (with a budget of 12 tokens, 9 to
// 12 are: batches 1, 2 and 4, then those of the batch of 8 that took a token
// before the 9th gave the worker up), the expectations are lowered for the
// rest, the rest of its plan is left to the next sync, and its key is queued
// again behind the other namespace's. With nobody else waiting, another Job
// of its own namespace waiting, from the SyncJob RPC, or having held its
// worker for less than yieldAfterHeld, the same sync makes all 100.
func TestALongSyncGivesItsWorkerUpToAnotherNamespace(t *testing.T) {
	job := newJob("job")
	for _, tc := range []struct {
		name      string
		waiting   string // a key queued behind the Job's; "": none
		rpc       bool
		briefly   bool // the planner answers at once
		wantYield bool
	}{
		{name: "another namespace's Job waits", waiting: "other/job", wantYield: true},
		{name: "nobody else waits"},
		{name: "another Job of its namespace waits", waiting: testNamespace + "/job-2"},
		{name: "the SyncJob RPC's sync", waiting: "other/job", rpc: true},
		{name: "a sync that has held its worker under yieldAfterHeld", waiting: "other/job", briefly: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, job)
			qps, burst := float32(1e6), 1_000_000
			if tc.wantYield {
				qps, burst = 1e-6, 12
			}
			budget := fairlimit.New(qps, burst, nil)
			t.Cleanup(budget.Stop)
			f.c.cfg.APIBudget = budget
			if !tc.briefly {
				f.planner.takes = yieldAfterHeld
			}
			f.planner.set(
				plan.CreatePods{Because: because("Scale"), Pods: podsToCreate(job, 100), CreationReason: plan.PodCreateNew},
				afterCreate,
			)
			ctx := context.Background()
			f.c.queue.Add(jobKey)
			if tc.waiting != "" {
				f.c.queue.Add(tc.waiting)
			}
			if tc.rpc {
				if _, _, _, err := f.c.SyncJob(ctx, testNamespace, "job"); err != nil {
					t.Fatal(err)
				}
			} else {
				f.c.processNextWorkItem(ctx)
			}

			created := len(f.createdPods())
			pending := f.c.state.State(jobKey).Expectations.PendingCreations
			if int(pending) != created {
				t.Errorf("%d creations expected after the sync, want the %d made", pending, created)
			}
			if !tc.wantYield {
				if created != 100 {
					t.Errorf("%d pods created, want all 100 in one sync", created)
				}
				return
			}
			if created <= yieldAfter || created > 12 {
				t.Errorf("%d pods created, want more than %d and at most the 12 the budget had tokens for", created, yieldAfter)
			}
			for _, e := range f.events() {
				if e == "Normal AfterCreate after" {
					t.Error("the action after the creations was performed; the sync should have stopped")
				}
			}
			if next, _ := f.c.queue.Get(); next != "other/job" {
				t.Errorf("next key %q, want the other namespace's", next)
			}
			if n := f.c.queue.Len(); n != 1 {
				t.Errorf("%d keys queued after the other namespace's, want the yielding Job's again", n)
			}
		})
	}
}

// A namespace that keeps a key queued (a hostile tenant's Job whose pods
// churn) makes another namespace's long sync give its worker up at every
// turn, but never before it has made more than yieldAfter creations: the
// long Job goes on, a turn's worth at a time.
func TestAWaitingNamespaceCannotStopALongSync(t *testing.T) {
	job := newJob("job")
	f := newFixture(t, job)
	f.budget(1e6, 1_000_000)
	f.planner.set(plan.CreatePods{Because: because("Scale"), Pods: podsToCreate(job, 100), CreationReason: plan.PodCreateNew})
	f.c.queue.Add("hostile/job") // queued throughout
	before := 0
	for turn := 1; turn <= 3; turn++ {
		_, _, _, err := f.c.sync(yieldable(context.Background(), f.clock.Now()), jobKey)
		if !errors.Is(err, errYielded) {
			t.Fatalf("turn %d: %v, want the worker given up", turn, err)
		}
		made := len(f.createdPods()) - before
		before += made
		if made <= yieldAfter {
			t.Errorf("turn %d: %d creations before the worker was given up, want more than %d", turn, made, yieldAfter)
		}
	}
}

// Deletions and finalizer removals give the worker up as creations do: with
// a budget of 12 tokens, while another namespace's Job waits, a sync deleting
// (or removing the finalizers of) 100 pods makes 9 to 12 pods' requests and
// stops there. No pod is left half done: each pod whose finalizer went
// before its deletion is deleted. The expectations keep only what was made;
// the status write after the finalizers' removal is left to the next sync,
// which counts the pods whose finalizer went (the others stay uncounted and
// keep it); the yield is counted by the action it stopped in.
func TestDeletionsAndFinalizerRemovalsGiveTheWorkerUp(t *testing.T) {
	job := newJob("job")
	objects, refs := withPods(job, 100, succeeded)
	counted := batchv1.JobStatus{Succeeded: 100, UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{}}
	for _, tc := range []struct {
		name    string
		action  plan.Action
		metric  string
		deletes bool
	}{
		{name: "deletions", action: plan.DeletePods{Because: because("Scale"), Pods: refs, ExpectDeletions: true}, metric: "delete", deletes: true},
		{name: "deletions after the finalizer's removal", action: plan.DeletePods{Because: because("Scale"), Pods: refs, ExpectDeletions: true, RemoveTrackingFinalizer: true}, metric: "delete", deletes: true},
		{name: "finalizer removals", action: plan.RemoveFinalizers{Because: because("Track"), Pods: refs}, metric: "remove_finalizers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, objects...)
			f.c.pods.client = cancellablePods{f.c.pods.client}
			f.budget(1e-6, 12)
			f.planner.set(tc.action, plan.WriteStatus{Because: because("Complete"), Status: counted})
			f.c.queue.Add(jobKey)
			f.c.queue.Add("other/job")
			f.c.processNextWorkItem(context.Background())

			patched := f.patches()
			deleted := deletedNames(f)
			touched := len(patched)
			if tc.deletes {
				touched = len(deleted)
				for name := range patched {
					if !slices.Contains(deleted, name) {
						t.Errorf("pod %s lost its finalizer but was not deleted", name)
					}
				}
			}
			if touched <= yieldAfter || touched > 12 {
				t.Errorf("%d pods' requests made, want more than %d and at most the 12 the budget had tokens for", touched, yieldAfter)
			}
			st := f.c.state.State(jobKey)
			if tc.deletes && int(st.Expectations.PendingDeletions) != len(deleted) {
				t.Errorf("%d deletions expected after the sync, want the %d made", st.Expectations.PendingDeletions, len(deleted))
			}
			if !tc.deletes && len(st.FinalizerRemovalsInFlight) != len(patched) {
				t.Errorf("%d finalizer removals in flight, want the %d made", len(st.FinalizerRemovalsInFlight), len(patched))
			}
			if writes := f.statusWrites(); len(writes) != 0 {
				t.Errorf("%d status writes, want none: the next sync writes the status", len(writes))
			}
			if got := testutil.ToFloat64(f.c.metrics.syncsYielded.WithLabelValues(tc.metric)); got != 1 {
				t.Errorf("syncs yielded in %s = %v, want 1", tc.metric, got)
			}
			if next, _ := f.c.queue.Get(); next != "other/job" {
				t.Errorf("next key %q, want the other namespace's", next)
			}
		})
	}
}

// A finalizer removal refused while the sync gives its worker up is not a
// yield: the action fails and is retried with backoff, as the reference's,
// after counting only the pods whose finalizer did go; the pods not patched
// stay uncounted with theirs.
func TestARefusedFinalizerRemovalIsNoYield(t *testing.T) {
	job := newJob("job")
	objects, refs := withPods(job, 100, succeeded)
	var uids []types.UID
	for _, ref := range refs {
		uids = append(uids, ref.UID)
	}
	f := newFixture(t, objects...)
	f.budget(1e-6, 12)
	f.failCall("patch", "pods", 1, internalError())
	f.planner.set(
		plan.RemoveFinalizers{Because: because("Track"), Pods: refs},
		plan.WriteStatus{Because: because("Complete"), Status: batchv1.JobStatus{Succeeded: 100, UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{}}},
	)
	job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: uids}
	f.cache(job)
	f.c.queue.Add("other/job")
	_, _, _, err := f.c.sync(yieldable(context.Background(), f.clock.Now()), jobKey)
	if err == nil || errors.Is(err, errYielded) {
		t.Fatalf("sync error %v, want the refusal", err)
	}
	writes := f.statusWrites()
	if len(writes) != 1 {
		t.Fatalf("%d status writes, want the partial count", len(writes))
	}
	removed := int32(len(f.patches()) - 1) // the first patch was refused
	if got := countOf(writes[0].Status); got.Succeeded != removed || int32(len(got.Uncounted)) != 100-removed {
		t.Errorf("partial count %d counted, %d uncounted; want the %d pods whose finalizer went counted, the rest uncounted", got.Succeeded, len(got.Uncounted), removed)
	}
}

// A sync's pod requests are counted together, whatever their action: 6
// deletions then 100 finalizer removals, with 12 tokens while another
// namespace's Job waits, make the 6 deletions and 3 to 6 removals, giving the
// worker up at the 9th request of the sync.
func TestASyncsRequestsCountTogether(t *testing.T) {
	job := newJob("job")
	objects, refs := withPods(job, 106, succeeded)
	f := newFixture(t, objects...)
	f.budget(1e-6, 12)
	f.planner.set(
		plan.DeletePods{Because: because("Scale"), Pods: refs[:6], ExpectDeletions: true},
		plan.RemoveFinalizers{Because: because("Track"), Pods: refs[6:]},
	)
	f.c.queue.Add("other/job")
	// Should the removals count from 0, they would wait for tokens the
	// budget does not have: the deadline ends the sync instead.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, _, err := f.c.sync(yieldable(ctx, f.clock.Now()), jobKey); !errors.Is(err, errYielded) {
		t.Fatalf("sync error %v, want the worker given up", err)
	}
	deleted := len(actionsOf[k8stesting.DeleteAction](f, "delete", "pods"))
	if patched := len(f.patches()); deleted != 6 || patched < 3 || patched > 6 {
		t.Errorf("%d deletions and %d finalizer removals, want 6 and 3 to 6", deleted, patched)
	}
}

// A finishing Job's deletions (no expectations, as the reference's
// deleteActivePods) give the worker up as expected ones do; the next sync,
// whose cache still shows every pod active, deletes only the pods not yet
// deleted, counting the others as deleted without a second request; once the
// informer shows each pod deleting, nothing of it is remembered.
func TestAFinishingJobsDeletionsAreEachMadeOnce(t *testing.T) {
	job := newJob("job")
	objects, refs := withPods(job, 100)
	f := newFixture(t, objects...)
	f.budget(1e-6, 12)
	deleteActive := plan.DeletePods{Because: because("BackoffLimitExceeded"), Pods: refs}
	f.planner.set(deleteActive, plan.WriteStatus{Because: because("Terminating"), Status: batchv1.JobStatus{Terminating: ptr.To[int32](100)}})
	f.c.queue.Add("other/job")
	if _, _, _, err := f.c.sync(yieldable(context.Background(), f.clock.Now()), jobKey); !errors.Is(err, errYielded) {
		t.Fatalf("first sync: %v, want the worker given up", err)
	}
	first := deletedNames(f)
	if len(first) <= yieldAfter || len(first) > 12 {
		t.Fatalf("%d deletions in the first sync, want more than %d and at most the 12 the budget had tokens for", len(first), yieldAfter)
	}
	for _, ref := range refs {
		if inFlight := f.c.state.DeletionInFlight(jobKey, ref.UID); inFlight != slices.Contains(first, ref.Name) {
			t.Errorf("pod %s: deletion in flight %v, want it only for the pods deleted", ref.Name, inFlight)
		}
	}

	f.budget(1e6, 1_000_000)
	_, outcomes, _, err := f.c.sync(context.Background(), jobKey)
	if err != nil {
		t.Fatalf("second sync: %v", err)
	}
	if outcomes[0].Succeeded != 100 {
		t.Errorf("the second sync's deletions: %d succeeded, want all 100 (those in flight count as deleted)", outcomes[0].Succeeded)
	}
	all := deletedNames(f)
	slices.Sort(all)
	if pods := len(slices.Compact(slices.Clone(all))); len(all) != 100 || pods != 100 {
		t.Errorf("%d deletions in both syncs of %d pods, want each pod deleted once", len(all), pods)
	}
	if writes := f.statusWrites(); len(writes) != 1 {
		t.Errorf("%d status writes after both syncs, want the second's", len(writes))
	}

	for _, obj := range objects[1:] {
		pod := obj.(*corev1.Pod).DeepCopy()
		pod.DeletionTimestamp = &metav1.Time{Time: f.clock.Now()}
		f.c.deletePod(pod, false)
	}
	for _, ref := range refs {
		if f.c.state.DeletionInFlight(jobKey, ref.UID) {
			t.Fatalf("pod %s: deletion still in flight once the informer showed it", ref.Name)
		}
	}
}

// A finishing Job's sync that gives its worker up in its deletions writes
// the interim condition its status would have added (FailureTarget,
// SuccessCriteriaMet), on the Job's status as it is, so that the next sync
// keeps the decision rather than take again, from pods its deletions made
// count as failed, another (BackoffLimitExceeded for a Job past its
// deadline); none when the condition is already written. A refused write is
// the sync's error (retried with backoff), not a yield.
func TestAFinishingJobThatGivesItsWorkerUpKeepsItsDecision(t *testing.T) {
	failureTarget := batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, Message: "Job was active longer than specified deadline"}
	successCriteriaMet := batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonSuccessPolicy, Message: "Matched rules at index 0"}
	for _, tc := range []struct {
		name      string
		decision  batchv1.JobCondition
		written   bool // the condition is in the Job's status already
		refused   bool // the status write fails
		wantWrite bool
	}{
		{name: "FailureTarget", decision: failureTarget, wantWrite: true},
		{name: "SuccessCriteriaMet", decision: successCriteriaMet, wantWrite: true},
		{name: "already written", decision: failureTarget, written: true},
		{name: "write refused", decision: failureTarget, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := newJob("job")
			job.Status.Active = 100
			if tc.written {
				job.Status.Conditions = []batchv1.JobCondition{tc.decision}
			}
			objects, refs := withPods(job, 100)
			f := newFixture(t, objects...)
			f.budget(1e-6, 12)
			if tc.refused {
				f.failCall("update", "jobs", 1, internalError())
			}
			next := batchv1.JobStatus{Terminating: ptr.To[int32](100), Conditions: []batchv1.JobCondition{tc.decision}}
			f.planner.set(plan.DeletePods{Because: because("Finishing"), Pods: refs}, plan.WriteStatus{Because: because("Terminating"), Status: next})
			f.c.queue.Add("other/job")
			_, _, _, err := f.c.sync(yieldable(context.Background(), f.clock.Now()), jobKey)
			if tc.refused {
				if err == nil || errors.Is(err, errYielded) {
					t.Errorf("sync: %v, want the refused write's error", err)
				}
				if got := testutil.ToFloat64(f.c.metrics.syncsYielded.WithLabelValues("delete")); got != 0 {
					t.Errorf("syncs yielded in delete = %v, want none counted", got)
				}
				return
			}
			if !errors.Is(err, errYielded) {
				t.Fatalf("sync: %v, want the worker given up", err)
			}
			writes := f.statusWrites()
			if !tc.wantWrite {
				if len(writes) != 0 {
					t.Errorf("%d status writes, want none: the condition was there", len(writes))
				}
				return
			}
			if len(writes) != 1 {
				t.Fatalf("%d status writes, want the decision's one", len(writes))
			}
			got := writes[0].Status
			if len(got.Conditions) != 1 || got.Conditions[0] != tc.decision {
				t.Errorf("conditions written %+v, want the plan's %s", got.Conditions, tc.decision.Type)
			}
			if got.Active != 100 || got.Terminating != nil {
				t.Errorf("active %d, terminating %v written, want the Job's own counts (100, none): the next sync counts the deletions", got.Active, got.Terminating)
			}
		})
	}
}

// A finishing Job's deletion refused is not in flight: the next sync makes
// it. (Those not made for a yield are not either:
// TestAFinishingJobsDeletionsAreEachMadeOnce.)
func TestAFinishingJobsDeletionNotMadeIsNotInFlight(t *testing.T) {
	job := newJob("job")
	objects, refs := withPods(job, 3)
	f := newFixture(t, objects...)
	f.failCall("delete", "pods", 1, internalError())
	f.planner.set(plan.DeletePods{Because: because("BackoffLimitExceeded"), Pods: refs})
	if _, _, _, err := f.c.sync(context.Background(), jobKey); err == nil {
		t.Fatal("sync succeeded, want the refused deletion's error")
	}
	inFlight := 0
	for _, ref := range refs {
		if f.c.state.DeletionInFlight(jobKey, ref.UID) {
			inFlight++
		}
	}
	if inFlight != 2 {
		t.Errorf("%d deletions in flight, want the 2 made", inFlight)
	}
}

// deletedNames is the names of the pods deleted, in order.
func deletedNames(f *fixture) []string {
	var names []string
	for _, a := range actionsOf[k8stesting.DeleteAction](f, "delete", "pods") {
		names = append(names, a.GetName())
	}
	return names
}

// cancellablePods fails a pod deletion whose context has ended, as a real
// client does (the fake ignores contexts).
type cancellablePods struct{ typedcorev1.PodsGetter }

func (g cancellablePods) Pods(namespace string) typedcorev1.PodInterface {
	return cancellablePodInterface{g.PodsGetter.Pods(namespace)}
}

type cancellablePodInterface struct{ typedcorev1.PodInterface }

func (p cancellablePodInterface) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return p.PodInterface.Delete(ctx, name, opts)
}

// withPods is job and n pods of it, with the tracking finalizer (and opts),
// as the fixture's objects, and the references to the pods.
func withPods(job *batchv1.Job, n int, opts ...podOption) ([]runtime.Object, []plan.PodRef) {
	objects := []runtime.Object{job}
	var refs []plan.PodRef
	for i := range n {
		pod := newPod(fmt.Sprintf("pod-%03d", i), job, append([]podOption{withFinalizers(testFinalizer)}, opts...)...)
		objects = append(objects, pod)
		refs = append(refs, plan.PodRef{Name: pod.Name, UID: pod.UID})
	}
	return objects, refs
}

// budget makes the controller's API budget qps and burst, and each sync hold
// its worker long enough to give it up.
func (f *fixture) budget(qps float32, burst int) {
	budget := fairlimit.New(qps, burst, nil)
	f.t.Cleanup(budget.Stop)
	f.c.cfg.APIBudget = budget
	f.planner.takes = yieldAfterHeld
}
