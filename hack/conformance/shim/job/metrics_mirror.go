package job

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	basemetrics "k8s.io/component-base/metrics"

	"k8s.io/kubernetes/pkg/controller/job/metrics"
)

// mirrored are the reference's counters the tests read, by name: the
// executor serves them under the same names in drop-in mode.
var mirrored = map[string]*basemetrics.CounterVec{
	"job_controller_jobs_finished_total":                          metrics.JobFinishedNum,
	"job_controller_job_pods_finished_total":                      metrics.JobPodsFinished,
	"job_controller_pod_failures_handled_by_failure_policy_total": metrics.PodFailuresHandledByFailurePolicy,
	"job_controller_terminated_pods_tracking_finalizer_total":     metrics.TerminatedPodsTrackingFinalizerTotal,
	"job_controller_job_finished_indexes_total":                   metrics.JobFinishedIndexesTotal,
	"job_controller_job_pods_creation_total":                      metrics.JobPodsCreationTotal,
	"job_controller_jobs_by_external_controller_total":            metrics.JobByExternalControllerTotal,
	"job_controller_job_syncs_total":                              metrics.JobSyncNum,
	"job_controller_stale_sync_skips_total":                       metrics.JobRequeueSkips,
}

// mirrorMetrics adds, every 50 ms until ctx ends (and once more then), what
// the executor's counters at url gained to the reference's in-process ones:
// a test resets those and reads them, as it would the in-process
// controller's, across restarts of the controller too.
func mirrorMetrics(ctx context.Context, url string) {
	last := map[string]float64{}
	scrape := func() {
		resp, err := http.Get(url)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return
		}
		for name, family := range families {
			vec, ok := mirrored[name]
			if !ok {
				continue
			}
			for _, m := range family.GetMetric() {
				labels := labelsOf(m)
				key := name + seriesKey(labels)
				value := m.GetCounter().GetValue()
				if delta := value - last[key]; delta > 0 {
					vec.With(labels).Add(delta)
				}
				last[key] = value
			}
		}
	}
	go func() {
		ticker := time.NewTicker(50 * time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				scrape()
				return
			case <-ticker.C:
				scrape()
			}
		}
	}()
}

func labelsOf(m *dto.Metric) map[string]string {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

func seriesKey(labels map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		b.WriteString("," + k + "=" + labels[k])
	}
	return b.String()
}
