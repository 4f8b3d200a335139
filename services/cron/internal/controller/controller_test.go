package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/services/cron/internal/decide"
)

// minute is the run of everyMinute at 10:01 (the first after its creation).
var minute = time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC)

func TestDueRunIsHandedToTheExecutorAndRecorded(t *testing.T) {
	f := newFixture(t, everyMinute("cj"))
	f.clock.SetTime(minute.Add(200 * time.Millisecond))
	requeue, err := f.sync("cj")
	if err != nil {
		t.Fatal(err)
	}
	name := decide.JobName("cj", minute)
	if !slices.Equal(f.executor.submitted, []string{name}) {
		t.Fatalf("submitted %v, want [%s]", f.executor.submitted, name)
	}
	cj := f.cronJob("cj")
	if len(cj.Status.Active) != 1 || cj.Status.Active[0].UID != types.UID(name+"-uid") {
		t.Errorf("active = %+v, want the created Job with its UID", cj.Status.Active)
	}
	if cj.Status.LastScheduleTime == nil || !cj.Status.LastScheduleTime.Time.Equal(minute) {
		t.Errorf("lastScheduleTime = %v, want %v", cj.Status.LastScheduleTime, minute)
	}
	if cj.Status.NextScheduleTime == nil || !cj.Status.NextScheduleTime.Time.Equal(minute.Add(time.Minute)) {
		t.Errorf("nextScheduleTime = %v, want %v", cj.Status.NextScheduleTime, minute.Add(time.Minute))
	}
	// The reference's requeue: the next time plus 100 ms.
	if want := time.Minute - 200*time.Millisecond + 100*time.Millisecond; requeue == nil || *requeue != want {
		t.Errorf("requeue after %v, want %v", requeue, want)
	}
	if got := f.events(); !slices.Equal(got, []string{"Normal SuccessfulCreate"}) {
		t.Errorf("events %v", got)
	}
	if n := testutil.ToFloat64(f.c.metrics.runs.WithLabelValues(cronapi.TriggerSchedule)); n != 1 {
		t.Errorf("runs metric %v, want 1", n)
	}
}

// While the executor is unavailable the run stays due: the sync fails (so
// it is retried with backoff), nothing is recorded, and the next sync
// within the deadline delivers it.
func TestRunIsDeliveredWhenTheExecutorReturns(t *testing.T) {
	f := newFixture(t, everyMinute("cj", func(cj *cronapi.CronJob) { cj.Spec.StartingDeadlineSeconds = ptr.To[int64](60) }))
	f.clock.SetTime(minute.Add(100 * time.Millisecond))
	f.executor.failSubmits(status.Error(codes.Unavailable, "connection refused"))
	if _, err := f.sync("cj"); err == nil {
		t.Fatal("sync succeeded with the executor down")
	}
	if cj := f.cronJob("cj"); cj.Status.LastScheduleTime != nil || len(cj.Status.Active) != 0 {
		t.Errorf("status recorded a run that did not happen: %+v", cj.Status)
	}
	if got := f.events(); !slices.Equal(got, []string{"Warning FailedCreate"}) {
		t.Errorf("events %v", got)
	}
	f.executor.failSubmits(nil)
	f.clock.SetTime(minute.Add(30 * time.Second))
	f.syncCronJobCache(testNamespace, "cj")
	if _, err := f.sync("cj"); err != nil {
		t.Fatal(err)
	}
	if want := []string{decide.JobName("cj", minute)}; !slices.Equal(f.executor.submitted, want) {
		t.Errorf("submitted %v, want %v", f.executor.submitted, want)
	}
}

