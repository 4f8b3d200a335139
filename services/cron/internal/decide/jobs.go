package decide

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jobplane/jobplane/lib/cronapi"
)

// JobName is the name of the run scheduled at t: minutes since the epoch, as
// the reference names it, so a scheduled time is created at most once.
func JobName(cronJobName string, scheduled time.Time) string {
	return fmt.Sprintf("%s-%d", cronJobName, scheduled.Unix()/60)
}

// ManualJobName is the name of a run triggered at now: seconds in base 36
// after an "m", so two triggers in the same second are one run and no name
// collides with a scheduled run's.
func ManualJobName(cronJobName string, now time.Time) string {
	return cronJobName + "-m" + strconv.FormatInt(now.Unix(), 36)
}

// buildJob is the reference's getJobFromTemplate2, complete: the namespace
// is set, the owner is a jobplane CronJob, and runs not started by the
// schedule say why in an annotation. zone is the CronJob's (the
// scheduled-timestamp annotation is written in it).
func buildJob(cj *cronapi.CronJob, name string, scheduled time.Time, trigger string, zone *time.Location) *batchv1.Job {
	template := &cj.Spec.JobTemplate
	labels := map[string]string{}
	maps.Copy(labels, template.Labels)
	annotations := map[string]string{}
	maps.Copy(annotations, template.Annotations)
	annotations[batchv1.CronJobScheduledTimestampAnnotation] = scheduled.In(zone).Format(time.RFC3339)
	if trigger != cronapi.TriggerSchedule {
		annotations[cronapi.TriggerAnnotation] = trigger
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         cj.Namespace,
			Labels:            labels,
			Annotations:       annotations,
			CreationTimestamp: metav1.Time{Time: scheduled},
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(cj, ownerKind(cj))},
		},
	}
	template.Spec.DeepCopyInto(&job.Spec)
	return job
}

// jobRef is the active-list reference to a Job, as the reference's getRef
// makes it.
func jobRef(job *batchv1.Job) corev1.ObjectReference {
	return corev1.ObjectReference{
		Kind:            "Job",
		APIVersion:      "batch/v1",
		Namespace:       job.Namespace,
		Name:            job.Name,
		UID:             job.UID,
		ResourceVersion: job.ResourceVersion,
	}
}

// ownedJobs are the Jobs whose controller owner reference carries the
// CronJob's UID, in their input order (the reference goes through its Jobs
// in the order it is given them, and its events follow it). Matching the
// UID, not the name as the reference does, keeps a recreated CronJob from
// adopting its predecessor's Jobs.
func ownedJobs(cj *cronapi.CronJob, jobs []*batchv1.Job) []*batchv1.Job {
	var owned []*batchv1.Job
	for _, job := range jobs {
		if ref := metav1.GetControllerOf(job); ref != nil && ref.UID == cj.UID && job.Namespace == cj.Namespace {
			owned = append(owned, job)
		}
	}
	return owned
}

// finishedCondition is the Job's Complete or Failed condition type when it
// is true.
func finishedCondition(job *batchv1.Job) (bool, batchv1.JobConditionType) {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true, c.Type
		}
	}
	return false, ""
}

// isSucceeded is the reference's jobutil.IsJobSucceeded: a true Complete
// condition, wherever it is.
func isSucceeded(job *batchv1.Job) bool {
	return slices.ContainsFunc(job.Status.Conditions, func(c batchv1.JobCondition) bool {
		return c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue
	})
}

func isFinished(job *batchv1.Job) bool {
	finished, _ := finishedCondition(job)
	return finished
}

// byJobStartTime orders Jobs by start time, unstarted last, names breaking
// ties: the reference's order for history cleanup.
func byJobStartTime(a, b *batchv1.Job) int {
	switch {
	case a.Status.StartTime == nil && b.Status.StartTime != nil:
		return 1
	case a.Status.StartTime != nil && b.Status.StartTime == nil:
		return -1
	case a.Status.StartTime.Equal(b.Status.StartTime):
		return strings.Compare(a.Name, b.Name)
	case a.Status.StartTime.Before(b.Status.StartTime):
		return -1
	}
	return 1
}

// findJob is the Job of that name among jobs, or nil.
func findJob(jobs []*batchv1.Job, name string) *batchv1.Job {
	for _, job := range jobs {
		if job.Name == name {
			return job
		}
	}
	return nil
}

func inActiveListByName(status *cronapi.CronJobStatus, namespace, name string) bool {
	return slices.ContainsFunc(status.Active, func(r corev1.ObjectReference) bool {
		return r.Name == name && r.Namespace == namespace
	})
}

// deleteAllFromActiveList drops the references of every UID in uids at
// once: one pass, where dropping them one by one costs a pass each (a
// status anyone allowed to write it may fill with thousands).
func deleteAllFromActiveList(status *cronapi.CronJobStatus, uids map[types.UID]bool) {
	if !slices.ContainsFunc(status.Active, func(r corev1.ObjectReference) bool { return uids[r.UID] }) {
		return // nothing to drop: the list is left as it is, not copied
	}
	active := []corev1.ObjectReference{}
	for _, r := range status.Active {
		if !uids[r.UID] {
			active = append(active, r)
		}
	}
	status.Active = active
}

// activeUIDs are the UIDs the active list holds.
func activeUIDs(status *cronapi.CronJobStatus) map[types.UID]bool {
	uids := make(map[types.UID]bool, len(status.Active))
	for _, r := range status.Active {
		uids[r.UID] = true
	}
	return uids
}

// ownerKind is the kind the Jobs' controller reference names: the CronJob's
// own (jobplane's CronJobs are jobplane.dev/v1, which the garbage collector
// follows), and batch/v1's, as the reference, for a CronJob given without
// apiVersion (PlanCronJob called with a batch/v1 CronJob's fields).
func ownerKind(cj *cronapi.CronJob) schema.GroupVersionKind {
	if cj.APIVersion == "" {
		return batchv1.SchemeGroupVersion.WithKind("CronJob")
	}
	return schema.FromAPIVersionAndKind(cj.APIVersion, cmp.Or(cj.Kind, cronapi.Kind))
}
