package decide

// After the history cleanup the decision sees the Jobs that remain: a Job
// it deletes leaves no reference in active, and is never deleted again.

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/cronapi"
)

// succeededJob is the CronJob's Job of the run scheduled at t, completed
// ten seconds later, with the given UID and not in the active list.
func succeededJob(cj *cronapi.CronJob, t time.Time, uid types.UID) *batchv1.Job {
	job := buildJob(cj, JobName(cj.Name, t), t, cronapi.TriggerSchedule, time.UTC)
	job.UID = uid
	job.Status.StartTime = &metav1.Time{Time: t}
	job.Status.CompletionTime = &metav1.Time{Time: t.Add(10 * time.Second)}
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: v1.ConditionTrue}}
	return job
}

// staleReferenceToAFinishedRun is an hourly CronJob whose last run, at
// last, has succeeded and is beyond its history limit of 0, with an active
// reference to that run's name under another UID (the Job was created again
// since, say restored from its manifest).
func staleReferenceToAFinishedRun(policy batchv1.ConcurrencyPolicy, last time.Time) (*cronapi.CronJob, *batchv1.Job) {
	cj := hourlyCronJob(policy)
	cj.Status.LastScheduleTime = &metav1.Time{Time: last}
	cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](0)
	job := succeededJob(cj, last, "job-current")
	stale := jobRef(job)
	stale.UID = "job-stale"
	cj.Status.Active = []v1.ObjectReference{stale}
	return cj, job
}

func activeList(status cronapi.CronJobStatus) []string {
	var out []string
	for _, ref := range status.Active {
		out = append(out, fmt.Sprintf("%s/%s", ref.Name, ref.UID))
	}
	return out
}

// The due run's Job exists and has finished (its status write was lost),
// and the history cleanup deletes it. The reference creates it again;
// jobplane never runs a scheduled time twice: the run is recorded
// (lastScheduleTime, lastSuccessfulTime) and its Job, deleted, is not
// active. Kept by the history limit, the finished Job is not active either.
func TestDueRunWhoseFinishedJobTheHistoryCleanupDeletesIsRecordedNotActive(t *testing.T) {
	for _, inActive := range []bool{false, true} {
		cj := hourlyCronJob("Allow") // last run 01:00
		cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](0)
		job := succeededJob(cj, at("02:00:00"), "job-02")
		if inActive {
			cj.Status.Active = []v1.ObjectReference{jobRef(job)}
		}
		plan := syncAt(cj, at("02:10:00"), job)
		what := fmt.Sprintf("in active %t", inActive)
		expectStrings(t, what+": deleted", deleted(plan), []string{job.Name})
		expectStrings(t, what+": created", created(plan), nil)
		expectStrings(t, what+": events", events(plan), nil)
		expectStrings(t, what+": active", activeList(plan.Status), nil)
		expectStrings(t, what+": base active", activeList(plan.BaseStatus), nil)
		if lst := plan.Status.LastScheduleTime; lst == nil || !lst.Time.Equal(at("02:00:00")) {
			t.Errorf("%s: lastScheduleTime %v, want 02:00", what, lst)
		}
		if lst := plan.Status.LastSuccessfulTime; lst == nil || !lst.Time.Equal(at("02:00:10")) {
			t.Errorf("%s: lastSuccessfulTime %v, want 02:00:10", what, lst)
		}
		if !plan.UpdateStatus {
			t.Errorf("%s: no status update", what)
		}
		// The Job gone and the status written, the time does not run again.
		cj.Status = plan.Status
		plan = syncAt(cj, at("02:20:00"))
		expectStrings(t, what+": next sync created", created(plan), nil)
		if plan.UpdateStatus {
			t.Errorf("%s: next sync updates the status: %+v", what, plan.Status)
		}
	}

	cj := hourlyCronJob("Allow")
	job := succeededJob(cj, at("02:00:00"), "job-02")
	plan := syncAt(cj, at("02:10:00"), job)
	expectStrings(t, "kept: deleted", deleted(plan), nil)
	expectStrings(t, "kept: created", created(plan), nil)
	expectStrings(t, "kept: active", activeList(plan.Status), nil)
	if lst := plan.Status.LastScheduleTime; lst == nil || !lst.Time.Equal(at("02:00:00")) {
		t.Errorf("kept: lastScheduleTime %v, want 02:00", lst)
	}
}

// An active reference whose UID is not the current Job of its name, that
// Job finished and beyond the history limit: the cleanup deletes the Job,
// the reference's GET of the name then finds nothing, so the reference is
// dropped with MissingJob, as in the reference.
func TestStaleActiveReferenceToAJobTheHistoryCleanupDeletesIsMissing(t *testing.T) {
	cj, job := staleReferenceToAFinishedRun("Allow", at("02:00:00"))
	plan := syncAt(cj, at("02:30:00"), job)
	expectStrings(t, "deleted", deleted(plan), []string{job.Name})
	if del := plan.Actions[0].Delete; del == nil || del.UID != job.UID {
		t.Errorf("first action %+v, want the deletion of UID %s", plan.Actions[0], job.UID)
	}
	expectStrings(t, "events", events(plan), []string{"Normal MissingJob: Active job went missing: " + job.Name})
	expectStrings(t, "active", activeList(plan.Status), nil)
	expectStrings(t, "created", created(plan), nil)
	if !plan.UpdateStatus {
		t.Errorf("no status update")
	}
}

// The same under Replace with a run due: the Job is deleted once (by the
// history cleanup; Replace has nothing left to delete), the stale reference
// is missing, and active holds only the new Job, as in the reference.
func TestReplaceAfterTheHistoryCleanupDeletesOnceAndKeepsOnlyTheNewJob(t *testing.T) {
	cj, job := staleReferenceToAFinishedRun("Replace", at("01:00:00"))
	plan := syncAt(cj, at("02:00:01"), job)
	expectStrings(t, "deleted", deleted(plan), []string{job.Name})
	for _, a := range plan.Actions {
		if a.Delete != nil && a.Reason != "HistoryLimit" {
			t.Errorf("deletion for %s, want only the history cleanup's", a.Reason)
		}
	}
	expectStrings(t, "events", events(plan), []string{"Normal MissingJob: Active job went missing: " + job.Name})
	expectStrings(t, "created", created(plan), []string{"02:00 Schedule"})
	expectStrings(t, "active", activeList(plan.Status), []string{JobName(cj.Name, at("02:00:00")) + "/"})
	expectStrings(t, "base active", activeList(plan.BaseStatus), nil)
}
