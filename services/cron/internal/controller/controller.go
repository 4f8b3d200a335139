// Package controller is the cron service's control loop: informers on
// jobplane CronJobs and on the Jobs they own, a delaying workqueue fair
// between namespaces (fairqueue; its API requests queue for the API budget
// in the same order, fairlimit), workers
// that ask the pure decision (package decide) what a sync does and perform
// it, handing every run to the executor (SubmitJob) and every deletion too
// (DeleteJob).
package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/fairevents"
	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/fairorder"
	"github.com/jobplane/jobplane/lib/fairqueue"
	"github.com/jobplane/jobplane/lib/keyedmutex"
	"github.com/jobplane/jobplane/services/cron/internal/batchcron"
	"github.com/jobplane/jobplane/services/cron/internal/decide"
)

// Retry bounds of a failed sync (the executor or the API server
// unavailable): soon at first, at most every half minute.
const (
	minRetry = 500 * time.Millisecond
	maxRetry = 30 * time.Second
)

// controllerUIDIndex indexes Jobs by their namespace and the UID of their
// controlling CronJob (controllerIndexKey): owner references are
// namespace-local, so a Job in another namespace naming a CronJob's UID is
// not that CronJob's.
const controllerUIDIndex = "controllerUID"

func controllerIndexKey(namespace string, uid types.UID) string {
	return namespace + "/" + string(uid)
}

// Config is what the controller works with.
type Config struct {
	// Kube reads Jobs (informer, live reads) and records events.
	Kube kubernetes.Interface
	// Informers is the factory the Job informer comes from.
	Informers informers.SharedInformerFactory
	// CronJobs reads and writes cronjobs.jobplane.dev.
	CronJobs dynamic.NamespaceableResourceInterface
	// CronJobInformers is the factory the CronJob informer comes from; nil
	// runs no jobplane CronJobs (drop-in mode where the custom resource is
	// not installed).
	CronJobInformers dynamicinformer.DynamicSharedInformerFactory
	// DropIn runs batch/v1 CronJobs too (their informer comes from
	// Informers, their writes go through Kube), in place of the built-in
	// CronJob controller.
	DropIn bool
	// EventSource is the component of the events recorded; "jobplane-cron"
	// when empty.
	EventSource string
	// Executor receives every run (SubmitJob) and deletion (DeleteJob).
	Executor jobplanev1.ExecutorServiceClient
	// Local is the zone of a CronJob without spec.timeZone.
	Local *time.Location
	// NamespaceWeights are the namespaces' shares of the workers' turns;
	// nil: all equal.
	NamespaceWeights fairorder.Shares
	Clock            clock.WithTicker
	Log              *slog.Logger
	Metrics          *Metrics
}

// Controller runs jobplane CronJobs.
type Controller struct {
	cfg Config
	log *slog.Logger
	// kinds are the kinds of CronJob run, by apiVersion.
	kinds    map[string]cronJobKind
	jobs     cache.Indexer
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	events   record.EventBroadcaster
	recorder record.EventRecorder
	metrics  *Metrics
	missed   missedRuns
	written  writtenStatuses
	leading  func() (bool, string)
	// syncing serialises a CronJob's syncs and its Trigger and Backfill.
	syncing keyedmutex.Mutex
	// seats are the workers' holds; a call to the executor holding one may
	// be given up to another namespace (yield.go).
	seats *seats
}

