package jobvalidation

import (
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/kubeconv"
)

// Check converts a Job of the contract, applies the API server's defaults and
// validates it as the API server would on create. It returns the defaulted
// Job, or the errors with the Job's paths under path ("job" gives
// "job.spec.parallelism").
func Check(job *jobplanev1.Job, path *field.Path) (*batchv1.Job, field.ErrorList) {
	if job == nil {
		return nil, field.ErrorList{field.Required(path, "")}
	}
	out, err := kubeconv.JobToKube(job, kubeconv.FullTemplate)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(path.Child("spec", "template", "spec"), field.OmitValueType{}, err.Error())}
	}
	DefaultJob(out)
	if errs := ValidateJob(out); len(errs) > 0 {
		return nil, apierr.Prefixed(path, errs)
	}
	return out, nil
}
