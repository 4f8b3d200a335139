package controller

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/kubeconv"
)

// The fixture follows sample-controller's: fake clientsets (Jobs; CronJobs
// through a fake dynamic client), informer stores filled directly (the
// informers never run), a fake executor creating and deleting Jobs in the
// fake clientset, a fake clock and a fake event recorder.

const testNamespace = "ns"

// testCreated is when the test CronJobs were created: 10:00:30.
var testCreated = time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)

type fixture struct {
	t        *testing.T
	kube     *fake.Clientset
	dyn      *dynamicfake.FakeDynamicClient
	jobs     informers.SharedInformerFactory
	cronJobs dynamicinformer.DynamicSharedInformerFactory
	clock    *testingclock.FakeClock
	executor *fakeExecutor
	recorder *record.FakeRecorder
	c        *Controller
}

func newFixture(t *testing.T, cronJobs ...*cronapi.CronJob) *fixture {
	t.Helper()
	scheme := runtime.NewScheme()
	f := &fixture{
		t:        t,
		kube:     fake.NewClientset(),
		dyn:      dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{cronapi.GroupVersionResource: "CronJobList"}),
		clock:    testingclock.NewFakeClock(testCreated),
		recorder: record.NewFakeRecorder(1000),
	}
	f.executor = &fakeExecutor{f: f}
	f.jobs = informers.NewSharedInformerFactory(f.kube, 0)
	f.cronJobs = dynamicinformer.NewDynamicSharedInformerFactory(f.dyn, 0)
	c, err := New(Config{
		Kube: f.kube, Informers: f.jobs,
		CronJobs: f.dyn.Resource(cronapi.GroupVersionResource), CronJobInformers: f.cronJobs,
		Executor: f.executor, Local: time.UTC, Clock: f.clock,
		Log: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.recorder = f.recorder
	f.c = c
	for _, cj := range cronJobs {
		f.putCronJob(cj)
	}
	return f
}

// putCronJob stores a CronJob in the API server and the cache.
func (f *fixture) putCronJob(cj *cronapi.CronJob) {
	f.t.Helper()
	u, err := cronapi.ToUnstructured(cj)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := f.dyn.Resource(cronapi.GroupVersionResource).Namespace(cj.Namespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.syncCronJobCache(cj.Namespace, cj.Name)
}

// syncCronJobCache copies a CronJob from the API server into the cache.
func (f *fixture) syncCronJobCache(namespace, name string) {
	f.t.Helper()
	u, err := f.dyn.Resource(cronapi.GroupVersionResource).Namespace(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.cronJobs.ForResource(cronapi.GroupVersionResource).Informer().GetIndexer().Update(u); err != nil {
		f.t.Fatal(err)
	}
}

// putJob stores a Job in the API server and the cache.
func (f *fixture) putJob(job *batchv1.Job) {
	f.t.Helper()
	if _, err := f.kube.BatchV1().Jobs(job.Namespace).Create(context.Background(), job, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	if err := f.jobs.Batch().V1().Jobs().Informer().GetIndexer().Add(job); err != nil {
		f.t.Fatal(err)
	}
}

// cronJob reads a CronJob of the test namespace back from the API server.
func (f *fixture) cronJob(name string) *cronapi.CronJob {
	f.t.Helper()
	return f.cronJobIn(testNamespace, name)
}

// cronJobIn reads a CronJob of namespace back from the API server.
func (f *fixture) cronJobIn(namespace, name string) *cronapi.CronJob {
	f.t.Helper()
	u, err := f.dyn.Resource(cronapi.GroupVersionResource).Namespace(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	cj, err := cronapi.FromUnstructured(u)
	if err != nil {
		f.t.Fatal(err)
	}
	return cj
}

// sync syncs a CronJob at the fixture's time.
func (f *fixture) sync(name string) (*time.Duration, error) {
	return f.c.sync(context.Background(), testNamespace+"/"+name)
}

// events drains the recorded events, as "Type Reason".
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			fields := strings.SplitN(e, " ", 3)
			out = append(out, fields[0]+" "+fields[1])
		default:
			return out
		}
	}
}

// everyMinute is a CronJob running each minute, created at testCreated.
func everyMinute(name string, mutate ...func(*cronapi.CronJob)) *cronapi.CronJob {
	cj := &cronapi.CronJob{
		TypeMeta: metav1.TypeMeta{APIVersion: cronapi.APIVersion, Kind: cronapi.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNamespace, UID: types.UID(name + "-uid"),
			CreationTimestamp: metav1.NewTime(testCreated),
		},
		Spec: cronapi.CronJobSpec{CronJobSpec: batchv1.CronJobSpec{
			Schedule:          "* * * * *",
			ConcurrencyPolicy: batchv1.AllowConcurrent,
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			}}}},
		}},
	}
	for _, m := range mutate {
		m(cj)
	}
	return cj
}

