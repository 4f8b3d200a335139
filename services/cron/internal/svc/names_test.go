package svc_test

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// Every RPC that names a CronJob checks its namespace (a DNS label) and
// name (a DNS subdomain) before anything else: INVALID_ARGUMENT with a field
// violation of that field, never INTERNAL, NOT_FOUND or a call to the API
// server.
func TestMalformedNamesAreInvalidArgumentOnEveryRPC(t *testing.T) {
	badNames := []string{"a/b", "..", "Upper", "-dash", "x y", "a_b"}
	badNamespaces := []string{"a/b", "..", "Upper", "a.b", "x y"}
	now := timestamppb.Now()
	rpcs := []struct {
		rpc string
		// namespacePath and namePath are where the request names the
		// CronJob; namePath is empty where it takes a namespace only.
		namespacePath, namePath string
		call                    func(c jobplanev1.CronServiceClient, namespace, name string) error
	}{
		{"CreateCronJob", "metadata.namespace", "metadata.name", func(c jobplanev1.CronServiceClient, namespace, name string) error {
			_, err := c.CreateCronJob(context.Background(), &jobplanev1.CreateCronJobRequest{CronJob: validCronJob(namespace, name)})
			return err
		}},
		{"GetCronJob", "namespace", "name", func(c jobplanev1.CronServiceClient, namespace, name string) error {
			_, err := c.GetCronJob(context.Background(), &jobplanev1.GetCronJobRequest{Namespace: namespace, Name: name})
			return err
		}},
		{"UpdateCronJob", "metadata.namespace", "metadata.name", func(c jobplanev1.CronServiceClient, namespace, name string) error {
			_, err := c.UpdateCronJob(context.Background(), &jobplanev1.UpdateCronJobRequest{CronJob: validCronJob(namespace, name)})
			return err
		}},
		{"DeleteCronJob", "namespace", "name", func(c jobplanev1.CronServiceClient, namespace, name string) error {
			_, err := c.DeleteCronJob(context.Background(), &jobplanev1.DeleteCronJobRequest{Namespace: namespace, Name: name})
			return err
		}},
		{"ListCronJobs", "namespace", "", func(c jobplanev1.CronServiceClient, namespace, _ string) error {
			_, err := c.ListCronJobs(context.Background(), &jobplanev1.ListCronJobsRequest{Namespace: namespace})
			return err
		}},
		{"TriggerCronJob", "namespace", "name", func(c jobplanev1.CronServiceClient, namespace, name string) error {
			_, err := c.TriggerCronJob(context.Background(), &jobplanev1.TriggerCronJobRequest{Namespace: namespace, Name: name})
			return err
		}},
		{"BackfillCronJob", "namespace", "name", func(c jobplanev1.CronServiceClient, namespace, name string) error {
			_, err := c.BackfillCronJob(context.Background(), &jobplanev1.BackfillCronJobRequest{Namespace: namespace, Name: name, Start: now, End: now})
			return err
		}},
		{"PlanCronJob", "cronJob.metadata.namespace", "cronJob.metadata.name", func(c jobplanev1.CronServiceClient, namespace, name string) error {
			req := planRequest(t)
			req.CronJob.Metadata.Namespace, req.CronJob.Metadata.Name = namespace, name
			_, err := c.PlanCronJob(context.Background(), req)
			return err
		}},
		{"WatchJobInstances", "namespace", "cronJobName", func(c jobplanev1.CronServiceClient, namespace, name string) error {
			stream, err := c.WatchJobInstances(context.Background(), &jobplanev1.WatchJobInstancesRequest{Namespace: namespace, CronJobName: name})
			if err != nil {
				return err
			}
			_, err = stream.Recv()
			return err
		}},
	}
	s := newStore(t)
	for _, r := range rpcs {
		t.Run(r.rpc, func(t *testing.T) {
			check := func(namespace, name, wantField string) {
				t.Helper()
				err := r.call(s.client, namespace, name)
				if status.Code(err) != codes.InvalidArgument {
					t.Fatalf("%s(%q, %q): %v, want InvalidArgument", r.rpc, namespace, name, err)
				}
				if got := violatedFields(err); !slices.Contains(got, wantField) {
					t.Errorf("%s(%q, %q): field violations %v, want one of %s", r.rpc, namespace, name, got, wantField)
				}
			}
			for _, ns := range badNamespaces {
				check(ns, "cj", r.namespacePath)
			}
			if r.namePath == "" {
				return
			}
			for _, name := range badNames {
				check("default", name, r.namePath)
			}
		})
	}
	if verbs := s.verbsCalled(); len(verbs) > 0 {
		t.Errorf("the API server was called: %v", verbs)
	}
}
