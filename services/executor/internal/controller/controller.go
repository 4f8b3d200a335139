// Package controller is the executor's control loop: the reference Job
// controller's loop around the planner. Informers on jobplane's Jobs and on
// pods feed a rate-limited workqueue, fair between namespaces (fairqueue);
// each sync claims the Job's pods, sends a snapshot to the planner, and
// performs the plan it gets back, in order, stopping at the first action
// that fails.
package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	batchv1listers "k8s.io/client-go/listers/batch/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/fairevents"
	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/fairorder"
	"github.com/jobplane/jobplane/lib/fairqueue"
	"github.com/jobplane/jobplane/lib/featuregates"
	"github.com/jobplane/jobplane/lib/keyedmutex"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/executor/internal/dropin"
	"github.com/jobplane/jobplane/services/executor/internal/gang"
	"github.com/jobplane/jobplane/services/executor/internal/jobstate"
)

// Delays of the reference.
const (
	// syncJobBatchPeriod batches the syncs pod events and status changes
	// trigger.
	syncJobBatchPeriod = time.Second
	// Per-item backoff of a Job whose sync failed.
	defaultJobAPIBackoff = time.Second
	maxJobAPIBackoff     = time.Minute
	// plannerTimeout bounds one planner call: a planner that hangs must not
	// hold a worker (or shutdown) forever.
	plannerTimeout = 30 * time.Second
)

// Planner answers snapshots with plans.
type Planner interface {
	Plan(ctx context.Context, req *jobplanev1.PlanSyncRequest) (*jobplanev1.SyncPlan, error)
}

// SnapshotPlanner is a Planner that builds the request itself, as a delta
// against the last snapshot of the Job when it can (plannerclient.Client).
type SnapshotPlanner interface {
	PlanSnapshot(ctx context.Context, snap *plan.Snapshot) (*jobplanev1.SyncPlan, error)
}

// Config is what a Controller is built from.
type Config struct {
	Client kubernetes.Interface
	// PodWrites creates, patches and deletes the pods; nil: Client's. The
	// executor's answers only the metadata of a pod (podwrites): nothing
	// else is done with it.
	PodWrites typedcorev1.PodsGetter
	Informers informers.SharedInformerFactory
	Planner   Planner
	// ManagedBy is the spec.managedBy value of the Jobs to run.
	ManagedBy string
	// DropIn runs the Jobs of the built-in Job controller too (spec.managedBy
	// unset or dropin.BuiltinManagedBy), in its place.
	DropIn bool
	// FeatureGates are the reference's gates followed (JobManagedBy off:
	// in drop-in mode every Job is the controller's, as the built-in's).
	FeatureGates featuregates.Features
	// EventSource is the component of the events recorded; empty is
	// "jobplane-executor".
	EventSource string
	// Finalizer is the pod tracking finalizer.
	Finalizer string
	Clock     clock.WithTicker
	Log       *slog.Logger
	Metrics   *Metrics
	// NamespaceWeights are the namespaces' shares of the workers' turns;
	// nil: all equal.
	NamespaceWeights fairorder.Shares
	// APIBudget is the clients' rate limiter: a worker's sync takes the
	// tokens of its pods' first requests from it itself, so that it can
	// give its worker up to another namespace without cutting a request
	// sent (yield.go).
	// nil: syncs never give their worker up.
	APIBudget *fairlimit.Limiter
}

// Controller runs jobplane's Jobs.
type Controller struct {
	cfg      Config
	log      *slog.Logger
	pods     podControl
	jobs     batchv1listers.JobLister
	podStore corev1listers.PodLister
	podIndex cache.Indexer
	synced   []cache.InformerSynced
	// stores are the informer stores whose freshness a sync checks.
	stores map[string]jobstate.LastSyncRVGetter
	state  *jobstate.Store
	queue  workqueue.TypedRateLimitingInterface[string]
	// order is the queue's order, which says who waits for a worker;
	// workers are how many there are, busy how many are syncing.
	order    *fairorder.Order
	workers  atomic.Int32
	busy     atomic.Int32
	orphans  workqueue.TypedRateLimitingInterface[orphanKey]
	events   record.EventBroadcaster
	recorder record.EventRecorder
	metrics  *Metrics
	// gang is the scheduling objects of gang-scheduled Jobs; nil without
	// the WorkloadWithJob gate.
	gang *gang.Objects
	// syncing serialises the syncs of one Job between the workers and the
	// SyncJob and Execute RPCs.
	syncing keyedmutex.Mutex
}

