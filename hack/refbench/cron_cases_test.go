package refbench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// cronSchedules are the schedules the cases draw from: every minute to once
// a year, descriptors, hours daylight saving skips or repeats, a schedule
// that never comes and ones that cannot be read.
var cronSchedules = []string{
	"* * * * *", "*/5 * * * *", "*/15 9-17 * * *", "0 * * * *", "30 * * * *",
	"0 */2 * * *", "30 2 * * *", "0 1 * * *", "*/30 1-3 * * *", "0 9 * * 1-5",
	"0 0 1 * *", "0 0 29 2 *", "59 23 31 12 *", "0 0 30 2 *", "5 4 * * ?",
	"@hourly", "@daily", "@weekly", "@every 5m", "@every 90m", "@every 1h30m10s",
	"0 0 * * 0", "0 9 * * MON-FRI", "0 0 1 JAN,JUL *", "1-59/7 * * * *", "0 2-3 * * *",
	"@yearly", "@monthly", "@midnight", "@every 30s", "@every 0s", "@every 25h",
	"TZ=UTC 0 * * * *", "CRON_TZ=Europe/Paris 30 2 * * *", "TZ=Not/AZone * * * * *",
	"not a schedule", "* * * *", "61 * * * *", "0 0 L * *", "@every -5m",
}

// cronZones are the time zones the cases draw from; nil is the service's
// own (UTC here, as the reference's is kube-controller-manager's).
var cronZones = []*string{
	nil, nil, ptr.To("UTC"), ptr.To("America/New_York"), ptr.To("Europe/Paris"),
	ptr.To("Asia/Kolkata"), ptr.To("Australia/Lord_Howe"), ptr.To("Not/AZone"),
}

// cronEpochs are the instants the cases' clocks are drawn around: daylight
// saving starting and ending in New York and Paris, and a plain day.
var cronEpochs = []time.Time{
	time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC),
	time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC),
	time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC),
	time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC),
	time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC),
}

// randomCronJob is the CronJob, the Jobs of its namespace and the time of
// seed's sync: a CronJob as the API server stores it, created a while
// before now, with runs behind it, Jobs running, finished or missing, and
// some Jobs that are not its own.
func randomCronJob(seed uint64) (*batchv1.CronJob, []*batchv1.Job, time.Time) {
	r := rand.New(rand.NewPCG(seed, 0x63726f6e))
	now := cronEpochs[r.IntN(len(cronEpochs))].Add(time.Duration(r.IntN(6*3600)-3*3600) * time.Second)
	if r.IntN(4) == 0 {
		now = now.Add(time.Duration(r.IntN(1000)) * time.Millisecond)
	}
	ages := []time.Duration{30 * time.Second, 5 * time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 400 * 24 * time.Hour}
	created := now.Add(-time.Duration(r.Float64() * float64(ages[r.IntN(len(ages))]))).Truncate(time.Second)
	if r.IntN(40) == 0 {
		created = now.Add(time.Duration(1+r.IntN(90)) * time.Second).Truncate(time.Second) // a clock behind the API server's
	}
	cj := &batchv1.CronJob{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{Name: "cj", Namespace: "ns", UID: "uid-cj", ResourceVersion: "7",
			CreationTimestamp: metav1.Time{Time: created}},
		Spec: batchv1.CronJobSpec{
			Schedule:          cronSchedules[r.IntN(len(cronSchedules))],
			TimeZone:          cronZones[r.IntN(len(cronZones))],
			ConcurrencyPolicy: []batchv1.ConcurrencyPolicy{batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent}[r.IntN(3)],
			JobTemplate:       randomJobTemplate(r),
		},
	}
	if r.IntN(3) == 0 {
		cj.Spec.StartingDeadlineSeconds = ptr.To([]int64{0, 10, 59, 200, 3600, 100000}[r.IntN(6)])
	}
	if r.IntN(5) == 0 {
		cj.Spec.Suspend = ptr.To(r.IntN(3) != 0)
	}
	if r.IntN(3) != 0 {
		cj.Spec.SuccessfulJobsHistoryLimit = ptr.To(int32(r.IntN(4)))
	}
	if r.IntN(3) != 0 {
		cj.Spec.FailedJobsHistoryLimit = ptr.To(int32(r.IntN(3)))
	}
	if r.IntN(30) == 0 {
		cj.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Second).Truncate(time.Second)}
	}
	if r.IntN(5) != 0 {
		last := now.Add(-time.Duration(r.IntN(4*60)) * time.Minute).Truncate(time.Minute)
		switch r.IntN(10) {
		case 0:
			last = now.Add(time.Minute).Truncate(time.Minute) // a clock behind the last run's
		case 1:
			last = last.Add(17 * time.Second)
		}
		cj.Status.LastScheduleTime = &metav1.Time{Time: last}
	}
	if r.IntN(3) == 0 {
		cj.Status.LastSuccessfulTime = &metav1.Time{Time: now.Add(-time.Duration(r.IntN(300)) * time.Minute).Truncate(time.Second)}
	}
	var jobs []*batchv1.Job
	for i := range r.IntN(7) {
		j := randomCronJobJob(r, cj, now)
		if slices.ContainsFunc(jobs, func(other *batchv1.Job) bool { return other.Name == j.Name }) {
			continue
		}
		jobs = append(jobs, j)
		if owned := metav1.GetControllerOf(j); owned != nil && owned.Name == cj.Name && r.IntN(3) != 0 {
			ref := corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: j.Namespace, Name: j.Name, UID: j.UID, ResourceVersion: fmt.Sprint(i + 1)}
			if r.IntN(15) == 0 {
				ref.UID = "uid-of-an-earlier-job"
			}
			cj.Status.Active = append(cj.Status.Active, ref)
		}
	}
	if r.IntN(8) == 0 { // an active Job gone missing
		at := now.Add(-time.Duration(1+r.IntN(120)) * time.Minute)
		cj.Status.Active = append(cj.Status.Active, corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1",
			Namespace: cj.Namespace, Name: fmt.Sprintf("cj-%d", at.Unix()/60), UID: "uid-missing"})
	}
	return cj, jobs, now
}

