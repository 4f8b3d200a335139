package decide

// Behaviours of the reference (v1.36.3 syncCronJob and cleanupFinishedJobs)
// found in a line-by-line review, pinned without extension fields.

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func events(p Plan) []string {
	var out []string
	for _, a := range p.Actions {
		if a.Event != nil {
			out = append(out, a.Event.Type+" "+a.Event.Reason+": "+a.Event.Message)
		}
	}
	return out
}

// The reference records the success with jobutil.IsJobSucceeded (any true
// Complete condition), not with the finished condition its
// SawCompletedJob event names (the first true Complete or Failed).
func TestSucceededJobWhoseFailedConditionComesFirstSetsLastSuccessfulTime(t *testing.T) {
	cj := hourlyCronJob("Allow")
	job := runningJob(cj, at("01:00:00"))
	job.Status.CompletionTime = &metav1.Time{Time: at("01:00:10")}
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobFailed, Status: v1.ConditionTrue},
		{Type: batchv1.JobComplete, Status: v1.ConditionTrue},
	}
	plan := syncAt(cj, at("01:30:00"), job)
	expectStrings(t, "events", events(plan), []string{"Normal SawCompletedJob: Saw completed job: " + job.Name + ", condition: Failed"})
	if lst := plan.Status.LastSuccessfulTime; lst == nil || !lst.Time.Equal(at("01:00:10")) {
		t.Errorf("lastSuccessfulTime %v, want 01:00:10", lst)
	}
	if !plan.UpdateStatus {
		t.Errorf("no status update")
	}
}

// The reference goes through its Jobs in the order it is given them; its
// events follow that order.
func TestOwnedJobsAreReconciledInTheirInputOrder(t *testing.T) {
	cj := hourlyCronJob("Allow")
	b := runningJob(cj, at("01:00:00"))
	a := runningJob(cj, at("00:00:00"))
	cj.Status.Active = nil
	plan := syncAt(cj, at("01:30:00"), b, a)
	expectStrings(t, "events", events(plan), []string{
		"Warning UnexpectedJob: Saw a job that the controller did not create or forgot: " + b.Name,
		"Warning UnexpectedJob: Saw a job that the controller did not create or forgot: " + a.Name,
	})
}

// The reference looks for the most recent time from now-deadline with its
// approximate count; for an irregular schedule the count overshoots and
// finds nothing, and nothing starts. Fault 3's look from the last run only
// reports runs past the deadline; it starts none the reference would not.
func TestDeadlineClampedLookThatOvershootsStartsNothing(t *testing.T) {
	cj := hourlyCronJob("Allow") // last run 01:00
	cj.Spec.Schedule = "0,10 * * * *"
	cj.Spec.StartingDeadlineSeconds = ptr.To[int64](4 * 3600)
	// From 01:59 the first two times are 02:00 and 02:10: ten minutes
	// apart, so the count jumps to 05:40 and finds nothing before 05:59.
	plan := syncAt(cj, at("05:59:00"))
	expectStrings(t, "created", created(plan), nil)
	expectStrings(t, "events", events(plan), nil)
	if plan.UpdateStatus {
		t.Errorf("status update")
	}
	if plan.RequeueAfter == nil || *plan.RequeueAfter != time.Minute+nextScheduleDelta {
		t.Errorf("requeue %s, want 1m0.1s", ptrString(plan.RequeueAfter))
	}
}

// An error of the look from the last run (a schedule whose next time is
// more than robfig's five years away) is not the reference's: its look from
// now-deadline found nothing, so it requeues, without InvalidSchedule.
func TestNoInvalidScheduleFromTheLookBeyondTheDeadline(t *testing.T) {
	cj := hourlyCronJob("Allow")
	cj.Spec.Schedule = "0 0 29 2 *"
	cj.CreationTimestamp = metav1.Time{Time: mustParseTime("2096-01-01T00:00:00Z")}
	cj.Status.LastScheduleTime = nil
	now := mustParseTime("2100-06-01T00:00:00Z")
	cj.Spec.StartingDeadlineSeconds = ptr.To(int64(now.Sub(mustParseTime("2100-01-01T00:00:00Z")) / time.Second))
	plan := syncAt(cj, now)
	expectStrings(t, "events", events(plan), nil)
	want := mustParseTime("2104-02-29T00:00:00Z").Sub(now) + nextScheduleDelta
	if plan.RequeueAfter == nil || *plan.RequeueAfter != want {
		t.Errorf("requeue %s, want %s", ptrString(plan.RequeueAfter), want)
	}
}