// New builds a controller and registers its informer handlers.
func New(cfg Config) (*Controller, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(cfg.DropIn)
	}
	broadcaster := record.NewBroadcaster()
	jobInformer := cfg.Informers.Batch().V1().Jobs()
	podInformer := cfg.Informers.Core().V1().Pods()
	order := fairorder.NewOrder(cfg.NamespaceWeights)
	c := &Controller{
		cfg:      cfg,
		log:      cfg.Log,
		pods:     podControl{client: podWrites(cfg)},
		jobs:     jobInformer.Lister(),
		podStore: podInformer.Lister(),
		state:    jobstate.New(cfg.Clock),
		queue: fairqueue.New(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](defaultJobAPIBackoff, maxJobAPIBackoff),
			fairqueue.Config{Name: "jobplane_job", Clock: cfg.Clock, Order: order}),
		order: order,
		orphans: fairqueue.New(
			workqueue.NewTypedItemExponentialFailureRateLimiter[orphanKey](defaultJobAPIBackoff, maxJobAPIBackoff),
			fairqueue.Config{Name: "jobplane_orphan_pod", Clock: cfg.Clock, Weights: cfg.NamespaceWeights}),
		events:   broadcaster,
		recorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: cmp.Or(cfg.EventSource, "jobplane-executor")}),
		metrics:  cfg.Metrics,
	}
	// The caches keep what decisions read: a pod of the cluster costs its
	// contract's fields (with the strings pods repeat shared), another
	// controller's Job its identity.
	if err := podInformer.Informer().SetTransform((&kubeconv.PodTrimmer{}).Transform); err != nil {
		return nil, fmt.Errorf("trimming the pod cache: %w", err)
	}
	if err := jobInformer.Informer().SetTransform(c.trimJob); err != nil {
		return nil, fmt.Errorf("trimming the Job cache: %w", err)
	}
	if err := podInformer.Informer().AddIndexers(cache.Indexers{
		controllerUIDIndex:   indexByController,
		finalizerHolderIndex: c.indexFinalizerHolders,
	}); err != nil {
		return nil, fmt.Errorf("adding the pod indexes: %w", err)
	}
	c.podIndex = podInformer.Informer().GetIndexer()
	c.pods.wrote = c.podWritten
	c.stores = map[string]jobstate.LastSyncRVGetter{}
	if g, ok := podInformer.Informer().GetStore().(jobstate.LastSyncRVGetter); ok {
		c.stores[jobstate.Pods] = g
	}
	if g, ok := jobInformer.Informer().GetStore().(jobstate.LastSyncRVGetter); ok {
		c.stores[jobstate.Jobs] = g
	}
	if _, err := jobInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addJob,
		UpdateFunc: c.updateJob,
		DeleteFunc: c.deleteJob,
	}); err != nil {
		return nil, fmt.Errorf("adding the Job event handler: %w", err)
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addPod,
		UpdateFunc: c.updatePod,
		DeleteFunc: func(obj any) { c.deletePod(obj, true) },
	}); err != nil {
		return nil, fmt.Errorf("adding the pod event handler: %w", err)
	}
	c.synced = []cache.InformerSynced{jobInformer.Informer().HasSynced, podInformer.Informer().HasSynced}
	if cfg.FeatureGates.WorkloadWithJob {
		objects, err := gang.New(cfg.Client, cfg.Informers, c.recorder, cfg.Log)
		if err != nil {
			return nil, err
		}
		c.gang = objects
		c.synced = append(c.synced, objects.Synced...)
	}
	return c, nil
}

// HasSynced says whether both informers have listed everything once.
func (c *Controller) HasSynced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Jobs is the Job lister the controller reads.
func (c *Controller) Jobs() batchv1listers.JobLister { return c.jobs }