// New builds a controller and registers its informer handlers.
func New(cfg Config) (*Controller, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Local == nil {
		cfg.Local = time.Local
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(cfg.DropIn)
	}
	if cfg.EventSource == "" {
		cfg.EventSource = "jobplane-cron"
	}
	broadcaster := record.NewBroadcaster()
	jobInformer := cfg.Informers.Batch().V1().Jobs().Informer()
	order := fairorder.NewOrder(cfg.NamespaceWeights)
	c := &Controller{
		cfg:   cfg,
		log:   cfg.Log,
		kinds: map[string]cronJobKind{},
		jobs:  jobInformer.GetIndexer(),
		queue: fairqueue.New(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](minRetry, maxRetry),
			fairqueue.Config{Name: "jobplane_cronjob", Clock: cfg.Clock, Order: order}),
		events:   broadcaster,
		recorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: cfg.EventSource}),
		metrics:  cfg.Metrics,
		leading:  func() (bool, string) { return true, "" },
		seats:    newSeats(cfg.Clock, order),
	}
	if err := jobInformer.AddIndexers(cache.Indexers{controllerUIDIndex: indexByController}); err != nil {
		return nil, fmt.Errorf("adding the Job controller index: %w", err)
	}
	handlers := cache.ResourceEventHandlerFuncs{AddFunc: c.addCronJob, UpdateFunc: c.updateCronJob, DeleteFunc: c.deleteCronJob}
	if cfg.CronJobInformers != nil {
		cronJobInformer := cfg.CronJobInformers.ForResource(cronapi.GroupVersionResource)
		c.kinds[cronapi.APIVersion] = customCronJobs{lister: cronJobInformer.Lister(), client: cfg.CronJobs}
		if _, err := cronJobInformer.Informer().AddEventHandler(handlers); err != nil {
			return nil, fmt.Errorf("adding the CronJob event handler: %w", err)
		}
		c.synced = append(c.synced, cronJobInformer.Informer().HasSynced)
	}
	if cfg.DropIn {
		batchInformer := cfg.Informers.Batch().V1().CronJobs()
		c.kinds[batchcron.APIVersion] = batchCronJobs{lister: batchInformer.Lister(), kube: cfg.Kube}
		if _, err := batchInformer.Informer().AddEventHandler(handlers); err != nil {
			return nil, fmt.Errorf("adding the batch/v1 CronJob event handler: %w", err)
		}
		c.synced = append(c.synced, batchInformer.Informer().HasSynced)
	}
	if _, err := jobInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.addJob,
		UpdateFunc: c.updateJob,
		DeleteFunc: c.deleteJob,
	}); err != nil {
		return nil, fmt.Errorf("adding the Job event handler: %w", err)
	}
	c.synced = append(c.synced, jobInformer.HasSynced)
	return c, nil
}

// SetLeader tells the controller how to know whether this replica leads, for
// Trigger and Backfill. Without it the controller always leads.
func (c *Controller) SetLeader(leading func() (bool, string)) { c.leading = leading }

// HasSynced says whether both informers have listed everything once.
func (c *Controller) HasSynced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Run waits for the caches, then runs workers until ctx ends; it returns once
// every worker has given back the CronJob in hand.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	stopEvents := fairevents.Start(ctx, c.events, fairlimit.EventSink{Events: c.cfg.Kube.CoreV1().Events(""), Context: ctx}, c.cfg.Clock, c.log, c.metrics.eventsDropped)
	defer stopEvents()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return errors.New("the CronJob and Job caches did not sync")
	}
	// A replica that starts leading plans every CronJob at once: a sync
	// finding nothing due requeues itself at the next scheduled time.
	for _, key := range c.cronJobKeys() {
		c.queue.Add(key)
	}
	c.log.Info("starting workers", "workers", workers)
	c.seats.setWorkers(workers)
	var wg sync.WaitGroup
	wg.Go(func() { c.seats.run(ctx, c.logGivenUp) })
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.worker, time.Second) })
	}
	<-ctx.Done()
	c.queue.ShutDown()
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
	ctx, st := c.seats.take(ctx, key)
	defer c.seats.release(st)
	start := c.cfg.Clock.Now()
	requeueAfter, err := c.sync(ctx, key)
	c.log.Debug("synced", "cronjob", key, "took", c.cfg.Clock.Since(start), "err", err)
	switch {
	case errors.Is(err, errYielded):
		// Not a failure: queued again at once, behind the namespace its
		// worker went to.
		c.metrics.syncsYielded.Inc()
		c.queue.Forget(key)
		c.queue.Add(key)
	case err != nil:
		c.log.Warn("sync failed; retrying with backoff", "cronjob", key, "err", err)
		c.queue.AddRateLimited(key)
	case requeueAfter != nil:
		c.queue.Forget(key)
		c.queue.AddAfter(key, *requeueAfter)
	default:
		c.queue.Forget(key)
	}
	return true
}

