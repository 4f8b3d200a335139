package svc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
)

// The RPCs naming a CronJob take its kind: jobplane's, or batch/v1's only
// on a cron service in drop-in mode; anything else is refused by field.
func TestTheCronJobsKindIsChecked(t *testing.T) {
	c := client(t) // not in drop-in mode
	for _, apiVersion := range []string{"batch/v1", "apps/v1", "jobplane.dev/v2"} {
		calls := map[string]error{}
		_, calls["TriggerCronJob"] = c.TriggerCronJob(context.Background(), &jobplanev1.TriggerCronJobRequest{Namespace: "a", Name: "c", ApiVersion: apiVersion})
		_, calls["BackfillCronJob"] = c.BackfillCronJob(context.Background(), &jobplanev1.BackfillCronJobRequest{Namespace: "a", Name: "c", ApiVersion: apiVersion,
			Start: planRequest(t).Now, End: planRequest(t).Now})
		stream, err := c.WatchJobInstances(context.Background(), &jobplanev1.WatchJobInstancesRequest{Namespace: "a", ApiVersion: apiVersion})
		if err == nil {
			_, err = stream.Recv()
		}
		calls["WatchJobInstances"] = err
		for rpc, err := range calls {
			found := false
			for _, v := range apierr.FieldViolations(err) {
				found = found || v.Field == "apiVersion"
			}
			if status.Code(err) != codes.InvalidArgument || !found {
				t.Errorf("%s with apiVersion %s: %v, want INVALID_ARGUMENT on apiVersion", rpc, apiVersion, err)
			}
		}
	}
}

// A backfill from year 1 would name a 52-character CronJob's Jobs with a
// minus sign and eleven characters more, past what a Job's name may be:
// refused by field, never a run failing again on every retry.
func TestBackfillWhoseJobNamesWouldBeTooLongIsRefused(t *testing.T) {
	_, err := client(t).BackfillCronJob(context.Background(), &jobplanev1.BackfillCronJobRequest{Namespace: "a", Name: strings.Repeat("c", 52),
		Start: timestamppb.New(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)), End: timestamppb.New(time.Date(2, 1, 1, 0, 0, 0, 0, time.UTC))})
	if v := apierr.FieldViolations(err); status.Code(err) != codes.InvalidArgument || len(v) != 1 || v[0].Field != "start" {
		t.Errorf("got %v, want INVALID_ARGUMENT on start", err)
	}
}
