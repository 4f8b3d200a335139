package controller

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/plan"
)

// The fixture follows sample-controller's: a fake clientset whose reactors
// inject failures, informer stores filled directly (the informers never
// run), a fake planner with a canned plan, a fake clock, a fake event
// recorder and queues that record what was added to them.

const (
	testNamespace    = "ns"
	testManagedBy    = "jobplane.dev/executor"
	testFinalizer    = plan.DefaultTrackingFinalizer
	builtinFinalizer = batchv1.JobTrackingFinalizer
	jobKey           = testNamespace + "/job"
)

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	t        *testing.T
	client   *fake.Clientset
	factory  informers.SharedInformerFactory
	clock    *testingclock.FakeClock
	planner  *fakePlanner
	recorder *record.FakeRecorder
	queue    *recordingQueue[string]
	orphans  *recordingQueue[orphanKey]
	c        *Controller

	mu      sync.Mutex
	creates int // pod creations that reached the API, for generated names
}

// newFixture builds a controller whose API server and informer caches hold
// objects (Jobs and pods).
func newFixture(t *testing.T, objects ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{
		t:        t,
		client:   fake.NewSimpleClientset(objects...),
		clock:    testingclock.NewFakeClock(testNow),
		planner:  &fakePlanner{plan: &plan.Plan{}},
		recorder: record.NewFakeRecorder(1000),
	}
	f.planner.clock = f.clock
	f.factory = informers.NewSharedInformerFactory(f.client, 0)
	// The fake tracker does not generate names: do it as the API server
	// would, numbering pods in the order the creations reach it.
	f.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		pod := action.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if pod.Name == "" && pod.GenerateName != "" {
			f.mu.Lock()
			f.creates++
			pod.Name = fmt.Sprintf("%s%d", pod.GenerateName, f.creates)
			f.mu.Unlock()
			pod.UID = types.UID(pod.Name + "-uid")
		}
		return false, nil, nil
	})
	c, err := New(Config{
		Client:    f.client,
		Informers: f.factory,
		Planner:   f.planner,
		ManagedBy: testManagedBy,
		Finalizer: testFinalizer,
		Clock:     f.clock,
		Log:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	c.recorder = f.recorder
	f.queue = &recordingQueue[string]{TypedRateLimitingInterface: c.queue}
	f.orphans = &recordingQueue[orphanKey]{TypedRateLimitingInterface: c.orphans}
	c.queue, c.orphans = f.queue, f.orphans
	t.Cleanup(func() {
		f.queue.ShutDown()
		f.orphans.ShutDown()
		c.events.Shutdown()
	})
	for _, obj := range objects {
		f.cache(obj)
	}
	f.client.ClearActions()
	return f
}

// cache puts obj in the informer's store, as a watch event would.
func (f *fixture) cache(obj runtime.Object) {
	f.t.Helper()
	var err error
	switch obj := obj.(type) {
	case *batchv1.Job:
		err = f.factory.Batch().V1().Jobs().Informer().GetIndexer().Add(obj)
	case *corev1.Pod:
		err = f.factory.Core().V1().Pods().Informer().GetIndexer().Add(obj)
	default:
		f.t.Fatalf("cannot cache %T", obj)
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// failCall makes the n-th call (from 1) of verb on resource fail with err;
// the calls before and after it go through.
func (f *fixture) failCall(verb, resource string, n int, err error) {
	var calls int
	f.client.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		calls++ // reactors run under the clientset's lock
		if calls == n {
			return true, nil, err
		}
		return false, nil, nil
	})
}

// failNamed makes every call of verb on the object named name fail.
func (f *fixture) failNamed(verb, resource, subresource, name string, err error) {
	f.client.PrependReactor(verb, resource, func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != subresource {
			return false, nil, nil
		}
		if named, ok := action.(interface{ GetName() string }); ok && named.GetName() == name {
			return true, nil, err
		}
		if update, ok := action.(k8stesting.UpdateAction); ok && update.GetObject().(metav1.Object).GetName() == name {
			return true, nil, err
		}
		return false, nil, nil
	})
}

