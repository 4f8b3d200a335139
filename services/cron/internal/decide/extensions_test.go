package decide

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/cronapi"
)

// Fault 3: a run past its deadline is missed, with MissSchedule.
func TestRunPastItsDeadlineIsMissed(t *testing.T) {
	cj := hourlyCronJob("Allow")
	cj.Spec.StartingDeadlineSeconds = ptr.To[int64](60)
	plan := syncAt(cj, at("02:05:00"))
	expectStrings(t, "created", created(plan), nil)
	if !hasEvent(plan, v1.EventTypeWarning, "MissSchedule") {
		t.Errorf("no MissSchedule: %s", eventList(plan))
	}
	expectStrings(t, "missed", clock(plan.MissedRuns), []string{"02:00"})
	if *plan.RequeueAfter != 55*time.Minute+nextScheduleDelta {
		t.Errorf("requeue %s", plan.RequeueAfter)
	}
	// Within the deadline the run starts.
	expectStrings(t, "created", created(syncAt(cj, at("02:00:59"))), []string{"02:00 Schedule"})
}

func TestZeroDeadlineNeverRuns(t *testing.T) {
	cj := hourlyCronJob("Allow")
	cj.Spec.StartingDeadlineSeconds = ptr.To[int64](0)
	plan := syncAt(cj, at("02:00:00"))
	expectStrings(t, "created", created(plan), nil)
	expectStrings(t, "missed", clock(plan.MissedRuns), []string{"02:00"})
}

// Fault 5: "@every" with a deadline shorter than its interval runs every
// interval from its last run.
func TestEveryWithShortDeadlineRuns(t *testing.T) {
	cj := hourlyCronJob("Allow")
	cj.Spec.Schedule = "@every 2h"
	cj.Spec.StartingDeadlineSeconds = ptr.To[int64](30)
	cj.Status.LastScheduleTime = &metav1.Time{Time: at("01:00:00")}
	plan := syncAt(cj, at("03:00:00.1"))
	expectStrings(t, "created", created(plan), []string{"03:00 Schedule"})
	if *plan.RequeueAfter != 2*time.Hour {
		t.Errorf("requeue %s", plan.RequeueAfter)
	}
}

func TestScheduleChangeNeverFiresRetroactively(t *testing.T) {
	cj := hourlyCronJob("Allow")
	cj.Status.ObservedSchedule = " 30 * * * *"
	plan := syncAt(cj, at("02:10:00"))
	expectStrings(t, "created", created(plan), nil)
	if !plan.UpdateStatus || !plan.Status.ObservedScheduleSince.Time.Equal(at("02:10:00")) || plan.Status.ObservedSchedule != " 0 * * * *" {
		t.Errorf("status %+v update %t", plan.Status, plan.UpdateStatus)
	}
	if !plan.Status.NextScheduleTime.Time.Equal(at("03:00:00")) {
		t.Errorf("next %v", plan.Status.NextScheduleTime)
	}
	// The next sync, with the status written, runs 03:00 as usual.
	cj.Status = plan.Status
	expectStrings(t, "created", created(syncAt(cj, at("03:00:00.1"))), []string{"03:00 Schedule"})

	// A first sync only records the schedule.
	fresh := hourlyCronJob("Allow")
	plan = syncAt(fresh, at("01:30:00"))
	if plan.UpdateStatus || plan.Status.ObservedSchedule != " 0 * * * *" || plan.Status.ObservedScheduleSince != nil {
		t.Errorf("first sync: update %t status %+v", plan.UpdateStatus, plan.Status)
	}
}

func TestCatchUpSkip(t *testing.T) {
	cj := hourlyCronJob("Allow")
	cj.Spec.CatchUp = &cronapi.CatchUpPolicy{Policy: cronapi.CatchUpSkip}
	expectStrings(t, "on time", created(syncAt(cj, at("03:00:30"))), []string{"03:00 Schedule"})
	plan := syncAt(cj, at("03:02:00"))
	expectStrings(t, "late", created(plan), nil)
	if !hasEvent(plan, v1.EventTypeWarning, "SkippedMissedRun") {
		t.Errorf("no SkippedMissedRun: %s", eventList(plan))
	}
	expectStrings(t, "missed", clock(plan.MissedRuns), []string{"02:00", "03:00"})
	// A denser schedule has half its interval as grace.
	cj.Spec.Schedule = "* * * * *"
	cj.Status.LastScheduleTime = &metav1.Time{Time: at("03:00:00")}
	expectStrings(t, "within half a minute", created(syncAt(cj, at("03:01:29"))), []string{"03:01 Schedule"})
	expectStrings(t, "beyond half a minute", created(syncAt(cj, at("03:01:31"))), nil)
}

