package batchcron

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/cronapi"
)

func batchCronJob(annotations map[string]string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "nightly", UID: "u1", Annotations: annotations},
		Spec:       batchv1.CronJobSpec{Schedule: "0 2 * * *", ConcurrencyPolicy: batchv1.ForbidConcurrent},
		Status:     batchv1.CronJobStatus{LastScheduleTime: &metav1.Time{Time: time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)}},
	}
}

func TestTheAnnotationsAreTheExtensions(t *testing.T) {
	c, errs := FromBatch(batchCronJob(map[string]string{
		ConcurrencyPolicyAnnotation: "BufferOne",
		CatchUpPolicyAnnotation:     "All",
		CatchUpWindowAnnotation:     "3600",
		CatchUpMaxRunsAnnotation:    "5",
		JitterAnnotation:            "30",
		SkippedHourAnnotation:       "Skip",
		RepeatedHourAnnotation:      "Twice",
		"other.example.com/kept":    "anything",
	}))
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	if c.APIVersion != "batch/v1" || c.Kind != "CronJob" {
		t.Errorf("apiVersion/kind %s/%s, want batch/v1/CronJob: the Jobs' owner", c.APIVersion, c.Kind)
	}
	want := cronapi.CronJobSpec{
		CronJobSpec:    batchv1.CronJobSpec{Schedule: "0 2 * * *", ConcurrencyPolicy: cronapi.BufferOne},
		CatchUp:        &cronapi.CatchUpPolicy{Policy: "All", WindowSeconds: ptr.To[int64](3600), MaxRuns: ptr.To[int32](5)},
		JitterSeconds:  ptr.To[int32](30),
		DaylightSaving: &cronapi.DaylightSavingPolicy{SkippedHour: "Skip", RepeatedHour: "Twice"},
	}
	if got := c.Spec; !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("spec %+v, want %+v", got, want)
	}
	if c.Status.LastScheduleTime == nil {
		t.Error("the batch/v1 status was not kept")
	}
}

func TestWithoutAnnotationsTheSpecIsBatchV1s(t *testing.T) {
	c, errs := FromBatch(batchCronJob(nil))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if c.Spec.CatchUp != nil || c.Spec.JitterSeconds != nil || c.Spec.DaylightSaving != nil || c.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("spec %+v: extensions out of nothing", c.Spec)
	}
}

func TestInvalidAnnotationsNameThemselves(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		field       string
	}{
		{map[string]string{ConcurrencyPolicyAnnotation: "Sometimes"}, "metadata.annotations[cron.jobplane.dev/concurrency-policy]"},
		{map[string]string{CatchUpPolicyAnnotation: "Most"}, "metadata.annotations[cron.jobplane.dev/catch-up-policy]"},
		{map[string]string{CatchUpWindowAnnotation: "-1"}, "metadata.annotations[cron.jobplane.dev/catch-up-window-seconds]"},
		{map[string]string{CatchUpWindowAnnotation: "1h"}, "metadata.annotations[cron.jobplane.dev/catch-up-window-seconds]"},
		{map[string]string{CatchUpMaxRunsAnnotation: "0"}, "metadata.annotations[cron.jobplane.dev/catch-up-max-runs]"},
		{map[string]string{CatchUpMaxRunsAnnotation: "1001"}, "metadata.annotations[cron.jobplane.dev/catch-up-max-runs]"},
		{map[string]string{CatchUpMaxRunsAnnotation: "99999999999"}, "metadata.annotations[cron.jobplane.dev/catch-up-max-runs]"},
		{map[string]string{JitterAnnotation: "-5"}, "metadata.annotations[cron.jobplane.dev/jitter-seconds]"},
		{map[string]string{SkippedHourAnnotation: "Never"}, "metadata.annotations[cron.jobplane.dev/daylight-saving-skipped-hour]"},
		{map[string]string{RepeatedHourAnnotation: "Thrice"}, "metadata.annotations[cron.jobplane.dev/daylight-saving-repeated-hour]"},
		{map[string]string{NoRetroactiveRunsAnnotation: "yes"}, "metadata.annotations[cron.jobplane.dev/no-retroactive-runs]"},
		{map[string]string{Prefix + "jitter": "5"}, "metadata.annotations[cron.jobplane.dev/jitter]"},
		{map[string]string{StateAnnotation: "{"}, "metadata.annotations[cron.jobplane.dev/state]"},
		{map[string]string{StateAnnotation: `{"pendingRuns":[],"extra":1}`}, "metadata.annotations[cron.jobplane.dev/state]"},
		{map[string]string{StateAnnotation: `{"pendingRuns":[` + strings.Repeat(`{"scheduledTime":"2026-11-26T02:00:00Z","trigger":"Manual"},`, 1000) + `{"scheduledTime":"2026-11-26T02:00:00Z","trigger":"Manual"}]}`}, "metadata.annotations[cron.jobplane.dev/state]"},
	} {
		_, errs := FromBatch(batchCronJob(tc.annotations))
		if len(errs) != 1 || errs[0].Field != tc.field {
			t.Errorf("%v: errors %v, want one on %s", tc.annotations, errs, tc.field)
		}
	}
}

