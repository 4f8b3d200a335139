package kubeconv

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/cronapi"
)

// CronJobToKube converts a CronJob, its Job template fully decoded.
func CronJobToKube(c *jobplanev1.CronJob) (*cronapi.CronJob, error) {
	spec := c.GetSpec()
	if spec == nil {
		spec = &jobplanev1.CronJobSpec{} // its optional fields are read directly below
	}
	template, err := JobTemplateToKube(spec.GetJobTemplate())
	if err != nil {
		return nil, err
	}
	out := &cronapi.CronJob{
		TypeMeta:   typeMeta(c.GetApiVersion(), c.GetKind()),
		ObjectMeta: ObjectMetaToKube(c.GetMetadata()),
		Spec: cronapi.CronJobSpec{
			CronJobSpec: batchv1.CronJobSpec{
				Schedule:                   spec.GetSchedule(),
				TimeZone:                   spec.TimeZone,
				StartingDeadlineSeconds:    spec.StartingDeadlineSeconds,
				ConcurrencyPolicy:          batchv1.ConcurrencyPolicy(spec.GetConcurrencyPolicy()),
				Suspend:                    spec.Suspend,
				JobTemplate:                template,
				SuccessfulJobsHistoryLimit: spec.SuccessfulJobsHistoryLimit,
				FailedJobsHistoryLimit:     spec.FailedJobsHistoryLimit,
			},
			JitterSeconds: spec.JitterSeconds,
		},
		Status: CronJobStatusToKube(c.GetStatus()),
	}
	if cu := spec.GetCatchUp(); cu != nil {
		out.Spec.CatchUp = &cronapi.CatchUpPolicy{Policy: cu.GetPolicy(), WindowSeconds: cu.WindowSeconds, MaxRuns: cu.MaxRuns}
	}
	if ds := spec.GetDaylightSaving(); ds != nil {
		out.Spec.DaylightSaving = &cronapi.DaylightSavingPolicy{SkippedHour: ds.GetSkippedHour(), RepeatedHour: ds.GetRepeatedHour()}
	}
	return out, nil
}

// CronJobFromKube converts a CronJob.
func CronJobFromKube(c *cronapi.CronJob) (*jobplanev1.CronJob, error) {
	template, err := JobTemplateFromKube(&c.Spec.JobTemplate)
	if err != nil {
		return nil, err
	}
	spec := &c.Spec
	out := &jobplanev1.CronJob{
		ApiVersion: c.APIVersion,
		Kind:       c.Kind,
		Metadata:   ObjectMetaFromKube(&c.ObjectMeta),
		Spec: &jobplanev1.CronJobSpec{
			Schedule:                   spec.Schedule,
			TimeZone:                   spec.TimeZone,
			StartingDeadlineSeconds:    spec.StartingDeadlineSeconds,
			ConcurrencyPolicy:          string(spec.ConcurrencyPolicy),
			Suspend:                    spec.Suspend,
			JobTemplate:                template,
			SuccessfulJobsHistoryLimit: spec.SuccessfulJobsHistoryLimit,
			FailedJobsHistoryLimit:     spec.FailedJobsHistoryLimit,
			JitterSeconds:              spec.JitterSeconds,
		},
		Status: CronJobStatusFromKube(&c.Status),
	}
	if cu := spec.CatchUp; cu != nil {
		out.Spec.CatchUp = &jobplanev1.CatchUpPolicy{Policy: cu.Policy, WindowSeconds: cu.WindowSeconds, MaxRuns: cu.MaxRuns}
	}
	if ds := spec.DaylightSaving; ds != nil {
		out.Spec.DaylightSaving = &jobplanev1.DaylightSavingPolicy{SkippedHour: ds.SkippedHour, RepeatedHour: ds.RepeatedHour}
	}
	return out, nil
}

