// Package svc is the gRPC face of the cron service: it checks requests,
// calls the schedule math and the CronJob machinery, and answers with status
// errors only.
package svc

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/services/cron/internal/schedule"
	"github.com/jobplane/jobplane/services/cron/internal/validation"
)

// Bounds of PreviewSchedule's count.
const (
	defaultPreviewCount = 10
	maxPreviewCount     = 1000
)

// Config is what the service works with. A zero Config serves the pure
// RPCs only (PreviewSchedule, PlanCronJob); the others answer UNAVAILABLE.
type Config struct {
	// CronJobs reads and writes cronjobs.jobplane.dev.
	CronJobs dynamic.NamespaceableResourceInterface
	// Kube reads Jobs (WatchJobInstances).
	Kube kubernetes.Interface
	// Runs performs manual and backfilled runs (the controller, while this
	// replica leads).
	Runs Runs
	// DropIn: batch/v1 CronJobs are run here too, so the RPCs naming a
	// CronJob take api_version batch/v1.
	DropIn bool
	// Local is the zone of a CronJob without spec.timeZone.
	Local *time.Location
	Log   *slog.Logger
	// Done ends the streams when the server shuts down.
	Done <-chan struct{}
}

// Runs starts runs outside the schedule; the controller implements it.
type Runs interface {
	Trigger(ctx context.Context, apiVersion, namespace, name string, ignoreConcurrencyPolicy bool) (*jobplanev1.TriggerCronJobResponse, error)
	Backfill(ctx context.Context, req *jobplanev1.BackfillCronJobRequest) (*jobplanev1.BackfillCronJobResponse, error)
}

// CronService implements jobplane.v1.CronService.
type CronService struct {
	jobplanev1.UnimplementedCronServiceServer
	cfg Config
}

var _ jobplanev1.CronServiceServer = (*CronService)(nil)

// NewCronService returns the service.
func NewCronService(cfg Config) *CronService {
	if cfg.Local == nil {
		cfg.Local = time.Local
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &CronService{cfg: cfg}
}

// PreviewSchedule lists the next run times of a schedule.
func (s *CronService) PreviewSchedule(_ context.Context, req *jobplanev1.PreviewScheduleRequest) (*jobplanev1.PreviewScheduleResponse, error) {
	var tz *string
	if req.GetTimeZone() != "" {
		tz = &req.TimeZone
	}
	sched, errs := schedule.ParseIn(req.GetSchedule(), tz, s.cfg.Local, schedule.Fields{Schedule: field.NewPath("schedule"), TimeZone: field.NewPath("timeZone")})
	ds := &cronapi.DaylightSavingPolicy{SkippedHour: req.GetDaylightSaving().GetSkippedHour(), RepeatedHour: req.GetDaylightSaving().GetRepeatedHour()}
	errs = append(errs, validation.ValidateDaylightSaving(ds, field.NewPath("daylightSaving"))...)
	count := int(req.GetCount())
	switch {
	case count == 0:
		count = defaultPreviewCount
	case count < 0 || count > maxPreviewCount:
		errs = append(errs, field.Invalid(field.NewPath("count"), count, fmt.Sprintf("must be between 1 and %d", maxPreviewCount)))
	}
	from := time.Now()
	if req.GetFrom() != nil {
		if err := req.GetFrom().CheckValid(); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("from"), field.OmitValueType{}, err.Error()))
		}
		from = req.GetFrom().AsTime()
	}
	if err := apierr.Invalid("invalid PreviewSchedule request", errs); err != nil {
		return nil, err
	}
	resp := &jobplanev1.PreviewScheduleResponse{}
	for _, t := range sched.WithDaylightSaving(ds.SkippedHour, ds.RepeatedHour).NextN(from, count) {
		ts := timestamppb.New(t)
		if ts.CheckValid() != nil {
			break // after year 9999, which a Timestamp does not reach
		}
		resp.Runs = append(resp.Runs, &jobplanev1.ScheduledRun{Time: ts, LocalTime: t.In(sched.Location()).Format(time.RFC3339)})
	}
	return resp, nil
}
