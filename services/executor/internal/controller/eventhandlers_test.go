package controller

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/fairorder"
	"github.com/jobplane/jobplane/lib/plan"
)

// TestEnqueueRules pins the reference's event handlers: which events sync
// which Job, when, and what they tell the expectations.
func TestEnqueueRules(t *testing.T) {
	job := newJob("job")
	selectorKey := selectorOrphan(testNamespace, batchv1.ControllerUidLabel+"=job-uid")
	builtin := newJob("builtin", managedBy(nil))
	foreign := newJob("foreign", managedBy(ptr.To("kueue.x-k8s.io/multikueue")))
	done := newJob("job", finished)
	withDeadline := func(ads *int64, generation int64, started time.Duration) *batchv1.Job {
		j := job.DeepCopy()
		j.Spec.ActiveDeadlineSeconds, j.Generation = ads, generation
		j.Status.StartTime = nil
		if started != 0 {
			j.Status.StartTime = ptr.To(metav1.NewTime(testNow.Add(-started)))
		}
		return j
	}
	statusChanged := job.DeepCopy()
	statusChanged.ResourceVersion, statusChanged.Status.Active = "101", 3
	specChanged := job.DeepCopy()
	specChanged.ResourceVersion, specChanged.Generation, specChanged.Spec.Parallelism = "101", 2, ptr.To[int32](5)
	pod := newPod("pod", job)
	podV2 := func(opts ...podOption) *corev1.Pod {
		return newPod("pod", job, append([]podOption{resourceVersion("2")}, opts...)...)
	}
	matchingOrphan := newPod("orphan", nil, withLabels(job.Spec.Template.Labels), withFinalizers())
	orphanWithFinalizer := newPod("orphan", nil, withLabels(map[string]string{"app": "other"}))

	cases := []struct {
		name    string
		objects []runtime.Object // in the caches
		before  func(f *fixture)
		event   func(c *Controller)
		// wantQueue and wantOrphans are the additions to the two queues.
		wantQueue   []queueCall[string]
		wantOrphans []queueCall[orphanKey]
		// wantState is the state of jobKey after the event.
		wantState plan.State
	}{
		// Jobs.
		{
			name:      "Job added: synced at once",
			event:     func(c *Controller) { c.addJob(job) },
			wantQueue: []queueCall[string]{{"AddAfter", jobKey, 0}},
		}, {
			name:  "Job of the built-in controller added: never queued",
			event: func(c *Controller) { c.addJob(builtin) },
		}, {
			name:  "Job of another controller added: never queued",
			event: func(c *Controller) { c.addJob(foreign) },
		}, {
			name:      "Job status updated, same generation: sync batched by a second",
			event:     func(c *Controller) { c.updateJob(job, statusChanged) },
			wantQueue: []queueCall[string]{{"AddAfter", jobKey, syncJobBatchPeriod}},
		}, {
			name:      "Job spec changed, new generation: synced at once",
			event:     func(c *Controller) { c.updateJob(job, specChanged) },
			wantQueue: []queueCall[string]{{"AddAfter", jobKey, 0}},
		}, {
			name: "activeDeadlineSeconds set on a started Job: synced again when it passes",
			event: func(c *Controller) {
				c.updateJob(withDeadline(nil, 1, 30*time.Second), withDeadline(ptr.To[int64](100), 2, 30*time.Second))
			},
			wantQueue: []queueCall[string]{
				{"AddAfter", jobKey, 0},
				{"AddAfter", jobKey, 70 * time.Second},
			},
		}, {
			name: "activeDeadlineSeconds changed on a started Job: synced again at the new deadline",
			event: func(c *Controller) {
				c.updateJob(withDeadline(ptr.To[int64](50), 1, 30*time.Second), withDeadline(ptr.To[int64](100), 2, 30*time.Second))
			},
			wantQueue: []queueCall[string]{
				{"AddAfter", jobKey, 0},
				{"AddAfter", jobKey, 70 * time.Second},
			},
		}, {
			name: "activeDeadlineSeconds already passed: synced again at once",
			event: func(c *Controller) {
				c.updateJob(withDeadline(nil, 1, 200*time.Second), withDeadline(ptr.To[int64](100), 2, 200*time.Second))
			},
			wantQueue: []queueCall[string]{
				{"AddAfter", jobKey, 0},
				{"AddAfter", jobKey, -100 * time.Second},
			},
		}, {
			name: "activeDeadlineSeconds unchanged: no deadline sync",
			event: func(c *Controller) {
				c.updateJob(withDeadline(ptr.To[int64](100), 1, 30*time.Second), withDeadline(ptr.To[int64](100), 1, 30*time.Second))
			},
			wantQueue: []queueCall[string]{{"AddAfter", jobKey, syncJobBatchPeriod}},
		}, {
			name:      "activeDeadlineSeconds set before the Job started: no deadline sync",
			event:     func(c *Controller) { c.updateJob(withDeadline(nil, 1, 0), withDeadline(ptr.To[int64](100), 2, 0)) },
			wantQueue: []queueCall[string]{{"AddAfter", jobKey, 0}},
		}, {
			name:        "finished Job updated: no sync, its pods' selector queued for finalizer cleanup, its finish observed",
			before:      func(f *fixture) { f.c.state.MarkFinished(job.UID) },
			event:       func(c *Controller) { c.updateJob(job, done) },
			wantOrphans: []queueCall[orphanKey]{{"Add", selectorKey, 0}},
		}, {
			name:  "Job of another controller updated: never queued",
			event: func(c *Controller) { c.updateJob(foreign, foreign) },
		}, {
			name:        "Job deleted: synced at once, its pods' selector queued for finalizer cleanup",
			event:       func(c *Controller) { c.deleteJob(job) },
			wantQueue:   []queueCall[string]{{"AddAfter", jobKey, 0}},
			wantOrphans: []queueCall[orphanKey]{{"Add", selectorKey, 0}},
		}, {
			name:        "Job deleted, seen as a tombstone: the same",
			event:       func(c *Controller) { c.deleteJob(cache.DeletedFinalStateUnknown{Key: jobKey, Obj: job}) },
			wantQueue:   []queueCall[string]{{"AddAfter", jobKey, 0}},
			wantOrphans: []queueCall[orphanKey]{{"Add", selectorKey, 0}},
		}, {
			name:  "Job of another controller deleted: never queued",
			event: func(c *Controller) { c.deleteJob(foreign) },
		},
		// Pods of a jobplane Job.
		{
			name:      "pod of a jobplane Job added: creation observed, sync batched",
			objects:   []runtime.Object{job},
			before:    func(f *fixture) { f.c.state.ExpectCreations(jobKey, 2) },
			event:     func(c *Controller) { c.addPod(pod) },
			wantQueue: []queueCall[string]{{"AddAfter", jobKey, syncJobBatchPeriod}},
			wantState: plan.State{Expectations: plan.Expectations{PendingCreations: 1, RecordedAt: testNow}},
		}, {
			name:      "pod added while being deleted (seen after a restart): a deletion observed, not a creation",
			objects:   []runtime.Object{job},
			before:    func(f *fixture) { f.c.state.ExpectDeletions(jobKey, 1) },
			event:     func(c *Controller) { c.addPod(newPod("pod", job, terminating)) },
			wantQueue: []queueCall[string]{{"AddAfter", jobKey, syncJobBatchPeriod}},
			wantState: plan.State{Expectations: plan.Expectations{PendingDeletions: 0, RecordedAt: testNow}},
		}, {
			name:      "pod got a deletionTimestamp: deletion observed, sync batched",
			objects:   []runtime.Object{job},
			before:    func(f *fixture) { f.c.state.ExpectDeletions(jobKey, 2) },
			event:     func(c *Controller) { c.updatePod(pod, podV2(terminating)) },
			wantQueue: []queueCall[string]{{"AddAfter", jobKey, syncJobBatchPeriod}},
			wantState: plan.State{Expectations: plan.Expectations{PendingDeletions: 1, RecordedAt: testNow}},
		}, {
			name:    "pod deleted: deletion and finalizer removal observed",
			objects: []runtime.Object{job},
			before: func(f *fixture) {
				f.c.state.ExpectDeletions(jobKey, 1)
				f.c.state.ExpectFinalizersRemoved(jobKey, []types.UID{pod.UID, "other-uid"})
			},
			event:     func(c *Controller) { c.deletePod(pod, true) },
			wantQueue: []queueCall[string]{{"AddAfter", jobKey, syncJobBatchPeriod}},
			wantState: plan.State{Expectations: plan.Expectations{RecordedAt: testNow}, FinalizerRemovalsInFlight: []types.UID{"other-uid"}},
		}, {
			name:      "pod update removing our finalizer: finalizer removal observed",
			objects:   []runtime.Object{job},
			before:    func(f *fixture) { f.c.state.ExpectFinalizersRemoved(jobKey, []types.UID{pod.UID}) },
			event:     func(c *Controller) { c.updatePod(pod, podV2(succeeded, withFinalizers())) },
			wantQueue: []queueCall[string]{{"AddAfter", jobKey, syncJobBatchPeriod}},
			wantState: plan.State{},
		}, {
			name:      "pod update keeping our finalizer: its removal stays in flight",
			objects:   []runtime.Object{job},
			before:    func(f *fixture) { f.c.state.ExpectFinalizersRemoved(jobKey, []types.UID{pod.UID}) },
			event:     func(c *Controller) { c.updatePod(pod, podV2(succeeded)) },
			wantQueue: []queueCall[string]{{"AddAfter", jobKey, syncJobBatchPeriod}},
			wantState: plan.State{FinalizerRemovalsInFlight: []types.UID{pod.UID}},
		}, {
			name:    "pod released by its Job (labels changed) without our finalizer: the old Job observes the removal",
			objects: []runtime.Object{job},
			before:  func(f *fixture) { f.c.state.ExpectFinalizersRemoved(jobKey, []types.UID{pod.UID}) },
			event: func(c *Controller) {
				c.updatePod(pod, podV2(orphaned, withFinalizers(), withLabels(map[string]string{"app": "other"})))
			},
			wantQueue: []queueCall[string]{{"AddAfter", jobKey, syncJobBatchPeriod}},
			wantState: plan.State{},
		}, {
			name:    "pod resync (same resourceVersion): ignored",
			objects: []runtime.Object{job},
			event:   func(c *Controller) { c.updatePod(pod, pod) },
		},
		// Pods of other Jobs and of nobody.
		{
			name:    "pod of a built-in Job added: never queued",
			objects: []runtime.Object{builtin},
			event:   func(c *Controller) { c.addPod(newPod("pod", builtin, withFinalizers(builtinFinalizer))) },
		}, {
			name:    "pod of a built-in Job updated and deleted: never queued",
			objects: []runtime.Object{builtin},
			event: func(c *Controller) {
				p := newPod("pod", builtin, withFinalizers(builtinFinalizer))
				c.updatePod(p, newPod("pod", builtin, resourceVersion("2"), withFinalizers(), terminating))
				c.deletePod(p, true)
			},
		}, {
			name:        "orphan pod with our finalizer added: queued for finalizer removal",
			objects:     []runtime.Object{job},
			event:       func(c *Controller) { c.addPod(orphanWithFinalizer) },
			wantOrphans: []queueCall[orphanKey]{{"Add", podOrphan(testNamespace, "orphan"), 0}},
		}, {
			name:    "orphan pod with only the built-in finalizer added: never queued",
			objects: []runtime.Object{job},
			event: func(c *Controller) {
				c.addPod(newPod("orphan", nil, withLabels(map[string]string{"app": "other"}), withFinalizers(builtinFinalizer)))
			},
		}, {
			name:        "pod whose Job is gone added with our finalizer: queued for finalizer removal",
			event:       func(c *Controller) { c.addPod(pod) },
			wantOrphans: []queueCall[orphanKey]{{"Add", podOrphan(testNamespace, "pod"), 0}},
		}, {
			name:        "pod of a finished Job deleted with our finalizer: queued for finalizer removal",
			objects:     []runtime.Object{done},
			before:      func(f *fixture) { f.c.state.ExpectDeletions(jobKey, 1) },
			event:       func(c *Controller) { c.deletePod(pod, true) },
			wantOrphans: []queueCall[orphanKey]{{"Add", podOrphan(testNamespace, "pod"), 0}},
			wantState:   plan.State{Expectations: plan.Expectations{PendingDeletions: 1, RecordedAt: testNow}},
		}, {
			name:        "orphan pod deleted with our finalizer: queued for finalizer removal",
			event:       func(c *Controller) { c.deletePod(orphanWithFinalizer, true) },
			wantOrphans: []queueCall[orphanKey]{{"Add", podOrphan(testNamespace, "orphan"), 0}},
		}, {
			name:      "orphan pod matching a jobplane Job's selector added: the Job syncs (batched) to adopt it, no creation observed",
			objects:   []runtime.Object{job, builtin},
			before:    func(f *fixture) { f.c.state.ExpectCreations(jobKey, 1) },
			event:     func(c *Controller) { c.addPod(matchingOrphan) },
			wantQueue: []queueCall[string]{{"AddAfter", jobKey, syncJobBatchPeriod}},
			wantState: plan.State{Expectations: plan.Expectations{PendingCreations: 1, RecordedAt: testNow}},
		}, {
			name:    "orphan pod matching only a built-in Job's selector added: never queued",
			objects: []runtime.Object{builtin},
			event: func(c *Controller) {
				c.addPod(newPod("orphan", nil, withLabels(builtin.Spec.Template.Labels), withFinalizers()))
			},
		}, {
			name:    "orphan pod relabelled to match a jobplane Job's selector: the Job syncs (batched)",
			objects: []runtime.Object{job},
			event: func(c *Controller) {
				c.updatePod(newPod("orphan", nil, withFinalizers()), newPod("orphan", nil, resourceVersion("2"), withFinalizers(), withLabels(job.Spec.Template.Labels)))
			},
			wantQueue: []queueCall[string]{{"AddAfter", jobKey, syncJobBatchPeriod}},
		}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.objects...)
			if tc.before != nil {
				tc.before(f)
			}
			tc.event(f.c)
			if got := f.queue.recorded(); !reflect.DeepEqual(got, tc.wantQueue) {
				t.Errorf("Job queue additions = %+v, want %+v", got, tc.wantQueue)
			}
			if got := f.orphans.recorded(); !reflect.DeepEqual(got, tc.wantOrphans) {
				t.Errorf("orphan queue additions = %+v, want %+v", got, tc.wantOrphans)
			}
			if got := f.c.state.State(jobKey); !reflect.DeepEqual(got, tc.wantState) {
				t.Errorf("state = %+v, want %+v", got, tc.wantState)
			}
			if f.c.state.FinishPending(job.UID) {
				t.Errorf("finish of %s still pending", job.UID)
			}
			if a := f.client.Actions(); len(a) > 0 {
				t.Errorf("event handlers called the API: %v", f.actions())
			}
		})
	}
}