// randomJobTemplate is a Job template with some labels and annotations of
// its own.
func randomJobTemplate(r *rand.Rand) batchv1.JobTemplateSpec {
	t := batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
		}},
	}}
	if r.IntN(2) == 0 {
		t.Labels = map[string]string{"app": "report"}
	}
	if r.IntN(3) == 0 {
		t.Annotations = map[string]string{"team": "batch"}
	}
	if r.IntN(3) == 0 {
		t.Spec.Parallelism, t.Spec.Completions = ptr.To(int32(2)), ptr.To(int32(4))
	}
	return t
}

// randomCronJobJob is a Job of cj's namespace: most often one cj created
// for a minute before now, running or finished; sometimes another's, or
// nobody's.
func randomCronJobJob(r *rand.Rand, cj *batchv1.CronJob, now time.Time) *batchv1.Job {
	scheduled := now.Add(-time.Duration(r.IntN(10*60)) * time.Minute).Truncate(time.Minute)
	j := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", cj.Name, scheduled.Unix()/60), Namespace: cj.Namespace,
			UID:               types.UID(fmt.Sprintf("uid-job-%d", scheduled.Unix()/60)),
			CreationTimestamp: metav1.Time{Time: scheduled.Add(time.Second)},
		},
		Spec: *cj.Spec.JobTemplate.Spec.DeepCopy(),
	}
	switch owner := r.IntN(20); {
	case owner < 17:
		j.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))}
	case owner < 19:
		j.Name = fmt.Sprintf("other-%d", scheduled.Unix()/60)
		other := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: "uid-other"}}
		j.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(other, batchv1.SchemeGroupVersion.WithKind("CronJob"))}
	default:
		j.Name = fmt.Sprintf("adhoc-%d", r.IntN(1000))
	}
	if r.IntN(4) != 0 {
		j.Annotations = map[string]string{batchv1.CronJobScheduledTimestampAnnotation: scheduled.Format(time.RFC3339)}
	}
	if r.IntN(20) == 0 {
		j.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Second).Truncate(time.Second)}
	}
	start := metav1.NewTime(scheduled.Add(2 * time.Second))
	end := metav1.NewTime(scheduled.Add(time.Duration(3+r.IntN(600)) * time.Second))
	if end.After(now) {
		end = metav1.NewTime(now.Truncate(time.Second))
	}
	condition := func(t batchv1.JobConditionType) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: end}
	}
	switch state := r.IntN(20); {
	case state < 8: // running
		j.Status.StartTime, j.Status.Active = &start, 1
	case state < 14:
		j.Status.StartTime, j.Status.CompletionTime, j.Status.Succeeded = &start, &end, 1
		j.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobSuccessCriteriaMet), condition(batchv1.JobComplete)}
	case state < 18:
		j.Status.StartTime, j.Status.Failed = &start, 1
		j.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobFailureTarget), condition(batchv1.JobFailed)}
	case state < 19: // about to fail: not finished yet
		j.Status.StartTime, j.Status.Failed = &start, 1
		j.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobFailureTarget)}
	default: // suspended
		j.Spec.Suspend = ptr.To(true)
		j.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobSuspended)}
	}
	return j
}
