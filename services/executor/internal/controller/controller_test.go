package controller

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/plan"
)

// TestSyncSnapshot: the planner is sent the Job, the pods it controls, the
// executor's state of the Job and the clock's time.
func TestSyncSnapshot(t *testing.T) {
	job := newJob("job")
	other := newJob("other")
	f := newFixture(t, job, other, newPod("a", job), newPod("b", job, succeeded), newPod("c", other))
	f.c.state.ExpectCreations(jobKey, 2)
	f.c.state.ExpectFinalizersRemoved(jobKey, []types.UID{"b-uid"})
	f.clock.Step(5 * time.Second)
	if _, _, err := f.sync(jobKey); err != nil {
		t.Fatal(err)
	}
	calls := f.planner.calls()
	if len(calls) != 1 {
		t.Fatalf("planner asked %d times, want once", len(calls))
	}
	req := calls[0]
	if got := req.GetJob().GetMetadata().GetUid(); got != string(job.UID) {
		t.Errorf("Job sent has UID %s, want %s", got, job.UID)
	}
	var pods []string
	for _, p := range req.GetPods() {
		pods = append(pods, p.GetMetadata().GetName())
	}
	slices.Sort(pods)
	if !slices.Equal(pods, []string{"a", "b"}) {
		t.Errorf("pods sent = %v, want the Job's a and b", pods)
	}
	if got := req.GetNow().AsTime(); !got.Equal(testNow.Add(5 * time.Second)) {
		t.Errorf("now = %s, want the fake clock's %s", got, testNow.Add(5*time.Second))
	}
	e := req.GetExpectations()
	if e.GetPendingCreations() != 2 || !e.GetRecordedAt().AsTime().Equal(testNow) {
		t.Errorf("expectations = %v, want 2 creations recorded at %s", e, testNow)
	}
	if got := req.GetFinalizerRemovalsInFlight(); !slices.Equal(got, []string{"b-uid"}) {
		t.Errorf("finalizer removals in flight = %v, want [b-uid]", got)
	}
	if got := req.GetTrackingFinalizer(); got != testFinalizer {
		t.Errorf("tracking finalizer = %q, want %q", got, testFinalizer)
	}
}

// blockingPlanner holds every Plan call until released, and records how
// many calls of each Job were in flight at once.
type blockingPlanner struct {
	mu       sync.Mutex
	inFlight map[string]int
	maxOf    map[string]int
	entered  chan string
	release  chan struct{}
}

func (p *blockingPlanner) Plan(_ context.Context, req *jobplanev1.PlanSyncRequest) (*jobplanev1.SyncPlan, error) {
	name := req.GetJob().GetMetadata().GetName()
	p.mu.Lock()
	p.inFlight[name]++
	p.maxOf[name] = max(p.maxOf[name], p.inFlight[name])
	p.mu.Unlock()
	p.entered <- name
	<-p.release
	p.mu.Lock()
	p.inFlight[name]--
	p.mu.Unlock()
	return plan.ToProto(&plan.Plan{}), nil
}

// TestSyncsOfOneJobAreSerialised: the workers and the SyncJob RPC never
// sync one Job twice at once; different Jobs sync in parallel.
func TestSyncsOfOneJobAreSerialised(t *testing.T) {
	f := newFixture(t, newJob("job"), newJob("other"))
	p := &blockingPlanner{inFlight: map[string]int{}, maxOf: map[string]int{}, entered: make(chan string, 4), release: make(chan struct{})}
	f.c.cfg.Planner = p
	var wg sync.WaitGroup
	for _, key := range []string{jobKey, jobKey, testNamespace + "/other"} {
		wg.Go(func() {
			if _, _, _, err := f.c.sync(context.Background(), key); err != nil {
				t.Errorf("sync %s: %v", key, err)
			}
		})
	}
	// Both Jobs reach the planner; the second sync of "job" waits.
	got := []string{<-p.entered, <-p.entered}
	slices.Sort(got)
	if !slices.Equal(got, []string{"job", "other"}) {
		t.Fatalf("first planner calls for %v, want job and other in parallel", got)
	}
	select {
	case name := <-p.entered:
		t.Fatalf("a third planner call (%s) while one of job's syncs holds it", name)
	case <-time.After(50 * time.Millisecond):
	}
	close(p.release)
	if name := <-p.entered; name != "job" {
		t.Errorf("third planner call for %s, want job's second sync", name)
	}
	wg.Wait()
	if p.maxOf["job"] != 1 {
		t.Errorf("%d syncs of job in flight at once, want 1", p.maxOf["job"])
	}
	if n := f.c.syncing.Len(); n != 0 {
		t.Errorf("%d per-Job locks left after the syncs, want 0", n)
	}
}

