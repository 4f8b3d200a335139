package auth_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jobplane/jobplane/lib/admission"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/auth"
)

// Every RPC of every service has an entry: by the generated service
// descriptors, and by every service of package jobplane.v1 in the proto
// registry, so that a new service is covered too.
func TestEveryRPCHasARule(t *testing.T) {
	var methods []string
	for _, desc := range []*grpc.ServiceDesc{
		&jobplanev1.PlannerService_ServiceDesc,
		&jobplanev1.ExecutorService_ServiceDesc,
		&jobplanev1.CronService_ServiceDesc,
	} {
		for _, m := range desc.Methods {
			methods = append(methods, "/"+desc.ServiceName+"/"+m.MethodName)
		}
		for _, s := range desc.Streams {
			methods = append(methods, "/"+desc.ServiceName+"/"+s.StreamName)
		}
	}
	protoregistry.GlobalFiles.RangeFilesByPackage("jobplane.v1", func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			s := f.Services().Get(i)
			for j := range s.Methods().Len() {
				methods = append(methods, "/"+string(s.FullName())+"/"+string(s.Methods().Get(j).Name()))
			}
		}
		return true
	})
	if len(methods) < 2*len(auth.Rules) {
		t.Fatalf("found only %d methods (twice over) for %d rules: are the services registered?", len(methods), len(auth.Rules))
	}
	for _, m := range methods {
		if _, ok := auth.Rules[m]; !ok {
			t.Errorf("%s has no entry in auth.Rules", m)
		}
	}
	for m := range auth.Rules {
		if !slices.Contains(methods, m) {
			t.Errorf("auth.Rules has an entry for %s, which no service has", m)
		}
	}
}

// Every rule that needs a permission names its resource and reads its
// request type (a wrong request type would refuse every call).
func TestEveryRuleReadsItsRequest(t *testing.T) {
	requests := map[string]any{}
	protoregistry.GlobalFiles.RangeFilesByPackage("jobplane.v1", func(f protoreflect.FileDescriptor) bool {
		for i := range f.Services().Len() {
			s := f.Services().Get(i)
			for j := range s.Methods().Len() {
				m := s.Methods().Get(j)
				mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
				if err != nil {
					t.Fatal(err)
				}
				requests["/"+string(s.FullName())+"/"+string(m.Name())] = mt.New().Interface()
			}
		}
		return true
	})
	for method, rule := range auth.Rules {
		if rule.AuthenticationOnly() {
			if rule.Object != nil || rule.More != nil || rule.Resource != "" {
				t.Errorf("%s needs authentication only but names a permission", method)
			}
			continue
		}
		if rule.Resource == "" || rule.Object == nil {
			t.Errorf("%s: incomplete rule %+v", method, rule)
			continue
		}
		if _, ok := rule.Attributes(requests[method]); !ok {
			t.Errorf("%s: the rule does not read the RPC's request type %T", method, requests[method])
		}
	}
}

func TestForbiddenMessageIsTheAPIServers(t *testing.T) {
	for _, tc := range []struct {
		a    auth.Attributes
		want string
	}{
		{auth.Attributes{Verb: "create", Group: "batch", Resource: "jobs", Namespace: "b"},
			`User "alice" cannot create resource "jobs" in API group "batch" in the namespace "b"`},
		{auth.Attributes{Verb: "update", Group: "batch", Resource: "jobs", Subresource: "status", Namespace: "b", Name: "j"},
			`User "alice" cannot update resource "jobs/status" in API group "batch" in the namespace "b"`},
		{auth.Attributes{Verb: "watch", Group: "batch", Resource: "jobs"},
			`User "alice" cannot watch resource "jobs" in API group "batch" at the cluster scope`},
	} {
		if got := auth.ForbiddenMessage("alice", tc.a); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

// The contracts say, in each RPC's comment, what the table says: the
// comments are what a caller reads.
func TestTheContractsDocumentEveryRule(t *testing.T) {
	comments := rpcComments(t, filepath.Join("..", "..", "proto", "jobplane", "v1"))
	for method, rule := range auth.Rules {
		svc, rpc, _ := strings.Cut(strings.TrimPrefix(method, "/jobplane.v1."), "/")
		want := "Authorization: authentication only"
		if !rule.AuthenticationOnly() {
			resource := rule.Resource
			if rule.Group != "" {
				resource += "." + rule.Group
			}
			if rule.Subresource != "" {
				resource += ", subresource " + rule.Subresource
			}
			want = "Authorization: " + rule.Verb + " " + resource
		}
		comment, ok := comments[svc+"/"+rpc]
		if !ok {
			t.Errorf("%s not found in the .proto files", method)
			continue
		}
		if !strings.Contains(comment, want) {
			t.Errorf("the comment of %s does not say %q:\n%s", method, want, comment)
		}
	}
}

// rpcComments reads the leading comment of every rpc in the .proto files
// of dir, by "Service/Method", its lines joined by spaces (the generated
// descriptors carry no comments).
func rpcComments(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.proto"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no .proto files in %s: %v", dir, err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var service string
		var comment []string
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(line, "service "):
				service = strings.Fields(line)[1]
				comment = nil
			case strings.HasPrefix(line, "//"):
				comment = append(comment, strings.TrimSpace(strings.TrimPrefix(line, "//")))
			case strings.HasPrefix(line, "rpc "):
				name, _, _ := strings.Cut(strings.TrimPrefix(line, "rpc "), "(")
				out[service+"/"+name] = strings.Join(strings.Fields(strings.Join(comment, " ")), " ")
				comment = nil
			default:
				comment = nil
			}
		}
	}
	return out
}

