package svc_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/auth"
	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/kubeconv"
)

var jobsResource = schema.GroupResource{Group: "batch", Resource: "jobs"}

// failing makes the fake clientset answer verb on Jobs with err.
func failing(verb string, err error) func(*fixture) {
	return func(f *fixture) {
		f.client.PrependReactor(verb, "jobs", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, err })
	}
}

// stored is a Job as the fake holds it after an earlier SubmitJob of
// contractJob (defaulted, managed by jobplane).
func stored(t *testing.T, namespace, name string, opts ...func(*jobplanev1.Job)) *batchv1.Job {
	t.Helper()
	f := newFixture(t)
	j := contractJob(t, namespace, name)
	for _, o := range opts {
		o(j)
	}
	resp, err := f.api.SubmitJob(context.Background(), &jobplanev1.SubmitJobRequest{Job: j})
	if err != nil {
		t.Fatal(err)
	}
	out, err := kubeconv.JobToKube(resp.GetJob(), kubeconv.FullTemplate)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSubmitJob(t *testing.T) {
	parallelism := func(n int32) func(*jobplanev1.Job) {
		return func(j *jobplanev1.Job) { j.Spec.Parallelism = proto.Int32(n) }
	}
	cases := []struct {
		name     string
		existing func(t *testing.T) []runtime.Object
		setup    func(*fixture)
		job      func(j *jobplanev1.Job) *jobplanev1.Job
		code     codes.Code
		fields   []string
		message  []string
		created  bool
		actions  []string
	}{
		{
			name:    "creates the Job, managed by jobplane when managedBy is empty",
			code:    codes.OK,
			created: true,
			actions: []string{"create jobs"},
		},
		{
			name:    "an explicit empty managedBy means jobplane's",
			job:     func(j *jobplanev1.Job) *jobplanev1.Job { j.Spec.ManagedBy = proto.String(""); return j },
			code:    codes.OK,
			created: true,
			actions: []string{"create jobs"},
		},
		{
			name:    "jobplane's own managedBy is kept",
			job:     func(j *jobplanev1.Job) *jobplanev1.Job { j.Spec.ManagedBy = proto.String(managedBy); return j },
			code:    codes.OK,
			created: true,
			actions: []string{"create jobs"},
		},
		{
			name:   "no Job",
			job:    func(*jobplanev1.Job) *jobplanev1.Job { return nil },
			code:   codes.InvalidArgument,
			fields: []string{"job"},
		},
		{
			name:   "an invalid Job is refused before the API server sees it",
			job:    func(j *jobplanev1.Job) *jobplanev1.Job { parallelism(-1)(j); j.Metadata.Namespace = ""; return j },
			code:   codes.InvalidArgument,
			fields: []string{"job.metadata.namespace", "job.spec.parallelism"},
		},
		{
			name: "a Job of another controller",
			job: func(j *jobplanev1.Job) *jobplanev1.Job {
				j.Spec.ManagedBy = proto.String("kubernetes.io/job-controller")
				return j
			},
			code:    codes.InvalidArgument,
			fields:  []string{"job.spec.managedBy"},
			message: []string{`"kubernetes.io/job-controller"`, managedBy},
		},
		{
			name: "a Job read back from the API server, with its resourceVersion",
			job: func(j *jobplanev1.Job) *jobplanev1.Job {
				j.Metadata.ResourceVersion = "12345"
				return j
			},
			code:   codes.InvalidArgument,
			fields: []string{"job.metadata.resourceVersion"},
		},
		{
			name:     "the same Job again is the existing one",
			existing: func(t *testing.T) []runtime.Object { return []runtime.Object{stored(t, "default", "work")} },
			code:     codes.OK,
			created:  false,
			actions:  []string{"create jobs", "get jobs", "create jobs dry-run"},
		},
		{
			name: "a different Job under the same name",
			existing: func(t *testing.T) []runtime.Object {
				return []runtime.Object{stored(t, "default", "work", parallelism(3))}
			},
			code:    codes.AlreadyExists,
			message: []string{"a different Job default/work already exists", "spec.parallelism"},
			actions: []string{"create jobs", "get jobs", "create jobs dry-run"},
		},
		{
			name:     "another controller's Job under the same name",
			existing: func(*testing.T) []runtime.Object { return []runtime.Object{job("default", "work", managedByOther)} },
			code:     codes.AlreadyExists,
			message:  []string{"not managed by " + managedBy, "kubernetes.io/job-controller"},
			actions:  []string{"create jobs", "get jobs"},
		},
		{
			name: "a Job being deleted under the same name",
			existing: func(t *testing.T) []runtime.Object {
				j := stored(t, "default", "work")
				j.DeletionTimestamp = ptr.To(metav1.Now())
				j.Finalizers = []string{"foregroundDeletion"}
				return []runtime.Object{j}
			},
			code:    codes.AlreadyExists,
			message: []string{"being deleted"},
			actions: []string{"create jobs", "get jobs"},
		},
		{
			name: "the API server's causes are field violations",
			setup: failing("create", apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "work", field.ErrorList{
				field.Required(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("image"), ""),
			})),
			code:    codes.InvalidArgument,
			fields:  []string{"job.spec.template.spec.containers[0].image"},
			actions: []string{"create jobs"},
		},
		{
			name:    "forbidden",
			setup:   failing("create", apierrors.NewForbidden(jobsResource, "work", errors.New("exceeded quota"))),
			code:    codes.PermissionDenied,
			message: []string{"exceeded quota"},
			actions: []string{"create jobs"},
		},
		{
			name:    "API server overloaded",
			setup:   failing("create", apierrors.NewTooManyRequests("slow down", 1)),
			code:    codes.Unavailable,
			actions: []string{"create jobs"},
		},
		{
			name:    "an unexpected API error is Internal, its cause kept in the log",
			setup:   failing("create", errors.New("etcd: corrupted")),
			code:    codes.Internal,
			actions: []string{"create jobs"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var existing []runtime.Object
			if tc.existing != nil {
				existing = tc.existing(t)
			}
			f := newFixture(t, existing...)
			if tc.setup != nil {
				tc.setup(f)
			}
			req := contractJob(t, "default", "work")
			if tc.job != nil {
				req = tc.job(req)
			}
			resp, err := f.api.SubmitJob(context.Background(), &jobplanev1.SubmitJobRequest{Job: req})
			wantStatus(t, err, tc.code, tc.message...)
			equal(t, "field violations", fields(err), tc.fields)
			equal(t, "API actions", f.actions(), tc.actions)
			if err != nil {
				return
			}
			if resp.GetCreated() != tc.created {
				t.Errorf("created = %v, want %v", resp.GetCreated(), tc.created)
			}
			got := resp.GetJob()
			if got.GetSpec().GetManagedBy() != managedBy || got.GetApiVersion() != "batch/v1" || got.GetKind() != "Job" {
				t.Errorf("answered Job: %v", got)
			}
			if got.GetSpec().GetBackoffLimit() != 6 {
				t.Errorf("answered Job not defaulted: %v", got.GetSpec())
			}
			if tc.created {
				stored, err := f.client.BatchV1().Jobs("default").Get(context.Background(), "work", metav1.GetOptions{})
				if err != nil || ptr.Deref(stored.Spec.ManagedBy, "") != managedBy {
					t.Errorf("stored Job: %v %v", stored, err)
				}
			}
		})
	}
}