// TestSyncJobErrors pins what the SyncJob RPC answers: a status error when
// no plan was had, the outcomes (and no error) when one was performed.
func TestSyncJobErrors(t *testing.T) {
	cases := []struct {
		name     string
		objects  []runtime.Object
		inject   func(f *fixture)
		wantCode codes.Code
		// wantOutcomes when a plan was performed.
		wantOutcomes []outcome
	}{{
		name:     "Job gone: NotFound",
		wantCode: codes.NotFound,
	}, {
		name:     "Job of another controller: FailedPrecondition",
		objects:  []runtime.Object{newJob("job", managedBy(nil))},
		wantCode: codes.FailedPrecondition,
	}, {
		name:    "snapshot refused by the planner: its InvalidArgument",
		objects: []runtime.Object{newJob("job")},
		inject: func(f *fixture) {
			f.planner.err = status.Error(codes.InvalidArgument, "job.spec.parallelism: Invalid value")
		},
		wantCode: codes.InvalidArgument,
	}, {
		name:     "planner unavailable: Unavailable",
		objects:  []runtime.Object{newJob("job")},
		inject:   func(f *fixture) { f.planner.err = status.Error(codes.Unavailable, "planner stream closed") },
		wantCode: codes.Unavailable,
	}, {
		name:    "pods could not be claimed: Unavailable",
		objects: []runtime.Object{newJob("job"), newPod("orphan", nil, withLabels(newJob("job").Spec.Template.Labels))},
		inject: func(f *fixture) {
			f.failNamed("get", "jobs", "", "job", internalError())
		},
		wantCode: codes.Unavailable,
	}, {
		name:    "an action failed: the outcomes say so, no error",
		objects: []runtime.Object{newJob("job")},
		inject: func(f *fixture) {
			f.failCall("update", "jobs", 1, conflictOnStatus("job"))
			f.planner.set(plan.WriteStatus{Because: because("Track"), Status: newJob("job").Status})
		},
		wantOutcomes: []outcome{{resultFailed, 0, 1}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objects...)
			if tc.inject != nil {
				tc.inject(f)
			}
			p, outcomes, _, err := f.c.SyncJob(context.Background(), testNamespace, "job")
			if got := status.Code(err); got != tc.wantCode {
				t.Errorf("SyncJob error = %v, want code %s", err, tc.wantCode)
			}
			if tc.wantOutcomes != nil {
				if p == nil {
					t.Fatal("no plan returned")
				}
				if got := outcomesOf(outcomes); !reflect.DeepEqual(got, tc.wantOutcomes) {
					t.Errorf("outcomes = %+v, want %+v", got, tc.wantOutcomes)
				}
			}
		})
	}
}