func TestCatchUpAll(t *testing.T) {
	all := func(policy batchv1.ConcurrencyPolicy, mutate func(*cronapi.CatchUpPolicy)) *cronapi.CronJob {
		cj := hourlyCronJob(policy)
		cj.Spec.CatchUp = &cronapi.CatchUpPolicy{Policy: cronapi.CatchUpAll}
		if mutate != nil {
			mutate(cj.Spec.CatchUp)
		}
		return cj
	}
	now := at("05:10:00")
	plan := syncAt(all("Allow", nil), now)
	expectStrings(t, "allow", created(plan), []string{"02:00 CatchUp", "03:00 CatchUp", "04:00 CatchUp", "05:00 Schedule"})
	if !plan.Status.LastScheduleTime.Time.Equal(at("05:00:00")) || len(plan.Status.Active) != 4 {
		t.Errorf("status %+v", plan.Status)
	}
	for _, a := range plan.Actions {
		if c := a.Create; c != nil && c.Trigger == cronapi.TriggerCatchUp && c.Job.Annotations[cronapi.TriggerAnnotation] != "CatchUp" {
			t.Errorf("catch-up Job annotations %v", c.Job.Annotations)
		}
	}

	plan = syncAt(all("Allow", func(c *cronapi.CatchUpPolicy) { c.WindowSeconds = ptr.To[int64](7200) }), now)
	expectStrings(t, "window", created(plan), []string{"04:00 CatchUp", "05:00 Schedule"})
	expectStrings(t, "window missed", clock(plan.MissedRuns), []string{"02:00", "03:00"})

	plan = syncAt(all("Allow", func(c *cronapi.CatchUpPolicy) { c.MaxRuns = ptr.To[int32](1) }), now)
	expectStrings(t, "maxRuns", created(plan), []string{"05:00 Schedule"})
	expectStrings(t, "maxRuns missed", clock(plan.MissedRuns), []string{"02:00", "03:00", "04:00"})

	plan = syncAt(all("Forbid", nil), now)
	expectStrings(t, "forbid, nothing active: the oldest", created(plan), []string{"02:00 CatchUp"})
	if len(plan.MissedRuns) != 0 {
		t.Errorf("forbid missed %v", plan.MissedRuns)
	}

	cj := all("Forbid", nil)
	job := runningJob(cj, at("01:00:00"))
	plan = syncAt(cj, now, job)
	expectStrings(t, "forbid, active", created(plan), nil)
	if !hasEvent(plan, v1.EventTypeNormal, "JobAlreadyActive") {
		t.Errorf("no JobAlreadyActive: %s", eventList(plan))
	}

	cj = all("Replace", nil)
	job = runningJob(cj, at("01:00:00"))
	plan = syncAt(cj, now, job)
	expectStrings(t, "replace deletes", deleted(plan), []string{job.Name})
	expectStrings(t, "replace creates the latest", created(plan), []string{"05:00 Schedule"})
	expectStrings(t, "replace missed", clock(plan.MissedRuns), []string{"02:00", "03:00", "04:00"})

	// A time whose Job exists is never created again.
	cj = all("Allow", nil)
	existing := runningJob(cj, at("03:00:00"))
	plan = syncAt(cj, now, existing)
	expectStrings(t, "existing", created(plan), []string{"02:00 CatchUp", "04:00 CatchUp", "05:00 Schedule"})

	// Past the deadline: missed.
	cj = all("Allow", nil)
	cj.Spec.StartingDeadlineSeconds = ptr.To[int64](3 * 3600)
	plan = syncAt(cj, now)
	expectStrings(t, "deadline", created(plan), []string{"03:00 CatchUp", "04:00 CatchUp", "05:00 Schedule"})
	expectStrings(t, "deadline missed", clock(plan.MissedRuns), []string{"02:00"})
}