// sync syncs the Job of key with the planner's canned plan.
func (f *fixture) sync(key string) ([]*jobplanev1.ActionOutcome, *batchv1.Job, error) {
	f.t.Helper()
	_, outcomes, job, err := f.c.sync(context.Background(), key)
	return outcomes, job, err
}

// events drains the events recorded so far, sorted.
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			sort.Strings(out)
			return out
		}
	}
}

// actions are the API calls made, each as "verb resource[/subresource]
// name", in order.
func (f *fixture) actions() []string {
	var out []string
	for _, a := range f.client.Actions() {
		out = append(out, describe(a))
	}
	return out
}

func describe(a k8stesting.Action) string {
	resource := a.GetResource().Resource
	if sub := a.GetSubresource(); sub != "" {
		resource += "/" + sub
	}
	var name string
	switch verb := a.GetVerb(); {
	case verb == "create":
		name = a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetGenerateName() + "*"
	case verb == "update":
		name = a.(k8stesting.UpdateAction).GetObject().(metav1.Object).GetName()
	default:
		if named, ok := a.(interface{ GetName() string }); ok {
			name = named.GetName()
		}
	}
	return strings.TrimSpace(a.GetVerb() + " " + resource + " " + name)
}

// actionsOf are the recorded actions of verb on resource.
func actionsOf[T k8stesting.Action](f *fixture, verb, resource string) []T {
	var out []T
	for _, a := range f.client.Actions() {
		if a.Matches(verb, resource) {
			out = append(out, a.(T))
		}
	}
	return out
}

func (f *fixture) createdPods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, a := range actionsOf[k8stesting.CreateAction](f, "create", "pods") {
		out = append(out, a.GetObject().(*corev1.Pod))
	}
	return out
}

// patches are the pod patch bodies by pod name, in order.
func (f *fixture) patches() map[string][]string {
	out := map[string][]string{}
	for _, a := range actionsOf[k8stesting.PatchAction](f, "patch", "pods") {
		if a.GetPatchType() != types.StrategicMergePatchType {
			f.t.Errorf("patch of pod %s is %s, want a strategic merge patch", a.GetName(), a.GetPatchType())
		}
		out[a.GetName()] = append(out[a.GetName()], string(a.GetPatch()))
	}
	return out
}

// statusWrites are the Jobs sent to the status subresource, in order.
func (f *fixture) statusWrites() []*batchv1.Job {
	var out []*batchv1.Job
	for _, a := range actionsOf[k8stesting.UpdateAction](f, "update", "jobs") {
		if a.GetSubresource() != "status" {
			f.t.Errorf("Job update of subresource %q, want status", a.GetSubresource())
		}
		out = append(out, a.GetObject().(*batchv1.Job))
	}
	return out
}

// fakePlanner answers every snapshot with its canned plan.
type fakePlanner struct {
	mu       sync.Mutex
	plan     *plan.Plan
	err      error
	requests []*jobplanev1.PlanSyncRequest
	// takes is how long a call seems to take: the fake clock, when set,
	// steps that much.
	takes time.Duration
	clock *testingclock.FakeClock
}

func (p *fakePlanner) Plan(_ context.Context, req *jobplanev1.PlanSyncRequest) (*jobplanev1.SyncPlan, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.takes > 0 {
		p.clock.Step(p.takes)
	}
	p.requests = append(p.requests, req)
	if p.err != nil {
		return nil, p.err
	}
	return plan.ToProto(p.plan), nil
}

func (p *fakePlanner) set(actions ...plan.Action) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plan = &plan.Plan{Summary: "canned", Actions: actions}
}

func (p *fakePlanner) calls() []*jobplanev1.PlanSyncRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// queueCall is one addition to a workqueue.
type queueCall[T comparable] struct {
	Op    string // Add, AddAfter or AddRateLimited
	Item  T
	After time.Duration
}

// recordingQueue is a real rate-limited queue that records additions.
type recordingQueue[T comparable] struct {
	workqueue.TypedRateLimitingInterface[T]
	mu    sync.Mutex
	calls []queueCall[T]
}

func (q *recordingQueue[T]) record(c queueCall[T]) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = append(q.calls, c)
}

func (q *recordingQueue[T]) Add(item T) {
	q.record(queueCall[T]{Op: "Add", Item: item})
	q.TypedRateLimitingInterface.Add(item)
}

