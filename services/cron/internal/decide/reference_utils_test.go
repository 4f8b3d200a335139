package decide

// The reference's utils_test.go (k8s.io/kubernetes v1.36.3
// pkg/controller/cronjob), ported to this package's functions.

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/services/cron/internal/schedule"
)

func parseSchedule(t *testing.T, spec string) schedule.Schedule {
	t.Helper()
	s, err := schedule.ParseReference(spec, time.UTC)
	if err != nil {
		t.Fatalf("parse %q: %v", spec, err)
	}
	return s
}

func TestGetJobFromTemplate2(t *testing.T) {
	var (
		one             int64 = 1
		no              bool
		timeZoneUTC     = "UTC"
		timeZoneCorrect = "Europe/Rome"
		scheduledTime   = *topOfTheHour()
	)
	cj := cronapi.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "mycronjob", Namespace: "snazzycats", UID: types.UID("1a2b3c")},
		Spec: cronapi.CronJobSpec{CronJobSpec: batchv1.CronJobSpec{
			Schedule:          "* * * * ?",
			ConcurrencyPolicy: batchv1.AllowConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.Time{Time: scheduledTime}, Labels: map[string]string{"a": "b"}},
				Spec: batchv1.JobSpec{
					ActiveDeadlineSeconds: &one,
					ManualSelector:        &no,
					Template: v1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"foo": "bar"}},
						Spec:       v1.PodSpec{Containers: []v1.Container{{Image: "foo/bar"}}},
					},
				},
			},
		}},
	}
	testCases := []struct {
		name                        string
		timeZone                    *string
		inputAnnotations            map[string]string
		expectedScheduledTime       func() time.Time
		expectedNumberOfAnnotations int
	}{
		{"UTC timezone and one annotation", &timeZoneUTC, map[string]string{"x": "y"}, func() time.Time { return scheduledTime }, 2},
		// The service's zone (Input.Local) is UTC here.
		{"nil timezone and one annotation", nil, map[string]string{"x": "y"}, func() time.Time { return scheduledTime }, 2},
		{"correct timezone and multiple annotation", &timeZoneCorrect, map[string]string{"x": "y", "z": "x"}, func() time.Time {
			location, _ := time.LoadLocation(timeZoneCorrect)
			return scheduledTime.In(location)
		}, 3},
	}
	for _, tt := range testCases {
		t.Run(tt.name, func(t *testing.T) {
			cj.Spec.JobTemplate.Annotations = tt.inputAnnotations
			cj.Spec.TimeZone = tt.timeZone
			d := newDecision(Input{CronJob: &cj, Local: time.UTC})
			job := buildJob(d.cj, JobName(cj.Name, scheduledTime), scheduledTime, cronapi.TriggerSchedule, d.zone())
			if !strings.HasPrefix(job.Name, "mycronjob-") {
				t.Errorf("wrong name %s", job.Name)
			}
			if len(job.Labels) != 1 {
				t.Errorf("wrong number of labels")
			}
			if len(job.Annotations) != tt.expectedNumberOfAnnotations {
				t.Errorf("wrong number of annotations: %v", job.Annotations)
			}
			if got := job.Annotations[batchv1.CronJobScheduledTimestampAnnotation]; got != tt.expectedScheduledTime().Format(time.RFC3339) {
				t.Errorf("scheduled timestamp annotation %s, want %s", got, tt.expectedScheduledTime().Format(time.RFC3339))
			}
			// Beyond the reference: the Job is complete and independent of
			// the template.
			if job.Namespace != "snazzycats" || !job.CreationTimestamp.Time.Equal(scheduledTime) {
				t.Errorf("namespace %q creation %s", job.Namespace, job.CreationTimestamp)
			}
			ref := metav1.GetControllerOf(job)
			if ref == nil || ref.APIVersion != "batch/v1" || ref.Kind != "CronJob" || ref.UID != cj.UID || !*ref.BlockOwnerDeletion {
				t.Errorf("owner %+v", ref)
			}
			if _, ok := job.Annotations[cronapi.TriggerAnnotation]; ok {
				t.Errorf("a scheduled run carries the trigger annotation")
			}
			*job.Spec.ActiveDeadlineSeconds = 7
			if *cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds != 1 {
				t.Errorf("the Job shares the template's spec")
			}
			*job.Spec.ActiveDeadlineSeconds = 1
		})
	}
}

