package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metrics is a parsed Prometheus text exposition.
type metrics struct {
	families map[string]*dto.MetricFamily
}

type sample struct {
	labels map[string]string
	value  float64
}

func parseMetrics(r io.Reader) (*metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	return &metrics{families: families}, nil
}

// samples are the values of a counter, gauge or untyped family.
func (m *metrics) samples(name string) []sample {
	if m == nil {
		return nil
	}
	f := m.families[name]
	if f == nil {
		return nil
	}
	out := make([]sample, 0, len(f.Metric))
	for _, x := range f.Metric {
		s := sample{labels: map[string]string{}}
		for _, l := range x.Label {
			s.labels[l.GetName()] = l.GetValue()
		}
		switch {
		case x.Counter != nil:
			s.value = x.Counter.GetValue()
		case x.Gauge != nil:
			s.value = x.Gauge.GetValue()
		case x.Untyped != nil:
			s.value = x.Untyped.GetValue()
		default:
			continue
		}
		out = append(out, s)
	}
	return out
}

// sum adds up the samples of name whose labels include match.
func (m *metrics) sum(name string, match map[string]string) float64 {
	var t float64
	for _, s := range m.samples(name) {
		if matches(s.labels, match) {
			t += s.value
		}
	}
	return t
}

func matches(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// histogram is the merged histogram of every series of name: cumulative
// counts by upper bound, sample count and sum.
type histogram struct {
	bounds []float64
	counts []float64
	count  float64
	sum    float64
}

func (m *metrics) histogram(name string) histogram {
	var h histogram
	if m == nil || m.families[name] == nil {
		return h
	}
	byBound := map[float64]float64{}
	for _, x := range m.families[name].Metric {
		if x.Histogram == nil {
			continue
		}
		h.count += float64(x.Histogram.GetSampleCount())
		h.sum += x.Histogram.GetSampleSum()
		for _, b := range x.Histogram.Bucket {
			byBound[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		}
	}
	for b := range byBound {
		h.bounds = append(h.bounds, b)
	}
	sort.Float64s(h.bounds)
	for _, b := range h.bounds {
		h.counts = append(h.counts, byBound[b])
	}
	return h
}

// minus is h − o, bucket by bucket (o taken earlier from the same series).
func (h histogram) minus(o histogram) histogram {
	out := histogram{count: h.count - o.count, sum: h.sum - o.sum}
	prev := map[float64]float64{}
	for i, b := range o.bounds {
		prev[b] = o.counts[i]
	}
	for i, b := range h.bounds {
		out.bounds = append(out.bounds, b)
		out.counts = append(out.counts, h.counts[i]-prev[b])
	}
	return out
}

// beyondBuckets is the quantile of a histogram past its last finite bound
// (JSON has no +Inf).
const beyondBuckets = 1e9

// quantile is the upper bound of the bucket holding quantile q
// (beyondBuckets past the last finite bound); -1 for an empty histogram.
func (h histogram) quantile(q float64) float64 {
	if h.count <= 0 {
		return -1
	}
	rank := q * h.count
	for i, c := range h.counts {
		if c >= rank && !math.IsInf(h.bounds[i], 1) {
			return h.bounds[i]
		}
	}
	return beyondBuckets
}

func (b *bench) apiserverMetrics(ctx context.Context) (*metrics, error) {
	body, err := b.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return parseMetrics(body)
}

var insecureClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // kube-controller-manager's self-signed loopback certificate
}}

func httpMetrics(ctx context.Context, url string) (*metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := insecureClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "DELETECOLLECTION": true, "APPLY": true}

// requestDeltas are the API server's request counts over the interval by
// verb, group, resource, subresource and code.
func requestDeltas(before, after *metrics) map[[5]string]float64 {
	key := func(l map[string]string) [5]string {
		return [5]string{l["verb"], l["group"], l["resource"], l["subresource"], l["code"]}
	}
	d := map[[5]string]float64{}
	for _, s := range after.samples("apiserver_request_total") {
		d[key(s.labels)] += s.value
	}
	for _, s := range before.samples("apiserver_request_total") {
		d[key(s.labels)] -= s.value
	}
	return d
}

// The controllers' names: the group of their CronJobs and the event
// sources of their two halves.
var (
	cronJobGroup    = map[string]string{builtin: "batch", jobplane: "jobplane.dev"}
	cronComponent   = map[string]string{builtin: "cronjob-controller", jobplane: "jobplane-cron"}
	jobComponent    = map[string]string{builtin: "job-controller", jobplane: "jobplane-executor"}
	cronJobSkewName = map[string]string{builtin: "cronjob_controller_job_creation_skew_duration_seconds", jobplane: "jobplane_cronjob_job_creation_skew_duration_seconds"}
)