// fakeExecutor creates and deletes Jobs in the fixture's clientset and cache
// as the executor would, or fails as told.
type fakeExecutor struct {
	jobplanev1.ExecutorServiceClient
	f *fixture

	mu        sync.Mutex
	submitErr error
	deleteErr error
	submitted []string
	// lanes are the API budget's lanes the submissions were made in.
	lanes   []string
	deleted []string
	// unbounded counts the calls made without a deadline.
	unbounded int
	// slow is a namespace whose submissions, once their Job is created,
	// are answered only when unblocked is closed or their call ends;
	// blocked counts those waiting.
	slow      string
	unblocked chan struct{}
	blocked   int
}

// slowFor makes the executor slow for namespace's submissions.
func (e *fakeExecutor) slowFor(namespace string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.slow, e.unblocked = namespace, make(chan struct{})
}

// answerSlowly waits, for a submission in the slow namespace, until the
// executor is unblocked or the call ends.
func (e *fakeExecutor) answerSlowly(ctx context.Context, namespace string) error {
	e.mu.Lock()
	if namespace != e.slow {
		e.mu.Unlock()
		return nil
	}
	e.blocked++
	unblocked := e.unblocked
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.blocked--
		e.mu.Unlock()
	}()
	select {
	case <-unblocked:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// bounded records whether the call of ctx had a deadline within
// executorCallTimeout; e.mu is held.
func (e *fakeExecutor) bounded(ctx context.Context) {
	if deadline, ok := ctx.Deadline(); !ok || time.Until(deadline) > executorCallTimeout {
		e.unbounded++
	}
}

func (e *fakeExecutor) SubmitJob(ctx context.Context, req *jobplanev1.SubmitJobRequest, _ ...grpc.CallOption) (*jobplanev1.SubmitJobResponse, error) {
	if err := ctx.Err(); err != nil { // as gRPC, a call already ended is not sent
		return nil, status.FromContextError(err).Err()
	}
	e.mu.Lock()
	err := e.submitErr
	e.bounded(ctx)
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	job, convErr := kubeconv.JobToKube(req.GetJob(), kubeconv.FullTemplate)
	if convErr != nil {
		return nil, status.Error(codes.InvalidArgument, convErr.Error())
	}
	if existing, getErr := e.f.kube.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{}); getErr == nil {
		out, _ := kubeconv.JobFromKube(existing)
		return &jobplanev1.SubmitJobResponse{Job: out}, nil
	}
	job.UID = types.UID(job.Name + "-uid")
	job.CreationTimestamp = metav1.NewTime(e.f.clock.Now())
	job.ResourceVersion = "1"
	e.f.putJob(job)
	e.mu.Lock()
	e.submitted = append(e.submitted, job.Name)
	e.lanes = append(e.lanes, fairlimit.LaneOf(ctx))
	e.mu.Unlock()
	if err := e.answerSlowly(ctx, job.Namespace); err != nil {
		return nil, err
	}
	out, _ := kubeconv.JobFromKube(job)
	return &jobplanev1.SubmitJobResponse{Job: out, Created: true}, nil
}

func (e *fakeExecutor) DeleteJob(ctx context.Context, req *jobplanev1.DeleteJobRequest, _ ...grpc.CallOption) (*jobplanev1.DeleteJobResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	e.mu.Lock()
	err := e.deleteErr
	e.bounded(ctx)
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if delErr := e.f.kube.BatchV1().Jobs(req.GetNamespace()).Delete(ctx, req.GetName(), metav1.DeleteOptions{}); delErr != nil {
		return nil, status.Error(codes.NotFound, delErr.Error())
	}
	if obj, ok, _ := e.f.jobs.Batch().V1().Jobs().Informer().GetIndexer().GetByKey(req.GetNamespace() + "/" + req.GetName()); ok {
		_ = e.f.jobs.Batch().V1().Jobs().Informer().GetIndexer().Delete(obj)
	}
	e.mu.Lock()
	e.deleted = append(e.deleted, req.GetName())
	e.mu.Unlock()
	return &jobplanev1.DeleteJobResponse{}, nil
}

func (e *fakeExecutor) failSubmits(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.submitErr = err
}

func backfillRequest(name string, start, end time.Time, policy string) *jobplanev1.BackfillCronJobRequest {
	return &jobplanev1.BackfillCronJobRequest{
		Namespace: testNamespace, Name: name,
		Start: timestamppb.New(start), End: timestamppb.New(end), ConcurrencyPolicy: policy,
	}
}