func TestSubmitJobDoesNotChangeTheRequest(t *testing.T) {
	f := newFixture(t)
	req := contractJob(t, "default", "work")
	before := proto.Clone(req)
	if _, err := f.api.SubmitJob(context.Background(), &jobplanev1.SubmitJobRequest{Job: req}); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(req, before) {
		t.Errorf("request changed: %v", req)
	}
}

func TestSubmitJobComparesOnlyWhatTheSubmitterControls(t *testing.T) {
	// The API server adds the selector and the template labels from the
	// Job's name and UID; the existing Job carries them, a resubmission
	// does not.
	existing := stored(t, "default", "work")
	existing.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: "uid-1"}}
	existing.Spec.Template.Labels = map[string]string{
		batchv1.ControllerUidLabel: "uid-1", "controller-uid": "uid-1",
		batchv1.JobNameLabel: "work", "job-name": "work",
	}
	f := newFixture(t, existing)
	resp, err := f.api.SubmitJob(context.Background(), &jobplanev1.SubmitJobRequest{Job: contractJob(t, "default", "work")})
	if err != nil || resp.GetCreated() {
		t.Fatalf("got %v %v, want the existing Job", resp, err)
	}

	// A label of the submitter's in the template does count.
	labelled := contractJob(t, "default", "work")
	labelled.Spec.Template.Metadata = &jobplanev1.ObjectMeta{Labels: map[string]string{"team": "batch"}}
	_, err = f.api.SubmitJob(context.Background(), &jobplanev1.SubmitJobRequest{Job: labelled})
	wantStatus(t, err, codes.AlreadyExists, "spec.template.metadata.labels.team")

	// So does the pod spec.
	other := contractJob(t, "default", "work")
	other.Spec.Template.Spec.Fields["containers"] = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{
		structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"name": structpb.NewStringValue("main"), "image": structpb.NewStringValue("alpine")}}),
	}})
	_, err = f.api.SubmitJob(context.Background(), &jobplanev1.SubmitJobRequest{Job: other})
	wantStatus(t, err, codes.AlreadyExists, "spec.template.spec.containers[0].image")
}