// Replace deletes the Job its GET of the active reference's name returns,
// and drops from active the references with that Job's UID: a reference
// whose UID is not the Job's (its name reused) stays.
func TestReplaceDeletesTheJobOfTheReferencedNameAndKeepsAStaleReference(t *testing.T) {
	cj := hourlyCronJob("Replace")
	job := runningJob(cj, at("01:00:00"))
	cj.Status.Active[0].UID = "stale"
	plan := syncAt(cj, at("02:00:01"), job)
	if len(plan.Actions) == 0 {
		t.Fatalf("no actions")
	}
	var del *v1.ObjectReference
	for _, a := range plan.Actions {
		if a.Delete != nil {
			del = a.Delete
		}
	}
	if del == nil || del.Name != job.Name || del.UID != job.UID {
		t.Errorf("deletion %+v, want %s with UID %s", del, job.Name, job.UID)
	}
	expectStrings(t, "created", created(plan), []string{"02:00 Schedule"})
	var active []string
	for _, ref := range plan.Status.Active {
		active = append(active, fmt.Sprintf("%s/%s", ref.Name, ref.UID))
	}
	expectStrings(t, "active", active, []string{job.Name + "/stale", JobName(cj.Name, at("02:00:00")) + "/"})
}

// A Job listed twice as active (under two UIDs) is replaced once: the
// reference's second GET of its name finds it deleted, records FailedGet
// and ends the sync, creating nothing (found by the refbench comparison).
func TestReplaceOfAJobListedTwiceDeletesItOnceAndStops(t *testing.T) {
	cj := hourlyCronJob("Replace")
	job := runningJob(cj, at("01:00:00"))
	twice := cj.Status.Active[0]
	twice.UID = "uid-of-another-run"
	cj.Status.Active = append(cj.Status.Active, twice)
	plan := syncAt(cj, at("02:00:01"), job)
	expectStrings(t, "deleted", deleted(plan), []string{job.Name})
	expectStrings(t, "events", events(plan), []string{fmt.Sprintf("Warning FailedGet: Get job: jobs.batch %q not found", job.Name)})
	expectStrings(t, "created", created(plan), nil)
	if plan.RequeueAfter != nil {
		t.Errorf("requeue after %v, want none: the reference's sync ends in an error", *plan.RequeueAfter)
	}
}

// The reference parses formatSchedule's "TZ=<zone> <schedule>": robfig
// trims what follows the zone, so a descriptor with a trailing space runs,
// and an empty schedule has no fields rather than being an empty spec.
func TestScheduleIsParsedAsFormatScheduleWritesIt(t *testing.T) {
	cj := hourlyCronJob("Allow")
	cj.Spec.TimeZone = ptr.To("Europe/Paris")
	cj.Spec.Schedule = "@hourly "
	expectStrings(t, "created", created(syncAt(cj, at("02:00:01"))), []string{"02:00 Schedule"})

	cj.Spec.Schedule = ""
	plan := syncAt(cj, at("02:00:01"))
	expectStrings(t, "events", events(plan), []string{`Warning UnparseableSchedule: unparseable schedule: "" : expected exactly 5 fields, found 0: []`})
	if plan.RequeueAfter != nil {
		t.Errorf("requeue %s", ptrString(plan.RequeueAfter))
	}
}

// robfig reads a "TZ=Local" schedule (spec.timeZone "Local", or the prefix
// in the schedule) in the zone of the times it is given: the controller's
// own, which here is Input.Local.
func TestLocalZoneNameIsInputLocal(t *testing.T) {
	kolkata, _ := time.LoadLocation("Asia/Kolkata")
	for _, tc := range []struct {
		schedule string
		timeZone *string
	}{
		{"TZ=Local 30 9 * * *", nil},
		{"30 9 * * *", ptr.To("Local")},
	} {
		cj := hourlyCronJob("Allow")
		cj.Spec.Schedule, cj.Spec.TimeZone = tc.schedule, tc.timeZone
		cj.Status.LastScheduleTime = nil
		plan := Sync(Input{CronJob: cj, Now: at("04:00:00.1"), Local: kolkata})
		expectStrings(t, tc.schedule+" created", created(plan), []string{"04:00 Schedule"})
	}
}

