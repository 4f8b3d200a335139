package controller

import (
	"cmp"
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/services/cron/internal/decide"
)

// Trigger starts a manual run of a CronJob now (the TriggerCronJob RPC),
// under the CronJob's lock so that it never races a sync.
func (c *Controller) Trigger(ctx context.Context, apiVersion, namespace, name string, ignoreConcurrencyPolicy bool) (*jobplanev1.TriggerCronJobResponse, error) {
	ctx = fairlimit.WithLane(ctx, cronJobKey(apiVersion, namespace, name))
	in, unlock, err := c.lockedInput(ctx, apiVersion, namespace, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	p, err := decide.Trigger(in, ignoreConcurrencyPolicy)
	if err != nil {
		return nil, decisionError(err)
	}
	out := c.perform(ctx, in, p)
	if out.err != nil {
		return nil, apierr.New(codes.Unavailable, "RUN_FAILED", nil, "the run of %s/%s could not be handed to the executor: %v", namespace, name, out.err)
	}
	c.queue.Add(cronJobKey(apiVersion, namespace, name))
	resp := &jobplanev1.TriggerCronJobResponse{}
	if len(out.created) > 0 {
		resp.Job = out.created[0]
	} else if queued := newPendingRuns(in.CronJob.Status, p.Status); len(queued) > 0 {
		resp.Queued = queued[0]
	}
	return resp, nil
}

// Backfill runs the scheduled times of a past range (the BackfillCronJob
// RPC).
func (c *Controller) Backfill(ctx context.Context, req *jobplanev1.BackfillCronJobRequest) (*jobplanev1.BackfillCronJobResponse, error) {
	apiVersion := cmp.Or(req.GetApiVersion(), cronapi.APIVersion)
	ctx = fairlimit.WithLane(ctx, cronJobKey(apiVersion, req.GetNamespace(), req.GetName()))
	in, unlock, err := c.lockedInput(ctx, apiVersion, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	defer unlock()
	p, err := decide.Backfill(in, req.GetStart().AsTime(), req.GetEnd().AsTime(), req.GetConcurrencyPolicy())
	if err != nil {
		return nil, decisionError(err)
	}
	out := c.perform(ctx, in, p)
	if out.err != nil {
		return nil, apierr.New(codes.Unavailable, "RUN_FAILED", nil, "the backfill of %s/%s stopped: %v", req.GetNamespace(), req.GetName(), out.err)
	}
	c.queue.Add(cronJobKey(apiVersion, req.GetNamespace(), req.GetName()))
	resp := &jobplanev1.BackfillCronJobResponse{Jobs: out.created, Queued: newPendingRuns(in.CronJob.Status, p.Status)}
	for _, t := range p.Skipped {
		resp.Skipped = append(resp.Skipped, kubeconv.TimeFromKube(ptrTime(t)))
	}
	return resp, nil
}

// newPendingRuns are the runs after queues that before did not.
func newPendingRuns(before, after cronapi.CronJobStatus) []*jobplanev1.PendingRun {
	had := map[cronapi.PendingRun]bool{}
	for _, r := range before.PendingRuns {
		had[cronapi.PendingRun{ScheduledTime: metav1.NewTime(r.ScheduledTime.UTC()), Trigger: r.Trigger}] = true
	}
	var out []*jobplanev1.PendingRun
	for _, r := range after.PendingRuns {
		if !had[cronapi.PendingRun{ScheduledTime: metav1.NewTime(r.ScheduledTime.UTC()), Trigger: r.Trigger}] {
			out = append(out, &jobplanev1.PendingRun{ScheduledTime: kubeconv.TimeFromKube(&r.ScheduledTime), Trigger: r.Trigger})
		}
	}
	return out
}

// lockedInput locks a CronJob and reads what a decision about it needs, the
// CronJob read live: an RPC acts on the CronJob as it is now.
func (c *Controller) lockedInput(ctx context.Context, apiVersion, namespace, name string) (decide.Input, func(), error) {
	if leading, holder := c.leading(); !leading {
		if holder == "" {
			return decide.Input{}, nil, apierr.New(codes.Unavailable, "NOT_LEADER", nil, "not the leader; the leader is unknown")
		}
		return decide.Input{}, nil, apierr.New(codes.Unavailable, "NOT_LEADER", map[string]string{"leader": holder}, "not the leader; the leader is %s", holder)
	}
	if _, err := c.kindOf(apiVersion); err != nil {
		return decide.Input{}, nil, apierr.New(codes.FailedPrecondition, "KIND_NOT_RUN", nil, "%v", err)
	}
	unlock := c.syncing.Lock(cronJobKey(apiVersion, namespace, name))
	cronJob, err := c.liveCronJob(ctx, apiVersion, namespace, name)
	var invalid *invalidCronJob
	if err != nil {
		unlock()
		switch {
		case apierrors.IsNotFound(err):
			return decide.Input{}, nil, apierr.New(codes.NotFound, "NOT_FOUND", nil, "CronJob %s/%s not found", namespace, name)
		case errors.As(err, &invalid):
			return decide.Input{}, nil, apierr.New(codes.FailedPrecondition, "INVALID_ANNOTATIONS", nil,
				"CronJob %s/%s is not run until its jobplane annotations are valid: %v", namespace, name, invalid.errs.ToAggregate())
		}
		return decide.Input{}, nil, apierr.FromKube(err)
	}
	in, err := c.input(ctx, cronJob)
	if err != nil {
		unlock()
		return decide.Input{}, nil, apierr.FromKube(err)
	}
	if len(in.Unread) > 0 {
		unlock()
		return decide.Input{}, nil, apierr.New(codes.Unavailable, "ACTIVE_JOBS_UNREAD", nil,
			"CronJob %s/%s lists more active Jobs than one sync reads (%d); its syncs read them: retry", namespace, name, maxLiveReads)
	}
	return in, unlock, nil
}

// decisionError maps the decision's refusals to gRPC errors.
func decisionError(err error) error {
	switch {
	case errors.Is(err, decide.ErrConcurrencyPolicy), errors.Is(err, decide.ErrDeleting), errors.Is(err, decide.ErrInvalidSchedule):
		return apierr.New(codes.FailedPrecondition, "RUN_REFUSED", nil, "%v", err)
	case errors.Is(err, decide.ErrInvalidBackfill):
		var fe *field.Error
		if errors.As(err, &fe) {
			return apierr.Invalid("invalid BackfillCronJob request", field.ErrorList{fe})
		}
		return apierr.New(codes.InvalidArgument, "INVALID_BACKFILL", nil, "%v", err)
	}
	return apierr.New(codes.Internal, "DECISION_FAILED", nil, "%v", err)
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
