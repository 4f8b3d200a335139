package controller

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/executor/internal/jobstate"
)

// Metrics are the reference Job controller's metrics under a jobplane_
// prefix (same names after it, same labels), and the executor's own; in
// drop-in mode the reference's under its own names too (job_controller_*),
// so that the dashboards and alerts of a cluster keep working when the
// executor takes the built-in controller's place.
type Metrics struct {
	// syncMetrics are jobplane's; reference the job_controller_ ones, or
	// nil.
	syncMetrics
	reference         *syncMetrics
	finalizersRemoved *prometheus.CounterVec
	apiRequests       *prometheus.CounterVec
	apiRequestsPerJob prometheus.Histogram
	perJob            jobRequestCounts
	plannerDuration   prometheus.Histogram
	plannerErrors     prometheus.Counter
	// syncsYielded counts the syncs that gave their worker up to another
	// namespace (yield.go), by the action they stopped in.
	syncsYielded *prometheus.CounterVec
	// eventsDropped counts the events not written (lib/fairevents).
	eventsDropped prometheus.Counter
	// externalNames are the controller_name values counted so far.
	externalNames struct {
		sync.Mutex
		seen map[string]struct{}
	}
}

// syncMetrics are the reference Job controller's metrics of what syncs do,
// under one name prefix.
type syncMetrics struct {
	syncDuration    *prometheus.HistogramVec
	syncs           *prometheus.CounterVec
	jobsFinished    *prometheus.CounterVec
	podsFinished    *prometheus.CounterVec
	failurePolicy   *prometheus.CounterVec
	podsCreated     *prometheus.CounterVec
	indexesFinished *prometheus.CounterVec
	staleSyncSkips  *prometheus.CounterVec
	// trackedTerminations counts pods becoming finished with the tracking
	// finalizer ("add") or ceasing to be ("delete"); externalJobs the Jobs
	// added that another controller manages.
	trackedTerminations *prometheus.CounterVec
	externalJobs        *prometheus.CounterVec
}

// ReferencePrefix is the reference Job controller's metrics subsystem.
const ReferencePrefix = "job_controller_"

func newSyncMetrics(prefix string) syncMetrics {
	return syncMetrics{
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: prefix + "job_sync_duration_seconds", Help: "Time of one Job sync: snapshot, planner call and the plan performed.",
			Buckets: prometheus.ExponentialBuckets(0.004, 2, 15),
		}, []string{"completion_mode", "result", "action"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "job_syncs_total", Help: "Job syncs.",
		}, []string{"completion_mode", "result", "action"}),
		jobsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "jobs_finished_total", Help: "Jobs finished.",
		}, []string{"completion_mode", "result", "reason"}),
		podsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "job_pods_finished_total", Help: "Finished pods counted in Job status.",
		}, []string{"completion_mode", "result"}),
		failurePolicy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "pod_failures_handled_by_failure_policy_total", Help: "Pod failures handled by a pod failure policy, by action.",
		}, []string{"action"}),
		podsCreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "job_pods_creation_total", Help: "Pods created for Jobs, by reason and status.",
		}, []string{"reason", "status"}),
		indexesFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "job_finished_indexes_total", Help: "Finished indexes of Indexed Jobs.",
		}, []string{"status", "backoffLimit"}),
		staleSyncSkips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "stale_sync_skips_total", Help: "Syncs put off because a cache had not yet seen the executor's own last write, by the cache's API group and resource.",
		}, []string{"group", "resource"}),
		trackedTerminations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "terminated_pods_tracking_finalizer_total", Help: "Terminated pods (Succeeded or Failed) with the tracking finalizer: add when one is seen, delete when it is gone or lost the finalizer.",
		}, []string{"event"}),
		externalJobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "jobs_by_external_controller_total", Help: "Jobs added whose spec.managedBy names another controller, by that name.",
		}, []string{"controller_name"}),
	}
}

func (s *syncMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.syncDuration, s.syncs, s.jobsFinished, s.podsFinished, s.failurePolicy, s.podsCreated, s.indexesFinished, s.staleSyncSkips,
		s.trackedTerminations, s.externalJobs}
}

