package decide

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/jobplane/jobplane/lib/cronapi"
)

func trigger(t *testing.T, cj *cronapi.CronJob, now time.Time, ignore bool, jobs ...*batchv1.Job) (Plan, error) {
	t.Helper()
	return Trigger(Input{CronJob: cj, Jobs: jobs, Now: now, Local: time.UTC}, ignore)
}

func TestTrigger(t *testing.T) {
	now := at("01:30:00")
	wantName := "hourly-m" + strconv.FormatInt(now.Unix(), 36)

	plan, err := trigger(t, hourlyCronJob("Allow"), now, false)
	if err != nil {
		t.Fatal(err)
	}
	expectStrings(t, "allow", created(plan), []string{"01:30 Manual"})
	c := plan.Actions[0].Create
	if c.Job.Name != wantName || c.Job.Annotations[cronapi.TriggerAnnotation] != "Manual" {
		t.Errorf("job %s annotations %v", c.Job.Name, c.Job.Annotations)
	}
	if !plan.Status.LastScheduleTime.Time.Equal(at("01:00:00")) || !plan.UpdateStatus || plan.RequeueAfter != nil {
		t.Errorf("a manual run moved lastScheduleTime or lacks an update: %+v", plan)
	}

	cj := hourlyCronJob("Forbid")
	job := runningJob(cj, at("01:00:00"))
	if _, err := trigger(t, cj, now, false, job); !errors.Is(err, ErrConcurrencyPolicy) {
		t.Errorf("forbid: %v", err)
	}
	plan, err = trigger(t, cj, now, true, job)
	if err != nil {
		t.Fatal(err)
	}
	expectStrings(t, "forbid ignored", created(plan), []string{"01:30 Manual"})

	cj = hourlyCronJob("Replace")
	job = runningJob(cj, at("01:00:00"))
	plan, _ = trigger(t, cj, now, false, job)
	expectStrings(t, "replace deletes", deleted(plan), []string{job.Name})
	expectStrings(t, "replace creates", created(plan), []string{"01:30 Manual"})
	if len(plan.Status.Active) != 1 || plan.Status.Active[0].Name != wantName {
		t.Errorf("active %+v", plan.Status.Active)
	}

	// Replace with a stale reference (the Job of that name was recreated
	// under another UID): the current Job is deleted once, and active
	// holds the new run only.
	cj = hourlyCronJob("Replace")
	job = runningJob(cj, at("01:00:00"))
	cj.Status.Active[0].UID = "stale"
	plan, _ = trigger(t, cj, now, false, job)
	if len(plan.Actions) == 0 || plan.Actions[0].Delete == nil || plan.Actions[0].Delete.UID != job.UID {
		t.Errorf("replace of a stale reference: actions %+v, want the current Job %s deleted first", plan.Actions, job.UID)
	}
	expectStrings(t, "replace stale deletes once", deleted(plan), []string{job.Name})
	if len(plan.Status.Active) != 1 || plan.Status.Active[0].Name != wantName {
		t.Errorf("replace of a stale reference: active %+v", plan.Status.Active)
	}

	for _, policy := range []batchv1.ConcurrencyPolicy{cronapi.BufferOne, cronapi.BufferAll} {
		cj = hourlyCronJob(policy)
		cj.Status.PendingRuns = []cronapi.PendingRun{{ScheduledTime: metav1.Time{Time: at("01:00:00")}, Trigger: cronapi.TriggerSchedule}}
		job = runningJob(cj, at("00:00:00"))
		plan, _ = trigger(t, cj, now, false, job)
		want := []string{"01:00 Schedule", "01:30 Manual"}
		if policy == cronapi.BufferOne {
			want = want[1:]
		}
		expectStrings(t, string(policy), pendingClock(plan.Status.PendingRuns), want)
		expectStrings(t, string(policy)+" creates", created(plan), nil)
	}

	cj = hourlyCronJob("Allow")
	cj.DeletionTimestamp = &metav1.Time{Time: now}
	if _, err := trigger(t, cj, now, false); !errors.Is(err, ErrDeleting) {
		t.Errorf("deleting: %v", err)
	}

	// A second trigger in the same second is the same run.
	cj = hourlyCronJob("Allow")
	existing := buildJob(cj, wantName, now, cronapi.TriggerManual, time.UTC)
	existing.UID = "manual"
	plan, _ = trigger(t, cj, now, false, existing)
	expectStrings(t, "existing", created(plan), nil)
	if len(plan.Status.Active) != 1 || plan.Status.Active[0].UID != "manual" {
		t.Errorf("active %+v", plan.Status.Active)
	}
}

func backfill(cj *cronapi.CronJob, now, start, end time.Time, policy string, jobs ...*batchv1.Job) (Plan, error) {
	return Backfill(Input{CronJob: cj, Jobs: jobs, Now: now, Local: time.UTC}, start, end, policy)
}

