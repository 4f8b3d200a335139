package controller

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/kubemetrics"
	"github.com/jobplane/jobplane/services/cron/internal/decide"
)

// Metrics are the reference CronJob controller's (its job creation skew,
// under a jobplane_ prefix) and the cron service's own.
type Metrics struct {
	creationSkew prometheus.Histogram
	// referenceSkew is the reference's own creation skew, under its name,
	// in drop-in mode (nil otherwise): dashboards keep working.
	referenceSkew prometheus.Histogram
	runs          *prometheus.CounterVec
	missedRuns    prometheus.Counter
	syncDuration  *prometheus.HistogramVec
	statusWrites  *prometheus.CounterVec
	apiRequests   *prometheus.CounterVec
	eventsDropped prometheus.Counter
	syncsYielded  prometheus.Counter
}

// NewMetrics returns unregistered metrics; in drop-in mode with the
// reference controller's (cronjob_controller_*) too.
func NewMetrics(dropIn bool) *Metrics {
	m := newMetrics()
	if dropIn {
		m.referenceSkew = prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cronjob_controller_job_creation_skew_duration_seconds",
			Help:    "Time between when a cronjob is scheduled to be run, and when the corresponding job is created",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		})
	}
	return m
}

func newMetrics() *Metrics {
	return &Metrics{
		creationSkew: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "jobplane_cronjob_job_creation_skew_duration_seconds",
			Help:    "Time between a run's scheduled time and the creation of its Job.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobplane_cronjob_runs_total", Help: "Runs handed to the executor, by trigger.",
		}, []string{"trigger"}),
		missedRuns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobplane_cronjob_missed_runs_total", Help: "Scheduled runs that will not happen (past the deadline, skipped by the catch-up policy, dropped from a full buffer).",
		}),
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "jobplane_cronjob_sync_duration_seconds", Help: "Time of one CronJob sync: decision, runs handed over, status write.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"result"}),
		statusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobplane_cronjob_status_write_failures_total", Help: "CronJob status writes that failed, conflict or not.",
		}, []string{"conflict"}),
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jobplane_cron_kube_api_requests_total", Help: "Requests of the cron service to the Kubernetes API, by method and resource.",
		}, []string{"method", "resource"}),
		eventsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobplane_cron_events_dropped_total", Help: "Events not written because their namespace had 2,000 queued, or all namespaces together 20,000 (lib/fairevents).",
		}),
		syncsYielded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jobplane_cronjob_syncs_yielded_total", Help: "Syncs that gave their worker up to another namespace's CronJob, their call to the executor given up while every worker was busy (queued again at once).",
		}),
	}
}

// Transport wraps the Kubernetes clients' transport to count requests.
func (m *Metrics) Transport(next http.RoundTripper) http.RoundTripper {
	return kubemetrics.Transport(next, func(r *http.Request) {
		m.apiRequests.WithLabelValues(r.Method, kubemetrics.Resource(r.URL.Path)).Inc()
	})
}

// Register registers the metrics.
func (m *Metrics) Register(r prometheus.Registerer) error {
	collectors := []prometheus.Collector{m.creationSkew, m.runs, m.missedRuns, m.syncDuration, m.statusWrites, m.apiRequests, m.eventsDropped, m.syncsYielded}
	if m.referenceSkew != nil {
		collectors = append(collectors, m.referenceSkew)
	}
	for _, c := range collectors {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// runEmitted counts a run the executor created, now. Its skew is taken
// from now, not from the Job's creationTimestamp, whose second resolution
// would hide everything below a second.
func (m *Metrics) runEmitted(create *decide.CreateJob, now time.Time) {
	m.runs.WithLabelValues(create.Trigger).Inc()
	skew := now.Sub(create.ScheduledTime).Seconds()
	m.creationSkew.Observe(skew)
	if m.referenceSkew != nil {
		m.referenceSkew.Observe(skew)
	}
}

func (m *Metrics) missed(n int) { m.missedRuns.Add(float64(n)) }

func (m *Metrics) observeSync(d time.Duration, err error) {
	result := "success"
	switch {
	case errors.Is(err, errYielded):
		result = "yielded"
	case err != nil:
		result = "error"
	}
	m.syncDuration.WithLabelValues(result).Observe(d.Seconds())
}

func (m *Metrics) statusWriteFailed(conflict bool) {
	label := "false"
	if conflict {
		label = "true"
	}
	m.statusWrites.WithLabelValues(label).Inc()
}

// missedRuns counts each missed scheduled time once per process: the
// decision lists the times it gives up on every time it looks, so each
// CronJob keeps the latest time counted. After a restart the mark starts
// from the CronJob's last scheduled time, so a miss is counted again rather
// than lost.
type missedRuns struct {
	mu      sync.Mutex
	counted map[string]time.Time
}

func (m *missedRuns) add(cronJob *cronapi.CronJob, times []time.Time) int {
	if len(times) == 0 {
		return 0
	}
	key := cronJobKey(cronJob.APIVersion, cronJob.Namespace, cronJob.Name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counted == nil {
		m.counted = map[string]time.Time{}
	}
	mark, ok := m.counted[key]
	if !ok && cronJob.Status.LastScheduleTime != nil {
		mark = cronJob.Status.LastScheduleTime.Time
	}
	n := 0
	for _, t := range times {
		if t.After(mark) {
			n++
			mark = t
		}
	}
	m.counted[key] = mark
	return n
}

func (m *missedRuns) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.counted, key)
}
