package controller

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/plan"
)

// outcome is an ActionOutcome without its error text.
type outcome struct {
	Result            string
	Succeeded, Failed int32
}

func outcomesOf(got []*jobplanev1.ActionOutcome) []outcome {
	out := make([]outcome, len(got))
	for i, o := range got {
		out[i] = outcome{o.GetResult(), o.GetSucceeded(), o.GetFailed()}
	}
	return out
}

func podsToCreate(job *batchv1.Job, n int) []plan.PodToCreate {
	pods := make([]plan.PodToCreate, n)
	for i := range pods {
		pods[i] = plan.PodToCreate{GenerateName: job.Name + "-", Labels: map[string]string{"extra": "label"}, Finalizers: []string{testFinalizer}}
	}
	return pods
}

func because(reason string) plan.Because { return plan.Because{Reason: reason, Explanation: reason} }

var afterCreate = plan.RecordEvent{Because: because("AfterCreate"), Type: corev1.EventTypeNormal, Message: "after"}

// TestSlowStart pins the reference's manageJob creation: batches of 1, 2,
// 4, ... in parallel, stopping after the first batch with a failure; each
// failed or skipped creation lowers the expectations, a namespace being
// terminated is no failure at all.
func TestSlowStart(t *testing.T) {
	job := newJob("job")
	cases := []struct {
		name     string
		failCall int // the create call (from 1) that fails; 0: none
		err      error
		// wantCreates is the number of creations attempted.
		wantCreates int
		wantOutcome []outcome
		// wantMetric is job_pods_creation_total{status=succeeded,failed}:
		// the reference counts refused creations as succeeded too.
		wantMetric [2]float64
		// wantPending is PendingCreations right after the sync, when the
		// informer has seen none of the new pods; wantObserved after it
		// has seen all of them.
		wantPending, wantObserved int32
	}{{
		name:        "all 10 created in batches of 1, 2, 4 and 3",
		wantCreates: 10,
		wantOutcome: []outcome{{resultDone, 10, 0}, {resultDone, 1, 0}},
		wantMetric:  [2]float64{10, 0},
		wantPending: 10, wantObserved: 0,
	}, {
		name:     "the 1st create fails: the 9 others are skipped",
		failCall: 1, err: quotaExceeded(),
		wantCreates: 1,
		wantOutcome: []outcome{{resultFailed, 0, 10}, {resultSkipped, 0, 1}},
		wantMetric:  [2]float64{1, 1},
		wantPending: 0, wantObserved: 0,
	}, {
		name:     "the 2nd create fails: its batch of 2 ends the slow start, 7 skipped",
		failCall: 2, err: quotaExceeded(),
		wantCreates: 3,
		wantOutcome: []outcome{{resultFailed, 2, 8}, {resultSkipped, 0, 1}},
		wantMetric:  [2]float64{3, 1},
		wantPending: 2, wantObserved: 0,
	}, {
		name:     "the 4th create fails: batches of 1, 2 and 4 tried (7 creates), 3 skipped",
		failCall: 4, err: quotaExceeded(),
		wantCreates: 7,
		wantOutcome: []outcome{{resultFailed, 6, 4}, {resultSkipped, 0, 1}},
		wantMetric:  [2]float64{7, 1},
		wantPending: 6, wantObserved: 0,
	}, {
		name:     "the 8th create fails, in the last batch: nothing left to skip",
		failCall: 8, err: quotaExceeded(),
		wantCreates: 10,
		wantOutcome: []outcome{{resultFailed, 9, 1}, {resultSkipped, 0, 1}},
		wantMetric:  [2]float64{10, 1},
		wantPending: 9, wantObserved: 0,
	}, {
		// As the reference: no event, no failure, and the expectation is
		// not lowered (the namespace's deletion takes the Job with it).
		name:     "namespace terminating: dropped silently, the slow start goes on",
		failCall: 2, err: namespaceTerminating(),
		wantCreates: 10,
		wantOutcome: []outcome{{resultDone, 9, 0}, {resultDone, 1, 0}},
		wantMetric:  [2]float64{9, 0},
		wantPending: 10, wantObserved: 1,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, job)
			if tc.failCall > 0 {
				f.failCall("create", "pods", tc.failCall, tc.err)
			}
			f.planner.set(
				plan.CreatePods{Because: because("Scale"), Pods: podsToCreate(job, 10), CreationReason: plan.PodCreateNew},
				afterCreate,
			)
			outcomes, _, err := f.sync(jobKey)

			if got := outcomesOf(outcomes); !reflect.DeepEqual(got, tc.wantOutcome) {
				t.Errorf("outcomes = %+v, want %+v", got, tc.wantOutcome)
			}
			wantFailure := tc.wantOutcome[0].Result == resultFailed
			if (err != nil) != wantFailure {
				t.Errorf("sync error = %v, want one: %v", err, wantFailure)
			}
			if wantFailure && !strings.Contains(outcomes[0].GetError(), "exceeded quota") {
				t.Errorf("failed outcome's error = %q, want the API server's", outcomes[0].GetError())
			}

			created := f.createdPods()
			if len(created) != tc.wantCreates {
				t.Errorf("%d creates attempted, want %d; actions: %v", len(created), tc.wantCreates, f.actions())
			}
			for _, pod := range created {
				checkNewPod(t, job, pod)
			}

			// Events: one per created pod (named as the API server named
			// it), one per refused creation.
			var wantEvents []string
			for i := 1; i <= int(tc.wantOutcome[0].Succeeded); i++ {
				wantEvents = append(wantEvents, fmt.Sprintf("Normal SuccessfulCreate Created pod: job-%d", i))
			}
			if tc.failCall > 0 && !apierrors.HasStatusCause(tc.err, corev1.NamespaceTerminatingCause) {
				wantEvents = append(wantEvents, "Warning FailedCreate Error creating: "+tc.err.Error())
			}
			if !wantFailure {
				wantEvents = append(wantEvents, "Normal AfterCreate after")
			}
			sort.Strings(wantEvents)
			if got := f.events(); !reflect.DeepEqual(got, wantEvents) {
				t.Errorf("events =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantEvents, "\n"))
			}

			metric := [2]float64{
				counterValue(t, f.c.metrics.podsCreated.WithLabelValues(plan.PodCreateNew, "succeeded")),
				counterValue(t, f.c.metrics.podsCreated.WithLabelValues(plan.PodCreateNew, "failed")),
			}
			if metric != tc.wantMetric {
				t.Errorf("job_pods_creation_total{succeeded, failed} = %v, want %v", metric, tc.wantMetric)
			}
			if got := f.c.state.State(jobKey).Expectations.PendingCreations; got != tc.wantPending {
				t.Errorf("pending creations after the sync = %d, want %d", got, tc.wantPending)
			}
			// The informer sees the pods that were created.
			pods, err := f.client.CoreV1().Pods(testNamespace).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range pods.Items {
				f.c.addPod(&pods.Items[i])
			}
			if got := f.c.state.State(jobKey).Expectations.PendingCreations; got != tc.wantObserved {
				t.Errorf("pending creations once the informer saw the %d new pods = %d, want %d", len(pods.Items), got, tc.wantObserved)
			}
		})
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// checkNewPod checks a created pod is the Job's template with the
// PodToCreate's overlays and a controller reference to the Job.
func checkNewPod(t *testing.T, job *batchv1.Job, pod *corev1.Pod) {
	t.Helper()
	if pod.Namespace != job.Namespace || pod.Name != "" || pod.GenerateName != job.Name+"-" {
		t.Errorf("pod %s/%s generateName %q, want %s/ and generateName %q", pod.Namespace, pod.Name, pod.GenerateName, job.Namespace, job.Name+"-")
	}
	wantLabels := map[string]string{batchv1.ControllerUidLabel: string(job.UID), batchv1.JobNameLabel: job.Name, "extra": "label"}
	if !reflect.DeepEqual(pod.Labels, wantLabels) {
		t.Errorf("pod labels = %v, want %v", pod.Labels, wantLabels)
	}
	if !reflect.DeepEqual(pod.Finalizers, []string{testFinalizer}) {
		t.Errorf("pod finalizers = %v, want [%s]", pod.Finalizers, testFinalizer)
	}
	wantRef := []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	if !reflect.DeepEqual(pod.OwnerReferences, wantRef) {
		t.Errorf("pod owner references = %+v, want %+v", pod.OwnerReferences, wantRef)
	}
	if !reflect.DeepEqual(pod.Spec, job.Spec.Template.Spec) {
		t.Errorf("pod spec = %+v, want the template's %+v", pod.Spec, job.Spec.Template.Spec)
	}
}

func TestDeletePods(t *testing.T) {
	job := newJob("job")
	a, b := newPod("a", job), newPod("b", job)
	refs := []plan.PodRef{{Name: "a", UID: a.UID}, {Name: "b", UID: b.UID}}
	removeFinalizer := func(name string) string {
		return fmt.Sprintf(`{"metadata":{"$deleteFromPrimitiveList/finalizers":[%q],"uid":"%s-uid"}}`, testFinalizer, name)
	}
	cases := []struct {
		name    string
		action  plan.DeletePods
		inject  func(f *fixture)
		outcome outcome
		// wantPatched are the pods whose finalizer was patched away; each
		// before its delete.
		wantPatched []string
		wantDeleted []string
		// wantPending is PendingDeletions after the sync.
		wantPending int32
		wantEvents  []string
	}{{
		name:        "each pod deleted with its UID as precondition; deletions expected until observed",
		action:      plan.DeletePods{Pods: refs, ExpectDeletions: true},
		outcome:     outcome{resultDone, 2, 0},
		wantDeleted: []string{"a", "b"},
		wantPending: 2,
		wantEvents:  []string{"Normal SuccessfulDelete Deleted pod: a", "Normal SuccessfulDelete Deleted pod: b"},
	}, {
		name:        "without ExpectDeletions the expectations are left alone",
		action:      plan.DeletePods{Pods: refs},
		outcome:     outcome{resultDone, 2, 0},
		wantDeleted: []string{"a", "b"},
		wantPending: 0,
		wantEvents:  []string{"Normal SuccessfulDelete Deleted pod: a", "Normal SuccessfulDelete Deleted pod: b"},
	}, {
		name:        "a pod already gone counts as deleted, its expectation lowered",
		action:      plan.DeletePods{Pods: refs, ExpectDeletions: true},
		inject:      func(f *fixture) { f.failNamed("delete", "pods", "", "b", apierrors.NewNotFound(podsResource, "b")) },
		outcome:     outcome{resultDone, 2, 0},
		wantDeleted: []string{"a", "b"},
		wantPending: 1,
		wantEvents:  []string{"Normal SuccessfulDelete Deleted pod: a"},
	}, {
		name:        "another pod of the same name (UID precondition failed) counts as deleted",
		action:      plan.DeletePods{Pods: refs, ExpectDeletions: true},
		inject:      func(f *fixture) { f.failNamed("delete", "pods", "", "b", uidPreconditionFailed("b")) },
		outcome:     outcome{resultDone, 2, 0},
		wantDeleted: []string{"a", "b"},
		wantPending: 1,
		wantEvents:  []string{"Normal SuccessfulDelete Deleted pod: a"},
	}, {
		name:        "a failed delete fails the action and lowers its expectation",
		action:      plan.DeletePods{Pods: refs, ExpectDeletions: true},
		inject:      func(f *fixture) { f.failNamed("delete", "pods", "", "b", internalError()) },
		outcome:     outcome{resultFailed, 1, 1},
		wantDeleted: []string{"a", "b"},
		wantPending: 1,
		wantEvents:  []string{"Normal SuccessfulDelete Deleted pod: a", "Warning FailedDelete Error deleting: " + internalError().Error()},
	}, {
		name:        "remove_tracking_finalizer: each pod patched before it is deleted",
		action:      plan.DeletePods{Pods: refs, ExpectDeletions: true, RemoveTrackingFinalizer: true},
		outcome:     outcome{resultDone, 2, 0},
		wantPatched: []string{"a", "b"},
		wantDeleted: []string{"a", "b"},
		wantPending: 2,
		wantEvents:  []string{"Normal SuccessfulDelete Deleted pod: a", "Normal SuccessfulDelete Deleted pod: b"},
	}, {
		name:        "remove_tracking_finalizer: a failed patch skips that pod's delete and lowers its expectation",
		action:      plan.DeletePods{Pods: refs, ExpectDeletions: true, RemoveTrackingFinalizer: true},
		inject:      func(f *fixture) { f.failNamed("patch", "pods", "", "b", internalError()) },
		outcome:     outcome{resultFailed, 1, 1},
		wantPatched: []string{"a", "b"},
		wantDeleted: []string{"a"},
		wantPending: 1,
		wantEvents:  []string{"Normal SuccessfulDelete Deleted pod: a"},
	}, {
		name:        "remove_tracking_finalizer: another pod of the same name (uid of the patch refused) counts as deleted",
		action:      plan.DeletePods{Pods: refs, ExpectDeletions: true, RemoveTrackingFinalizer: true},
		inject:      func(f *fixture) { f.failNamed("patch", "pods", "", "b", uidChanged("b")) },
		outcome:     outcome{resultDone, 2, 0},
		wantPatched: []string{"a", "b"},
		wantDeleted: []string{"a"},
		wantPending: 1,
		wantEvents:  []string{"Normal SuccessfulDelete Deleted pod: a"},
	}, {
		name:        "remove_tracking_finalizer: a pod gone before its patch counts as deleted",
		action:      plan.DeletePods{Pods: refs, ExpectDeletions: true, RemoveTrackingFinalizer: true},
		inject:      func(f *fixture) { f.failNamed("patch", "pods", "", "b", apierrors.NewNotFound(podsResource, "b")) },
		outcome:     outcome{resultDone, 2, 0},
		wantPatched: []string{"a", "b"},
		wantDeleted: []string{"a"},
		wantPending: 1,
		wantEvents:  []string{"Normal SuccessfulDelete Deleted pod: a"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, job, a, b)
			if tc.inject != nil {
				tc.inject(f)
			}
			tc.action.Because = because("TooManyActivePods")
			f.planner.set(tc.action)
			outcomes, _, err := f.sync(jobKey)
			if got := outcomesOf(outcomes); !reflect.DeepEqual(got, []outcome{tc.outcome}) {
				t.Errorf("outcome = %+v, want %+v", got, tc.outcome)
			}
			if (err != nil) != (tc.outcome.Result == resultFailed) {
				t.Errorf("sync error = %v", err)
			}

			var deleted []string
			for _, d := range actionsOf[k8stesting.DeleteAction](f, "delete", "pods") {
				deleted = append(deleted, d.GetName())
				want := metav1.Preconditions{UID: ptr.To(types.UID(d.GetName() + "-uid"))}
				if got := d.GetDeleteOptions().Preconditions; got == nil || !reflect.DeepEqual(*got, want) {
					t.Errorf("delete of %s has preconditions %+v, want UID %s", d.GetName(), got, *want.UID)
				}
			}
			sort.Strings(deleted)
			if !slices.Equal(deleted, tc.wantDeleted) {
				t.Errorf("deleted %v, want %v", deleted, tc.wantDeleted)
			}
			patches := f.patches()
			var patched []string
			for name, bodies := range patches {
				patched = append(patched, name)
				if want := []string{removeFinalizer(name)}; !slices.Equal(bodies, want) {
					t.Errorf("patches of %s = %s, want %s", name, bodies, want)
				}
			}
			sort.Strings(patched)
			if !slices.Equal(patched, tc.wantPatched) {
				t.Errorf("patched %v, want %v", patched, tc.wantPatched)
			}
			actions := f.actions()
			for _, name := range tc.wantPatched {
				p, d := slices.Index(actions, "patch pods "+name), slices.Index(actions, "delete pods "+name)
				if d >= 0 && d < p {
					t.Errorf("pod %s deleted before its finalizer was removed: %v", name, actions)
				}
			}

			if got := f.c.state.State(jobKey).Expectations.PendingDeletions; got != tc.wantPending {
				t.Errorf("pending deletions = %d, want %d", got, tc.wantPending)
			}
			sort.Strings(tc.wantEvents)
			if got := f.events(); !reflect.DeepEqual(got, tc.wantEvents) {
				t.Errorf("events = %q, want %q", got, tc.wantEvents)
			}
		})
	}
}