// logGivenUp logs a call to the executor given up.
func (c *Controller) logGivenUp(given *givenUp) {
	c.log.Debug("a call to the executor given up for another namespace", "namespace", given.namespace, "lasted", given.lasted, "to", given.to)
}

// sync is one sync of the CronJob of key: decide, perform, write the status.
func (c *Controller) sync(ctx context.Context, key string) (*time.Duration, error) {
	unlock := c.syncing.Lock(key)
	defer unlock()
	ctx = fairlimit.WithLane(ctx, key)
	start := c.cfg.Clock.Now()
	apiVersion, ns, name, err := splitCronJobKey(key)
	if err != nil {
		return nil, err
	}
	kind, err := c.kindOf(apiVersion)
	if err != nil {
		return nil, err
	}
	cronJob, err := kind.cached(ns, name)
	var invalid *invalidCronJob
	switch {
	case apierrors.IsNotFound(err):
		c.missed.forget(key)
		c.written.forget(key)
		return nil, nil
	case errors.As(err, &invalid):
		// As an object the API server refused: nothing runs until it is
		// edited, which syncs it again.
		c.recorder.Eventf(eventTarget(invalid.cronJob), corev1.EventTypeWarning, "InvalidAnnotations",
			"not run until its jobplane annotations are valid: %v", invalid.errs.ToAggregate())
		return nil, nil
	case err != nil:
		return nil, err
	}
	in, err := c.input(ctx, c.written.freshest(key, cronJob))
	if err != nil {
		return nil, err
	}
	p := decide.Sync(in)
	out := c.perform(ctx, in, p)
	c.metrics.observeSync(c.cfg.Clock.Since(start), out.err)
	if out.err != nil {
		return nil, out.err
	}
	if len(in.Unread) > 0 {
		return nil, fmt.Errorf("CronJob %s: %d %w", key, len(in.Unread), errUnread)
	}
	if out.stop {
		return nil, nil
	}
	return p.RequeueAfter, nil
}

// cronJobKeys are the keys of every cached CronJob, of every kind run.
func (c *Controller) cronJobKeys() []string {
	var keys []string
	for apiVersion, kind := range c.kinds {
		for _, obj := range kind.list() {
			keys = append(keys, cronJobKey(apiVersion, obj.GetNamespace(), obj.GetName()))
		}
	}
	return keys
}

// kindOf is the kind of CronJob of apiVersion ("" is jobplane's).
func (c *Controller) kindOf(apiVersion string) (cronJobKind, error) {
	kind, ok := c.kinds[cmp.Or(apiVersion, cronapi.APIVersion)]
	if !ok {
		return nil, fmt.Errorf("no CronJobs of %s are run here", apiVersion)
	}
	return kind, nil
}

// liveCronJob reads a CronJob of apiVersion from the API server.
func (c *Controller) liveCronJob(ctx context.Context, apiVersion, namespace, name string) (*cronapi.CronJob, error) {
	kind, err := c.kindOf(apiVersion)
	if err != nil {
		return nil, err
	}
	return kind.live(ctx, namespace, name)
}