// nextScheduleTime is the reference's: the most recent unmet time with the
// deadline clamping earliest, and its error.
func nextScheduleTime(cj *cronapi.CronJob, now time.Time, sched schedule.Schedule) (*time.Time, error) {
	earliestTime := earliest(cj, &cj.Status)
	if d := cj.Spec.StartingDeadlineSeconds; d != nil {
		if clamp := now.Add(-time.Duration(*d) * time.Second); clamp.After(earliestTime) {
			earliestTime = clamp
		}
	}
	t, _, err := mostRecentScheduleTime(earliestTime, now, sched)
	return t, err
}

func TestNextScheduleTime(t *testing.T) {
	sched := parseSchedule(t, "0 * * * ?")
	T1 := *topOfTheHour()
	T2 := *deltaTimeAfterTopOfTheHour(1 * time.Hour)
	cj := cronapi.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "mycronjob", Namespace: metav1.NamespaceDefault, UID: types.UID("1a2b3c")},
		Spec:       cronapi.CronJobSpec{CronJobSpec: batchv1.CronJobSpec{Schedule: "0 * * * ?", ConcurrencyPolicy: batchv1.AllowConcurrent}},
	}
	check := func(name string, got *time.Time, want *time.Time) {
		t.Helper()
		switch {
		case want == nil && got != nil:
			t.Errorf("%s: expected no start time, got %v", name, got)
		case want != nil && (got == nil || !got.Equal(*want)):
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
	cj.CreationTimestamp = metav1.Time{Time: T1.Add(-10 * time.Minute)}
	got, _ := nextScheduleTime(&cj, T1.Add(-7*time.Minute), sched)
	check("case 1: no known start times, and none needed yet", got, nil)

	got, _ = nextScheduleTime(&cj, T1.Add(2*time.Second), sched)
	check("case 2: no known start times, and one needed", got, &T1)

	cj.Status.LastScheduleTime = &metav1.Time{Time: T1}
	got, _ = nextScheduleTime(&cj, T1.Add(2*time.Minute), sched)
	check("case 3: known LastScheduleTime, no start needed", got, nil)

	got, _ = nextScheduleTime(&cj, T2.Add(5*time.Minute), sched)
	check("case 4: known LastScheduleTime, a start needed", got, &T2)

	cj.CreationTimestamp = metav1.Time{Time: T1.Add(-2 * time.Hour)}
	cj.Status.LastScheduleTime = &metav1.Time{Time: T1.Add(-1 * time.Hour)}
	got, _ = nextScheduleTime(&cj, T2.Add(5*time.Minute), sched)
	check("case 5: known LastScheduleTime, two starts needed", got, &T2)

	if got, _ = nextScheduleTime(&cj, T2.Add(10*24*time.Hour), sched); got == nil {
		t.Errorf("case 6: expected more than 0 missed times")
	}
	deadline := int64(2 * 60 * 60)
	cj.Spec.StartingDeadlineSeconds = &deadline
	if got, _ = nextScheduleTime(&cj, T2.Add(10*24*time.Hour), sched); got == nil {
		t.Errorf("case 7: expected more than 0 missed times")
	}
	cj.CreationTimestamp = metav1.Time{Time: T1.Add(10 * time.Second)}
	cj.Status.LastScheduleTime = nil
	got, err := nextScheduleTime(&cj, *deltaTimeAfterTopOfTheHour(1 * time.Hour), parseSchedule(t, "59 23 31 2 *"))
	check("case 8: rogue schedule", got, nil)
	if err == nil {
		t.Errorf("case 8: expected error")
	}
}

func TestByJobStartTime(t *testing.T) {
	now := metav1.NewTime(time.Date(2018, time.January, 1, 2, 3, 4, 5, time.UTC))
	later := metav1.NewTime(time.Date(2019, time.January, 1, 2, 3, 4, 5, time.UTC))
	aNil := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	bNil := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	aSet := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: batchv1.JobStatus{StartTime: &now}}
	bSet := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Status: batchv1.JobStatus{StartTime: &now}}
	aSetLater := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: batchv1.JobStatus{StartTime: &later}}
	testCases := []struct {
		name            string
		input, expected []*batchv1.Job
	}{
		{"both have nil start times", []*batchv1.Job{bNil, aNil}, []*batchv1.Job{aNil, bNil}},
		{"only the first has a nil start time", []*batchv1.Job{aNil, bSet}, []*batchv1.Job{bSet, aNil}},
		{"only the second has a nil start time", []*batchv1.Job{aSet, bNil}, []*batchv1.Job{aSet, bNil}},
		{"both have non-nil, equal start time", []*batchv1.Job{bSet, aSet}, []*batchv1.Job{aSet, bSet}},
		{"both have non-nil, different start time", []*batchv1.Job{aSetLater, bSet}, []*batchv1.Job{bSet, aSetLater}},
	}
	for _, tc := range testCases {
		slices.SortFunc(tc.input, byJobStartTime)
		if !slices.Equal(tc.input, tc.expected) {
			t.Errorf("%s: jobs not sorted as expected", tc.name)
		}
	}
}