func (q *recordingQueue[T]) AddAfter(item T, d time.Duration) {
	q.record(queueCall[T]{Op: "AddAfter", Item: item, After: d})
	q.TypedRateLimitingInterface.AddAfter(item, d)
}

func (q *recordingQueue[T]) AddRateLimited(item T) {
	q.record(queueCall[T]{Op: "AddRateLimited", Item: item})
	q.TypedRateLimitingInterface.AddRateLimited(item)
}

func (q *recordingQueue[T]) recorded() []queueCall[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.calls)
}

func (q *recordingQueue[T]) reset() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = nil
}

// Objects.

type jobOption func(*batchv1.Job)

// newJob is a started jobplane Job of 10 pods whose selector is its
// controller-uid label, as the API server generates it.
func newJob(name string, opts ...jobOption) *batchv1.Job {
	uid := types.UID(name + "-uid")
	labels := map[string]string{batchv1.ControllerUidLabel: string(uid), batchv1.JobNameLabel: name}
	job := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: testNamespace, Name: name, UID: uid,
			ResourceVersion: "100", Generation: 1,
		},
		Spec: batchv1.JobSpec{
			ManagedBy:    ptr.To(testManagedBy),
			Parallelism:  ptr.To[int32](10),
			Completions:  ptr.To[int32](10),
			BackoffLimit: ptr.To[int32](6),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: string(uid)}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
				},
			},
		},
		Status: batchv1.JobStatus{StartTime: ptr.To(metav1.NewTime(testNow.Add(-time.Minute)))},
	}
	for _, o := range opts {
		o(job)
	}
	return job
}

func managedBy(m *string) jobOption { return func(j *batchv1.Job) { j.Spec.ManagedBy = m } }

func finished(j *batchv1.Job) {
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})
}

type podOption func(*corev1.Pod)

// newPod is a running pod of job (nil: an orphan with no labels) with the
// tracking finalizer.
func newPod(name string, job *batchv1.Job, opts ...podOption) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: testNamespace, Name: name, UID: types.UID(name + "-uid"),
			ResourceVersion: "1",
			Finalizers:      []string{testFinalizer},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if job != nil {
		pod.Labels = job.Spec.Template.Labels
		pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}
	}
	for _, o := range opts {
		o(pod)
	}
	return pod
}

func orphaned(p *corev1.Pod) { p.OwnerReferences = nil }

func withFinalizers(fs ...string) podOption { return func(p *corev1.Pod) { p.Finalizers = fs } }

func withLabels(l map[string]string) podOption { return func(p *corev1.Pod) { p.Labels = l } }

func inNamespace(ns string) podOption { return func(p *corev1.Pod) { p.Namespace = ns } }

func terminating(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(testNow)) }

func succeeded(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }

func resourceVersion(rv string) podOption { return func(p *corev1.Pod) { p.ResourceVersion = rv } }

func ownedBy(kind, apiVersion, name string, uid types.UID) podOption {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
	}
}

// Errors of the API server.

var podsResource = schema.GroupResource{Resource: "pods"}

func quotaExceeded() error {
	return apierrors.NewForbidden(podsResource, "", fmt.Errorf("exceeded quota: compute, requested: pods=1, used: pods=6, limited: pods=6"))
}

func namespaceTerminating() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: `pods "job-" is forbidden: unable to create new content in namespace ns because it is being terminated`,
		Details: &metav1.StatusDetails{Kind: "pods", Causes: []metav1.StatusCause{{
			Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated", Field: "metadata.namespace",
		}}},
	}}
}

func uidPreconditionFailed(name string) error {
	return apierrors.NewConflict(podsResource, name, fmt.Errorf("Precondition failed: UID in precondition: %s-uid, UID in object meta: other", name))
}

// uidChanged is the API server's answer to a patch whose metadata.uid is not
// the pod's (a pod recreated under the same name): uid is immutable, so the
// patch is invalid (the reference's ReleasePod relies on this).
func uidChanged(name string) error {
	return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, name, field.ErrorList{
		field.Invalid(field.NewPath("metadata", "uid"), name+"-uid", "field is immutable"),
	})
}

func internalError() error { return apierrors.NewInternalError(fmt.Errorf("etcd timeout")) }