func TestGetJob(t *testing.T) {
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("pod-" + name)}}
	}
	cases := []struct {
		name   string
		req    *jobplanev1.GetJobRequest
		code   codes.Code
		reason string
		fields []string
		pods   []string
	}{
		{name: "a Job of jobplane's", req: &jobplanev1.GetJobRequest{Namespace: "default", Name: "work"}},
		{name: "with its pods, by name", req: &jobplanev1.GetJobRequest{Namespace: "default", Name: "work", IncludePods: true}, pods: []string{"work-a", "work-b", "work-c"}},
		{name: "namespace and name are required", req: &jobplanev1.GetJobRequest{}, code: codes.InvalidArgument, reason: "INVALID_ARGUMENT", fields: []string{"name", "namespace"}},
		{name: "absent", req: &jobplanev1.GetJobRequest{Namespace: "default", Name: "gone"}, code: codes.NotFound, reason: "NOT_FOUND"},
		{name: "another controller's", req: &jobplanev1.GetJobRequest{Namespace: "default", Name: "theirs"}, code: codes.FailedPrecondition, reason: "NOT_MANAGED"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, job("default", "work"), job("default", "theirs", managedByOther))
			f.pods["uid-work"] = []*corev1.Pod{pod("work-c"), pod("work-a"), pod("work-b")}
			resp, err := f.api.GetJob(context.Background(), tc.req)
			wantStatus(t, err, tc.code)
			equal(t, "field violations", fields(err), tc.fields)
			if reason, _ := errorInfo(err); reason != tc.reason {
				t.Errorf("reason %q, want %q", reason, tc.reason)
			}
			equal(t, "API actions", f.actions(), nil) // reads come from the cache
			if err != nil {
				return
			}
			if resp.GetJob().GetMetadata().GetName() != tc.req.GetName() {
				t.Errorf("got Job %v", resp.GetJob().GetMetadata())
			}
			var pods []string
			for _, p := range resp.GetPods() {
				pods = append(pods, p.GetMetadata().GetName())
			}
			equal(t, "pods", pods, tc.pods)
		})
	}
}