func TestTheStateSurvivesTheRoundTrip(t *testing.T) {
	c, _ := FromBatch(batchCronJob(map[string]string{NoRetroactiveRunsAnnotation: "true", "kept": "yes"}))
	st := *c.Status.DeepCopy()
	since := metav1.NewTime(time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC))
	st.PendingRuns = []cronapi.PendingRun{{ScheduledTime: metav1.NewTime(time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)), Trigger: cronapi.TriggerManual}}
	st.ObservedSchedule, st.ObservedScheduleSince = "0 2 * * *", &since
	st.NextScheduleTime = &since // batch/v1 has no room for it, nor needs it
	written := ToBatch(c, st)
	if written.Annotations["kept"] != "yes" {
		t.Error("the CronJob's own annotations were not kept")
	}
	back, errs := FromBatch(written)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if len(back.Status.PendingRuns) != 1 || !back.Status.PendingRuns[0].ScheduledTime.Equal(&st.PendingRuns[0].ScheduledTime) ||
		back.Status.ObservedSchedule != st.ObservedSchedule || !back.Status.ObservedScheduleSince.Equal(&since) {
		t.Errorf("state read back %+v, want %+v", back.Status, st)
	}
	if !back.Status.LastScheduleTime.Equal(st.LastScheduleTime) {
		t.Error("the batch/v1 status was not written")
	}
}

func TestAnEmptyStateLeavesNoAnnotation(t *testing.T) {
	c, _ := FromBatch(batchCronJob(map[string]string{StateAnnotation: `{"pendingRuns":[{"scheduledTime":"2026-11-26T02:00:00Z","trigger":"Manual"}]}`}))
	st := *c.Status.DeepCopy()
	st.PendingRuns = nil
	st.ObservedSchedule = "0 2 * * *" // not kept without no-retroactive-runs: the reference's behaviour
	if _, ok := ToBatch(c, st).Annotations[StateAnnotation]; ok {
		t.Error("an empty state is still written")
	}
}

// What batch/v1 cannot or need not hold changes nothing stored: a sync
// that only moves the next scheduled time, or observes the schedule of a
// CronJob without no-retroactive-runs, writes nothing.
func TestStoredLeavesOutWhatIsNotKept(t *testing.T) {
	c, _ := FromBatch(batchCronJob(nil))
	next := metav1.NewTime(time.Date(2026, 11, 27, 2, 0, 0, 0, time.UTC))
	st := *c.Status.DeepCopy()
	st.NextScheduleTime, st.ObservedSchedule, st.ObservedScheduleSince = &next, "0 2 * * *", &next
	if got := Stored(c, st); !equality.Semantic.DeepEqual(got, c.Status) {
		t.Errorf("stored %+v, want the status as read (%+v)", got, c.Status)
	}
	c.Annotations = map[string]string{NoRetroactiveRunsAnnotation: "true"}
	if got := Stored(c, st); got.ObservedSchedule != "0 2 * * *" || got.NextScheduleTime != nil {
		t.Errorf("with no-retroactive-runs: stored %+v, want the observed schedule kept", got)
	}
}
