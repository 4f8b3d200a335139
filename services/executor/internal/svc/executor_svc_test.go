package svc_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
	batchv1listers "k8s.io/client-go/listers/batch/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/auth"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/executor/internal/svc"
)

const managedBy = "jobplane.dev/executor"

// fixture is the service over bufconn with a fake clientset for writes and
// watches, an informer-style lister for reads, and a fake controller.
type fixture struct {
	client *fake.Clientset
	// impersonated lists the callers SubmitJob acted as.
	impersonated *[]string
	cache        cache.Indexer
	pods         map[types.UID][]*corev1.Pod
	runner       *fakeRunner
	api          jobplanev1.ExecutorServiceClient
	done         chan struct{}
	// dropIn serves as an executor in drop-in mode (serve again after
	// setting it).
	dropIn bool
}

func newFixture(t *testing.T, objects ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{
		client: fake.NewClientset(objects...),
		cache:  cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		pods:   map[types.UID][]*corev1.Pod{},
		runner: &fakeRunner{leader: true},
		done:   make(chan struct{}),

		impersonated: &[]string{},
	}
	// The fake clientset stores dry runs and ignores generateName; the API
	// server does neither.
	f.client.PrependReactor("create", "jobs", func(action k8stesting.Action) (bool, runtime.Object, error) {
		create := action.(k8stesting.CreateActionImpl)
		if len(create.CreateOptions.DryRun) == 0 {
			return false, nil, nil
		}
		job := create.GetObject().(*batchv1.Job).DeepCopy()
		if job.Name == "" {
			job.Name = job.GenerateName + "x7k2q"
		}
		return true, job, nil
	})
	for _, o := range objects {
		if job, ok := o.(*batchv1.Job); ok {
			if err := f.cache.Add(job); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.api = f.serve(t, f.impersonate)
	f.client.ClearActions()
	return f
}

// serve starts the service on the fixture's clients, acting as callers with
// impersonate, and returns a client of it.
func (f *fixture) serve(t *testing.T, impersonate func(*auth.Identity) (typedbatchv1.BatchV1Interface, error)) jobplanev1.ExecutorServiceClient {
	t.Helper()
	srv := grpctest.Start(t, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.ExecutorService_ServiceDesc, svc.NewExecutorService(svc.Config{
			Client:      f.client,
			Impersonate: impersonate,
			Jobs:        batchv1listers.NewJobLister(f.cache),
			PodsOf:      func(job *batchv1.Job) ([]*corev1.Pod, error) { return f.pods[job.UID], nil },
			Runner:      f.runner,
			ManagedBy:   managedBy,
			DropIn:      f.dropIn,
			Log:         slog.New(slog.DiscardHandler),
			Done:        f.done,
		}))
	})
	return jobplanev1.NewExecutorServiceClient(srv.Conn)
}

// impersonate records the caller and acts as the executor: the fake
// clientset has no RBAC.
func (f *fixture) impersonate(caller *auth.Identity) (typedbatchv1.BatchV1Interface, error) {
	*f.impersonated = append(*f.impersonated, caller.User)
	return f.client.BatchV1(), nil
}

// actions are the API calls the fake clientset recorded, as "verb resource"
// ("create jobs", "create jobs dry-run", "delete jobs").
func (f *fixture) actions() []string {
	var out []string
	for _, a := range f.client.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if c, ok := a.(k8stesting.CreateActionImpl); ok && len(c.CreateOptions.DryRun) > 0 {
			s += " dry-run"
		}
		out = append(out, s)
	}
	return out
}

type fakeRunner struct {
	mu     sync.Mutex
	leader bool
	holder string

	// What the next call answers.
	plan     *plan.Plan
	outcomes []*jobplanev1.ActionOutcome
	job      *batchv1.Job
	err      error

	// What the calls were.
	calls []string
	uid   types.UID
	got   *plan.Plan
}

func (r *fakeRunner) Execute(_ context.Context, namespace, name string, uid types.UID, p *plan.Plan) ([]*jobplanev1.ActionOutcome, *batchv1.Job, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "Execute "+namespace+"/"+name)
	r.uid, r.got = uid, p
	return r.outcomes, r.job, r.err
}

func (r *fakeRunner) SyncJob(_ context.Context, namespace, name string) (*plan.Plan, []*jobplanev1.ActionOutcome, *batchv1.Job, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "SyncJob "+namespace+"/"+name)
	return r.plan, r.outcomes, r.job, r.err
}

func (r *fakeRunner) Leader() (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader, r.holder
}

func (r *fakeRunner) standby(holder string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leader, r.holder = false, holder
}

// job is a stored Job: managed by jobplane unless told otherwise.
func job(namespace, name string, opts ...func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "7"},
		Spec: batchv1.JobSpec{
			ManagedBy: ptr.To(managedBy),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			}},
		},
	}
	for _, o := range opts {
		o(j)
	}
	return j
}

func managedByOther(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To("kubernetes.io/job-controller") }

