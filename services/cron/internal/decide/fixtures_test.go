package decide

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobplane/jobplane/lib/cronapi"
)

// at is a UTC time of 2026-01-01 written "15:04:05", or an RFC 3339 time.
func at(s string) time.Time {
	if !strings.Contains(s, "T") {
		s = "2026-01-01T" + s + "Z"
	}
	return mustParseTime(s)
}

// hourlyCronJob runs "0 * * * *" in UTC, created at midnight and last run
// at 01:00.
func hourlyCronJob(policy batchv1.ConcurrencyPolicy) *cronapi.CronJob {
	cj := cronJob()
	cj.Name, cj.Namespace, cj.UID = "hourly", "ns", "uid-hourly"
	cj.CreationTimestamp = metav1.Time{Time: at("00:00:00")}
	cj.Spec.Schedule = "0 * * * *"
	cj.Spec.ConcurrencyPolicy = policy
	cj.Status.LastScheduleTime = &metav1.Time{Time: at("01:00:00")}
	return &cj
}

// runningJob is the CronJob's unfinished Job of the run scheduled at t, in
// its active list.
func runningJob(cj *cronapi.CronJob, t time.Time) *batchv1.Job {
	job := buildJob(cj, JobName(cj.Name, t), t, cronapi.TriggerSchedule, time.UTC)
	job.UID = types.UID(fmt.Sprintf("job-%d", t.Unix()))
	cj.Status.Active = append(cj.Status.Active, jobRef(job))
	return job
}

func syncAt(cj *cronapi.CronJob, now time.Time, jobs ...*batchv1.Job) Plan {
	return Sync(Input{CronJob: cj, Jobs: jobs, Now: now, Local: time.UTC})
}

// created lists the plan's creations as "<UTC time> <trigger>".
func created(p Plan) []string {
	var out []string
	for _, a := range p.Actions {
		if a.Create != nil {
			s := a.Create.ScheduledTime.UTC().Format("15:04") + " " + a.Create.Trigger
			if a.Create.FromPending {
				s += " pending"
			}
			out = append(out, s)
		}
	}
	return out
}

func deleted(p Plan) []string {
	var out []string
	for _, a := range p.Actions {
		if a.Delete != nil {
			out = append(out, a.Delete.Name)
		}
	}
	return out
}

func hasEvent(p Plan, eventType, reason string) bool {
	for _, a := range p.Actions {
		if a.Event != nil && a.Event.Type == eventType && a.Event.Reason == reason {
			return true
		}
	}
	return false
}

func clock(times []time.Time) []string {
	var out []string
	for _, t := range times {
		out = append(out, t.UTC().Format("15:04"))
	}
	return out
}

func pendingClock(pending []cronapi.PendingRun) []string {
	var out []string
	for _, p := range pending {
		out = append(out, p.ScheduledTime.UTC().Format("15:04")+" "+p.Trigger)
	}
	return out
}

func expectStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: %q, want %q", what, got, want)
	}
}