// Run waits for the caches, then runs workers syncing Jobs and as many
// removing finalizers of orphan pods, until ctx ends; it returns once every
// worker has given back the item in hand.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	stopEvents := fairevents.Start(ctx, c.events, fairlimit.EventSink{Events: c.cfg.Client.CoreV1().Events(""), Context: ctx}, c.cfg.Clock, c.log, c.metrics.eventsDropped)
	defer stopEvents()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return errors.New("the Job and pod caches did not sync")
	}
	c.log.Info("starting workers", "workers", workers)
	var wg sync.WaitGroup
	c.workers.Store(int32(workers))
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.worker, time.Second) })
		wg.Go(func() { wait.UntilWithContext(ctx, c.orphanWorker, time.Second) })
	}
	<-ctx.Done()
	c.queue.ShutDown()
	c.orphans.ShutDown()
	wg.Wait()
	c.log.Info("workers stopped")
	return nil
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	c.busy.Add(1)
	defer c.busy.Add(-1)
	// The worker's context ends when the process stops or the Lease is
	// lost: the sync's remaining writes then fail at once, as the
	// reference's do, so a new leader never races a replica that no longer
	// leads. What was not done is planned again by the next sync.
	_, _, _, err := c.sync(yieldable(ctx, c.cfg.Clock.Now()), key)
	if errors.Is(err, errYielded) {
		// Not a failure: queued again at once, behind the namespace
		// it gave its worker up to.
		c.queue.Forget(key)
		c.queue.Add(key)
		return true
	}
	if err == nil || jobGoneOrNotOurs(err) {
		// As the reference, a Job deleted or not ours is done with.
		c.queue.Forget(key)
		return true
	}
	var stale *jobstate.StaleCacheError
	if errors.As(err, &stale) {
		// Not a failure either: the cache's event of our own write
		// queues the key again; the backoff is the backstop.
		c.log.Debug("cache behind the executor's own write; sync put off", "job", key, "err", err)
	} else {
		c.log.Warn("sync failed; retrying with backoff", "job", key, "err", err)
	}
	c.queue.AddRateLimited(key)
	return true
}

// SyncJob syncs a Job now, for the SyncJob RPC.
func (c *Controller) SyncJob(ctx context.Context, namespace, name string) (*plan.Plan, []*jobplanev1.ActionOutcome, *batchv1.Job, error) {
	p, outcomes, job, err := c.sync(ctx, namespace+"/"+name)
	if err != nil {
		if status, ok := asStatus(err); ok {
			return p, outcomes, job, status
		}
		if p == nil {
			return nil, nil, nil, apierr.New(codes.Unavailable, "SYNC_FAILED", nil, "syncing %s/%s: %v", namespace, name, err)
		}
	}
	return p, outcomes, job, nil
}

// sync is one sync of the Job of key: the plan, the outcome of each action
// and the Job after. A failed action is an error, so the key is retried.
func (c *Controller) sync(ctx context.Context, key string) (p *plan.Plan, outcomes []*jobplanev1.ActionOutcome, after *batchv1.Job, err error) {
	unlock := c.syncing.Lock(key)
	defer unlock()
	ctx = fairlimit.WithKey(ctx, key)
	start := c.cfg.Clock.Now()
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	shared, err := c.jobs.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.state.Forget(key)
		c.metrics.jobDone(key)
		return nil, nil, nil, &jobNotFoundError{namespace: ns, name: name}
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if !c.managed(shared) {
		return nil, nil, shared, notManaged(shared, c.cfg.ManagedBy)
	}
	if isFinished(shared) {
		c.state.Release(key)
		c.metrics.jobDone(key)
		c.state.FinishObserved(shared.UID)
		return &plan.Plan{Summary: "The Job is finished; nothing to do.", ReleaseJobState: true}, nil, shared, nil
	}
	if c.state.FinishPending(shared.UID) {
		return &plan.Plan{Summary: "The Job was finished by the last write, not yet observed; nothing to do."}, nil, shared, nil
	}
	if err := c.state.EnsureReady(key, c.stores); err != nil {
		// Planning from a cache older than our own writes could create
		// or count pods twice; the retry comes once it caught up.
		var stale *jobstate.StaleCacheError
		if errors.As(err, &stale) {
			c.metrics.recordStaleSkip(stale.Resource)
		}
		return nil, nil, shared, err
	}
	// The state is read before the pods, as the reference checks its
	// expectations before listing: a pod arriving in between is then
	// counted, never created twice.
	state := c.state.State(key)
	job := shared.DeepCopy()
	pods, err := c.claimPods(ctx, job)
	if err != nil {
		return nil, nil, job, err
	}
	// Before any pod, so that every pod joins the Job's gang.
	podGroup, err := c.gang.Ensure(ctx, job, pods)
	if err != nil {
		return nil, nil, job, fmt.Errorf("ensuring Workload and PodGroup for Job %s: %w", key, err)
	}
	snap := &plan.Snapshot{Job: job, Pods: pods, State: state, Now: c.cfg.Clock.Now(), Finalizer: c.cfg.Finalizer}
	planStart := time.Now()
	planCtx, cancel := context.WithTimeout(ctx, plannerTimeout)
	var resp *jobplanev1.SyncPlan
	if sp, ok := c.cfg.Planner.(SnapshotPlanner); ok {
		resp, err = sp.PlanSnapshot(planCtx, snap)
	} else {
		resp, err = c.cfg.Planner.Plan(planCtx, snap.Request())
	}
	cancel()
	c.metrics.plannerDuration.Observe(time.Since(planStart).Seconds())
	if err != nil {
		c.metrics.plannerErrors.Inc()
		if apierr.Reason(err) == plan.ReasonTooLarge {
			// Only the Job's owner can make it fit: tell it on the Job.
			c.recorder.Event(job, corev1.EventTypeWarning, reasonSnapshotTooLarge, status.Convert(err).Message())
		}
		return nil, nil, job, fmt.Errorf("asking the planner: %w", err)
	}
	p, errs := plan.FromProto(resp, field.NewPath("plan"))
	if len(errs) > 0 {
		return nil, nil, job, fmt.Errorf("the planner's plan: %w", errs.ToAggregate())
	}
	outcomes, after, err = c.perform(ctx, key, job, p, podGroup)
	if !errors.Is(err, errYielded) { // the sync that finishes it is counted
		c.metrics.recordSync(p, err, c.cfg.Clock.Since(start))
	}
	return p, outcomes, after, err
}

