package svc_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
)

// A Job's namespace (a DNS label) and name (a DNS subdomain) are checked on
// every RPC that takes a Job: INVALID_ARGUMENT with a field violation, never
// a plan creating pods named after a name no Job can have.
func TestMalformedJobNamesAreInvalidArgumentOnEveryRPC(t *testing.T) {
	c := client(t)
	rpcs := map[string]func(*jobplanev1.PlanSyncRequest) error{
		"PlanSync": func(req *jobplanev1.PlanSyncRequest) error {
			_, err := c.PlanSync(context.Background(), req)
			return err
		},
		"StreamPlanSync": func(req *jobplanev1.PlanSyncRequest) error {
			stream, err := c.StreamPlanSync(context.Background())
			if err != nil {
				return err
			}
			if err := stream.Send(&jobplanev1.StreamPlanSyncRequest{Id: "1", Request: req}); err != nil {
				return err
			}
			resp, err := stream.Recv()
			if err != nil {
				return err
			}
			return status.FromProto(resp.GetError()).Err()
		},
		"ValidateJob": func(req *jobplanev1.PlanSyncRequest) error {
			req.Job.Status = nil
			_, err := c.ValidateJob(context.Background(), &jobplanev1.ValidateJobRequest{Job: req.Job})
			return err
		},
	}
	cases := []struct {
		field, value string
	}{
		{"job.metadata.name", "a/b"}, {"job.metadata.name", ".."}, {"job.metadata.name", "Upper"}, {"job.metadata.name", "x y"},
		{"job.metadata.namespace", "a/b"}, {"job.metadata.namespace", "Upper"}, {"job.metadata.namespace", "a.b"},
	}
	for rpc, call := range rpcs {
		t.Run(rpc, func(t *testing.T) {
			for _, tc := range cases {
				req := loadRequest(t, "plansync-indexed-job.json")
				if tc.field == "job.metadata.name" {
					req.Job.Metadata.Name = tc.value
				} else {
					req.Job.Metadata.Namespace = tc.value
					for _, p := range req.Pods {
						p.Metadata.Namespace = tc.value
					}
				}
				err := call(req)
				if status.Code(err) != codes.InvalidArgument {
					t.Fatalf("%s %q: %v, want InvalidArgument", tc.field, tc.value, err)
				}
				found := false
				for _, v := range apierr.FieldViolations(err) {
					found = found || v.Field == tc.field
				}
				if !found {
					t.Errorf("%s %q: violations %v lack it", tc.field, tc.value, apierr.FieldViolations(err))
				}
			}
		})
	}
}
