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
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/services/cron/internal/svc"
)

func client(t *testing.T) jobplanev1.CronServiceClient {
	srv := grpctest.Start(t, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.CronService_ServiceDesc, svc.NewCronService(svc.Config{}))
	})
	return jobplanev1.NewCronServiceClient(srv.Conn)
}

func TestPreviewScheduleListsRunsInTheZone(t *testing.T) {
	c := client(t)
	from := time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC)
	resp, err := c.PreviewSchedule(context.Background(), &jobplanev1.PreviewScheduleRequest{
		Schedule: "0 9 * * *", TimeZone: "Europe/Paris", From: timestamppb.New(from), Count: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Paris moves to summer time on 2026-03-29: 09:00 local is 08:00 UTC before, 07:00 UTC after.
	want := []struct{ utc, local string }{
		{"2026-03-28T08:00:00Z", "2026-03-28T09:00:00+01:00"},
		{"2026-03-29T07:00:00Z", "2026-03-29T09:00:00+02:00"},
		{"2026-03-30T07:00:00Z", "2026-03-30T09:00:00+02:00"},
	}
	if len(resp.GetRuns()) != len(want) {
		t.Fatalf("runs %v", resp.GetRuns())
	}
	for i, run := range resp.GetRuns() {
		if got := run.GetTime().AsTime().Format(time.RFC3339); got != want[i].utc {
			t.Errorf("run %d at %s, want %s", i, got, want[i].utc)
		}
		if run.GetLocalTime() != want[i].local {
			t.Errorf("run %d local %s, want %s", i, run.GetLocalTime(), want[i].local)
		}
	}
}

func TestPreviewScheduleDefaultsToTenRuns(t *testing.T) {
	resp, err := client(t).PreviewSchedule(context.Background(), &jobplanev1.PreviewScheduleRequest{
		Schedule: "@hourly", TimeZone: "UTC", From: timestamppb.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetRuns()) != 10 {
		t.Errorf("%d runs", len(resp.GetRuns()))
	}
}

// The list ends at year 9999, the last a Timestamp holds: the runs after it
// could not be written as JSON.
func TestPreviewScheduleEndsAtTheLastTimestamp(t *testing.T) {
	from := time.Date(9999, 12, 31, 23, 57, 30, 0, time.UTC)
	resp, err := client(t).PreviewSchedule(context.Background(), &jobplanev1.PreviewScheduleRequest{
		Schedule: "* * * * *", From: timestamppb.New(from), Count: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetRuns()) != 2 {
		t.Fatalf("runs %v, want 23:58 and 23:59 of 9999-12-31", resp.GetRuns())
	}
	for _, run := range resp.GetRuns() {
		if err := run.GetTime().CheckValid(); err != nil {
			t.Errorf("run %v: %v", run, err)
		}
	}
}

func TestPreviewScheduleRejectsBadInputWithFieldViolations(t *testing.T) {
	c := client(t)
	now := timestamppb.Now()
	cases := []struct {
		name   string
		req    *jobplanev1.PreviewScheduleRequest
		fields []string
	}{
		{"unparseable schedule", &jobplanev1.PreviewScheduleRequest{Schedule: "every day", From: now}, []string{"schedule"}},
		{"empty schedule", &jobplanev1.PreviewScheduleRequest{From: now}, []string{"schedule"}},
		{"TZ in schedule", &jobplanev1.PreviewScheduleRequest{Schedule: "TZ=UTC 0 * * * *", From: now}, []string{"schedule"}},
		{"Local zone", &jobplanev1.PreviewScheduleRequest{Schedule: "0 * * * *", TimeZone: "Local", From: now}, []string{"timeZone"}},
		{"unknown zone", &jobplanev1.PreviewScheduleRequest{Schedule: "0 * * * *", TimeZone: "Moon/Base", From: now}, []string{"timeZone"}},
		{"invalid from", &jobplanev1.PreviewScheduleRequest{Schedule: "0 * * * *", From: &timestamppb.Timestamp{Nanos: -1}}, []string{"from"}},
		{"count too large", &jobplanev1.PreviewScheduleRequest{Schedule: "0 * * * *", From: now, Count: 1001}, []string{"count"}},
		{"negative count", &jobplanev1.PreviewScheduleRequest{Schedule: "0 * * * *", From: now, Count: -1}, []string{"count"}},
		{"everything wrong", &jobplanev1.PreviewScheduleRequest{Schedule: "nope", TimeZone: "Local", Count: 5000, From: &timestamppb.Timestamp{Seconds: -1 << 62}}, []string{"count", "from", "schedule", "timeZone"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.PreviewSchedule(context.Background(), tc.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", err)
			}
			var got []string
			for _, v := range apierr.FieldViolations(err) {
				if len(got) == 0 || got[len(got)-1] != v.Field {
					got = append(got, v.Field)
				}
			}
			if len(got) != len(tc.fields) {
				t.Fatalf("violated fields %v, want %v (%v)", got, tc.fields, err)
			}
			for i := range got {
				if got[i] != tc.fields[i] {
					t.Errorf("violated fields %v, want %v", got, tc.fields)
				}
			}
		})
	}
}

func TestPreviewScheduleStartsFromNowByDefault(t *testing.T) {
	before := time.Now()
	resp, err := client(t).PreviewSchedule(context.Background(), &jobplanev1.PreviewScheduleRequest{Schedule: "@every 1m", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	runs := resp.GetRuns()
	if len(runs) != 2 {
		t.Fatalf("runs %v", runs)
	}
	first := runs[0].GetTime().AsTime()
	if !first.After(before) || first.After(time.Now().Add(time.Minute)) {
		t.Errorf("first run at %v, want within a minute after %v", first, before)
	}
}

func TestCronJobRPCsWithoutAClusterAreUnavailable(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	calls := map[string]func() error{
		"CreateCronJob": func() error {
			_, err := c.CreateCronJob(ctx, &jobplanev1.CreateCronJobRequest{CronJob: validCronJob("team-a", "nightly")})
			return err
		},
		"GetCronJob": func() error {
			_, err := c.GetCronJob(ctx, &jobplanev1.GetCronJobRequest{Namespace: "team-a", Name: "nightly"})
			return err
		},
		"ListCronJobs": func() error { _, err := c.ListCronJobs(ctx, &jobplanev1.ListCronJobsRequest{}); return err },
		"UpdateCronJob": func() error {
			_, err := c.UpdateCronJob(ctx, &jobplanev1.UpdateCronJobRequest{CronJob: validCronJob("team-a", "nightly")})
			return err
		},
		"DeleteCronJob": func() error {
			_, err := c.DeleteCronJob(ctx, &jobplanev1.DeleteCronJobRequest{Namespace: "team-a", Name: "nightly"})
			return err
		},
	}
	for rpc, call := range calls {
		err := call()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: got %v, want Unavailable", rpc, err)
		} else if msg := status.Convert(err).Message(); !strings.Contains(msg, rpc) {
			t.Errorf("%s: message does not name the RPC: %q", rpc, msg)
		}
	}
}