func TestListJobs(t *testing.T) {
	objects := []runtime.Object{
		job("b", "two", withLabels(map[string]string{"team": "batch"})),
		job("a", "two"),
		job("a", "one", withLabels(map[string]string{"team": "batch"})),
		job("a", "theirs", managedByOther),
		job("c", "three", withLabels(map[string]string{"team": "web"})),
	}
	cases := []struct {
		name   string
		req    *jobplanev1.ListJobsRequest
		code   codes.Code
		fields []string
		pages  [][]string
	}{
		{name: "every namespace, only jobplane's, by namespace and name", req: &jobplanev1.ListJobsRequest{},
			pages: [][]string{{"a/one", "a/two", "b/two", "c/three"}}},
		{name: "one namespace", req: &jobplanev1.ListJobsRequest{Namespace: "a"},
			pages: [][]string{{"a/one", "a/two"}}},
		{name: "label selector", req: &jobplanev1.ListJobsRequest{LabelSelector: "team in (batch)"},
			pages: [][]string{{"a/one", "b/two"}}},
		{name: "pages", req: &jobplanev1.ListJobsRequest{PageSize: 3},
			pages: [][]string{{"a/one", "a/two", "b/two"}, {"c/three"}}},
		{name: "pages that end at the last Job", req: &jobplanev1.ListJobsRequest{PageSize: 2},
			pages: [][]string{{"a/one", "a/two"}, {"b/two", "c/three"}}},
		{name: "nothing matches", req: &jobplanev1.ListJobsRequest{Namespace: "d"}, pages: [][]string{nil}},
		{name: "bad selector", req: &jobplanev1.ListJobsRequest{LabelSelector: "team in batch"}, code: codes.InvalidArgument, fields: []string{"labelSelector"}},
		{name: "negative page size", req: &jobplanev1.ListJobsRequest{PageSize: -1}, code: codes.InvalidArgument, fields: []string{"pageSize"}},
		{name: "page size over the maximum", req: &jobplanev1.ListJobsRequest{PageSize: 1001}, code: codes.InvalidArgument, fields: []string{"pageSize"}},
		{name: "token that is not base64", req: &jobplanev1.ListJobsRequest{PageToken: "not a token!"}, code: codes.InvalidArgument, fields: []string{"pageToken"}},
		{name: "token without namespace/name", req: &jobplanev1.ListJobsRequest{PageToken: "bm9zbGFzaA"}, code: codes.InvalidArgument, fields: []string{"pageToken"}},
		{name: "every violation at once", req: &jobplanev1.ListJobsRequest{LabelSelector: "=", PageSize: -5, PageToken: "%"},
			code: codes.InvalidArgument, fields: []string{"labelSelector", "pageSize", "pageToken"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, objects...)
			req := proto.Clone(tc.req).(*jobplanev1.ListJobsRequest)
			for i := 0; ; i++ {
				resp, err := f.api.ListJobs(context.Background(), req)
				wantStatus(t, err, tc.code)
				equal(t, "field violations", fields(err), tc.fields)
				if err != nil {
					return
				}
				if i >= len(tc.pages) {
					t.Fatalf("page %d is one too many: %v", i, names(resp.GetJobs()))
				}
				equal(t, "page", names(resp.GetJobs()), tc.pages[i])
				if resp.GetNextPageToken() == "" {
					if i != len(tc.pages)-1 {
						t.Errorf("%d pages, want %d", i+1, len(tc.pages))
					}
					break
				}
				req.PageToken = resp.GetNextPageToken()
			}
			equal(t, "API actions", f.actions(), nil)
		})
	}
}

