package svc_test

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// Every RPC that names a Job checks its namespace (a DNS label) and name (a
// DNS subdomain) before anything else: INVALID_ARGUMENT with a field
// violation of that field, never INTERNAL (client-go refuses such names),
// UNAVAILABLE (a cache key that does not split) or NOT_FOUND, and nothing
// reaches the API server or the controller.
func TestMalformedNamesAreInvalidArgumentOnEveryRPC(t *testing.T) {
	badNames := []string{"a/b", "..", "Upper", "-dash", "x y", "a_b"}
	badNamespaces := []string{"a/b", "..", "Upper", "a.b", "x y"}
	rpcs := map[string]func(api jobplanev1.ExecutorServiceClient, namespace, name string) error{
		"SubmitJob": func(api jobplanev1.ExecutorServiceClient, namespace, name string) error {
			_, err := api.SubmitJob(context.Background(), &jobplanev1.SubmitJobRequest{Job: contractJob(t, namespace, name)})
			return err
		},
		"Execute": func(api jobplanev1.ExecutorServiceClient, namespace, name string) error {
			_, err := api.Execute(context.Background(), &jobplanev1.ExecuteRequest{Namespace: namespace, Name: name, Uid: "uid", Plan: &jobplanev1.SyncPlan{}})
			return err
		},
		"SyncJob": func(api jobplanev1.ExecutorServiceClient, namespace, name string) error {
			_, err := api.SyncJob(context.Background(), &jobplanev1.SyncJobRequest{Namespace: namespace, Name: name})
			return err
		},
		"GetJob": func(api jobplanev1.ExecutorServiceClient, namespace, name string) error {
			_, err := api.GetJob(context.Background(), &jobplanev1.GetJobRequest{Namespace: namespace, Name: name, IncludePods: true})
			return err
		},
		"DeleteJob": func(api jobplanev1.ExecutorServiceClient, namespace, name string) error {
			_, err := api.DeleteJob(context.Background(), &jobplanev1.DeleteJobRequest{Namespace: namespace, Name: name})
			return err
		},
		"ListJobs": func(api jobplanev1.ExecutorServiceClient, namespace, _ string) error {
			_, err := api.ListJobs(context.Background(), &jobplanev1.ListJobsRequest{Namespace: namespace})
			return err
		},
		"WatchJobs": func(api jobplanev1.ExecutorServiceClient, namespace, _ string) error {
			stream, err := api.WatchJobs(context.Background(), &jobplanev1.WatchJobsRequest{Namespace: namespace})
			if err != nil {
				return err
			}
			_, err = stream.Recv()
			return err
		},
	}
	// Where the request names the Job, and whether it names one at all
	// (a list or watch takes a namespace only).
	paths := map[string][2]string{
		"SubmitJob": {"job.metadata.namespace", "job.metadata.name"},
		"ListJobs":  {"namespace", ""},
		"WatchJobs": {"namespace", ""},
	}
	f := newFixture(t)
	check := func(t *testing.T, rpc, namespace, name, wantField string) {
		t.Helper()
		err := rpcs[rpc](f.api, namespace, name)
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%s(%q, %q): %v, want InvalidArgument", rpc, namespace, name, err)
		}
		if got := fields(err); !slices.Contains(got, wantField) {
			t.Errorf("%s(%q, %q): field violations %v, want one of %s", rpc, namespace, name, got, wantField)
		}
	}
	for rpc := range rpcs {
		namespacePath, namePath := "namespace", "name"
		if p, ok := paths[rpc]; ok {
			namespacePath, namePath = p[0], p[1]
		}
		t.Run(rpc, func(t *testing.T) {
			for _, ns := range badNamespaces {
				check(t, rpc, ns, "job", namespacePath)
			}
			if namePath == "" {
				return
			}
			for _, name := range badNames {
				check(t, rpc, "default", name, namePath)
			}
		})
	}
	if got := f.actions(); len(got) > 0 {
		t.Errorf("the API server was called: %v", got)
	}
	if len(f.runner.calls) > 0 {
		t.Errorf("the controller was called: %v", f.runner.calls)
	}
}