func TestBufferOne(t *testing.T) {
	cj := hourlyCronJob(cronapi.BufferOne)
	job := runningJob(cj, at("01:00:00"))
	plan := syncAt(cj, at("02:00:00.1"), job)
	expectStrings(t, "queued", pendingClock(plan.Status.PendingRuns), []string{"02:00 Schedule"})
	expectStrings(t, "created", created(plan), nil)
	if !plan.UpdateStatus || !plan.Status.LastScheduleTime.Time.Equal(at("02:00:00")) {
		t.Errorf("update %t last %v", plan.UpdateStatus, plan.Status.LastScheduleTime)
	}
	// The Job finished; 03:00 arrives: it replaces 02:00 and starts.
	cj.Status = plan.Status
	done := job.DeepCopy()
	done.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: v1.ConditionTrue}}
	plan = syncAt(cj, at("03:00:00.1"), done)
	expectStrings(t, "created", created(plan), []string{"03:00 Schedule pending"})
	expectStrings(t, "missed", clock(plan.MissedRuns), []string{"02:00"})
	if len(plan.Status.PendingRuns) != 0 || len(plan.BaseStatus.PendingRuns) != 1 {
		t.Errorf("pending %v base %v", plan.Status.PendingRuns, plan.BaseStatus.PendingRuns)
	}
}

func TestBufferAll(t *testing.T) {
	cj := hourlyCronJob(cronapi.BufferAll)
	cj.Status.PendingRuns = []cronapi.PendingRun{{ScheduledTime: metav1.Time{Time: at("02:00:00")}, Trigger: cronapi.TriggerSchedule}}
	cj.Status.LastScheduleTime = &metav1.Time{Time: at("02:00:00")}
	// Nothing active: 03:00 joins the queue, the oldest starts.
	plan := syncAt(cj, at("03:00:00.1"))
	expectStrings(t, "created", created(plan), []string{"02:00 Schedule pending"})
	expectStrings(t, "pending", pendingClock(plan.Status.PendingRuns), []string{"03:00 Schedule"})
	expectStrings(t, "base pending", pendingClock(plan.BaseStatus.PendingRuns), []string{"02:00 Schedule", "03:00 Schedule"})
	if !plan.Status.LastScheduleTime.Time.Equal(at("03:00:00")) {
		t.Errorf("last %v", plan.Status.LastScheduleTime)
	}
	// With a Job active the queue grows, capped at maxRuns.
	cj.Spec.CatchUp = &cronapi.CatchUpPolicy{MaxRuns: ptr.To[int32](2)}
	cj.Status = plan.Status
	cj.Status.PendingRuns = append(cj.Status.PendingRuns, cronapi.PendingRun{ScheduledTime: metav1.Time{Time: at("03:30:00")}, Trigger: cronapi.TriggerManual})
	job := runningJob(cj, at("02:00:00"))
	plan = syncAt(cj, at("04:00:00.1"), job)
	expectStrings(t, "capped", pendingClock(plan.Status.PendingRuns), []string{"03:30 Manual", "04:00 Schedule"})
	expectStrings(t, "dropped", clock(plan.MissedRuns), []string{"03:00"})
}

// Pending runs queued by a backfill start under any policy once nothing is
// active.
func TestPendingRunsStartUnderAllow(t *testing.T) {
	cj := hourlyCronJob("Allow")
	cj.Status.PendingRuns = []cronapi.PendingRun{{ScheduledTime: metav1.Time{Time: at("00:00:00")}, Trigger: cronapi.TriggerBackfill}}
	plan := syncAt(cj, at("01:30:00"))
	expectStrings(t, "created", created(plan), []string{"00:00 Backfill pending"})
}