func TestDeleteJob(t *testing.T) {
	conflict := apierrors.NewConflict(jobsResource, "work", errors.New("Precondition failed: UID in precondition: uid-work, UID in object meta: uid-new"))
	cases := []struct {
		name        string
		req         *jobplanev1.DeleteJobRequest
		setup       func(*fixture)
		code        codes.Code
		reason      string
		fields      []string
		actions     []string
		propagation metav1.DeletionPropagation
	}{
		{name: "background by default", req: &jobplanev1.DeleteJobRequest{Namespace: "default", Name: "work"},
			actions: []string{"get jobs", "delete jobs"}, propagation: metav1.DeletePropagationBackground},
		{name: "foreground", req: &jobplanev1.DeleteJobRequest{Namespace: "default", Name: "work", PropagationPolicy: "Foreground"},
			actions: []string{"get jobs", "delete jobs"}, propagation: metav1.DeletePropagationForeground},
		{name: "orphan, with the right UID", req: &jobplanev1.DeleteJobRequest{Namespace: "default", Name: "work", Uid: "uid-work", PropagationPolicy: "Orphan"},
			actions: []string{"get jobs", "delete jobs"}, propagation: metav1.DeletePropagationOrphan},
		{name: "unknown propagation policy", req: &jobplanev1.DeleteJobRequest{Namespace: "default", Name: "work", PropagationPolicy: "background"},
			code: codes.InvalidArgument, reason: "INVALID_ARGUMENT", fields: []string{"propagationPolicy"}},
		{name: "namespace and name are required", req: &jobplanev1.DeleteJobRequest{},
			code: codes.InvalidArgument, reason: "INVALID_ARGUMENT", fields: []string{"name", "namespace"}},
		{name: "absent", req: &jobplanev1.DeleteJobRequest{Namespace: "default", Name: "gone"},
			code: codes.NotFound, reason: "NOT_FOUND", actions: []string{"get jobs"}},
		{name: "wrong UID", req: &jobplanev1.DeleteJobRequest{Namespace: "default", Name: "work", Uid: "uid-old"},
			code: codes.FailedPrecondition, reason: "UID_MISMATCH", actions: []string{"get jobs"}},
		{name: "another controller's Job", req: &jobplanev1.DeleteJobRequest{Namespace: "default", Name: "theirs"},
			code: codes.FailedPrecondition, reason: "NOT_MANAGED", actions: []string{"get jobs"}},
		{name: "replaced between the read and the delete", req: &jobplanev1.DeleteJobRequest{Namespace: "default", Name: "work"},
			setup: failing("delete", conflict), code: codes.FailedPrecondition, reason: "UID_MISMATCH",
			actions: []string{"get jobs", "delete jobs"}, propagation: metav1.DeletePropagationBackground},
		{name: "deleted between the read and the delete", req: &jobplanev1.DeleteJobRequest{Namespace: "default", Name: "work"},
			setup: failing("delete", apierrors.NewNotFound(jobsResource, "work")), code: codes.NotFound, reason: "NOT_FOUND",
			actions: []string{"get jobs", "delete jobs"}, propagation: metav1.DeletePropagationBackground},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, job("default", "work"), job("default", "theirs", managedByOther))
			if tc.setup != nil {
				tc.setup(f)
			}
			_, err := f.api.DeleteJob(context.Background(), tc.req)
			wantStatus(t, err, tc.code)
			equal(t, "field violations", fields(err), tc.fields)
			if reason, _ := errorInfo(err); reason != tc.reason {
				t.Errorf("reason %q, want %q", reason, tc.reason)
			}
			equal(t, "API actions", f.actions(), tc.actions)
			for _, a := range f.client.Actions() {
				if del, ok := a.(k8stesting.DeleteActionImpl); ok {
					opts := del.DeleteOptions
					if opts.Preconditions == nil || ptr.Deref(opts.Preconditions.UID, "") != "uid-work" {
						t.Errorf("delete without the UID read as precondition: %+v", opts.Preconditions)
					}
					if ptr.Deref(opts.PropagationPolicy, "") != tc.propagation {
						t.Errorf("propagation %v, want %v", ptr.Deref(opts.PropagationPolicy, ""), tc.propagation)
					}
				}
			}
		})
	}
}