// The reference's quirk: a succeeded Job without completionTime sets
// lastSuccessfulTime to nil while it is nil, and asks for a status update
// every sync.
func TestSucceededJobWithoutCompletionTimeUpdatesStatusEverySync(t *testing.T) {
	cj := hourlyCronJob("Allow")
	job := runningJob(cj, at("01:00:00"))
	cj.Status.Active = nil
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: v1.ConditionTrue}}
	plan := syncAt(cj, at("01:30:00"), job)
	if !plan.UpdateStatus || plan.Status.LastSuccessfulTime != nil {
		t.Errorf("update %t lastSuccessfulTime %v", plan.UpdateStatus, plan.Status.LastSuccessfulTime)
	}
	expectStrings(t, "events", events(plan), nil)
	if plan.RequeueAfter == nil || *plan.RequeueAfter != 30*time.Minute+nextScheduleDelta {
		t.Errorf("requeue %s", ptrString(plan.RequeueAfter))
	}
}

// A CronJob being deleted only has its active list reconciled: no time
// zone, schedule or run, no requeue.
func TestDeletingCronJobOnlyReconcilesItsJobs(t *testing.T) {
	cj := hourlyCronJob("Allow")
	cj.DeletionTimestamp = &metav1.Time{Time: at("01:10:00")}
	cj.Spec.TimeZone = ptr.To("Nowhere/Else")
	cj.Spec.Schedule = "TZ=UTC bad"
	job := runningJob(cj, at("01:00:00"))
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: v1.ConditionTrue}}
	cj.Status.Active = append(cj.Status.Active, v1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: "ns", Name: "gone", UID: "gone"})
	plan := syncAt(cj, at("02:00:01"), job)
	expectStrings(t, "events", events(plan), []string{
		"Normal SawCompletedJob: Saw completed job: " + job.Name + ", condition: Failed",
		"Normal MissingJob: Active job went missing: gone",
	})
	if !plan.UpdateStatus || len(plan.Status.Active) != 0 || plan.RequeueAfter != nil {
		t.Errorf("update %t active %v requeue %s", plan.UpdateStatus, plan.Status.Active, ptrString(plan.RequeueAfter))
	}
}

// The time zone is checked before suspend, the schedule after it.
func TestSuspendedCronJobWarnsOnlyOfAnUnknownTimeZone(t *testing.T) {
	cj := hourlyCronJob("Allow")
	cj.Spec.Suspend = ptr.To(true)
	cj.Spec.Schedule = "TZ=UTC bad"
	plan := syncAt(cj, at("02:00:01"))
	expectStrings(t, "events", events(plan), nil)
	if plan.UpdateStatus || plan.RequeueAfter != nil {
		t.Errorf("update %t requeue %s", plan.UpdateStatus, ptrString(plan.RequeueAfter))
	}
	cj.Spec.TimeZone = ptr.To("Nowhere/Else")
	plan = syncAt(cj, at("02:00:01"))
	expectStrings(t, "events", events(plan), []string{`Warning UnknownTimeZone: invalid timeZone: "Nowhere/Else": unknown time zone Nowhere/Else`})
	if plan.RequeueAfter != nil {
		t.Errorf("requeue %s", ptrString(plan.RequeueAfter))
	}
}

// A schedule with TZ in it is used as it is, spec.timeZone aside: a
// warning, then robfig's error on the whole schedule.
func TestScheduleWithTZIsParsedAsItIs(t *testing.T) {
	cj := hourlyCronJob("Allow")
	cj.Spec.TimeZone = ptr.To("Europe/Paris")
	cj.Spec.Schedule = "TZ=UTC"
	plan := syncAt(cj, at("02:00:01"))
	expectStrings(t, "events", events(plan), []string{
		`Warning UnsupportedSchedule: CRON_TZ or TZ used in schedule "TZ=UTC" is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details`,
		`Warning UnparseableSchedule: unparseable schedule: "TZ=UTC" : invalid schedule format: runtime error: slice bounds out of range [:-1]`,
	})
	// Read in the schedule's zone; the annotation in spec.timeZone's.
	cj.Spec.Schedule = "TZ=America/New_York 0 21 * * *"
	cj.Status.LastScheduleTime = nil
	plan = syncAt(cj, at("2026-01-02T02:00:01Z"))
	expectStrings(t, "created", created(plan), []string{"02:00 Schedule"})
	if got := plan.Actions[1].Create.Job.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != "2026-01-02T03:00:00+01:00" {
		t.Errorf("annotation %s", got)
	}
}