func TestExecute(t *testing.T) {
	job := newJob("job")
	deleteA := &plan.Plan{Actions: []plan.Action{plan.DeletePods{Because: because("Manual"), Pods: []plan.PodRef{{Name: "a", UID: "a-uid"}}}}}
	cases := []struct {
		name    string
		uid     types.UID
		objects []runtime.Object
		// live are in the API server only, not yet in the caches.
		live        []runtime.Object
		wantCode    codes.Code
		wantActions []string
	}{{
		name:    "the plan is performed on the Job read live",
		uid:     job.UID,
		objects: []runtime.Object{job, newPod("a", job)},
		// The Job is read again once held from syncs: the plan's pods are
		// checked before, so that live reads never hold a worker back.
		wantActions: []string{"get jobs job", "get jobs job", "delete pods a"},
	}, {
		name:        "a pod newer than the cache: read live, the Job's, deleted",
		uid:         job.UID,
		objects:     []runtime.Object{job},
		live:        []runtime.Object{newPod("a", job)},
		wantActions: []string{"get jobs job", "get pods a", "get jobs job", "delete pods a"},
	}, {
		// Owner references are namespace-local; the executor never reports
		// as deleted a pod it did not delete.
		name:        "the pod named is in another namespace: FailedPrecondition, nothing done",
		uid:         job.UID,
		objects:     []runtime.Object{job, newPod("a", job, inNamespace("other-team"))},
		wantCode:    codes.FailedPrecondition,
		wantActions: []string{"get jobs job", "get pods a"},
	}, {
		name:        "the pod named is another Job's: FailedPrecondition, nothing done",
		uid:         job.UID,
		objects:     []runtime.Object{job, newJob("other"), newPod("a", newJob("other"))},
		wantCode:    codes.FailedPrecondition,
		wantActions: []string{"get jobs job", "get pods a"},
	}, {
		name:        "the pod named is gone: FailedPrecondition, not reported deleted",
		uid:         job.UID,
		objects:     []runtime.Object{job},
		wantCode:    codes.FailedPrecondition,
		wantActions: []string{"get jobs job", "get pods a"},
	}, {
		name:        "the pod named has another UID (recreated): FailedPrecondition, nothing done",
		uid:         job.UID,
		objects:     []runtime.Object{job, newPod("a", job, func(p *corev1.Pod) { p.UID = "new-uid" })},
		wantCode:    codes.FailedPrecondition,
		wantActions: []string{"get jobs job", "get pods a"},
	}, {
		name:        "another UID: FailedPrecondition, nothing done",
		uid:         "old-uid",
		objects:     []runtime.Object{job, newPod("a", job)},
		wantCode:    codes.FailedPrecondition,
		wantActions: []string{"get jobs job"},
	}, {
		name:        "Job of another controller: FailedPrecondition, nothing done",
		uid:         job.UID,
		objects:     []runtime.Object{newJob("job", managedBy(nil)), newPod("a", job)},
		wantCode:    codes.FailedPrecondition,
		wantActions: []string{"get jobs job"},
	}, {
		name:        "Job gone: NotFound",
		uid:         job.UID,
		wantCode:    codes.NotFound,
		wantActions: []string{"get jobs job"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objects...)
			for _, obj := range tc.live {
				if err := f.client.Tracker().Add(obj); err != nil {
					t.Fatal(err)
				}
			}
			outcomes, _, err := f.c.Execute(context.Background(), testNamespace, "job", tc.uid, deleteA)
			if got := status.Code(err); got != tc.wantCode {
				t.Errorf("Execute error = %v, want code %s", err, tc.wantCode)
			}
			if tc.wantCode == codes.OK {
				if got := outcomesOf(outcomes); !reflect.DeepEqual(got, []outcome{{resultDone, 1, 0}}) {
					t.Errorf("outcomes = %+v", got)
				}
			} else if outcomes != nil {
				t.Errorf("outcomes %+v of a plan refused", outcomesOf(outcomes))
			}
			if got := f.actions(); !slices.Equal(got, tc.wantActions) {
				t.Errorf("actions = %v, want %v", got, tc.wantActions)
			}
		})
	}
}