// Past startingDeadlineSeconds the run is missed: a MissSchedule event and
// one missed run counted, however often the CronJob is synced.
func TestMissedRunIsCountedOnce(t *testing.T) {
	f := newFixture(t, everyMinute("cj", func(cj *cronapi.CronJob) { cj.Spec.StartingDeadlineSeconds = ptr.To[int64](10) }))
	f.clock.SetTime(minute.Add(30 * time.Second))
	for range 3 {
		if _, err := f.sync("cj"); err != nil {
			t.Fatal(err)
		}
		f.syncCronJobCache(testNamespace, "cj")
	}
	if len(f.executor.submitted) != 0 {
		t.Errorf("submitted %v past the deadline", f.executor.submitted)
	}
	if got := f.events(); len(got) == 0 || got[0] != "Warning MissSchedule" {
		t.Errorf("events %v, want MissSchedule", got)
	}
	if n := testutil.ToFloat64(f.c.metrics.missedRuns); n != 1 {
		t.Errorf("missed runs %v, want 1", n)
	}
}

// A Job of the run's name that the CronJob controls already exists (its
// status write was lost): the run counts as created, as the fix of
// kubernetes#136918 does.
func TestOwnExistingJobCountsAsCreated(t *testing.T) {
	cj := everyMinute("cj")
	f := newFixture(t, cj)
	existing := ownedJob(cj, decide.JobName("cj", minute))
	existing.Spec.Parallelism = ptr.To[int32](7) // differs from the template: SubmitJob says AlreadyExists
	if _, err := f.kube.BatchV1().Jobs(testNamespace).Create(context.Background(), existing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.executor.failSubmits(status.Error(codes.AlreadyExists, "jobs.batch already exists with another spec"))
	f.clock.SetTime(minute.Add(100 * time.Millisecond))
	if _, err := f.sync("cj"); err != nil {
		t.Fatal(err)
	}
	got := f.cronJob("cj")
	if len(got.Status.Active) != 1 || got.Status.Active[0].UID != existing.UID {
		t.Errorf("active %+v, want the existing Job", got.Status.Active)
	}
	if got.Status.LastScheduleTime == nil || !got.Status.LastScheduleTime.Time.Equal(minute) {
		t.Errorf("lastScheduleTime %v, want %v", got.Status.LastScheduleTime, minute)
	}
	if events := f.events(); slices.Contains(events, "Normal SuccessfulCreate") || slices.Contains(events, "Warning FailedCreate") {
		t.Errorf("events %v: the run was neither created now nor failed", events)
	}
}

// A Job of the run's name owned by something else: as the reference, the
// sync ends without recording a run and without a requeue.
func TestForeignJobOfTheRunsNameEndsTheSync(t *testing.T) {
	cj := everyMinute("cj")
	f := newFixture(t, cj)
	foreign := ownedJob(cj, decide.JobName("cj", minute))
	foreign.OwnerReferences[0].UID = "someone-else"
	if _, err := f.kube.BatchV1().Jobs(testNamespace).Create(context.Background(), foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.executor.failSubmits(status.Error(codes.AlreadyExists, "exists"))
	f.clock.SetTime(minute.Add(100 * time.Millisecond))
	requeue, err := f.sync("cj")
	if err != nil || requeue != nil {
		t.Fatalf("sync = %v, %v; want no requeue and no error", requeue, err)
	}
	if got := f.cronJob("cj"); len(got.Status.Active) != 0 || got.Status.LastScheduleTime != nil {
		t.Errorf("status %+v recorded another owner's Job", got.Status)
	}
}

// A status write that conflicts fails the sync, so it is planned again from
// fresh state.
func TestStatusConflictFailsTheSync(t *testing.T) {
	f := newFixture(t, everyMinute("cj"))
	f.dyn.PrependReactor("update", "cronjobs", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Group: cronapi.Group, Resource: cronapi.Resource}, "cj", errors.New("the object has been modified"))
	})
	f.clock.SetTime(minute.Add(100 * time.Millisecond))
	_, err := f.sync("cj")
	if !apierrors.IsConflict(err) {
		t.Fatalf("sync error %v, want the conflict", err)
	}
	if n := testutil.ToFloat64(f.c.metrics.statusWrites.WithLabelValues("true")); n != 1 {
		t.Errorf("conflicts counted %v, want 1", n)
	}
}