func TestMostRecentScheduleTime(t *testing.T) {
	metav1TopOfTheHour := metav1.NewTime(*topOfTheHour())
	metav1HalfPastTheHour := metav1.NewTime(*deltaTimeAfterTopOfTheHour(30 * time.Minute))
	metav1MinuteAfterTopOfTheHour := metav1.NewTime(*deltaTimeAfterTopOfTheHour(1 * time.Minute))
	oneMinute := int64(60)
	tenSeconds := int64(10)
	newCJ := func(created metav1.Time, schedule string, deadline *int64, last *metav1.Time) *cronapi.CronJob {
		return &cronapi.CronJob{
			ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created},
			Spec:       cronapi.CronJobSpec{CronJobSpec: batchv1.CronJobSpec{Schedule: schedule, StartingDeadlineSeconds: deadline}},
			Status:     cronapi.CronJobStatus{CronJobStatus: batchv1.CronJobStatus{LastScheduleTime: last}},
		}
	}
	tests := []struct {
		name                  string
		cj                    *cronapi.CronJob
		includeSDS            bool
		now                   time.Time
		expectedEarliestTime  time.Time
		expectedRecentTime    *time.Time
		expectedTooManyMissed missedSchedules
		wantErr               bool
	}{
		{name: "now before next schedule", cj: newCJ(metav1TopOfTheHour, "0 * * * *", nil, nil),
			now: topOfTheHour().Add(30 * time.Second), expectedEarliestTime: *topOfTheHour()},
		{name: "now just after next schedule", cj: newCJ(metav1TopOfTheHour, "0 * * * *", nil, nil),
			now: topOfTheHour().Add(61 * time.Minute), expectedRecentTime: deltaTimeAfterTopOfTheHour(60 * time.Minute), expectedEarliestTime: *topOfTheHour()},
		{name: "missed 5 schedules", cj: newCJ(metav1.NewTime(*deltaTimeAfterTopOfTheHour(10 * time.Second)), "0 * * * *", nil, nil),
			now: *deltaTimeAfterTopOfTheHour(301 * time.Minute), expectedRecentTime: deltaTimeAfterTopOfTheHour(300 * time.Minute),
			expectedEarliestTime: *deltaTimeAfterTopOfTheHour(10 * time.Second), expectedTooManyMissed: fewMissed},
		{name: "complex schedule", cj: newCJ(metav1TopOfTheHour, "30 6-16/4 * * 1-5", nil, &metav1HalfPastTheHour),
			now: *deltaTimeAfterTopOfTheHour(24*time.Hour + 31*time.Minute), expectedRecentTime: deltaTimeAfterTopOfTheHour(24*time.Hour + 30*time.Minute),
			expectedEarliestTime: *deltaTimeAfterTopOfTheHour(30 * time.Minute), expectedTooManyMissed: fewMissed},
		{name: "another complex schedule", cj: newCJ(metav1TopOfTheHour, "30 10,11,12 * * 1-5", nil, &metav1HalfPastTheHour),
			now: *deltaTimeAfterTopOfTheHour(30*time.Hour + 30*time.Minute), expectedEarliestTime: *deltaTimeAfterTopOfTheHour(30 * time.Minute), expectedTooManyMissed: fewMissed},
		{name: "complex schedule with longer diff between executions", cj: newCJ(metav1TopOfTheHour, "30 6-16/4 * * 1-5", nil, &metav1HalfPastTheHour),
			now: *deltaTimeAfterTopOfTheHour(96*time.Hour + 31*time.Minute), expectedRecentTime: deltaTimeAfterTopOfTheHour(96*time.Hour + 30*time.Minute),
			expectedEarliestTime: *deltaTimeAfterTopOfTheHour(30 * time.Minute), expectedTooManyMissed: fewMissed},
		{name: "complex schedule with shorter diff between executions", cj: newCJ(metav1TopOfTheHour, "30 6-16/4 * * 1-5", nil, nil),
			now: *deltaTimeAfterTopOfTheHour(24*time.Hour + 31*time.Minute), expectedRecentTime: deltaTimeAfterTopOfTheHour(24*time.Hour + 30*time.Minute),
			expectedEarliestTime: *topOfTheHour(), expectedTooManyMissed: fewMissed},
		{name: "@every schedule", cj: newCJ(metav1.NewTime(*deltaTimeAfterTopOfTheHour(-59 * time.Minute)), "@every 1h", &tenSeconds, &metav1MinuteAfterTopOfTheHour),
			now: *deltaTimeAfterTopOfTheHour(7 * 24 * time.Hour), expectedRecentTime: deltaTimeAfterTopOfTheHour((6 * 24 * time.Hour) + 23*time.Hour + 1*time.Minute),
			expectedEarliestTime: *deltaTimeAfterTopOfTheHour(1 * time.Minute), expectedTooManyMissed: manyMissed},
		{name: "rogue cronjob", cj: newCJ(metav1.NewTime(*deltaTimeAfterTopOfTheHour(10 * time.Second)), "59 23 31 2 *", nil, nil),
			now: *deltaTimeAfterTopOfTheHour(1 * time.Hour), wantErr: true},
		{name: "earliestTime being CreationTimestamp and LastScheduleTime", cj: newCJ(metav1TopOfTheHour, "0 * * * *", nil, &metav1TopOfTheHour),
			now: *deltaTimeAfterTopOfTheHour(30 * time.Second), expectedEarliestTime: *topOfTheHour()},
		{name: "earliestTime being LastScheduleTime", cj: newCJ(metav1TopOfTheHour, "*/5 * * * *", nil, &metav1HalfPastTheHour),
			now: *deltaTimeAfterTopOfTheHour(31 * time.Minute), expectedEarliestTime: *deltaTimeAfterTopOfTheHour(30 * time.Minute)},
		{name: "earliestTime being LastScheduleTime (within StartingDeadlineSeconds)", cj: newCJ(metav1TopOfTheHour, "*/5 * * * *", &oneMinute, &metav1HalfPastTheHour),
			now: *deltaTimeAfterTopOfTheHour(31 * time.Minute), expectedEarliestTime: *deltaTimeAfterTopOfTheHour(30 * time.Minute)},
		{name: "earliestTime being LastScheduleTime (outside StartingDeadlineSeconds)", cj: newCJ(metav1TopOfTheHour, "*/5 * * * *", &oneMinute, &metav1HalfPastTheHour),
			includeSDS: true, now: *deltaTimeAfterTopOfTheHour(32 * time.Minute), expectedEarliestTime: *deltaTimeAfterTopOfTheHour(31 * time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sched := parseSchedule(t, tt.cj.Spec.Schedule)
			// The reference computes earliest inside; here the caller does.
			earliestTime := earliest(tt.cj, &tt.cj.Status)
			if d := tt.cj.Spec.StartingDeadlineSeconds; tt.includeSDS && d != nil {
				if clamp := tt.now.Add(-time.Duration(*d) * time.Second); clamp.After(earliestTime) {
					earliestTime = clamp
				}
			}
			gotRecent, gotMissed, err := mostRecentScheduleTime(earliestTime, tt.now, sched)
			if tt.wantErr {
				if err == nil {
					t.Error("no error when expected one")
				}
				return
			}
			if err != nil {
				t.Errorf("error %v", err)
			}
			if !earliestTime.Equal(tt.expectedEarliestTime) {
				t.Errorf("earliest %v, want %v", earliestTime, tt.expectedEarliestTime)
			}
			if (gotRecent == nil) != (tt.expectedRecentTime == nil) || (gotRecent != nil && !gotRecent.Equal(*tt.expectedRecentTime)) {
				t.Errorf("recent %v, want %v", gotRecent, tt.expectedRecentTime)
			}
			if gotMissed != tt.expectedTooManyMissed {
				t.Errorf("missed %v, want %v", gotMissed, tt.expectedTooManyMissed)
			}
		})
	}
}