func TestBackfillValidation(t *testing.T) {
	now := at("12:00:00")
	cases := []struct {
		name, policy, field string
		start, end          time.Time
		schedule            string
		want                error
	}{
		{"empty range", "", "start", at("05:00:00"), at("05:00:00"), "", ErrInvalidBackfill},
		{"end after now", "", "end", at("05:00:00"), at("13:00:00"), "", ErrInvalidBackfill},
		{"unknown policy", "Replace", "concurrencyPolicy", at("05:00:00"), at("06:00:00"), "", ErrInvalidBackfill},
		{"more than 100 times", "", "start", at("2025-12-20T00:00:00Z"), at("12:00:00"), "", ErrInvalidBackfill},
		{"invalid schedule", "", "schedule", at("05:00:00"), at("06:00:00"), "bad schedule", ErrInvalidSchedule},
	}
	for _, tc := range cases {
		cj := hourlyCronJob("Allow")
		if tc.schedule != "" {
			cj.Spec.Schedule = tc.schedule
		}
		_, err := backfill(cj, now, tc.start, tc.end, tc.policy)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v", tc.name, err)
		}
		// The request's field, for the caller's field violation.
		var fe *field.Error
		if tc.want == ErrInvalidBackfill && (!errors.As(err, &fe) || fe.Field != tc.field) {
			t.Errorf("%s: %v is not an error of field %s", tc.name, err, tc.field)
		}
	}
}

func TestBackfill(t *testing.T) {
	now := at("12:00:00")
	cj := hourlyCronJob("Allow")
	existing := runningJob(cj, at("06:00:00"))
	cj.Status.PendingRuns = []cronapi.PendingRun{{ScheduledTime: metav1.Time{Time: at("07:00:00")}, Trigger: cronapi.TriggerSchedule}}
	plan, err := backfill(cj, now, at("05:00:00"), at("09:00:00"), "", existing)
	if err != nil {
		t.Fatal(err)
	}
	expectStrings(t, "allow", created(plan), []string{"05:00 Backfill", "08:00 Backfill"})
	expectStrings(t, "skipped", clock(plan.Skipped), []string{"06:00", "07:00"})
	if !plan.Status.LastScheduleTime.Time.Equal(at("01:00:00")) {
		t.Errorf("backfill moved lastScheduleTime")
	}
	if name := plan.Actions[0].Create.Job.Name; name != JobName("hourly", at("05:00:00")) {
		t.Errorf("name %s", name)
	}

	for _, policy := range []string{"Forbid", "BufferAll"} {
		cj := hourlyCronJob("Allow")
		plan, err := backfill(cj, now, at("05:00:00"), at("08:00:00"), policy)
		if err != nil {
			t.Fatal(err)
		}
		expectStrings(t, policy+" starts the oldest", created(plan), []string{"05:00 Backfill pending"})
		expectStrings(t, policy+" queue", pendingClock(plan.Status.PendingRuns), []string{"06:00 Backfill", "07:00 Backfill"})
		// With a Job active nothing starts.
		job := runningJob(cj, at("01:00:00"))
		plan, _ = backfill(cj, now, at("05:00:00"), at("08:00:00"), policy, job)
		expectStrings(t, policy+" active", created(plan), nil)
		expectStrings(t, policy+" queue", pendingClock(plan.Status.PendingRuns), []string{"05:00 Backfill", "06:00 Backfill", "07:00 Backfill"})
	}
}

// A triggered run's Replace deletes only Jobs of the CronJob's namespace:
// an active reference into another namespace (a status anyone allowed to
// write it may fill) deletes nothing there, even when the input holds a Job
// of that name, and leaves the list.
func TestTriggerReplaceNeverDeletesAnotherNamespacesJob(t *testing.T) {
	cj := hourlyCronJob("Replace")
	theirs := runningJob(cj, at("01:00:00"))
	theirs.Namespace, theirs.UID, theirs.OwnerReferences = "their-namespace", "uid-theirs", nil
	cj.Status.Active = []v1.ObjectReference{
		{Kind: "Job", APIVersion: "batch/v1", Namespace: theirs.Namespace, Name: theirs.Name, UID: theirs.UID},
		{Kind: "Job", APIVersion: "batch/v1", Namespace: theirs.Namespace, Name: "victim"},
	}
	plan, err := trigger(t, cj, at("01:30:00"), false, theirs)
	if err != nil {
		t.Fatal(err)
	}
	expectStrings(t, "deleted", deleted(plan), nil)
	expectStrings(t, "created", created(plan), []string{"01:30 Manual"})
	for _, ref := range plan.Status.Active {
		if ref.Namespace != cj.Namespace {
			t.Errorf("another namespace's Job still listed: %+v", ref)
		}
	}
}
