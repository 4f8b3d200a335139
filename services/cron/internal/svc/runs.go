package svc

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/services/cron/internal/batchcron"
	"github.com/jobplane/jobplane/services/cron/internal/decide"
)

// TriggerCronJob starts a run now, through the controller.
func (s *CronService) TriggerCronJob(ctx context.Context, req *jobplanev1.TriggerCronJobRequest) (*jobplanev1.TriggerCronJobResponse, error) {
	errs := cronJobKey(nil, req.GetNamespace(), req.GetName())
	errs = append(errs, s.checkAPIVersion(req.GetApiVersion())...)
	if err := apierr.Invalid("invalid TriggerCronJob request", errs); err != nil {
		return nil, err
	}
	if s.cfg.Runs == nil {
		return nil, withoutCluster("TriggerCronJob")
	}
	return s.cfg.Runs.Trigger(ctx, cmp.Or(req.GetApiVersion(), cronapi.APIVersion), req.GetNamespace(), req.GetName(), req.GetIgnoreConcurrencyPolicy())
}

// BackfillCronJob runs the scheduled times of a past range, through the
// controller.
func (s *CronService) BackfillCronJob(ctx context.Context, req *jobplanev1.BackfillCronJobRequest) (*jobplanev1.BackfillCronJobResponse, error) {
	errs := cronJobKey(nil, req.GetNamespace(), req.GetName())
	errs = append(errs, checkTimestamp(field.NewPath("start"), req.GetStart())...)
	if start := req.GetStart(); start.IsValid() {
		// A run's Job is named for its minutes since 1970, so the earliest
		// run of a range long before 1970 has the longest name.
		if name := decide.JobName(req.GetName(), start.AsTime()); len(name) > utilvalidation.LabelValueMaxLength {
			errs = append(errs, field.Invalid(field.NewPath("start"), start.AsTime().Format(time.RFC3339),
				fmt.Sprintf("a run then would name its Job %s, longer than a Job's name may be (%d characters: its pods' job-name label holds it)", name, utilvalidation.LabelValueMaxLength)))
		}
	}
	errs = append(errs, checkTimestamp(field.NewPath("end"), req.GetEnd())...)
	errs = append(errs, s.checkAPIVersion(req.GetApiVersion())...)
	if err := apierr.Invalid("invalid BackfillCronJob request", errs); err != nil {
		return nil, err
	}
	if s.cfg.Runs == nil {
		return nil, withoutCluster("BackfillCronJob")
	}
	return s.cfg.Runs.Backfill(ctx, req)
}

func checkTimestamp(path *field.Path, ts *timestamppb.Timestamp) field.ErrorList {
	if ts == nil {
		return field.ErrorList{field.Required(path, "")}
	}
	if err := ts.CheckValid(); err != nil {
		return field.ErrorList{field.Invalid(path, field.OmitValueType{}, err.Error())}
	}
	return nil
}

// checkAPIVersion: a request names jobplane's CronJobs (empty or
// jobplane.dev/v1) or, in drop-in mode, batch/v1's.
func (s *CronService) checkAPIVersion(apiVersion string) field.ErrorList {
	path := field.NewPath("apiVersion")
	switch apiVersion {
	case "", cronapi.APIVersion:
		return nil
	case batchcron.APIVersion:
		if s.cfg.DropIn {
			return nil
		}
		return field.ErrorList{field.Invalid(path, apiVersion, "batch/v1 CronJobs are run only by a cron service in drop-in mode (-drop-in)")}
	}
	return field.ErrorList{field.NotSupported(path, apiVersion, []string{cronapi.APIVersion, batchcron.APIVersion})}
}
