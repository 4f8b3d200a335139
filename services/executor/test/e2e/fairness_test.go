package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// The burst of TestOneNamespacesBurstDoesNotHoldBackAnothersJob: the issue's
// is 200 Jobs of 4 pods, which takes the executor over two minutes at its
// default QPS of 20 on two cores; a quarter of it keeps the test under a
// minute.
const (
	burstJobs = 50
	burstPods = 4
	quietPods = 2
	podRun    = "2s"
)

// TestOneNamespacesBurstDoesNotHoldBackAnothersJob: namespace fair-busy
// creates burstJobs Jobs at once, then namespace fair-quiet one Job of 2 pods.
// With the executor's work queue and API budget shared by namespace, the
// quiet Job waits a turn or two of the busy namespace at each step, not
// behind all its Jobs: it completes within a small part of the time the busy
// namespace takes. (Behind a first-in-first-out queue it completes about
// when the busy namespace's last Job does.) It runs alone, as a top-level
// test that is not parallel, at the executor's default QPS and burst.
func TestOneNamespacesBurstDoesNotHoldBackAnothersJob(t *testing.T) {
	e, ctx, busy, quiet, done := busyAndQuiet(t, "fair")

	start := time.Now()
	createJobs(ctx, t, e, busy, burstJobs, burstPods)
	created := time.Now()
	createJobs(ctx, t, e, quiet, 1, quietPods)

	quietAt := done.wait(ctx, t, quiet, 1)
	busyAtQuiet := done.count(busy)
	lastAt := done.wait(ctx, t, busy, burstJobs)
	quietTook, busyTook := quietAt.Sub(created), lastAt.Sub(start)
	t.Logf("%d Jobs of %d pods in %s created in %s, all complete after %s; the Job of %d pods in %s complete %s after its creation, when %d of %s's Jobs were",
		burstJobs, burstPods, busy, created.Sub(start).Round(time.Millisecond), busyTook.Round(100*time.Millisecond),
		quietPods, quiet, quietTook.Round(100*time.Millisecond), busyAtQuiet, busy)
	// Measured on two cores: alone, the quiet Job takes 3.1 s (its pods run
	// 2 s); beside the busy namespace's 39 s, 3.5 to 5 s (with 200 Jobs, 4.6 s
	// beside 2m39s). Behind the first-in-first-out queue this replaces it took
	// 31.9 s beside 31.8 s (2m10.3s beside 2m10.7s), completing with the busy
	// namespace's last Job. A third leaves room for a loaded machine.
	if quietTook > busyTook/3 {
		t.Errorf("the quiet namespace's Job took %s, over a third of the %s the busy namespace's %d Jobs took: it waited behind them",
			quietTook.Round(100*time.Millisecond), busyTook.Round(100*time.Millisecond), burstJobs)
	}
	if busyAtQuiet > burstJobs/2 {
		t.Errorf("%d of the busy namespace's %d Jobs completed before the quiet namespace's one; want under half", busyAtQuiet, burstJobs)
	}
	// Its events (SuccessfulCreate twice, Completed) take their turns by
	// namespace too: written first come first served, they trailed the
	// busy namespace's hundreds.
	eventsAt := done.waitEvents(ctx, t, quiet, quietPods+1)
	t.Logf("the quiet Job's %d events seen %s after its creation", quietPods+1, eventsAt.Sub(created).Round(100*time.Millisecond))
	if eventsTook := eventsAt.Sub(created); eventsTook > busyTook/3 {
		t.Errorf("the quiet namespace's events were seen %s after its Job's creation, over a third of the %s the busy namespace's Jobs took: they waited behind its events",
			eventsTook.Round(100*time.Millisecond), busyTook.Round(100*time.Millisecond))
	}
}

// The long syncs of TestOneNamespacesLongSyncsDoNotHoldBackAnothersJob: as
// many Jobs as the executor has workers (its default 5), each of longPods
// pods at once, so that each of their syncs creating their pods or removing
// their finalizers takes longPods/4 s at the default QPS of 20.
const (
	longJobs = 5
	longPods = 100
)