// NewMetrics returns unregistered metrics; withReferenceNames adds the
// reference's (drop-in mode).
func NewMetrics(withReferenceNames bool) *Metrics {
	m := &Metrics{
		syncMetrics: newSyncMetrics("jobplane_"),
		finalizersRemoved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobplane_pod_tracking_finalizer_removals_total", Help: "Tracking finalizers removed: from finished pods, before deletion, from orphans.",
		}, []string{"cause"}),
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobplane_kube_api_requests_total", Help: "Requests of the executor to the Kubernetes API, by method and resource.",
		}, []string{"method", "resource"}),
		apiRequestsPerJob: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "jobplane_job_api_requests", Help: "Kubernetes API requests one Job cost, observed when it finishes or is deleted.",
			Buckets: prometheus.ExponentialBuckets(4, 2, 14),
		}),
		perJob: jobRequestCounts{perJob: map[string]int{}},
		plannerDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "jobplane_planner_call_duration_seconds", Help: "Round trip of one PlanSync over the stream.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}),
		plannerErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobplane_planner_errors_total", Help: "Syncs that got no plan (planner unavailable or snapshot refused); no action was taken.",
		}),
		eventsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobplane_events_dropped_total", Help: "Events not written because their namespace had 2,000 queued, or all namespaces together 20,000 (lib/fairevents).",
		}),
		syncsYielded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobplane_job_syncs_yielded_total", Help: "Syncs that gave their worker up to another namespace's Job before their plan's end (queued again at once), by the action they stopped in: create, delete or remove_finalizers.",
		}, []string{"action"}),
	}
	m.externalNames.seen = map[string]struct{}{}
	if withReferenceNames {
		reference := newSyncMetrics(ReferencePrefix)
		m.reference = &reference
	}
	return m
}

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	all := append(m.syncMetrics.collectors(), m.finalizersRemoved, m.apiRequests, m.apiRequestsPerJob, m.plannerDuration, m.plannerErrors, m.syncsYielded, m.eventsDropped)
	if m.reference != nil {
		all = append(all, m.reference.collectors()...)
	}
	for _, c := range all {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// each runs record on jobplane's sync metrics and, in drop-in mode, on the
// reference-named ones.
func (m *Metrics) each(record func(*syncMetrics)) {
	record(&m.syncMetrics)
	if m.reference != nil {
		record(m.reference)
	}
}

func (m *Metrics) recordSync(p *plan.Plan, err error, d time.Duration) {
	result := "success"
	if err != nil {
		result = "error"
	}
	labels := []string{p.Metrics.CompletionMode, result, p.Metrics.SyncAction}
	m.each(func(s *syncMetrics) {
		s.syncDuration.WithLabelValues(labels...).Observe(d.Seconds())
		s.syncs.WithLabelValues(labels...).Inc()
	})
}

// recordPlan counts what a plan performed in full did.
func (m *Metrics) recordPlan(p *plan.Plan) {
	m.each(func(s *syncMetrics) { s.recordPlan(p.Metrics) })
}

func (s *syncMetrics) recordPlan(pm plan.Metrics) {
	if pm.FinishedResult != "" {
		s.jobsFinished.WithLabelValues(pm.CompletionMode, pm.FinishedResult, pm.FinishedReason).Inc()
	}
	if pm.PodsSucceeded > 0 {
		s.podsFinished.WithLabelValues(pm.CompletionMode, "succeeded").Add(float64(pm.PodsSucceeded))
	}
	if pm.PodsFailed > 0 {
		s.podsFinished.WithLabelValues(pm.CompletionMode, "failed").Add(float64(pm.PodsFailed))
	}
	for action, n := range pm.PodFailuresByPolicyAction {
		s.failurePolicy.WithLabelValues(action).Add(float64(n))
	}
	if pm.IndexesSucceeded > 0 {
		s.indexesFinished.WithLabelValues("succeeded", pm.BackoffLimit).Add(float64(pm.IndexesSucceeded))
	}
	if pm.IndexesFailed > 0 {
		s.indexesFinished.WithLabelValues("failed", pm.BackoffLimit).Add(float64(pm.IndexesFailed))
	}
}

// recordStaleSkip counts a sync put off for the cache of resource
// (jobstate.Pods or jobstate.Jobs).
func (m *Metrics) recordStaleSkip(resource string) {
	group := ""
	if resource == jobstate.Jobs {
		group = batchv1.GroupName
	}
	m.each(func(s *syncMetrics) { s.staleSyncSkips.WithLabelValues(group, resource).Inc() })
}

// recordTrackedTermination counts a pod becoming finished with the tracking
// finalizer (added) or ceasing to be.
func (m *Metrics) recordTrackedTermination(added bool) {
	event := "delete"
	if added {
		event = "add"
	}
	m.each(func(s *syncMetrics) { s.trackedTerminations.WithLabelValues(event).Inc() })
}

// maxExternalControllers bounds the controller_name values counted: they
// are spec.managedBy values, which any tenant who creates Jobs chooses, and
// each would be a series held for good. Beyond them Jobs count as "other"
// (the reference has no bound).
const maxExternalControllers = 64

// recordExternalJob counts a Job added that controller manages.
func (m *Metrics) recordExternalJob(controller string) {
	m.externalNames.Lock()
	if _, seen := m.externalNames.seen[controller]; !seen {
		if len(m.externalNames.seen) < maxExternalControllers {
			m.externalNames.seen[controller] = struct{}{}
		} else {
			controller = "other"
		}
	}
	m.externalNames.Unlock()
	m.each(func(s *syncMetrics) { s.externalJobs.WithLabelValues(controller).Inc() })
}

// recordCreations counts as the reference does, which also counts failed
// creations as succeeded (its goroutine does not return after a failure).
func (m *Metrics) recordCreations(reason string, succeeded, failed int) {
	m.each(func(s *syncMetrics) {
		s.podsCreated.WithLabelValues(reason, "succeeded").Add(float64(succeeded + failed))
		s.podsCreated.WithLabelValues(reason, "failed").Add(float64(failed))
	})
}

// recordYield counts a sync that gave its worker up in action a.
func (m *Metrics) recordYield(a plan.Action) {
	action := "other"
	switch a.(type) {
	case plan.CreatePods:
		action = "create"
	case plan.DeletePods:
		action = "delete"
	case plan.RemoveFinalizers:
		action = "remove_finalizers"
	}
	m.syncsYielded.WithLabelValues(action).Inc()
}
