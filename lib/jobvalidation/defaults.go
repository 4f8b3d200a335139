// Package jobvalidation is the API server's Job validation and defaulting
// (batch/v1 SetDefaults_Job and ValidateJob on create, every Job feature
// enabled), shared by the planner's ValidateJob and the executor's SubmitJob
// so both refuse what the API server would, with the same Kubernetes JSON
// paths.
package jobvalidation

import (
	"math"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// DefaultJob applies the API server's defaults to a Job (SetDefaults_Job of
// batch/v1, with every Job feature enabled), in place.
func DefaultJob(job *batchv1.Job) {
	spec := &job.Spec
	if spec.Completions == nil && spec.Parallelism == nil {
		spec.Completions = ptr.To[int32](1)
		spec.Parallelism = ptr.To[int32](1)
	}
	if spec.Parallelism == nil {
		spec.Parallelism = ptr.To[int32](1)
	}
	if spec.BackoffLimit == nil {
		if spec.BackoffLimitPerIndex != nil {
			spec.BackoffLimit = ptr.To[int32](math.MaxInt32)
		} else {
			spec.BackoffLimit = ptr.To[int32](6)
		}
	}
	if labels := spec.Template.Labels; labels != nil && len(job.Labels) == 0 {
		job.Labels = labels
	}
	if spec.CompletionMode == nil {
		spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	}
	if spec.Suspend == nil {
		spec.Suspend = ptr.To(false)
	}
	if spec.PodReplacementPolicy == nil {
		if spec.PodFailurePolicy != nil {
			spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
		} else {
			spec.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
		}
	}
	if spec.ManualSelector == nil {
		spec.ManualSelector = ptr.To(false)
	}
	defaultPodFailurePolicy(spec)
}

// DefaultJobTemplate applies the defaults the API server gives a CronJob's
// Job template, in place: of the Job's own, only those of nested types (a
// template is not a Job, SetDefaults_Job does not run on it).
func DefaultJobTemplate(template *batchv1.JobTemplateSpec) {
	defaultPodFailurePolicy(&template.Spec)
}

// defaultPodFailurePolicy sets the status of onPodConditions patterns
// (SetDefaults_PodFailurePolicyOnPodConditionsPattern).
func defaultPodFailurePolicy(spec *batchv1.JobSpec) {
	if spec.PodFailurePolicy == nil {
		return
	}
	for i := range spec.PodFailurePolicy.Rules {
		for j := range spec.PodFailurePolicy.Rules[i].OnPodConditions {
			if p := &spec.PodFailurePolicy.Rules[i].OnPodConditions[j]; p.Status == "" {
				p.Status = corev1.ConditionTrue
			}
		}
	}
}