// input is what the decision reads, with the reference's two live reads
// done here so the decision stays pure: a CronJob whose cached status lacks
// an unfinished Job it owns is read again (the reference's informer-lag
// check), and an active Job missing from the cache is looked up by name
// before it is called missing.
func (c *Controller) input(ctx context.Context, cronJob *cronapi.CronJob) (decide.Input, error) {
	owned, err := c.ownedJobs(cronJob)
	if err != nil {
		return decide.Input{}, err
	}
	if hasUnlistedActiveJob(cronJob, owned) {
		fresh, err := c.liveCronJob(ctx, cronJob.APIVersion, cronJob.Namespace, cronJob.Name)
		if err != nil {
			return decide.Input{}, err
		}
		cronJob = fresh
	}
	jobs := owned
	ownedUIDs := uidsOf(owned)
	read := map[string]bool{}
	var unread map[types.NamespacedName]bool
	for _, ref := range cronJob.Status.Active {
		if ownedUIDs[ref.UID] || ref.Namespace != cronJob.Namespace || read[ref.Name] {
			continue // read once; another namespace's Job is never the CronJob's
		}
		if len(read) == maxLiveReads {
			// A status anyone allowed to write it may fill: each such
			// reference costs a read of the API budget every tenant
			// shares. The rest are read in the next syncs.
			if unread == nil {
				unread = map[types.NamespacedName]bool{}
			}
			unread[types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}] = true
			continue
		}
		read[ref.Name] = true
		job, err := c.cfg.Kube.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return decide.Input{}, err
		case !ownedUIDs[job.UID]:
			jobs = append(jobs, job)
		}
	}
	return decide.Input{CronJob: cronJob, Jobs: jobs, Now: c.cfg.Clock.Now(), Local: c.cfg.Local, Unread: unread}, nil
}

// maxLiveReads bounds the Jobs one sync reads from the API server: the
// active references whose Job the CronJob does not control (by UID), each
// looked up by name, as the reference does, before it is called missing.
// Those beyond are left for the next syncs (decide.Input.Unread).
const maxLiveReads = 32

// errUnread fails a sync that left active Jobs unread, so that the next,
// with the queue's backoff, reads them.
var errUnread = errors.New("active Jobs left to read")

func uidsOf(jobs []*batchv1.Job) map[types.UID]bool {
	uids := make(map[types.UID]bool, len(jobs))
	for _, job := range jobs {
		uids[job.UID] = true
	}
	return uids
}

// ownedJobs are the cached Jobs of the CronJob's namespace whose controller
// is the CronJob (by UID).
func (c *Controller) ownedJobs(cronJob *cronapi.CronJob) ([]*batchv1.Job, error) {
	objs, err := c.jobs.ByIndex(controllerUIDIndex, controllerIndexKey(cronJob.Namespace, cronJob.UID))
	if err != nil {
		return nil, err
	}
	jobs := make([]*batchv1.Job, 0, len(objs))
	for _, obj := range objs {
		if job, ok := obj.(*batchv1.Job); ok {
			jobs = append(jobs, job)
		}
	}
	return jobs, nil
}

// hasUnlistedActiveJob says whether an unfinished owned Job is missing from
// the CronJob's active list: the CronJob in the cache may be older than the
// Job.
func hasUnlistedActiveJob(cronJob *cronapi.CronJob, owned []*batchv1.Job) bool {
	listed := make(map[types.UID]bool, len(cronJob.Status.Active))
	for _, ref := range cronJob.Status.Active {
		listed[ref.UID] = true
	}
	for _, job := range owned {
		if !isFinished(job) && !listed[job.UID] {
			return true
		}
	}
	return false
}

func isFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func indexByController(obj any) ([]string, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOf(job); ref != nil && isCronJob(ref) {
		return []string{controllerIndexKey(job.Namespace, ref.UID)}, nil
	}
	return nil, nil
}

// isCronJob says whether ref names a CronJob of a kind this controller may
// run: jobplane's, or batch/v1's.
func isCronJob(ref *metav1.OwnerReference) bool {
	return ref.Kind == cronapi.Kind && (ref.APIVersion == cronapi.APIVersion || ref.APIVersion == batchcron.APIVersion)
}