func conflictOnStatus(name string) error {
	return apierrors.NewConflict(schema.GroupResource{Group: "batch", Resource: "jobs"}, name,
		fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
}

// TestStatusWriteConflictIsRetried: a status write refused with a
// conflict fails its action, skips the rest, and the worker puts the key
// back rate limited; the next sync, successful, forgets the failures.
func TestStatusWriteConflictIsRetried(t *testing.T) {
	job := newJob("job")
	f := newFixture(t, job)
	f.failCall("update", "jobs", 1, conflictOnStatus("job"))
	status := job.Status
	status.Active = 10
	f.planner.set(
		plan.WriteStatus{Because: because("Track"), Status: status, BackoffRecord: &plan.BackoffRecord{FailuresAfterLastSuccess: 1}},
		plan.Requeue{Because: because("Backoff"), After: 10 * time.Second},
	)

	f.c.queue.Add(jobKey)
	if !f.c.processNextWorkItem(context.Background()) {
		t.Fatal("processNextWorkItem = false")
	}
	wantQueue := []queueCall[string]{{"Add", jobKey, 0}, {"AddRateLimited", jobKey, 0}}
	if got := f.queue.recorded(); !reflect.DeepEqual(got, wantQueue) {
		t.Errorf("queue additions = %+v, want %+v", got, wantQueue)
	}
	if n := f.c.queue.NumRequeues(jobKey); n != 1 {
		t.Errorf("requeues of %s = %d, want 1", jobKey, n)
	}
	if got := f.actions(); !slices.Equal(got, []string{"update jobs/status job"}) {
		t.Errorf("actions = %v, want one status write", got)
	}
	if w := f.statusWrites(); w[0].ResourceVersion != job.ResourceVersion || w[0].Status.Active != 10 {
		t.Errorf("status write with resourceVersion %q and active %d, want the cached %q and 10", w[0].ResourceVersion, w[0].Status.Active, job.ResourceVersion)
	}
	if st := f.c.state.State(jobKey); st.Backoff != nil {
		t.Errorf("backoff record %+v stored although its write failed", st.Backoff)
	}

	// Performed directly, the outcomes say what happened.
	f.client.ClearActions()
	f.failCall("update", "jobs", 1, conflictOnStatus("job"))
	outcomes, _, err := f.sync(jobKey)
	if !apierrors.IsConflict(err) {
		t.Errorf("sync error = %v, want the conflict", err)
	}
	want := []outcome{{resultFailed, 0, 1}, {resultSkipped, 0, 1}}
	if got := outcomesOf(outcomes); !reflect.DeepEqual(got, want) {
		t.Errorf("outcomes = %+v, want %+v", got, want)
	}
	if !strings.Contains(outcomes[0].GetError(), "the object has been modified") {
		t.Errorf("outcome error = %q", outcomes[0].GetError())
	}

	// The retry, once the backoff passed, succeeds: the backoff record is
	// kept, the requeue asked for, the key's failures forgotten.
	f.client.ClearActions()
	f.queue.reset()
	if n := f.c.queue.Len(); n != 0 {
		t.Fatalf("queue length %d before the backoff passed, want 0", n)
	}
	f.clock.Step(defaultJobAPIBackoff)
	eventually(t, "the rate-limited key is back after the backoff", func() bool { return f.c.queue.Len() == 1 })
	f.c.processNextWorkItem(context.Background())
	if n := f.c.queue.NumRequeues(jobKey); n != 0 {
		t.Errorf("requeues after a successful sync = %d, want 0", n)
	}
	if got := f.queue.recorded(); !reflect.DeepEqual(got, []queueCall[string]{{"AddAfter", jobKey, 10 * time.Second}}) {
		t.Errorf("queue additions = %+v, want the plan's requeue", got)
	}
	if st := f.c.state.State(jobKey); st.Backoff == nil || st.Backoff.FailuresAfterLastSuccess != 1 {
		t.Errorf("backoff record = %+v, want the written one", st.Backoff)
	}
}

// TestPartialFinalizerRemoval is the reference's
// flushUncountedAndRemoveFinalizers when one removal fails: the pods whose
// finalizer went are counted in a status write of their own, the failed
// one stays uncounted, the Job is not finished, and the plan's final
// write is not performed. No count is lost nor doubled.
func TestPartialFinalizerRemoval(t *testing.T) {
	job := newJob("job")
	job.Status.Succeeded, job.Status.Active = 8, 2
	a, b := newPod("a", job, succeeded), newPod("b", job, succeeded)

	uncounted := job.Status
	uncounted.Active = 0
	uncounted.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{a.UID, b.UID}}
	counted := uncounted
	counted.Succeeded = 10
	counted.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	counted.CompletionTime = ptr.To(metav1.NewTime(testNow))
	counted.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached},
	}

	cases := []struct {
		name   string
		failed []string // pods whose patch fails
		errFor func(name string) error
		// wantWrites are the status writes as (succeeded, uncounted
		// succeeded, finished).
		wantWrites []statusCount
		want       []outcome
	}{{
		name:       "all removals succeed: uncounted, then counted and complete",
		wantWrites: []statusCount{{8, []types.UID{a.UID, b.UID}, false}, {10, nil, true}},
		want:       []outcome{{resultDone, 1, 0}, {resultDone, 2, 0}, {resultDone, 1, 0}},
	}, {
		name:       "the patch of b fails: a counted in a write of its own, b left uncounted, not complete",
		failed:     []string{"b"},
		wantWrites: []statusCount{{8, []types.UID{a.UID, b.UID}, false}, {9, []types.UID{b.UID}, false}},
		want:       []outcome{{resultDone, 1, 0}, {resultFailed, 1, 1}, {resultSkipped, 0, 1}},
	}, {
		name:       "b replaced by a pod of the same name (uid of the patch refused): counts as removed, as a pod gone",
		failed:     []string{"b"},
		errFor:     uidChanged,
		wantWrites: []statusCount{{8, []types.UID{a.UID, b.UID}, false}, {10, nil, true}},
		want:       []outcome{{resultDone, 1, 0}, {resultDone, 2, 0}, {resultDone, 1, 0}},
	}, {
		name:       "every patch fails: nothing to count, no extra write",
		failed:     []string{"a", "b"},
		wantWrites: []statusCount{{8, []types.UID{a.UID, b.UID}, false}},
		want:       []outcome{{resultDone, 1, 0}, {resultFailed, 0, 2}, {resultSkipped, 0, 1}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, job, a, b)
			errFor := func(string) error { return internalError() }
			if tc.errFor != nil {
				errFor = tc.errFor
			}
			for _, name := range tc.failed {
				f.failNamed("patch", "pods", "", name, errFor(name))
			}
			f.planner.set(
				plan.WriteStatus{Because: because("Track"), Status: uncounted},
				plan.RemoveFinalizers{Because: because("Track"), Pods: []plan.PodRef{{Name: "a", UID: a.UID}, {Name: "b", UID: b.UID}}},
				plan.WriteStatus{Because: because("Complete"), Status: counted},
			)
			outcomes, after, err := f.sync(jobKey)
			if got := outcomesOf(outcomes); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("outcomes = %+v, want %+v", got, tc.want)
			}
			if (err != nil) != (tc.want[1].Result == resultFailed) {
				t.Errorf("sync error = %v", err)
			}
			var writes []statusCount
			for _, w := range f.statusWrites() {
				writes = append(writes, countOf(w.Status))
				// Never lost nor doubled: counted + uncounted is all the
				// pods that succeeded.
				if n := w.Status.Succeeded + int32(len(uncountedSucceeded(w.Status))); n != 10 {
					t.Errorf("status write counts %d succeeded + %v uncounted = %d pods, want 10", w.Status.Succeeded, uncountedSucceeded(w.Status), n)
				}
			}
			if !reflect.DeepEqual(writes, tc.wantWrites) {
				t.Errorf("status writes = %+v, want %+v", writes, tc.wantWrites)
			}
			wantFinished := tc.wantWrites[len(tc.wantWrites)-1].Finished
			if isFinished(after) != wantFinished {
				t.Errorf("Job after the sync finished = %v, want %v", isFinished(after), wantFinished)
			}
			if f.c.state.FinishPending(job.UID) != wantFinished {
				t.Errorf("finish pending = %v, want %v", f.c.state.FinishPending(job.UID), wantFinished)
			}
			// The failed removals are forgotten; the others await the
			// informer.
			var inFlight []types.UID
			for _, pod := range []*corev1.Pod{a, b} {
				if !slices.Contains(tc.failed, pod.Name) {
					inFlight = append(inFlight, pod.UID)
				}
			}
			if got := f.c.state.State(jobKey).FinalizerRemovalsInFlight; !slices.Equal(got, inFlight) {
				t.Errorf("finalizer removals in flight = %v, want %v", got, inFlight)
			}
		})
	}
}

