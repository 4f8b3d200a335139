package svc_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/auth"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/lib/kubetest"
	"github.com/jobplane/jobplane/services/executor/internal/svc"
)

// realAPI is the service against a real kube-apiserver, reading through a
// real Job informer.
type realAPI struct {
	kube kubernetes.Interface
	api  jobplanev1.ExecutorServiceClient
}

func startRealAPI(t *testing.T) *realAPI {
	t.Helper()
	apiserver := kubetest.StartAPIServer(t)
	factory := informers.NewSharedInformerFactory(apiserver.Client, 0)
	jobs := factory.Batch().V1().Jobs()
	lister := jobs.Lister()
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
	for typ, ok := range factory.WaitForCacheSync(stop) {
		if !ok {
			t.Fatalf("%v cache did not sync", typ)
		}
	}
	// grpctest's callers are anonymous and SubmitJob acts as its caller:
	// here the anonymous user may write Jobs everywhere.
	grantEverywhere(t, apiserver.Client, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: auth.AnonymousUser},
		rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "create"}})
	impersonate, err := svc.Impersonating(apiserver.Config)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpctest.Start(t, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.ExecutorService_ServiceDesc, svc.NewExecutorService(svc.Config{
			Client:      apiserver.Client,
			Impersonate: impersonate,
			Jobs:        lister,
			PodsOf:      func(*batchv1.Job) ([]*corev1.Pod, error) { return nil, nil },
			Runner:      &fakeRunner{leader: true},
			ManagedBy:   managedBy,
			Log:         slog.New(slog.DiscardHandler),
		}))
	})
	return &realAPI{kube: apiserver.Client, api: jobplanev1.NewExecutorServiceClient(srv.Conn)}
}

func (r *realAPI) namespace(t *testing.T, name string) string {
	t.Helper()
	_, err := r.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// richJob uses what the API server defaults in a pod template (image pull
// policy, termination message path, DNS policy, ...), labels of the
// submitter's and an indexed completion mode.
func richJob(t *testing.T, namespace, name string) *jobplanev1.Job {
	t.Helper()
	j := contractJob(t, namespace, name)
	j.Spec.CompletionMode = proto.String("Indexed")
	j.Spec.Completions = proto.Int32(100)
	j.Spec.Parallelism = proto.Int32(4)
	j.Spec.Template.Metadata = &jobplanev1.ObjectMeta{Labels: map[string]string{"team": "batch"}}
	j.Spec.Template.Spec.Fields["containers"] = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{
		structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"name": structpb.NewStringValue("main"), "image": structpb.NewStringValue("busybox:1.36"),
			"ports": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{
				structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"containerPort": structpb.NewNumberValue(8080)}}),
			}}),
		}}),
	}})
	return j
}