// Replace deletes the active Job through the executor before creating the
// new run; when the deletion fails nothing is created and the Job stays in
// the active list, as the reference.
func TestReplaceDeletesThroughTheExecutor(t *testing.T) {
	for _, fail := range []bool{false, true} {
		f, previous := replacingPreviousRun(t)
		if fail {
			f.executor.deleteErr = status.Error(codes.Unavailable, "down")
		}
		f.clock.SetTime(minute.Add(100 * time.Millisecond))
		_, err := f.sync("cj")
		got := f.cronJob("cj")
		if fail {
			if err == nil || len(f.executor.submitted) != 0 || len(got.Status.Active) != 1 || got.Status.Active[0].UID != previous.UID {
				t.Errorf("failed deletion: err %v, submitted %v, active %+v; want an error, no run, the old Job still active", err, f.executor.submitted, got.Status.Active)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(f.executor.deleted, []string{previous.Name}) || len(f.executor.submitted) != 1 {
			t.Errorf("deleted %v, submitted %v", f.executor.deleted, f.executor.submitted)
		}
		if len(got.Status.Active) != 1 || got.Status.Active[0].Name != decide.JobName("cj", minute) {
			t.Errorf("active %+v, want only the new run", got.Status.Active)
		}
		// A worker waiting on the executor is held from every namespace's
		// CronJobs: each call gives up in time.
		if f.executor.unbounded != 0 {
			t.Errorf("%d of the calls to the executor had no deadline within %v", f.executor.unbounded, executorCallTimeout)
		}
	}
}

// An unfinished Job the cached CronJob does not list is checked against the
// CronJob read live: when the live one lists it, no UnexpectedJob.
func TestLaggingCacheIsCheckedLive(t *testing.T) {
	cj := everyMinute("cj")
	f := newFixture(t, cj)
	running := ownedJob(cj, decide.JobName("cj", minute.Add(-time.Minute)))
	f.putJob(running)
	fresh := f.cronJob("cj")
	fresh.Status.Active = []corev1.ObjectReference{{Kind: "Job", APIVersion: "batch/v1", Namespace: testNamespace, Name: running.Name, UID: running.UID}}
	fresh.Status.LastScheduleTime = &metav1.Time{Time: minute.Add(-time.Minute)}
	u, err := cronapi.ToUnstructured(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.dyn.Resource(cronapi.GroupVersionResource).Namespace(testNamespace).UpdateStatus(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The cache still has the CronJob without status.
	f.clock.SetTime(minute.Add(-30 * time.Second))
	if _, err := f.sync("cj"); err != nil {
		t.Fatal(err)
	}
	if events := f.events(); slices.Contains(events, "Warning UnexpectedJob") {
		t.Errorf("events %v: the live CronJob lists the Job", events)
	}
}

func TestTriggerRespectsTheConcurrencyPolicy(t *testing.T) {
	cj := everyMinute("cj", func(cj *cronapi.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent })
	running := ownedJob(cj, decide.JobName("cj", minute))
	cj.Status.Active = []corev1.ObjectReference{{Kind: "Job", APIVersion: "batch/v1", Namespace: testNamespace, Name: running.Name, UID: running.UID}}
	f := newFixture(t, cj)
	f.putJob(running)
	f.clock.SetTime(minute.Add(20 * time.Second))
	ctx := context.Background()
	if _, err := f.c.Trigger(ctx, cronapi.APIVersion, testNamespace, "cj", false); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Trigger under Forbid with a Job active: %v, want FAILED_PRECONDITION", err)
	}
	resp, err := f.c.Trigger(ctx, cronapi.APIVersion, testNamespace, "cj", true)
	if err != nil {
		t.Fatal(err)
	}
	if want := decide.ManualJobName("cj", f.clock.Now()); resp.GetJob().GetMetadata().GetName() != want {
		t.Errorf("triggered %q, want %q", resp.GetJob().GetMetadata().GetName(), want)
	}
	if got := f.cronJob("cj"); len(got.Status.Active) != 2 {
		t.Errorf("active %+v, want the running and the manual Job", got.Status.Active)
	}
	if _, err := f.c.Trigger(ctx, cronapi.APIVersion, testNamespace, "missing", false); status.Code(err) != codes.NotFound {
		t.Errorf("Trigger of a missing CronJob: %v, want NOT_FOUND", err)
	}
	f.c.SetLeader(func() (bool, string) { return false, "other-replica" })
	if _, err := f.c.Trigger(ctx, cronapi.APIVersion, testNamespace, "cj", true); status.Code(err) != codes.Unavailable {
		t.Errorf("Trigger on a standby: %v, want UNAVAILABLE", err)
	}
}

func TestBackfillQueuesUnderForbid(t *testing.T) {
	cj := everyMinute("cj")
	f := newFixture(t, cj)
	f.clock.SetTime(minute.Add(5 * time.Minute))
	resp, err := f.c.Backfill(context.Background(), backfillRequest("cj", minute, minute.Add(3*time.Minute), "Forbid"))
	if err != nil {
		t.Fatal(err)
	}
	// The oldest starts at once (nothing is active), the others wait.
	if len(resp.GetJobs()) != 1 || len(resp.GetQueued()) != 2 {
		t.Errorf("backfill started %d and queued %d, want 1 and 2", len(resp.GetJobs()), len(resp.GetQueued()))
	}
	if got := f.cronJob("cj"); len(got.Status.PendingRuns) != 2 {
		t.Errorf("pending runs %+v, want 2", got.Status.PendingRuns)
	}
	if _, err := f.c.Backfill(context.Background(), backfillRequest("cj", minute, minute.Add(time.Hour), "Allow")); status.Code(err) != codes.InvalidArgument {
		t.Errorf("backfill ending in the future: %v, want INVALID_ARGUMENT", err)
	}
}

// replacingPreviousRun is a fixture of CronJob "cj", Replace, whose run of
// the minute before is still active: its next run replaces previous.
func replacingPreviousRun(t *testing.T) (f *fixture, previous *batchv1.Job) {
	t.Helper()
	cj := everyMinute("cj", func(cj *cronapi.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ReplaceConcurrent })
	previous = ownedJob(cj, decide.JobName("cj", minute.Add(-time.Minute)))
	cj.Status.Active = []corev1.ObjectReference{{Kind: "Job", APIVersion: "batch/v1", Namespace: testNamespace, Name: previous.Name, UID: previous.UID}}
	cj.Status.LastScheduleTime = &metav1.Time{Time: minute.Add(-time.Minute)}
	f = newFixture(t, cj)
	f.putJob(previous)
	return f, previous
}

func ownedJob(cj *cronapi.CronJob, name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: cj.Namespace, UID: types.UID(name + "-uid"), ResourceVersion: "1",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: cronapi.APIVersion, Kind: cronapi.Kind, Name: cj.Name, UID: cj.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: *cj.Spec.JobTemplate.Spec.DeepCopy(),
	}
}

// A manual run under BufferOne while a Job is active replaces what is
// pending, and the answer says what was queued.
func TestTriggerUnderBufferOneQueues(t *testing.T) {
	cj := everyMinute("cj", func(cj *cronapi.CronJob) { cj.Spec.ConcurrencyPolicy = cronapi.BufferOne })
	running := ownedJob(cj, decide.JobName("cj", minute))
	cj.Status.Active = []corev1.ObjectReference{{Kind: "Job", APIVersion: "batch/v1", Namespace: testNamespace, Name: running.Name, UID: running.UID}}
	cj.Status.PendingRuns = []cronapi.PendingRun{{ScheduledTime: metav1.NewTime(minute.Add(time.Minute)), Trigger: cronapi.TriggerSchedule}}
	f := newFixture(t, cj)
	f.putJob(running)
	f.clock.SetTime(minute.Add(70 * time.Second))
	resp, err := f.c.Trigger(context.Background(), cronapi.APIVersion, testNamespace, "cj", false)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetJob() != nil || resp.GetQueued().GetTrigger() != cronapi.TriggerManual || !resp.GetQueued().GetScheduledTime().AsTime().Equal(f.clock.Now()) {
		t.Errorf("answer %v, want the manual run queued", resp)
	}
	if got := f.cronJob("cj").Status.PendingRuns; len(got) != 1 || got[0].Trigger != cronapi.TriggerManual {
		t.Errorf("pending %+v, want only the manual run", got)
	}
}

// The sync after a status write decides on what was written while the
// cache still has the version it replaced: a Job's completion is not seen
// twice (the reference would repeat SawCompletedJob and fail its write with
// a conflict).
func TestSyncAfterAWriteUsesTheWrittenStatus(t *testing.T) {
	cj := everyMinute("cj")
	done := ownedJob(cj, decide.JobName("cj", minute))
	done.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	done.Status.CompletionTime = &metav1.Time{Time: minute.Add(5 * time.Second)}
	cj.Status.Active = []corev1.ObjectReference{{Kind: "Job", APIVersion: "batch/v1", Namespace: testNamespace, Name: done.Name, UID: done.UID}}
	cj.Status.LastScheduleTime = &metav1.Time{Time: minute}
	f := newFixture(t, cj)
	f.putJob(done)
	f.clock.SetTime(minute.Add(10 * time.Second))
	if _, err := f.sync("cj"); err != nil {
		t.Fatal(err)
	}
	if events := f.events(); !slices.Equal(events, []string{"Normal SawCompletedJob"}) {
		t.Fatalf("events %v", events)
	}
	// The cache still lists the Job as active.
	f.clock.SetTime(minute.Add(11 * time.Second))
	if _, err := f.sync("cj"); err != nil {
		t.Fatal(err)
	}
	if events := f.events(); len(events) != 0 {
		t.Errorf("events %v repeated", events)
	}
}

// Owner references are namespace-local: Jobs of another namespace whose
// controller reference names the CronJob's UID are not its Jobs. A finished
// one is not pruned as history, a running one is not listed as active.
func TestJobsOfAnotherNamespaceAreNotTheCronJobs(t *testing.T) {
	cj := everyMinute("cj", func(cj *cronapi.CronJob) {
		cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](0)
	})
	f := newFixture(t, cj)
	finished := ownedJob(cj, "cj-finished")
	finished.Namespace = "other-team"
	finished.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	finished.Status.CompletionTime = &metav1.Time{Time: testCreated}
	running := ownedJob(cj, "cj-running")
	running.Namespace = "other-team"
	f.putJob(finished)
	f.putJob(running)
	f.clock.SetTime(testCreated.Add(20 * time.Second)) // no run due yet
	if _, err := f.sync("cj"); err != nil {
		t.Fatal(err)
	}
	if events := f.events(); len(events) != 0 {
		t.Errorf("events %v, want none", events)
	}
	if active := f.cronJob("cj").Status.Active; len(active) != 0 {
		t.Errorf("active %v, want none", active)
	}
	for _, name := range []string{"cj-finished", "cj-running"} {
		if _, err := f.kube.BatchV1().Jobs("other-team").Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			t.Errorf("the other namespace's Job %s: %v", name, err)
		}
	}
}