type statusCount struct {
	Succeeded int32
	Uncounted []types.UID
	Finished  bool
}

func countOf(s batchv1.JobStatus) statusCount {
	return statusCount{s.Succeeded, uncountedSucceeded(s), isFinished(&batchv1.Job{Status: s})}
}

func uncountedSucceeded(s batchv1.JobStatus) []types.UID {
	if s.UncountedTerminatedPods == nil || len(s.UncountedTerminatedPods.Succeeded) == 0 {
		return nil
	}
	return s.UncountedTerminatedPods.Succeeded
}

// TestPlanActions pins the actions that need no API call and the state a
// performed plan leaves. Every case starts with 3 creations pending.
func TestPlanActions(t *testing.T) {
	job := newJob("job")
	failedAt := testNow.Add(-time.Minute)
	backoff := &plan.BackoffRecord{FailuresAfterLastSuccess: 2, LastFailureTime: &failedAt}
	pending := plan.Expectations{PendingCreations: 3, RecordedAt: testNow}
	cases := []struct {
		name       string
		plan       *plan.Plan
		wantErr    bool
		wantEvents []string
		wantQueue  []queueCall[string]
		wantState  plan.State
	}{{
		name:       "record an event on the Job",
		plan:       &plan.Plan{Actions: []plan.Action{plan.RecordEvent{Because: because("BackoffLimitExceeded"), Type: corev1.EventTypeWarning, Message: "Job has reached the specified backoff limit"}}},
		wantEvents: []string{"Warning BackoffLimitExceeded Job has reached the specified backoff limit"},
		wantState:  plan.State{Expectations: pending},
	}, {
		name:      "requeue after a delay",
		plan:      &plan.Plan{Actions: []plan.Action{plan.Requeue{Because: because("PodFailureBackoff"), After: 20 * time.Second}}},
		wantQueue: []queueCall[string]{{"AddAfter", jobKey, 20 * time.Second}},
		wantState: plan.State{Expectations: pending},
	}, {
		name:      "a status write with a backoff record stores it",
		plan:      &plan.Plan{Actions: []plan.Action{plan.WriteStatus{Because: because("Track"), Status: job.Status, BackoffRecord: backoff}}},
		wantState: plan.State{Expectations: pending, Backoff: backoff},
	}, {
		name:      "a plan releasing the Job's state drops it once performed",
		plan:      &plan.Plan{ReleaseJobState: true, Actions: []plan.Action{plan.WriteStatus{Because: because("Complete"), Status: job.Status, BackoffRecord: backoff}}},
		wantState: plan.State{},
	}, {
		name: "a plan releasing the Job's state keeps it when an action failed",
		plan: &plan.Plan{ReleaseJobState: true, Actions: []plan.Action{
			plan.DeletePods{Because: because("Complete"), Pods: []plan.PodRef{{Name: "gone", UID: "gone-uid"}}, RemoveTrackingFinalizer: true},
			plan.WriteStatus{Because: because("Complete"), Status: job.Status},
		}},
		wantErr:   true,
		wantState: plan.State{Expectations: pending},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, job)
			f.failNamed("patch", "pods", "", "gone", internalError())
			f.c.state.ExpectCreations(jobKey, 3)
			f.planner.mu.Lock()
			f.planner.plan = tc.plan
			f.planner.mu.Unlock()
			if _, _, err := f.sync(jobKey); (err != nil) != tc.wantErr {
				t.Errorf("sync error = %v, want one: %v", err, tc.wantErr)
			}
			if got := f.events(); !reflect.DeepEqual(got, tc.wantEvents) {
				t.Errorf("events = %q, want %q", got, tc.wantEvents)
			}
			if got := f.queue.recorded(); !reflect.DeepEqual(got, tc.wantQueue) {
				t.Errorf("queue additions = %+v, want %+v", got, tc.wantQueue)
			}
			if got := f.c.state.State(jobKey); !reflect.DeepEqual(got, tc.wantState) {
				t.Errorf("state = %+v, want %+v", got, tc.wantState)
			}
		})
	}
}