func TestAgainstTheAPIServer(t *testing.T) {
	r := startRealAPI(t)
	ctx := context.Background()

	t.Run("SubmitJob is idempotent", func(t *testing.T) {
		cases := map[string]*jobplanev1.Job{
			"plain":   contractJob(t, "default", "plain"),
			"rich":    richJob(t, "default", "rich"),
			"dotted":  contractJob(t, "default", "nightly.run01"),     // its dry run cannot be named "nightly.xxxxx"
			"longest": richJob(t, "default", strings.Repeat("n", 60)), // pods' hostnames "<name>-99": 63 characters
		}
		for name, job := range cases {
			t.Run(name, func(t *testing.T) {
				first, err := r.api.SubmitJob(ctx, &jobplanev1.SubmitJobRequest{Job: job})
				if err != nil || !first.GetCreated() {
					t.Fatalf("first submission: %v %v", first, err)
				}
				if first.GetJob().GetSpec().GetSelector() == nil || first.GetJob().GetSpec().GetManagedBy() != managedBy {
					t.Errorf("stored Job: %v", first.GetJob().GetSpec())
				}
				again, err := r.api.SubmitJob(ctx, &jobplanev1.SubmitJobRequest{Job: job})
				if err != nil || again.GetCreated() {
					t.Fatalf("second submission: %v %v", again, err)
				}
				if got, want := again.GetJob().GetMetadata().GetUid(), first.GetJob().GetMetadata().GetUid(); got != want {
					t.Errorf("second submission answered UID %s, want the first's %s", got, want)
				}
			})
		}
		names, err := r.kube.BatchV1().Jobs("default").List(ctx, metav1.ListOptions{})
		if err != nil || len(names.Items) != len(cases) {
			t.Errorf("%d Jobs stored, want %d (dry runs store nothing): %v", len(names.Items), len(cases), err)
		}

		different := richJob(t, "default", "rich")
		different.Spec.Parallelism = proto.Int32(5)
		different.Spec.Template.Spec.Fields["containers"].GetListValue().GetValues()[0].GetStructValue().Fields["image"] = structpb.NewStringValue("busybox:1.37")
		_, err = r.api.SubmitJob(ctx, &jobplanev1.SubmitJobRequest{Job: different})
		wantStatus(t, err, codes.AlreadyExists, "spec.parallelism", "spec.template.spec.containers[0].image")
	})

	t.Run("SubmitJob of a Job the API server rejects", func(t *testing.T) {
		job := contractJob(t, "default", "no-image")
		delete(job.Spec.Template.Spec.Fields["containers"].GetListValue().GetValues()[0].GetStructValue().Fields, "image")
		_, err := r.api.SubmitJob(ctx, &jobplanev1.SubmitJobRequest{Job: job})
		wantStatus(t, err, codes.InvalidArgument)
		equal(t, "field violations", fields(err), []string{"job.spec.template.spec.containers[0].image"})
	})

	t.Run("SubmitJob where another controller's Job has the name", func(t *testing.T) {
		theirs := job("default", "theirs", managedByOther)
		theirs.UID, theirs.ResourceVersion = "", ""
		if _, err := r.kube.BatchV1().Jobs("default").Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := r.api.SubmitJob(ctx, &jobplanev1.SubmitJobRequest{Job: contractJob(t, "default", "theirs")})
		wantStatus(t, err, codes.AlreadyExists, "not managed by")
	})

	t.Run("reads come from the informer", func(t *testing.T) {
		ns := r.namespace(t, "reads")
		if _, err := r.api.SubmitJob(ctx, &jobplanev1.SubmitJobRequest{Job: contractJob(t, ns, "seen")}); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := r.api.GetJob(ctx, &jobplanev1.GetJobRequest{Namespace: ns, Name: "seen"})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("the submitted Job never reached the cache: %v", err)
		}
		list, err := r.api.ListJobs(ctx, &jobplanev1.ListJobsRequest{Namespace: ns})
		if err != nil || len(list.GetJobs()) != 1 {
			t.Errorf("ListJobs: %v %v", list, err)
		}
	})

	t.Run("WatchJobs resumes from a resourceVersion", func(t *testing.T) {
		ns := r.namespace(t, "watch")
		submit := func(name string) {
			t.Helper()
			if _, err := r.api.SubmitJob(ctx, &jobplanev1.SubmitJobRequest{Job: contractJob(t, ns, name)}); err != nil {
				t.Fatal(err)
			}
		}
		submit("first")
		theirs := job(ns, "theirs", managedByOther)
		theirs.UID, theirs.ResourceVersion = "", ""
		if _, err := r.kube.BatchV1().Jobs(ns).Create(ctx, theirs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}

		watchCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		stream, err := r.api.WatchJobs(watchCtx, &jobplanev1.WatchJobsRequest{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		initial := recv(t, stream)
		if initial.typ != "ADDED" || initial.job != ns+"/first" || initial.resourceVersion == "" {
			t.Fatalf("initial state: %v", initial)
		}
		cancel()

		// Changes while no one watches: the resumed watch replays them, in
		// order, without the other controller's Job.
		submit("second")
		if _, err := r.kube.BatchV1().Jobs(ns).Patch(ctx, "first", "application/merge-patch+json",
			[]byte(`{"metadata":{"labels":{"phase":"two"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.kube.BatchV1().Jobs(ns).Patch(ctx, "theirs", "application/merge-patch+json",
			[]byte(`{"metadata":{"labels":{"phase":"two"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.api.DeleteJob(ctx, &jobplanev1.DeleteJobRequest{Namespace: ns, Name: "second"}); err != nil {
			t.Fatal(err)
		}

		watchCtx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		stream, err = r.api.WatchJobs(watchCtx, &jobplanev1.WatchJobsRequest{Namespace: ns, ResourceVersion: initial.resourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for range 3 {
			e := recv(t, stream)
			if e.resourceVersion == "" {
				t.Errorf("event %v carries no version to resume from", e)
			}
			got = append(got, e.typ+" "+e.job)
		}
		equal(t, "resumed events", got, []string{"ADDED " + ns + "/second", "MODIFIED " + ns + "/first", "DELETED " + ns + "/second"})
	})

	t.Run("DeleteJob with a wrong UID", func(t *testing.T) {
		resp, err := r.api.SubmitJob(ctx, &jobplanev1.SubmitJobRequest{Job: contractJob(t, "default", "doomed")})
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.api.DeleteJob(ctx, &jobplanev1.DeleteJobRequest{Namespace: "default", Name: "doomed", Uid: "00000000-0000-0000-0000-000000000000"})
		wantStatus(t, err, codes.FailedPrecondition, "00000000-0000-0000-0000-000000000000")
		if _, err := r.kube.BatchV1().Jobs("default").Get(ctx, "doomed", metav1.GetOptions{}); err != nil {
			t.Fatalf("the Job is gone after a refused delete: %v", err)
		}
		_, err = r.api.DeleteJob(ctx, &jobplanev1.DeleteJobRequest{Namespace: "default", Name: "doomed", Uid: resp.GetJob().GetMetadata().GetUid()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.kube.BatchV1().Jobs("default").Get(ctx, "doomed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("after delete: %v", err)
		}
		_, err = r.api.DeleteJob(ctx, &jobplanev1.DeleteJobRequest{Namespace: "default", Name: "doomed"})
		wantStatus(t, err, codes.NotFound)
	})

	t.Run("DeleteJob of another controller's Job", func(t *testing.T) {
		_, err := r.api.DeleteJob(ctx, &jobplanev1.DeleteJobRequest{Namespace: "default", Name: "theirs"})
		wantStatus(t, err, codes.FailedPrecondition)
		if _, err := r.kube.BatchV1().Jobs("default").Get(ctx, "theirs", metav1.GetOptions{}); err != nil {
			t.Errorf("another controller's Job was deleted: %v", err)
		}
	})
}