func TestJitter(t *testing.T) {
	cj := hourlyCronJob("Allow")
	cj.Spec.JitterSeconds = ptr.To[int32](600)
	sched := parseSchedule(t, cj.Spec.Schedule)
	delay := jitterDelay(string(cj.UID), 600, at("02:00:00"), sched)
	if delay <= 0 || delay > 600*time.Second {
		t.Fatalf("delay %s for this UID; pick another", delay)
	}
	early := at("02:00:00").Add(delay - time.Second)
	plan := syncAt(cj, early)
	expectStrings(t, "before the jitter", created(plan), nil)
	if *plan.RequeueAfter != time.Second+nextScheduleDelta || !plan.Status.NextScheduleTime.Time.Equal(at("02:00:00")) {
		t.Errorf("requeue %s next %v", plan.RequeueAfter, plan.Status.NextScheduleTime)
	}
	plan = syncAt(cj, at("02:00:00").Add(delay))
	expectStrings(t, "after the jitter", created(plan), []string{"02:00 Schedule"})
	if c := plan.Actions[0].Create; c.Job.Name != JobName("hourly", at("02:00:00")) || !plan.Status.LastScheduleTime.Time.Equal(at("02:00:00")) {
		t.Errorf("name %s last %v", c.Job.Name, plan.Status.LastScheduleTime)
	}
	// The delay is stable and stays before the next scheduled time.
	for i := range 500 {
		s := at("00:00:00").Add(time.Duration(i) * time.Hour)
		d := jitterDelay(string(cj.UID), 7200, s, sched)
		if d != jitterDelay(string(cj.UID), 7200, s, sched) || d >= time.Hour || d < 0 {
			t.Fatalf("delay %s at %s", d, s)
		}
	}
}

func TestDaylightSavingThroughSync(t *testing.T) {
	cj := hourlyCronJob("Allow")
	cj.Spec.Schedule = "30 2 * * *"
	cj.Spec.TimeZone = ptr.To("America/New_York")
	cj.Status.LastScheduleTime = &metav1.Time{Time: at("2026-03-07T07:30:00Z")}
	// Skip (default): 2026-03-08 02:30 does not exist, nothing due.
	expectStrings(t, "skip", created(syncAt(cj, at("2026-03-08T07:00:00.1Z"))), nil)
	cj.Spec.DaylightSaving = &cronapi.DaylightSavingPolicy{SkippedHour: cronapi.SkippedHourRunAtNextValidTime}
	plan := syncAt(cj, at("2026-03-08T07:00:00.1Z"))
	expectStrings(t, "run at next valid time", created(plan), []string{"07:00 Schedule"})
	if got := plan.Actions[0].Create.Job.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != "2026-03-08T03:00:00-04:00" {
		t.Errorf("annotation %s", got)
	}
}

// Without spec.timeZone the CronJob reads its schedule in Input.Local, not
// the process's zone.
func TestLocalZoneIsAnInput(t *testing.T) {
	kolkata, _ := time.LoadLocation("Asia/Kolkata")
	cj := hourlyCronJob("Allow")
	cj.Spec.Schedule = "30 9 * * *"
	cj.Status.LastScheduleTime = nil
	plan := Sync(Input{CronJob: cj, Now: at("04:00:00.1"), Local: kolkata})
	expectStrings(t, "created", created(plan), []string{"04:00 Schedule"})
	// The annotation is in UTC, as the reference's time.LoadLocation("").
	if got := plan.Actions[0].Create.Job.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != "2026-01-01T04:00:00Z" {
		t.Errorf("annotation %s", got)
	}
}

// A jobplane CronJob's Jobs name it as their controller, so the garbage
// collector deletes them with it; one given without apiVersion (a batch/v1
// CronJob's fields, as the reference's tests build them) names batch/v1's.
func TestJobsNameTheirCronJobsKind(t *testing.T) {
	for apiVersion, want := range map[string]string{cronapi.APIVersion: cronapi.APIVersion, "": "batch/v1", "batch/v1": "batch/v1"} {
		cj := hourlyCronJob("Allow")
		cj.APIVersion, cj.Kind = apiVersion, ""
		plan := syncAt(cj, at("02:00:00.1"))
		creates := created(plan)
		if len(creates) != 1 {
			t.Fatalf("apiVersion %q: created %v", apiVersion, creates)
		}
		ref := metav1.GetControllerOf(plan.Actions[len(plan.Actions)-1].Create.Job)
		if ref == nil || ref.APIVersion != want || ref.Kind != "CronJob" {
			t.Errorf("apiVersion %q: controller %+v, want %s CronJob", apiVersion, ref, want)
		}
	}
}
