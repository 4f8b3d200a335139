package svc

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
)

// TriggerCronJob starts a run now, through the controller.
func (s *CronService) TriggerCronJob(ctx context.Context, req *jobplanev1.TriggerCronJobRequest) (*jobplanev1.TriggerCronJobResponse, error) {
	if err := requireName(req.GetNamespace(), req.GetName()); err != nil {
		return nil, err
	}
	if s.cfg.Runs == nil {
		return nil, unavailable("TriggerCronJob")
	}
	return s.cfg.Runs.Trigger(ctx, req.GetNamespace(), req.GetName(), req.GetIgnoreConcurrencyPolicy())
}

// BackfillCronJob runs the scheduled times of a past range, through the
// controller.
func (s *CronService) BackfillCronJob(ctx context.Context, req *jobplanev1.BackfillCronJobRequest) (*jobplanev1.BackfillCronJobResponse, error) {
	var v apierr.Violations
	if req.GetNamespace() == "" {
		v.Add("namespace", "Required value")
	}
	if req.GetName() == "" {
		v.Add("name", "Required value")
	}
	checkTimestamp(&v, "start", req.GetStart())
	checkTimestamp(&v, "end", req.GetEnd())
	if err := v.Err("invalid BackfillCronJob request"); err != nil {
		return nil, err
	}
	if s.cfg.Runs == nil {
		return nil, unavailable("BackfillCronJob")
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

func requireName(namespace, name string) error {
	var v apierr.Violations
	if namespace == "" {
		v.Add("namespace", "Required value")
	}
	if name == "" {
		v.Add("name", "Required value")
	}
	return v.Err("the CronJob's namespace and name are required")
}

func unavailable(rpc string) error {
	return apierr.New(codes.Unavailable, "NOT_CONFIGURED", nil, "%s needs a cluster: this cron service runs without one", rpc)
}