// The Job is created as the caller (grpctest's callers are anonymous), a
// resubmission read and dry-run as the caller too; deletions stay the
// executor's.
func TestSubmitJobActsAsTheCaller(t *testing.T) {
	f := newFixture(t)
	for range 2 {
		if _, err := f.api.SubmitJob(context.Background(), &jobplanev1.SubmitJobRequest{Job: contractJob(t, "default", "mine")}); err != nil {
			t.Fatal(err)
		}
	}
	equal(t, "impersonated", *f.impersonated, []string{auth.AnonymousUser, auth.AnonymousUser})
	equal(t, "actions", f.actions(), []string{"create jobs", "create jobs", "get jobs", "create jobs dry-run"})
}

// keyRecorder is the Jobs client of an impersonated caller, recording the
// fair limiter's lane of each creation's context, and its Job key if any.
type keyRecorder struct {
	typedbatchv1.BatchV1Interface
	keys *[]string
}

func (r keyRecorder) Jobs(namespace string) typedbatchv1.JobInterface {
	return keyRecordingJobs{r.BatchV1Interface.Jobs(namespace), r.keys}
}

type keyRecordingJobs struct {
	typedbatchv1.JobInterface
	keys *[]string
}

func (r keyRecordingJobs) Create(ctx context.Context, job *batchv1.Job, opts metav1.CreateOptions) (*batchv1.Job, error) {
	*r.keys = append(*r.keys, fairlimit.LaneOf(ctx)+" key="+fairlimit.KeyOf(ctx))
	return r.JobInterface.Create(ctx, job, opts)
}

// A named submission waits in its Job's lane of the fair limiter, the lane
// of the Job's syncs, without counting as the Job's work; a generateName
// one waits in its namespace's lane, never in the lane of unkeyed requests.
func TestSubmitJobCreatesInTheJobsLane(t *testing.T) {
	f := newFixture(t)
	var keys []string
	api := f.serve(t, func(caller *auth.Identity) (typedbatchv1.BatchV1Interface, error) {
		c, err := f.impersonate(caller)
		return keyRecorder{c, &keys}, err
	})
	named := contractJob(t, "default", "mine")
	generated := contractJob(t, "default", "")
	generated.Metadata.GenerateName = "run-"
	for _, job := range []*jobplanev1.Job{named, generated} {
		if _, err := api.SubmitJob(context.Background(), &jobplanev1.SubmitJobRequest{Job: job}); err != nil {
			t.Fatal(err)
		}
	}
	equal(t, "lanes", keys, []string{"default/mine key=", "default/ key="})
}

// In drop-in mode the executor is the cluster's Job controller: a Job
// submitted without spec.managedBy is created as kubectl would create it (as
// the built-in CronJob controller creates a batch/v1 CronJob's runs), and
// the built-in controller's Jobs are its own to read and delete.
func TestSubmitJobInDropInModeKeepsAPlainJobPlain(t *testing.T) {
	f := newFixture(t, job("default", "builtin", managedByOther))
	f.dropIn = true
	api := f.serve(t, f.impersonate)
	resp, err := api.SubmitJob(context.Background(), &jobplanev1.SubmitJobRequest{Job: contractJob(t, "default", "plain")})
	if err != nil {
		t.Fatal(err)
	}
	if m := resp.GetJob().GetSpec().ManagedBy; m != nil {
		t.Errorf("spec.managedBy %q, want it unset", *m)
	}
	created, err := f.client.BatchV1().Jobs("default").Get(context.Background(), "plain", metav1.GetOptions{})
	if err != nil || created.Spec.ManagedBy != nil {
		t.Errorf("stored Job %v (%v), want spec.managedBy unset", created, err)
	}
	if _, err := api.GetJob(context.Background(), &jobplanev1.GetJobRequest{Namespace: "default", Name: "builtin"}); err != nil {
		t.Errorf("GetJob of the built-in controller's Job: %v", err)
	}
	other := contractJob(t, "default", "elsewhere")
	other.Spec.ManagedBy = proto.String("example.com/other")
	if _, err := api.SubmitJob(context.Background(), &jobplanev1.SubmitJobRequest{Job: other}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a Job of another controller: %v, want INVALID_ARGUMENT", err)
	}
}
