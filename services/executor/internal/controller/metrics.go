package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobplane/jobplane/lib/plan"
)

// Metrics are the reference Job controller's metrics under a jobplane_
// prefix (same names after it, same labels), and the executor's own.
type Metrics struct {
	syncDuration      *prometheus.HistogramVec
	syncs             *prometheus.CounterVec
	jobsFinished      *prometheus.CounterVec
	podsFinished      *prometheus.CounterVec
	failurePolicy     *prometheus.CounterVec
	podsCreated       *prometheus.CounterVec
	indexesFinished   *prometheus.CounterVec
	finalizersRemoved *prometheus.CounterVec
	apiRequests       *prometheus.CounterVec
	apiRequestsPerJob prometheus.Histogram
	perJob            jobRequestCounts
	plannerDuration   prometheus.Histogram
	plannerErrors     prometheus.Counter
	staleCacheSkips   prometheus.Counter
}

// NewMetrics returns unregistered metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "jobplane_job_sync_duration_seconds", Help: "Time of one Job sync: snapshot, planner call and the plan performed.",
			Buckets: prometheus.ExponentialBuckets(0.004, 2, 15),
		}, []string{"completion_mode", "result", "action"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobplane_job_syncs_total", Help: "Job syncs.",
		}, []string{"completion_mode", "result", "action"}),
		jobsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobplane_jobs_finished_total", Help: "Jobs finished.",
		}, []string{"completion_mode", "result", "reason"}),
		podsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobplane_job_pods_finished_total", Help: "Finished pods counted in Job status.",
		}, []string{"completion_mode", "result"}),
		failurePolicy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobplane_pod_failures_handled_by_failure_policy_total", Help: "Pod failures handled by a pod failure policy, by action.",
		}, []string{"action"}),
		podsCreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobplane_job_pods_creation_total", Help: "Pods created for Jobs, by reason and status.",
		}, []string{"reason", "status"}),
		indexesFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobplane_job_finished_indexes_total", Help: "Finished indexes of Indexed Jobs.",
		}, []string{"status", "backoffLimit"}),
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
		staleCacheSkips: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobplane_job_sync_stale_cache_skips_total", Help: "Syncs put off because the cache had not yet seen the executor's own last write (the reference's job_controller_requeue_skips).",
		}),
		plannerErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobplane_planner_errors_total", Help: "Syncs that got no plan (planner unavailable or snapshot refused); no action was taken.",
		}),
	}
}

// Register adds the metrics to reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.syncDuration, m.syncs, m.jobsFinished, m.podsFinished, m.failurePolicy,
		m.podsCreated, m.indexesFinished, m.finalizersRemoved, m.apiRequests, m.apiRequestsPerJob, m.plannerDuration, m.plannerErrors, m.staleCacheSkips} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Metrics) recordSync(p *plan.Plan, err error, d time.Duration) {
	result := "success"
	if err != nil {
		result = "error"
	}
	labels := []string{p.Metrics.CompletionMode, result, p.Metrics.SyncAction}
	m.syncDuration.WithLabelValues(labels...).Observe(d.Seconds())
	m.syncs.WithLabelValues(labels...).Inc()
}

// recordPlan counts what a plan performed in full did.
func (m *Metrics) recordPlan(p *plan.Plan) {
	pm := p.Metrics
	if pm.FinishedResult != "" {
		m.jobsFinished.WithLabelValues(pm.CompletionMode, pm.FinishedResult, pm.FinishedReason).Inc()
	}
	if pm.PodsSucceeded > 0 {
		m.podsFinished.WithLabelValues(pm.CompletionMode, "succeeded").Add(float64(pm.PodsSucceeded))
	}
	if pm.PodsFailed > 0 {
		m.podsFinished.WithLabelValues(pm.CompletionMode, "failed").Add(float64(pm.PodsFailed))
	}
	for action, n := range pm.PodFailuresByPolicyAction {
		m.failurePolicy.WithLabelValues(action).Add(float64(n))
	}
	if pm.IndexesSucceeded > 0 {
		m.indexesFinished.WithLabelValues("succeeded", pm.BackoffLimit).Add(float64(pm.IndexesSucceeded))
	}
	if pm.IndexesFailed > 0 {
		m.indexesFinished.WithLabelValues("failed", pm.BackoffLimit).Add(float64(pm.IndexesFailed))
	}
}

// recordCreations counts as the reference does, which also counts failed
// creations as succeeded (its goroutine does not return after a failure).
func (m *Metrics) recordCreations(reason string, succeeded, failed int) {
	m.podsCreated.WithLabelValues(reason, "succeeded").Add(float64(succeeded + failed))
	m.podsCreated.WithLabelValues(reason, "failed").Add(float64(failed))
}