// TestOneNamespacesLongSyncsDoNotHoldBackAnothersJob: namespace long-busy
// creates 5 Jobs of 100 pods; once all 500 pods exist, when each of its 5
// syncs removes the finalizers of up to 100 finished pods at a fifth of the
// budget, namespace long-quiet creates one Job of 2 pods. The busy
// namespace's syncs give their workers up to it (a worker's sync stops at
// the next token after its first 8 requests while another namespace's Job
// waits), so the quiet Job completes within a small part of the time the
// busy namespace still takes. (When every sync kept its worker to its end,
// the quiet Job waited for one, then for another for its last sync, and
// completed about with the busy namespace's last Job.)
func TestOneNamespacesLongSyncsDoNotHoldBackAnothersJob(t *testing.T) {
	e, ctx, busy, quiet, done := busyAndQuiet(t, "long")

	start := time.Now()
	createJobs(ctx, t, e, busy, longJobs, longPods)
	waitForPods(ctx, t, e, busy, longJobs*longPods)
	t.Logf("all %d pods of %s after %s", longJobs*longPods, busy, time.Since(start).Round(100*time.Millisecond))
	quietBesideLongSyncs(ctx, t, e, busy, quiet, done, "finalizer removals")
}

// TestOneNamespacesFailingJobsDoNotHoldBackAnothersJob: namespace
// failing-busy runs 5 Jobs of 100 pods that run until deleted; once all 500
// exist, their deadline passes (activeDeadlineSeconds set to 1), and
// namespace failing-quiet creates one Job of 2 pods. Each failing Job's sync
// deletes its 100 active pods at a fifth of the budget, keeping their
// finalizers, as the reference's deleteActivePods: with no expectations to
// guard against deleting them twice, those syncs kept their workers to the
// end, and the quiet Job waited for one. They give their workers up now,
// remembering the deletions in flight, so the quiet Job completes within a
// small part of the time the busy namespace's Jobs take to fail.
func TestOneNamespacesFailingJobsDoNotHoldBackAnothersJob(t *testing.T) {
	e, ctx, busy, quiet, done := busyAndQuiet(t, "failing")

	start := time.Now()
	createJobsOf(ctx, t, e, busy, longJobs, longPods, podTemplate(fateRun, "forever"))
	waitForPods(ctx, t, e, busy, longJobs*longPods)
	t.Logf("all %d pods of %s after %s", longJobs*longPods, busy, time.Since(start).Round(100*time.Millisecond))
	for i := range longJobs {
		name := fmt.Sprintf("job-%03d", i)
		if _, err := e.Cluster.Client.BatchV1().Jobs(busy).Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"activeDeadlineSeconds":1}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("setting %s/%s's deadline: %v", busy, name, err)
		}
	}
	quietBesideLongSyncs(ctx, t, e, busy, quiet, done, "deletions")
	for i := range longJobs {
		job, err := e.Cluster.Client.BatchV1().Jobs(busy).Get(ctx, fmt.Sprintf("job-%03d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The reason is the deadline's, as under the reference: a sync
		// giving its worker up in the deletions keeps the decision.
		if c := conditionOf(job, batchv1.JobFailed); c == nil || c.Reason != batchv1.JobReasonDeadlineExceeded {
			t.Errorf("%s/%s finished with conditions %+v, want Failed with reason %s", busy, job.Name, job.Status.Conditions, batchv1.JobReasonDeadlineExceeded)
		}
	}
}

// podTimeline says when namespace ns's pods were created and last changed
// condition (whole seconds, as the API server keeps them) after from: where
// a slow Job's time went, the executor's creations or the fake kubelet.
func podTimeline(ctx context.Context, t *testing.T, e *Env, ns string, from time.Time) string {
	t.Helper()
	pods, err := e.Cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	from = from.Truncate(time.Second)
	var created, changed time.Time
	for _, pod := range pods.Items {
		created = latest(created, pod.CreationTimestamp.Time)
		for _, c := range pod.Status.Conditions {
			changed = latest(changed, c.LastTransitionTime.Time)
		}
	}
	return fmt.Sprintf("in whole seconds of the API server's clock, its %d pods created by %s, their conditions last changed by %s", len(pods.Items),
		created.Sub(from), changed.Sub(from))
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// conditionOf is the Job's condition of type typ that is true, or nil.
func conditionOf(job *batchv1.Job, typ batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range job.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// quietBesideLongSyncs creates namespace quiet's Job of quietPods pods now,
// waits for it and for namespace busy's longJobs Jobs to finish, and fails
// the test when the quiet Job took over a third of the time the busy Jobs
// took from now: it waited behind their long syncs (of what).
func quietBesideLongSyncs(ctx context.Context, t *testing.T, e *Env, busy, quiet string, done *jobMilestones, what string) {
	t.Helper()
	created := time.Now()
	createJobs(ctx, t, e, quiet, 1, quietPods)
	quietAt := done.wait(ctx, t, quiet, 1)
	busyAtQuiet := done.count(busy)
	lastAt := done.wait(ctx, t, busy, longJobs)
	quietTook, busyLeft := quietAt.Sub(created), lastAt.Sub(created)
	t.Logf("%d Jobs of %d pods in %s all finished %s later; the Job of %d pods in %s complete %s after its creation, when %d of %s's Jobs had finished (%s)",
		longJobs, longPods, busy, busyLeft.Round(100*time.Millisecond), quietPods, quiet, quietTook.Round(100*time.Millisecond), busyAtQuiet, busy,
		podTimeline(ctx, t, e, quiet, created))
	if quietTook > busyLeft/3 {
		t.Errorf("the quiet namespace's Job took %s, over a third of the %s the busy namespace's Jobs still took: it waited behind their %s",
			quietTook.Round(100*time.Millisecond), busyLeft.Round(100*time.Millisecond), what)
	}
}

// waitForPods waits until namespace ns has n pods.
func waitForPods(ctx context.Context, t *testing.T, e *Env, ns string, n int) {
	t.Helper()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		pods, err := e.Cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) >= n {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("%d of %d pods in %s when the test's time ran out", len(pods.Items), n, ns)
		}
	}
}

// busyAndQuiet starts a fairness test: namespaces PREFIX-busy and
// PREFIX-quiet, whose Jobs' completions are followed, and 4 minutes for the
// test (its context ends with it).
func busyAndQuiet(t *testing.T, prefix string) (e *Env, ctx context.Context, busy, quiet string, done *jobMilestones) {
	t.Helper()
	if builtinOnly() {
		t.Skip("needs jobplane's services")
	}
	e = sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	busy = newNamespace(t, e, prefix+"-busy")
	quiet = newNamespace(t, e, prefix+"-quiet")
	done = watchJobs(ctx, t, e, busy, quiet)
	// Registered last, so run first: the informers' shutdown waits for
	// the context's end.
	t.Cleanup(cancel)
	return e, ctx, busy, quiet, done
}

// createJobs creates n jobplane Jobs of pods pods each, whose pods run 2 s,
// in namespace ns, at once.
func createJobs(ctx context.Context, t *testing.T, e *Env, ns string, n int, pods int32) {
	t.Helper()
	createJobsOf(ctx, t, e, ns, n, pods, podTemplate(fateAfter, podRun))
}

// createJobsOf creates n jobplane Jobs of pods pods each, of template, in
// namespace ns, at once.
func createJobsOf(ctx context.Context, t *testing.T, e *Env, ns string, n int, pods int32, template corev1.PodTemplateSpec) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			job := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job-%03d", i), Namespace: ns},
				Spec: batchv1.JobSpec{
					ManagedBy:   ptr.To(jobplaneManager),
					Completions: ptr.To(pods), Parallelism: ptr.To(pods),
					Template: template,
				},
			}
			if _, err := e.Cluster.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
				errs <- fmt.Errorf("creating %s/%s: %w", ns, job.Name, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// jobMilestones records when each Job of the watched namespaces was first seen
// finished: Complete, or Failed; and when each event about a Job was first
// seen.
type jobMilestones struct {
	mu     sync.Mutex
	at     map[string]map[string]time.Time // namespace → Job → time
	events map[string]map[string]time.Time // namespace → event → time
	seen   chan struct{}                   // signalled on every new completion or event
}

// watchJobs follows the Jobs of namespaces, and the events about them, until
// ctx ends.
func watchJobs(ctx context.Context, t *testing.T, e *Env, namespaces ...string) *jobMilestones {
	t.Helper()
	c := &jobMilestones{at: map[string]map[string]time.Time{}, events: map[string]map[string]time.Time{}, seen: make(chan struct{}, 1)}
	signal := func() {
		select {
		case c.seen <- struct{}{}:
		default:
		}
	}
	// firstSeen records now as when name of namespace ns was first seen in
	// seen.
	firstSeen := func(seen map[string]map[string]time.Time, ns, name string) {
		c.mu.Lock()
		if _, ok := seen[ns][name]; !ok {
			seen[ns][name] = time.Now()
		}
		c.mu.Unlock()
		signal()
	}
	record := func(obj any) {
		if job, ok := obj.(*batchv1.Job); ok && (hasCondition(job, batchv1.JobComplete) || hasCondition(job, batchv1.JobFailed)) {
			firstSeen(c.at, job.Namespace, job.Name)
		}
	}
	recordEvent := func(obj any) {
		if ev, ok := obj.(*corev1.Event); ok && ev.InvolvedObject.Kind == "Job" {
			firstSeen(c.events, ev.Namespace, ev.Name)
		}
	}
	for _, ns := range namespaces {
		c.at[ns], c.events[ns] = map[string]time.Time{}, map[string]time.Time{}
		factory := informers.NewSharedInformerFactoryWithOptions(e.Cluster.Client, 0, informers.WithNamespace(ns))
		if _, err := factory.Core().V1().Events().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: recordEvent}); err != nil {
			t.Fatal(err)
		}
		if _, err := factory.Batch().V1().Jobs().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    record,
			UpdateFunc: func(_, cur any) { record(cur) },
		}); err != nil {
			t.Fatal(err)
		}
		factory.Start(ctx.Done())
		t.Cleanup(factory.Shutdown)
		if !cache.WaitForCacheSync(ctx.Done(), factory.Batch().V1().Jobs().Informer().HasSynced, factory.Core().V1().Events().Informer().HasSynced) {
			t.Fatalf("the Jobs of %s did not sync", ns)
		}
	}
	return c
}

