package jobvalidation

import (
	batchv1 "k8s.io/api/batch/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/kubeconv"
)

// Check converts a Job of the contract, applies the API server's defaults and
// validates it as the API server would on create. It returns the defaulted
// Job, or InvalidArgument whose field violations are the Job's paths under
// field ("job" gives "job.spec.parallelism").
func Check(job *jobplanev1.Job, field string) (*batchv1.Job, error) {
	const summary = "invalid Job"
	if job == nil {
		return nil, apierr.InvalidArgument(summary, apierr.Violation{Field: field, Description: "Required value"})
	}
	out, err := kubeconv.JobToKube(job, kubeconv.FullTemplate)
	if err != nil {
		return nil, apierr.InvalidArgument(summary, apierr.Violation{Field: field + ".spec.template.spec", Description: err.Error()})
	}
	DefaultJob(out)
	var v apierr.Violations
	for _, e := range ValidateJob(out) {
		v.Add(field+"."+e.Field, "%s", e.ErrorBody())
	}
	if err := v.Err(summary); err != nil {
		return nil, err
	}
	return out, nil
}