// Execute performs a caller-supplied plan on the Job, for the Execute RPC.
func (c *Controller) Execute(ctx context.Context, namespace, name string, uid types.UID, p *plan.Plan) ([]*jobplanev1.ActionOutcome, *batchv1.Job, error) {
	key := namespace + "/" + name
	ctx = fairlimit.WithKey(ctx, key)
	// The plan's pods are checked before the Job's syncs are held back:
	// those the cache lacks are read live, which a caller could otherwise
	// use to keep workers waiting on its Jobs.
	job, err := c.executable(ctx, namespace, name, uid)
	if err != nil {
		return nil, nil, err
	}
	if err := c.checkPodRefs(ctx, job, p); err != nil {
		return nil, nil, err
	}
	unlock := c.syncing.Lock(key)
	defer unlock()
	if job, err = c.executable(ctx, namespace, name, uid); err != nil { // the same Job still, now that it is held
		return nil, nil, err
	}
	var podGroup *schedulingv1alpha2.PodGroup
	if c.gang != nil { // the Job's pods listed again only for gang scheduling
		pods, err := c.PodsOf(job)
		if err != nil {
			return nil, nil, err
		}
		if podGroup, err = c.gang.Ensure(ctx, job, pods); err != nil {
			return nil, nil, fromKube(err)
		}
	}
	outcomes, after, _ := c.perform(ctx, key, job, p, podGroup)
	return outcomes, after, nil
}

// executable reads the Job live: one jobplane manages, of that UID.
func (c *Controller) executable(ctx context.Context, namespace, name string, uid types.UID) (*batchv1.Job, error) {
	key := namespace + "/" + name
	job, err := c.cfg.Client.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		c.metrics.jobDone(key) // no Job of ours: keep no count for the name
		if apierrors.IsNotFound(err) {
			return nil, &jobNotFoundError{namespace: namespace, name: name}
		}
		return nil, fromKube(err)
	}
	if !c.managed(job) {
		c.metrics.jobDone(key)
		return nil, notManaged(job, c.cfg.ManagedBy)
	}
	if job.UID != uid {
		return nil, apierr.New(codes.FailedPrecondition, "UID_MISMATCH", map[string]string{"uid": string(job.UID)},
			"Job %s/%s has UID %s, not %s", namespace, name, job.UID, uid)
	}
	return job, nil
}