// deltas fills in the writes, reads, events, own metrics and CPU of r's
// controller over the interval.
//
// What is counted, per controller (the API server's counters have no
// namespace, so the two are told apart by what only one of them touches):
//   - CronJob status: PUT and PATCH of cronjobs/status in the controller's
//     group (batch for the built-in, jobplane.dev for jobplane): only the
//     controller writes its CronJobs' status.
//   - Job create: the Jobs of the controller's namespace first seen by the
//     watch in the interval (the API server's POST jobs is both's; failed
//     creates are in Shared).
//   - CronJob events, Job events: the Events of the namespace recorded by
//     the CronJob half (cronjob-controller, jobplane-cron) and the Job half
//     (job-controller, jobplane-executor), each Event's count (one POST,
//     then a PATCH per repeat).
//   - Job status: jobplane's is the executor's own count of its PUT and
//     PATCH of jobs/status (jobplane_kube_api_requests_total); the
//     built-in's is the API server's jobs/status writes less the
//     executor's (no other client writes Job status here).
//   - CronJob GET: GETs of cronjobs in the controller's group (reads, not
//     writes: the live reads each controller makes besides its cache).
func deltas(r *result, before, after snapshot) {
	r.Writes, r.Reads, r.Failed = map[string]float64{}, map[string]float64{}, map[string]float64{}
	r.Seen, r.Events, r.Own, r.Shared, r.CPU = map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}
	v, ns := r.Variant, namespaceOf(r.Variant)
	group := cronJobGroup[v]
	var jobStatusAll, jobStatusFailed float64
	for k, d := range requestDeltas(before.apiserver, after.apiserver) {
		verb, g, res, sub, code := k[0], k[1], k[2], k[3], k[4]
		if d == 0 {
			continue
		}
		failed := !strings.HasPrefix(code, "2")
		switch {
		case res == "cronjobs" && g == group && sub == "status" && (verb == "PUT" || verb == "PATCH"):
			r.Writes["CronJob status"] += d
			if failed {
				r.Failed["CronJob status"] += d
			}
		case res == "cronjobs" && g == group && writeVerbs[verb]:
			r.Writes["CronJob other"] += d
		case res == "cronjobs" && g == group && verb == "GET":
			r.Reads["CronJob GET"] += d
		case res == "jobs" && g == "batch" && sub == "status" && (verb == "PUT" || verb == "PATCH"):
			jobStatusAll += d
			if failed {
				jobStatusFailed += d
			}
		}
		if writeVerbs[verb] {
			name := res
			if g != "" {
				name = g + "/" + name
			}
			if sub != "" {
				name += "/" + sub
			}
			r.Shared[verb+" "+name+" "+code] += d
		}
	}
	r.Writes["Job create"] = float64(r.JobsCreated)
	executorJobStatus := after.executor.sum("jobplane_kube_api_requests_total", map[string]string{"resource": "jobs/status"}) -
		before.executor.sum("jobplane_kube_api_requests_total", map[string]string{"resource": "jobs/status"})
	if v == jobplane {
		r.Writes["Job status"] = executorJobStatus
		for _, s := range after.executor.samples("jobplane_kube_api_requests_total") {
			key := "executor " + s.labels["method"] + " " + s.labels["resource"]
			r.Own[key] += s.value
		}
		for _, s := range before.executor.samples("jobplane_kube_api_requests_total") {
			key := "executor " + s.labels["method"] + " " + s.labels["resource"]
			r.Own[key] -= s.value
		}
		for _, n := range []string{"jobplane_cronjob_runs_total", "jobplane_cronjob_missed_runs_total", "jobplane_cronjob_status_write_failures_total"} {
			r.Own["cron "+n] = after.cron.sum(n, nil) - before.cron.sum(n, nil)
		}
		sync := after.cron.histogram("jobplane_cronjob_sync_duration_seconds").minus(before.cron.histogram("jobplane_cronjob_sync_duration_seconds"))
		r.Own["cron syncs"], r.Own["cron sync seconds"] = sync.count, sync.sum
		esync := after.executor.histogram("jobplane_job_sync_duration_seconds").minus(before.executor.histogram("jobplane_job_sync_duration_seconds"))
		r.Own["executor syncs"], r.Own["executor sync seconds"] = esync.count, esync.sum
		skew := after.cron.histogram(cronJobSkewName[v]).minus(before.cron.histogram(cronJobSkewName[v]))
		r.SkewOwn, r.OwnSamples = quantiles{P50: skew.quantile(0.5), P99: skew.quantile(0.99), Max: skew.quantile(1)}, skew.count
	} else {
		r.Writes["Job status"] = jobStatusAll - executorJobStatus
		skew := after.kcm.histogram(cronJobSkewName[v]).minus(before.kcm.histogram(cronJobSkewName[v]))
		r.SkewOwn, r.OwnSamples = quantiles{P50: skew.quantile(0.5), P99: skew.quantile(0.99), Max: skew.quantile(1)}, skew.count
		for _, q := range []string{"cronjob", "job"} {
			r.Own["kcm workqueue adds "+q] = after.kcm.sum("workqueue_adds_total", map[string]string{"name": q}) - before.kcm.sum("workqueue_adds_total", map[string]string{"name": q})
		}
		js := after.kcm.histogram("job_controller_job_sync_duration_seconds").minus(before.kcm.histogram("job_controller_job_sync_duration_seconds"))
		r.Own["kcm job syncs"], r.Own["kcm job sync seconds"] = js.count, js.sum
	}
	r.Failed["Job status (both)"] = jobStatusFailed
	for k, n := range after.events {
		parts := strings.SplitN(k, "|", 3)
		if parts[0] != ns {
			continue
		}
		d := n - before.events[k]
		if d == 0 {
			continue
		}
		r.Events[parts[1]+" "+parts[2]] += d
		switch parts[1] {
		case cronComponent[v]:
			r.Writes["CronJob events"] += d
		case jobComponent[v]:
			r.Writes["Job events"] += d
		}
	}
	r.Seen["CronJob modifications"] = float64(after.cronJobMods[ns] - before.cronJobMods[ns])
	r.Seen["Job modifications"] = float64(after.jobMods[ns] - before.jobMods[ns])
	const cpu = "process_cpu_seconds_total"
	for name, m := range map[string][2]*metrics{
		"kube-apiserver": {before.apiserver, after.apiserver}, "kube-controller-manager": {before.kcm, after.kcm},
		"cron": {before.cron, after.cron}, "executor": {before.executor, after.executor},
	} {
		if m[0] != nil && m[1] != nil {
			r.CPU[name] = m[1].sum(cpu, nil) - m[0].sum(cpu, nil)
		}
	}
}