func withLabels(l map[string]string) func(*batchv1.Job) {
	return func(j *batchv1.Job) { j.Labels = l }
}

// contractJob is a Job as a client submits it.
func contractJob(t *testing.T, namespace, name string) *jobplanev1.Job {
	t.Helper()
	spec, err := structpb.NewStruct(map[string]any{
		"restartPolicy": "Never",
		"containers":    []any{map[string]any{"name": "main", "image": "busybox"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &jobplanev1.Job{
		Metadata: &jobplanev1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:     &jobplanev1.JobSpec{Template: &jobplanev1.PodTemplateSpec{Spec: spec}},
	}
}

// fields are the paths of err's field violations.
func fields(err error) []string {
	var out []string
	for _, v := range apierr.FieldViolations(err) {
		out = append(out, v.Field)
	}
	return out
}

// errorInfo returns the reason and metadata of err's ErrorInfo.
func errorInfo(err error) (string, map[string]string) {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason(), info.GetMetadata()
		}
	}
	return "", nil
}

// wantStatus fails unless err has code and, when given, contains every
// fragment.
func wantStatus(t *testing.T, err error, code codes.Code, fragments ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want %v", err, code)
	}
	for _, f := range fragments {
		if !strings.Contains(status.Convert(err).Message(), f) {
			t.Errorf("message %q does not say %q", status.Convert(err).Message(), f)
		}
	}
}

func equal[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

func TestExecutorIsHealthy(t *testing.T) {
	srv := grpctest.Start(t, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.ExecutorService_ServiceDesc, svc.NewExecutorService(svc.Config{}))
	})
	resp, err := healthpb.NewHealthClient(srv.Conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "jobplane.v1.ExecutorService"})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", resp, err)
	}
}

func TestConfigValidateNamesEveryMissingDependency(t *testing.T) {
	err := svc.Config{}.Validate()
	for _, f := range []string{"Client", "Impersonate", "Jobs", "PodsOf", "Runner"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("Validate() = %v, does not name %s", err, f)
		}
	}
	f := newFixture(t)
	cfg := svc.Config{Client: f.client, Impersonate: f.impersonate, Jobs: batchv1listers.NewJobLister(f.cache), PodsOf: func(*batchv1.Job) ([]*corev1.Pod, error) { return nil, nil }, Runner: f.runner}
	if err := cfg.Validate(); err != nil {
		t.Errorf("complete config: %v", err)
	}
}

func TestWritesOnAStandbyAnswerWhoLeads(t *testing.T) {
	cases := map[string]struct {
		holder   string
		message  string
		metadata map[string]string
	}{
		"leader known":   {holder: "executor-0_1234", message: "not the leader; the leader is executor-0_1234", metadata: map[string]string{"leader": "executor-0_1234"}},
		"leader unknown": {message: "not the leader; the leader is unknown"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, job("default", "work"))
			f.runner.standby(tc.holder)
			ctx := context.Background()
			calls := map[string]func() error{
				"SubmitJob": func() error {
					_, err := f.api.SubmitJob(ctx, &jobplanev1.SubmitJobRequest{Job: contractJob(t, "default", "new")})
					return err
				},
				"DeleteJob": func() error {
					_, err := f.api.DeleteJob(ctx, &jobplanev1.DeleteJobRequest{Namespace: "default", Name: "work"})
					return err
				},
				"Execute": func() error {
					_, err := f.api.Execute(ctx, &jobplanev1.ExecuteRequest{Namespace: "default", Name: "work", Uid: "uid-work", Plan: &jobplanev1.SyncPlan{}})
					return err
				},
				"SyncJob": func() error {
					_, err := f.api.SyncJob(ctx, &jobplanev1.SyncJobRequest{Namespace: "default", Name: "work"})
					return err
				},
			}
			for _, rpc := range slices.Sorted(maps.Keys(calls)) {
				err := calls[rpc]()
				if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != tc.message {
					t.Errorf("%s: got %v, want Unavailable %q", rpc, err, tc.message)
				}
				if reason, meta := errorInfo(err); reason != "NOT_LEADER" || !maps.Equal(meta, tc.metadata) {
					t.Errorf("%s: ErrorInfo %s %v, want NOT_LEADER %v", rpc, reason, meta, tc.metadata)
				}
			}
			equal(t, "API actions", f.actions(), nil)
			equal(t, "controller calls", f.runner.calls, nil)

			// Reads are served by a standby.
			if _, err := f.api.GetJob(ctx, &jobplanev1.GetJobRequest{Namespace: "default", Name: "work"}); err != nil {
				t.Errorf("GetJob on a standby: %v", err)
			}
			if _, err := f.api.ListJobs(ctx, &jobplanev1.ListJobsRequest{}); err != nil {
				t.Errorf("ListJobs on a standby: %v", err)
			}
		})
	}
}

func names(jobs []*jobplanev1.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, fmt.Sprintf("%s/%s", j.GetMetadata().GetNamespace(), j.GetMetadata().GetName()))
	}
	return out
}