// checkPodRefs refuses a caller's plan that names a pod the Job does not
// control: in the Job's namespace, of that name and UID, with the Job as
// its controller. Performing it would touch a pod that is not the Job's, or
// report as deleted one it never deleted. A reference missing from the cache
// is read live once (the pod may be newer than the cache).
func (c *Controller) checkPodRefs(ctx context.Context, job *batchv1.Job, p *plan.Plan) error {
	owned, err := c.PodsOf(job)
	if err != nil {
		return err
	}
	controlled := make(map[string]types.UID, len(owned))
	for _, pod := range owned {
		controlled[pod.Name] = pod.UID
	}
	notOfJob := &podsNotOfJobError{namespace: job.Namespace, name: job.Name}
	readLive := map[string]bool{} // name/UID of each pod read live: whether the Job controls it
	for i, a := range p.Actions {
		var refs []plan.PodRef
		var kind string
		switch a := a.(type) {
		case plan.DeletePods:
			refs, kind = a.Pods, "deletePods"
		case plan.RemoveFinalizers:
			refs, kind = a.Pods, "removeFinalizers"
		}
		for j, ref := range refs {
			if uid, ok := controlled[ref.Name]; ok && uid == ref.UID {
				continue
			}
			key := ref.Name + "/" + string(ref.UID)
			ok, read := readLive[key]
			if !read {
				if len(readLive) == maxLiveReads {
					return apierr.New(codes.FailedPrecondition, "PODS_NOT_SEEN", map[string]string{"limit": strconv.Itoa(maxLiveReads)},
						"the plan names more than %d pods the executor's cache of the Job's pods does not hold, each read live: plan again from a fresh snapshot of the Job", maxLiveReads)
				}
				var err error
				if ok, err = c.controlsLive(ctx, job, ref); err != nil {
					return fromKube(err)
				}
				readLive[key] = ok
			}
			if !ok {
				path := field.NewPath("plan", "actions").Index(i).Child(kind, "pods").Index(j)
				notOfJob.refs = append(notOfJob.refs, podRefPath{path: path.String(), pod: ref.Name})
			}
		}
	}
	if len(notOfJob.refs) > 0 {
		return notOfJob
	}
	return nil
}

// maxLiveReads bounds the pods of a caller's plan read live, one after
// another: a plan naming pods the cache has not seen yet (just created)
// needs a few.
const maxLiveReads = 32

// controlsLive reads the pod of ref in the Job's namespace from the API
// server: whether it is ref's pod (same UID) and the Job controls it.
func (c *Controller) controlsLive(ctx context.Context, job *batchv1.Job, ref plan.PodRef) (bool, error) {
	pod, err := c.cfg.Client.CoreV1().Pods(job.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	controller := metav1.GetControllerOf(pod)
	return pod.UID == ref.UID && controller != nil && controller.UID == job.UID, nil
}

// podWritten records the pod's resourceVersion for the Job controlling it.
func (c *Controller) podWritten(pod *corev1.Pod) {
	if ref := metav1.GetControllerOf(pod); ref != nil {
		c.state.WroteAt(pod.Namespace+"/"+ref.Name, jobstate.Pods, pod.ResourceVersion)
	}
}

// podWrites is the client the pods are written with.
func podWrites(cfg Config) typedcorev1.PodsGetter {
	if cfg.PodWrites != nil {
		return cfg.PodWrites
	}
	return cfg.Client.CoreV1()
}

// trimJob is what the Job cache keeps of a Job: the whole Job (but its
// managedFields) when the controller runs it; of another controller's, only
// its metadata and spec.managedBy (which is immutable), all that is read of
// it: whose it is, and that its pods are not orphans.
func (c *Controller) trimJob(obj any) (any, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok || c.managed(job) {
		return kubeconv.TrimForCache(obj)
	}
	out := &batchv1.Job{TypeMeta: job.TypeMeta, ObjectMeta: job.ObjectMeta}
	out.ManagedFields = nil
	out.Spec.ManagedBy = job.Spec.ManagedBy
	return out, nil
}

// managed says whether the Job is one the controller runs.
func (c *Controller) managed(job *batchv1.Job) bool {
	return dropin.Runs(job, c.cfg.ManagedBy, c.cfg.DropIn, c.cfg.FeatureGates)
}

func isFinished(job *batchv1.Job) bool {
	return hasCondition(&job.Status, batchv1.JobComplete) || hasCondition(&job.Status, batchv1.JobFailed)
}
