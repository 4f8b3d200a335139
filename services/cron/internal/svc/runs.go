package svc

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
)

// TriggerCronJob starts a run now, through the controller.
func (s *CronService) TriggerCronJob(ctx context.Context, req *jobplanev1.TriggerCronJobRequest) (*jobplanev1.TriggerCronJobResponse, error) {
	var v apierr.Violations
	requireNamespaceAndName(&v, "", req.GetNamespace(), req.GetName())
	if err := v.Err("invalid TriggerCronJob request"); err != nil {
		return nil, err
	}
	if s.cfg.Runs == nil {
		return nil, withoutCluster("TriggerCronJob")
	}
	return s.cfg.Runs.Trigger(ctx, req.GetNamespace(), req.GetName(), req.GetIgnoreConcurrencyPolicy())
}

// BackfillCronJob runs the scheduled times of a past range, through the
// controller.
func (s *CronService) BackfillCronJob(ctx context.Context, req *jobplanev1.BackfillCronJobRequest) (*jobplanev1.BackfillCronJobResponse, error) {
	var v apierr.Violations
	requireNamespaceAndName(&v, "", req.GetNamespace(), req.GetName())
	checkTimestamp(&v, "start", req.GetStart())
	checkTimestamp(&v, "end", req.GetEnd())
	if err := v.Err("invalid BackfillCronJob request"); err != nil {
		return nil, err
	}
	if s.cfg.Runs == nil {
		return nil, withoutCluster("BackfillCronJob")
	}
	return s.cfg.Runs.Backfill(ctx, req)
}

func checkTimestamp(v *apierr.Violations, field string, ts *timestamppb.Timestamp) {
	if ts == nil {
		v.Add(field, "Required value")
	} else if err := ts.CheckValid(); err != nil {
		v.Add(field, "Invalid value: %v", err)
	}
}