// A caller's plan naming more pods the cache has not seen than are read
// live is refused: each read holds the Job's syncs back.
func TestExecuteReadsAFewUnseenPodsLiveAtMost(t *testing.T) {
	job := newJob("job")
	var refs []plan.PodRef
	for i := range maxLiveReads + 1 {
		refs = append(refs, plan.PodRef{Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("p%d-uid", i))})
	}
	f := newFixture(t, job)
	p := &plan.Plan{Actions: []plan.Action{plan.DeletePods{Because: because("Manual"), Pods: refs}}}
	_, _, err := f.c.Execute(context.Background(), testNamespace, "job", job.UID, p)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "more than 32 pods") {
		t.Errorf("Execute error = %v, want FailedPrecondition: more than 32 pods not in the cache", err)
	}
	if got := f.actions(); len(got) != 1+maxLiveReads || slices.Contains(got, "delete pods p0") {
		t.Errorf("actions = %v, want the Job and %d pods read, none deleted", got, maxLiveReads)
	}
}

// The pods of a caller's plan are read live before the Job is held from its
// syncs, so a plan naming many never keeps a worker waiting on the Job (were
// the Job held during the read, taking it here would never return).
func TestExecuteReadsPodsLiveWithoutHoldingTheJob(t *testing.T) {
	job := newJob("job")
	f := newFixture(t, job)
	if err := f.client.Tracker().Add(newPod("a", job)); err != nil {
		t.Fatal(err)
	}
	f.client.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		unlock := f.c.syncing.Lock(testNamespace + "/job")
		unlock()
		return false, nil, nil
	})
	deleteA := &plan.Plan{Actions: []plan.Action{plan.DeletePods{Because: because("Manual"), Pods: []plan.PodRef{{Name: "a", UID: "a-uid"}}}}}
	if _, _, err := f.c.Execute(context.Background(), testNamespace, "job", job.UID, deleteA); err != nil {
		t.Fatal(err)
	}
}

// scalingPlanner creates the Job's pods while it has none and nothing is
// expected, and plans nothing otherwise.
type scalingPlanner struct{ fakePlanner }

func (p *scalingPlanner) Plan(ctx context.Context, req *jobplanev1.PlanSyncRequest) (*jobplanev1.SyncPlan, error) {
	p.mu.Lock()
	if len(req.GetPods()) == 0 && req.GetExpectations().GetPendingCreations() <= 0 {
		job := newJob(req.GetJob().GetMetadata().GetName())
		p.plan = &plan.Plan{Actions: []plan.Action{plan.CreatePods{Because: because("Scale"), Pods: podsToCreate(job, 2)}}}
	} else {
		p.plan = &plan.Plan{}
	}
	p.mu.Unlock()
	return p.fakePlanner.Plan(ctx, req)
}

// TestRunSyncsJobsFromTheInformers runs the whole loop on the fake
// clientset: a Job created in the API is seen by the informer, synced by a
// worker, its pods created and then observed, which meets the expectations.
func TestRunSyncsJobsFromTheInformers(t *testing.T) {
	f := newFixture(t)
	p := &scalingPlanner{}
	f.c.cfg.Planner = p
	ctx, cancel := context.WithCancel(context.Background())
	f.factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- f.c.Run(ctx, 2) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		f.factory.Shutdown()
	})
	eventually(t, "caches synced", f.c.HasSynced)

	job := newJob("job")
	if _, err := f.client.BatchV1().Jobs(testNamespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Job's 2 pods created and observed", func() bool {
		pods, err := f.c.PodsOf(job)
		return err == nil && len(pods) == 2 && f.c.state.State(jobKey).Expectations.PendingCreations == 0
	})
	if n := len(f.createdPods()); n != 2 {
		t.Errorf("%d pods created, want 2", n)
	}
	if got, err := f.c.Jobs().Jobs(testNamespace).Get("job"); err != nil || got.UID != job.UID {
		t.Errorf("Jobs lister: %v, %v", got, err)
	}
}