// A status naming another namespace's Job (whoever may write the CronJob's
// status can write one) never reaches that Job: no live read of it, no
// deletion by a scheduled or a triggered Replace.
func TestActiveReferencesIntoAnotherNamespaceReachNothingThere(t *testing.T) {
	cj := everyMinute("cj", func(cj *cronapi.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ReplaceConcurrent })
	theirs := ownedJob(cj, "theirs")
	theirs.Namespace, theirs.UID, theirs.OwnerReferences = "other-team", "uid-theirs", nil
	cj.Status.Active = []corev1.ObjectReference{
		{Kind: "Job", APIVersion: "batch/v1", Namespace: theirs.Namespace, Name: theirs.Name, UID: theirs.UID},
		{Kind: "Job", APIVersion: "batch/v1", Namespace: theirs.Namespace, Name: theirs.Name},
	}
	cj.Status.LastScheduleTime = &metav1.Time{Time: minute.Add(-time.Minute)}
	f := newFixture(t, cj)
	f.putJob(theirs)
	f.kube.ClearActions()
	f.clock.SetTime(minute.Add(100 * time.Millisecond))
	if _, err := f.c.Trigger(context.Background(), cronapi.APIVersion, testNamespace, "cj", false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sync("cj"); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(f.executor.deleted, theirs.Name) {
		t.Errorf("deleted %v: the other namespace's Job among them", f.executor.deleted)
	}
	for _, a := range f.kube.Actions() {
		if a.GetNamespace() == theirs.Namespace {
			t.Errorf("%s %s in %s: the CronJob's status reached another namespace", a.GetVerb(), a.GetResource().Resource, a.GetNamespace())
		}
	}
	if _, err := f.kube.BatchV1().Jobs(theirs.Namespace).Get(context.Background(), theirs.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the other namespace's Job: %v", err)
	}
}

// A status listing many Jobs the CronJob does not control costs at most
// maxLiveReads reads of the API a sync, each name once; the rest are kept
// listed, and read in the next syncs (the sync fails, to be retried with
// backoff), until every missing one is dropped. Meanwhile no run starts,
// and a trigger is refused for a retry.
func TestActiveReferencesAreReadLiveAFewAtMost(t *testing.T) {
	for _, refs := range []int{40, 400} {
		cj := everyMinute("cj")
		for i := range refs {
			name := fmt.Sprintf("gone-%d", i%(refs/2)) // each name twice
			cj.Status.Active = append(cj.Status.Active, corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: testNamespace, Name: name, UID: types.UID(fmt.Sprintf("uid-%d", i))})
		}
		f := newFixture(t, cj)
		f.clock.SetTime(minute.Add(100 * time.Millisecond))
		if refs/2 > maxLiveReads {
			if _, err := f.c.Trigger(context.Background(), cronapi.APIVersion, testNamespace, "cj", false); status.Code(err) != codes.Unavailable {
				t.Errorf("%d references: Trigger %v, want UNAVAILABLE until they are read", refs, err)
			}
		}
		syncs := 0
		for ; syncs < 20; syncs++ {
			f.kube.ClearActions()
			_, err := f.sync("cj")
			gets := 0
			for _, a := range f.kube.Actions() {
				if a.GetVerb() == "get" && a.GetResource().Resource == "jobs" {
					gets++
				}
			}
			if gets > maxLiveReads {
				t.Errorf("%d references: a sync read %d Jobs live", refs, gets)
			}
			if err == nil {
				break
			}
			if !errors.Is(err, errUnread) {
				t.Fatal(err)
			}
			if len(f.executor.submitted) != 0 {
				t.Fatalf("%d references: a run started while active Jobs were unread", refs)
			}
		}
		if want := (refs/2 + maxLiveReads - 1) / maxLiveReads; syncs+1 != want {
			t.Errorf("%d references to %d names: %d syncs, want %d", refs, refs/2, syncs+1, want)
		}
		for _, ref := range f.cronJob("cj").Status.Active {
			if strings.HasPrefix(ref.Name, "gone-") {
				t.Errorf("%d references: %s still active after the syncs", refs, ref.Name)
			}
		}
	}
}
