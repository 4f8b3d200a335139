package refbench

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// widenCronJob changes some of seed's cases, from a random stream of their
// own (randomCronJob's draws stay as they were), into what those draws
// never made: zones "" and Local, an empty concurrency policy, clocks far
// behind, deadlines beyond a Duration, CronJob names of every length, Jobs of an earlier CronJob
// of the same name, a Job of the due run's name that is not the CronJob's,
// finished conditions in other shapes, finished Jobs without a completion
// or start time, active lists naming a Job twice or another's Job, and
// templates that carry the scheduled-time annotation.
func widenCronJob(seed uint64, cj *batchv1.CronJob, jobs []*batchv1.Job, now time.Time) []*batchv1.Job {
	r := rand.New(rand.NewPCG(seed, 0x77696465))
	if r.IntN(6) == 0 {
		renameCronJob(cj, jobs, []string{strings.Repeat("n", 52), "a.b", "nightly-report"}[r.IntN(3)])
	}
	for _, j := range jobs {
		widenCronJobJob(r, cj, j)
	}
	switch r.IntN(40) {
	case 0:
		cj.Spec.TimeZone = ptr.To([]string{"", "Local"}[r.IntN(2)])
	case 1:
		cj.Spec.ConcurrencyPolicy = ""
	case 2: // a clock hours or days behind the API server's
		ahead := time.Duration(1+r.IntN(72)) * time.Hour
		cj.CreationTimestamp = metav1.NewTime(now.Add(ahead).Truncate(time.Second))
		if r.IntN(2) == 0 {
			cj.Status.LastScheduleTime = nil
		} else {
			cj.Status.LastScheduleTime = ptr.To(metav1.NewTime(now.Add(ahead / 2).Truncate(time.Minute)))
		}
	case 3: // a deadline whose seconds overflow a Duration
		cj.Spec.StartingDeadlineSeconds = ptr.To([]int64{9223372037, 1<<63 - 1, 18446744074}[r.IntN(3)])
	}
	name := cj.Name + "-" + strconv.FormatInt(now.Truncate(time.Minute).Unix()/60, 10)
	if r.IntN(25) == 0 && !slices.ContainsFunc(jobs, func(j *batchv1.Job) bool { return j.Name == name }) {
		// A Job of the due run's name (if one is due now) that another
		// made.
		other := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cj.Namespace, UID: "uid-squatter",
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		if r.IntN(2) == 0 {
			other.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cj.Name, UID: "uid-cj-earlier", Controller: ptr.To(true)}}
		}
		jobs = append(jobs, other)
	}
	if n := len(cj.Status.Active); n > 0 && r.IntN(30) == 0 {
		cj.Status.Active = append(cj.Status.Active, cj.Status.Active[r.IntN(n)]) // listed twice
	}
	for _, j := range jobs {
		if !metav1.IsControlledBy(j, cj) && r.IntN(30) == 0 {
			cj.Status.Active = append(cj.Status.Active, corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1",
				Namespace: j.Namespace, Name: j.Name, UID: j.UID}) // another's Job, listed as active
		}
	}
	for _, j := range jobs {
		if metav1.IsControlledBy(j, cj) && r.IntN(40) == 0 {
			// The UID of a Job of its own under a name no Job has.
			cj.Status.Active = append(cj.Status.Active, corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1",
				Namespace: j.Namespace, Name: j.Name + "-renamed", UID: j.UID})
		}
	}
	if r.IntN(30) == 0 {
		// Another namespace's Job, listed as active.
		theirs := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: cj.Name + "-1", Namespace: "their-namespace", UID: "uid-theirs",
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		cj.Status.Active = append(cj.Status.Active, corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1",
			Namespace: theirs.Namespace, Name: theirs.Name, UID: theirs.UID})
		if r.IntN(2) == 0 {
			jobs = append(jobs, theirs)
		}
	}
	if r.IntN(20) == 0 {
		if cj.Spec.JobTemplate.Annotations == nil {
			cj.Spec.JobTemplate.Annotations = map[string]string{}
		}
		cj.Spec.JobTemplate.Annotations[batchv1.CronJobScheduledTimestampAnnotation] = "2020-01-01T00:00:00Z"
	}
	return jobs
}

// renameCronJob names cj name, and its Jobs and references after it.
func renameCronJob(cj *batchv1.CronJob, jobs []*batchv1.Job, name string) {
	old := cj.Name
	renamed := func(s string) string {
		if rest, ok := strings.CutPrefix(s, old+"-"); ok {
			return name + "-" + rest
		}
		return s
	}
	cj.Name = name
	for _, j := range jobs {
		j.Name = renamed(j.Name)
		for i := range j.OwnerReferences {
			if j.OwnerReferences[i].Name == old {
				j.OwnerReferences[i].Name = name
			}
		}
	}
	for i := range cj.Status.Active {
		cj.Status.Active[i].Name = renamed(cj.Status.Active[i].Name)
	}
}

// widenCronJobJob gives a Job of the namespace a rarer shape.
func widenCronJobJob(r *rand.Rand, cj *batchv1.CronJob, j *batchv1.Job) {
	if ref := metav1.GetControllerOf(j); ref != nil && ref.UID == cj.UID {
		switch r.IntN(30) {
		case 0, 1: // a Job of an earlier CronJob of the same name
			j.OwnerReferences[0].UID = "uid-cj-earlier"
		case 2: // owned, not controlled
			j.OwnerReferences[0].Controller = nil
		case 3: // controlled by another kind of the same name
			j.OwnerReferences[0].Kind, j.OwnerReferences[0].APIVersion = "Workflow", "example.com/v1"
		}
	}
	end := metav1.NewTime(j.CreationTimestamp.Add(time.Minute))
	condition := func(t batchv1.JobConditionType, s corev1.ConditionStatus) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: s, LastTransitionTime: end}
	}
	switch r.IntN(20) {
	case 0: // success criteria met, not yet Complete: not finished
		j.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue)}
		j.Status.CompletionTime = nil
	case 1: // Complete, but False
		j.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobComplete, corev1.ConditionFalse)}
		j.Status.CompletionTime = nil
	case 2: // Failed listed before Complete, both true
		j.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobFailed, corev1.ConditionTrue), condition(batchv1.JobComplete, corev1.ConditionTrue)}
		j.Status.CompletionTime = &end
	}
	finished := false
	for _, c := range j.Status.Conditions {
		finished = finished || (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue
	}
	if finished && r.IntN(6) == 0 {
		j.Status.CompletionTime = nil
	}
	if finished && r.IntN(8) == 0 {
		j.Status.StartTime = nil // sorted last by the history cleanup
	}
	if finished && r.IntN(8) == 0 {
		j.Status.StartTime = ptr.To(metav1.NewTime(j.CreationTimestamp.Truncate(time.Hour))) // a tie, broken by name
	}
}