// count is how many Jobs of ns have finished.
func (c *jobMilestones) count(ns string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.at[ns])
}

// wait waits until n Jobs of ns have finished and returns when the last of
// them did.
func (c *jobMilestones) wait(ctx context.Context, t *testing.T, ns string, n int) time.Time {
	t.Helper()
	return c.waitIn(ctx, t, c.at, ns, n, "Jobs finished")
}

// waitEvents waits until n events about Jobs of ns have been seen and
// returns when the last of them was.
func (c *jobMilestones) waitEvents(ctx context.Context, t *testing.T, ns string, n int) time.Time {
	t.Helper()
	return c.waitIn(ctx, t, c.events, ns, n, "events about Jobs seen")
}

func (c *jobMilestones) waitIn(ctx context.Context, t *testing.T, seen map[string]map[string]time.Time, ns string, n int, what string) time.Time {
	t.Helper()
	for {
		c.mu.Lock()
		var last time.Time
		for _, at := range seen[ns] {
			if at.After(last) {
				last = at
			}
		}
		got := len(seen[ns])
		c.mu.Unlock()
		if got >= n {
			return last
		}
		select {
		case <-c.seen:
		case <-ctx.Done():
			t.Fatalf("%d of %d %s in %s when the test's time ran out", got, n, what, ns)
		}
	}
}