func TestClassOf(t *testing.T) {
	for method, want := range map[string]string{
		jobplanev1.ExecutorService_GetJob_FullMethodName:      admission.ClassRead,
		jobplanev1.ExecutorService_WatchJobs_FullMethodName:   admission.ClassRead,
		jobplanev1.ExecutorService_SubmitJob_FullMethodName:   admission.ClassWrite,
		jobplanev1.ExecutorService_Execute_FullMethodName:     admission.ClassWrite,
		jobplanev1.CronService_TriggerCronJob_FullMethodName:  admission.ClassWrite,
		jobplanev1.PlannerService_PlanSync_FullMethodName:     admission.ClassCompute,
		jobplanev1.CronService_PreviewSchedule_FullMethodName: admission.ClassCompute,
		"/unknown.Service/Method":                             "",
	} {
		if got := auth.ClassOf(method); got != want {
			t.Errorf("ClassOf(%s) = %q, want %q", method, got, want)
		}
	}
}

// A batch/v1 CronJob's runs and watches are authorized on cronjobs.batch,
// jobplane's on cronjobs.jobplane.dev: permission on one kind is none on
// the other.
func TestCronJobRPCsAskForTheirKindsGroup(t *testing.T) {
	for _, tc := range []struct {
		method string
		req    any
		group  string
	}{
		{jobplanev1.CronService_TriggerCronJob_FullMethodName, &jobplanev1.TriggerCronJobRequest{Namespace: "a", Name: "c"}, "jobplane.dev"},
		{jobplanev1.CronService_TriggerCronJob_FullMethodName, &jobplanev1.TriggerCronJobRequest{Namespace: "a", Name: "c", ApiVersion: "batch/v1"}, "batch"},
		{jobplanev1.CronService_BackfillCronJob_FullMethodName, &jobplanev1.BackfillCronJobRequest{Namespace: "a", Name: "c", ApiVersion: "batch/v1"}, "batch"},
		{jobplanev1.CronService_WatchJobInstances_FullMethodName, &jobplanev1.WatchJobInstancesRequest{Namespace: "a", ApiVersion: "batch/v1"}, "batch"},
		{jobplanev1.CronService_WatchJobInstances_FullMethodName, &jobplanev1.WatchJobInstancesRequest{Namespace: "a", ApiVersion: "jobplane.dev/v1"}, "jobplane.dev"},
		// Anything else is refused by the RPC; asked on jobplane's group.
		{jobplanev1.CronService_TriggerCronJob_FullMethodName, &jobplanev1.TriggerCronJobRequest{Namespace: "a", Name: "c", ApiVersion: "apps/v1"}, "jobplane.dev"},
	} {
		attrs, ok := auth.Rules[tc.method].Attributes(tc.req)
		if !ok || len(attrs) != 1 || attrs[0].Group != tc.group || attrs[0].Resource != "cronjobs" || attrs[0].Namespace != "a" {
			t.Errorf("%s %v: attributes %+v, want cronjobs.%s in a", tc.method, tc.req, attrs, tc.group)
		}
	}
}