func TestNextScheduleTimeDuration(t *testing.T) {
	metav1TopOfTheHour := metav1.NewTime(*topOfTheHour())
	metav1HalfPastTheHour := metav1.NewTime(*deltaTimeAfterTopOfTheHour(30 * time.Minute))
	metav1TwoHoursLater := metav1.NewTime(*deltaTimeAfterTopOfTheHour(2 * time.Hour))
	tests := []struct {
		name             string
		schedule         string
		last             *metav1.Time
		now              time.Time
		expectedDuration time.Duration
	}{
		{"complex schedule skipping weekend", "30 6-16/4 * * 1-5", &metav1HalfPastTheHour, *deltaTimeAfterTopOfTheHour(24*time.Hour + 31*time.Minute), 3*time.Hour + 59*time.Minute + nextScheduleDelta},
		{"another complex schedule skipping weekend", "30 10,11,12 * * 1-5", &metav1HalfPastTheHour, *deltaTimeAfterTopOfTheHour(30*time.Hour + 30*time.Minute), 66*time.Hour + nextScheduleDelta},
		{"once a week cronjob, missed two runs", "0 12 * * 4", &metav1TwoHoursLater, *deltaTimeAfterTopOfTheHour(19*24*time.Hour + 1*time.Hour + 30*time.Minute), 48*time.Hour + 30*time.Minute + nextScheduleDelta},
		{"no previous run of a cronjob", "0 12 * * 5", nil, *deltaTimeAfterTopOfTheHour(6 * time.Hour), 20*time.Hour + nextScheduleDelta},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cj := &cronapi.CronJob{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1TopOfTheHour}}
			cj.Status.LastScheduleTime = tt.last
			aim := nextScheduleAim(earliest(cj, &cj.Status), tt.now, parseSchedule(t, tt.schedule))
			if got := aim.Add(nextScheduleDelta).Sub(tt.now); got != tt.expectedDuration {
				t.Errorf("duration %s, want %s", got, tt.expectedDuration)
			}
		})
	}
}