// TooManyMissedTimes counts the times from the last run, or from
// now-startingDeadlineSeconds when that is later: a deadline that leaves
// few times silences it. The approximate count is the reference's.
func TestTooManyMissedTimesCountsFromTheDeadline(t *testing.T) {
	cj := hourlyCronJob("Allow")
	cj.Spec.Schedule = "* * * * *"
	plan := syncAt(cj, at("03:00:30"))
	expectStrings(t, "events", events(plan), []string{"Warning TooManyMissedTimes: too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"})
	expectStrings(t, "created", created(plan), []string{"03:00 Schedule"})
	if plan.RequeueAfter == nil || *plan.RequeueAfter != 30*time.Second+nextScheduleDelta {
		t.Errorf("requeue %s", ptrString(plan.RequeueAfter))
	}

	cj.Spec.StartingDeadlineSeconds = ptr.To[int64](200)
	plan = syncAt(cj, at("03:00:30"))
	expectStrings(t, "events", events(plan), nil)
	expectStrings(t, "created", created(plan), []string{"03:00 Schedule"})

	// 100 minutes from 01:00 is not more than 100; 101 is.
	cj.Spec.StartingDeadlineSeconds = nil
	expectStrings(t, "events", events(syncAt(cj, at("02:40:59"))), nil)
	if !hasEvent(syncAt(cj, at("02:41:00")), v1.EventTypeWarning, "TooManyMissedTimes") {
		t.Errorf("no TooManyMissedTimes at 101 missed")
	}
}

// An active reference whose UID is a running Job of the CronJob's under a
// name no Job has: the reference's Replace reads the Job by that name, is
// told it is not found and ends the sync there.
func TestReplaceOfAReferenceWhoseNameIsNoJobsStops(t *testing.T) {
	cj := hourlyCronJob("Replace")
	job := runningJob(cj, at("01:00:00"))
	cj.Status.Active[0].Name = job.Name + "-renamed"
	plan := syncAt(cj, at("02:00:01"), job)
	expectStrings(t, "deleted", deleted(plan), nil)
	expectStrings(t, "events", events(plan), []string{fmt.Sprintf("Warning FailedGet: Get job: jobs.batch %q not found", job.Name+"-renamed")})
	expectStrings(t, "created", created(plan), nil)
	if plan.RequeueAfter != nil {
		t.Errorf("requeue after %v, want none: the reference's sync ends in an error", *plan.RequeueAfter)
	}
}

// A CronJob's Jobs are of its namespace: an active reference naming another
// namespace's Job is missing, whatever Job of that name the input holds
// there, and no policy deletes that Job (the reference keeps the
// reference, and its Replace deletes the other namespace's Job).
func TestAnActiveReferenceIntoAnotherNamespaceIsMissing(t *testing.T) {
	for _, policy := range []batchv1.ConcurrencyPolicy{"Allow", "Forbid", "Replace"} {
		cj := hourlyCronJob(policy)
		theirs := runningJob(cj, at("01:00:00"))
		theirs.Namespace, theirs.UID, theirs.OwnerReferences = "their-namespace", "uid-theirs", nil
		cj.Status.Active = []v1.ObjectReference{{Kind: "Job", APIVersion: "batch/v1", Namespace: theirs.Namespace, Name: theirs.Name, UID: theirs.UID}}
		plan := syncAt(cj, at("02:00:01"), theirs)
		expectStrings(t, string(policy)+": deleted", deleted(plan), nil)
		expectStrings(t, string(policy)+": events", events(plan), []string{"Normal MissingJob: Active job went missing: " + theirs.Name})
		expectStrings(t, string(policy)+": created", created(plan), []string{"02:00 Schedule"})
	}
}