// TestSyncWithoutPlan: syncs that end before the planner is asked, or get
// no plan, take no action.
func TestSyncWithoutPlan(t *testing.T) {
	job := newJob("job")
	cases := []struct {
		name        string
		objects     []runtime.Object
		before      func(f *fixture)
		wantErr     bool
		wantPlanned bool
		wantState   plan.State
	}{{
		name:    "finished Job: its state released, nothing asked",
		objects: []runtime.Object{newJob("job", finished)},
		before: func(f *fixture) {
			f.c.state.ExpectCreations(jobKey, 2)
			f.c.state.MarkFinished(job.UID)
		},
		wantState: plan.State{},
	}, {
		name:        "finishing write not yet observed: nothing asked",
		objects:     []runtime.Object{job},
		before:      func(f *fixture) { f.c.state.MarkFinished(job.UID) },
		wantPlanned: false,
	}, {
		name:      "Job gone: its state forgotten",
		before:    func(f *fixture) { f.c.state.ExpectFinalizersRemoved(jobKey, []types.UID{"a"}) },
		wantErr:   true,
		wantState: plan.State{},
	}, {
		name:    "Job of another controller: nothing asked",
		objects: []runtime.Object{newJob("job", managedBy(nil))},
		wantErr: true,
	}, {
		name:        "planner unavailable: no action, an error to retry",
		objects:     []runtime.Object{job},
		before:      func(f *fixture) { f.planner.err = fmt.Errorf("planner stream closed") },
		wantErr:     true,
		wantPlanned: true,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objects...)
			if tc.before != nil {
				tc.before(f)
			}
			_, _, err := f.sync(jobKey)
			if (err != nil) != tc.wantErr {
				t.Errorf("sync error = %v, want one: %v", err, tc.wantErr)
			}
			if planned := len(f.planner.calls()) > 0; planned != tc.wantPlanned {
				t.Errorf("planner asked = %v, want %v", planned, tc.wantPlanned)
			}
			if a := f.actions(); len(a) > 0 {
				t.Errorf("actions = %v, want none", a)
			}
			if got := f.c.state.State(jobKey); !reflect.DeepEqual(got, tc.wantState) {
				t.Errorf("state = %+v, want %+v", got, tc.wantState)
			}
		})
	}
}

// TestWorkerForgetsJobsItCannotSync: a key whose Job is gone or not
// jobplane's is done with, as in the reference; retrying it would never
// succeed.
func TestWorkerForgetsJobsItCannotSync(t *testing.T) {
	cases := []struct {
		name    string
		objects []runtime.Object
	}{
		{name: "Job deleted"},
		{name: "Job of another controller", objects: []runtime.Object{newJob("job", managedBy(nil))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objects...)
			f.c.queue.Add(jobKey)
			f.c.processNextWorkItem(context.Background())
			if got := f.queue.recorded(); !reflect.DeepEqual(got, []queueCall[string]{{"Add", jobKey, 0}}) {
				t.Errorf("queue additions = %+v, want only the Add", got)
			}
			if n := f.c.queue.NumRequeues(jobKey); n != 0 {
				t.Errorf("requeues = %d, want 0", n)
			}
		})
	}
}