// TestBatchedSyncWaitsForTheClock checks the batching on the queue itself:
// a batched sync is ready one second of the (fake) clock later, an
// immediate one at once.
func TestBatchedSyncWaitsForTheClock(t *testing.T) {
	job := newJob("job")
	statusChanged := job.DeepCopy()
	statusChanged.ResourceVersion = "101"
	f := newFixture(t, job)
	waiters := f.clock.Waiters()

	f.c.updateJob(job, statusChanged)
	// The queue's timer for the item is set once its loop has seen it.
	eventually(t, "the queue's timer for the batched sync is set", func() bool { return f.clock.Waiters() == waiters+1 })
	if n := f.c.queue.Len(); n != 0 {
		t.Fatalf("queue length %d right after a batched enqueue, want 0", n)
	}
	f.clock.Step(syncJobBatchPeriod - time.Millisecond)
	if n := f.c.queue.Len(); n != 0 {
		t.Fatalf("queue length %d before the batch period passed, want 0", n)
	}
	f.clock.Step(time.Millisecond)
	eventually(t, "the batched sync is queued after a second", func() bool { return f.c.queue.Len() == 1 })

	f.c.addJob(newJob("other"))
	eventually(t, "the immediate sync is queued", func() bool { return f.c.queue.Len() == 2 })
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFinalizerRemovalsObservedThroughTheInformer is the reference's
// TestFinalizersRemovedExpectations: removals that failed are not expected;
// the others are, until the pod informer shows the finalizer gone (or the
// pod deleted); a pod that keeps it while terminating stays expected.
func TestFinalizerRemovalsObservedThroughTheInformer(t *testing.T) {
	job := newJob("job")
	pods := []*corev1.Pod{
		newPod("a", job, succeeded), newPod("b", job, succeeded),
		newPod("c", job, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
		newPod("d", job, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
	}
	objects := []runtime.Object{job}
	var refs []plan.PodRef
	var uids []types.UID
	for _, p := range pods {
		objects = append(objects, p)
		refs = append(refs, plan.PodRef{Name: p.Name, UID: p.UID})
		uids = append(uids, p.UID)
	}
	f := newFixture(t, objects...)
	// The patches reach the API but change nothing there, so that the
	// informer, not the patch, shows each removal.
	var refuse atomic.Bool
	refuse.Store(true)
	f.client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refuse.Load() {
			return true, nil, internalError()
		}
		return true, nil, nil
	})
	f.planner.set(plan.RemoveFinalizers{Because: because("Track"), Pods: refs})

	if _, _, err := f.sync(jobKey); err == nil {
		t.Fatal("sync with every patch refused succeeded")
	}
	if got := f.c.state.State(jobKey).FinalizerRemovalsInFlight; len(got) != 0 {
		t.Errorf("removals in flight after refused patches = %v, want none", got)
	}
	refuse.Store(false)
	if _, _, err := f.sync(jobKey); err != nil {
		t.Fatal(err)
	}
	if got := f.c.state.State(jobKey).FinalizerRemovalsInFlight; !slices.Equal(got, uids) {
		t.Errorf("removals in flight = %v, want %v", got, uids)
	}

	// The fake clientset's watch starts after the informer's list and
	// replays nothing: the updates below must wait for it, or be missed.
	var podsWatched atomic.Bool
	f.client.PrependWatchReactor("pods", func(action k8stesting.Action) (bool, watch.Interface, error) {
		w, err := f.client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		podsWatched.Store(true)
		return true, w, err
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		f.factory.Shutdown()
	})
	f.factory.Start(ctx.Done())
	f.factory.WaitForCacheSync(ctx.Done())
	eventually(t, "the informer watches the pods", podsWatched.Load)
	if got := f.c.state.State(jobKey).FinalizerRemovalsInFlight; !slices.Equal(got, uids) {
		t.Errorf("removals in flight once the caches synced = %v, want %v", got, uids)
	}

	podsGVR := corev1.SchemeGroupVersion.WithResource("pods")
	update := func(p *corev1.Pod) {
		p.ResourceVersion = "2"
		if err := f.client.Tracker().Update(podsGVR, p, testNamespace); err != nil {
			t.Fatal(err)
		}
	}
	update(newPod("a", job, succeeded, withFinalizers()))
	update(newPod("b", job, succeeded, withFinalizers(), terminating))
	update(newPod("c", job, terminating)) // keeps the finalizer
	if err := f.client.Tracker().Delete(podsGVR, testNamespace, "d"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "only c's removal still in flight", func() bool {
		return slices.Equal(f.c.state.State(jobKey).FinalizerRemovalsInFlight, []types.UID{"c-uid"})
	})
}

// TestWorkersTakeJobsByNamespaceInTurn: Jobs queued by a busy namespace do not
// make a quieter one's wait behind them; turns follow the namespaces'
// weights (busy 2, quiet 1).
func TestWorkersTakeJobsByNamespaceInTurn(t *testing.T) {
	client := fake.NewSimpleClientset()
	c, err := New(Config{
		Client: client, Informers: informers.NewSharedInformerFactory(client, 0),
		ManagedBy: testManagedBy, Finalizer: testFinalizer, Log: slog.New(slog.DiscardHandler),
		NamespaceWeights: fairorder.Weights{"busy": 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.queue.ShutDown()
		c.orphans.ShutDown()
		c.events.Shutdown()
	})
	in := func(ns string) jobOption { return func(j *batchv1.Job) { j.Namespace = ns } }
	for i := range 20 {
		c.addJob(newJob(fmt.Sprintf("job-%d", i), in("busy")))
	}
	for i := range 4 {
		c.addJob(newJob(fmt.Sprintf("job-%d", i), in("quiet")))
	}
	eventually(t, "24 Jobs queued", func() bool { return c.queue.Len() == 24 })
	var turns []string
	for range 9 {
		key, _ := c.queue.Get()
		c.queue.Done(key)
		turns = append(turns, fairorder.NamespaceOf(key))
	}
	if got, want := strings.Join(turns, " "), "busy quiet busy quiet busy busy quiet busy busy"; got != want {
		t.Errorf("turns by namespace:\n got %s\nwant %s", got, want)
	}
}