// JobTemplateToKube converts a Job template, its pod template fully decoded.
func JobTemplateToKube(t *jobplanev1.JobTemplateSpec) (batchv1.JobTemplateSpec, error) {
	job, err := JobToKube(&jobplanev1.Job{Spec: t.GetSpec()}, FullTemplate)
	if err != nil {
		return batchv1.JobTemplateSpec{}, err
	}
	return batchv1.JobTemplateSpec{ObjectMeta: ObjectMetaToKube(t.GetMetadata()), Spec: job.Spec}, nil
}

// JobTemplateFromKube converts a Job template.
func JobTemplateFromKube(t *batchv1.JobTemplateSpec) (*jobplanev1.JobTemplateSpec, error) {
	job, err := JobFromKube(&batchv1.Job{Spec: t.Spec})
	if err != nil {
		return nil, err
	}
	return &jobplanev1.JobTemplateSpec{Metadata: ObjectMetaFromKube(&t.ObjectMeta), Spec: job.GetSpec()}, nil
}

// CronJobStatusToKube converts a CronJob status; nil is the empty status.
func CronJobStatusToKube(s *jobplanev1.CronJobStatus) cronapi.CronJobStatus {
	if s == nil {
		return cronapi.CronJobStatus{}
	}
	out := cronapi.CronJobStatus{
		CronJobStatus: batchv1.CronJobStatus{
			LastScheduleTime:   TimeToKube(s.GetLastScheduleTime()),
			LastSuccessfulTime: TimeToKube(s.GetLastSuccessfulTime()),
		},
		NextScheduleTime:      TimeToKube(s.GetNextScheduleTime()),
		ObservedSchedule:      s.GetObservedSchedule(),
		ObservedScheduleSince: TimeToKube(s.GetObservedScheduleSince()),
	}
	for _, r := range s.GetActive() {
		out.Active = append(out.Active, ObjectReferenceToKube(r))
	}
	for _, p := range s.GetPendingRuns() {
		out.PendingRuns = append(out.PendingRuns, cronapi.PendingRun{ScheduledTime: TimeValueToKube(p.GetScheduledTime()), Trigger: p.GetTrigger()})
	}
	return out
}

// CronJobStatusFromKube converts a CronJob status.
func CronJobStatusFromKube(s *cronapi.CronJobStatus) *jobplanev1.CronJobStatus {
	out := &jobplanev1.CronJobStatus{
		LastScheduleTime:      TimeFromKube(s.LastScheduleTime),
		LastSuccessfulTime:    TimeFromKube(s.LastSuccessfulTime),
		NextScheduleTime:      TimeFromKube(s.NextScheduleTime),
		ObservedSchedule:      s.ObservedSchedule,
		ObservedScheduleSince: TimeFromKube(s.ObservedScheduleSince),
	}
	for i := range s.Active {
		out.Active = append(out.Active, ObjectReferenceFromKube(&s.Active[i]))
	}
	for _, p := range s.PendingRuns {
		out.PendingRuns = append(out.PendingRuns, &jobplanev1.PendingRun{ScheduledTime: TimeFromKube(&p.ScheduledTime), Trigger: p.Trigger})
	}
	return out
}

// ObjectReferenceToKube converts an object reference.
func ObjectReferenceToKube(r *jobplanev1.ObjectReference) corev1.ObjectReference {
	return corev1.ObjectReference{
		Kind:            r.GetKind(),
		Namespace:       r.GetNamespace(),
		Name:            r.GetName(),
		UID:             types.UID(r.GetUid()),
		APIVersion:      r.GetApiVersion(),
		ResourceVersion: r.GetResourceVersion(),
	}
}

// ObjectReferenceFromKube converts an object reference.
func ObjectReferenceFromKube(r *corev1.ObjectReference) *jobplanev1.ObjectReference {
	return &jobplanev1.ObjectReference{
		Kind:            r.Kind,
		Namespace:       r.Namespace,
		Name:            r.Name,
		Uid:             string(r.UID),
		ApiVersion:      r.APIVersion,
		ResourceVersion: r.ResourceVersion,
	}
}
