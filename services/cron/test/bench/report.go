package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// report prints the results files as markdown tables.
func report(args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	var paths multiFlag
	fs.Var(&paths, "results", "JSON-lines file written by bench run (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var all []result
	for _, path := range paths {
		rs, err := readResults(path)
		if err != nil {
			return err
		}
		all = append(all, rs...)
	}
	writeReport(os.Stdout, all)
	return nil
}

func readResults(path string) ([]result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []result
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

var variantName = map[string]string{builtin: "built-in", jobplane: "jobplane"}

// clientQPS is the QPS/burst of the client that creates the Jobs: kcm's for
// the built-in, the executor's for jobplane.
func clientQPS(r *result) string {
	if r.Variant == builtin {
		return r.KCMQPS
	}
	return cmp.Or(r.ExecutorQPS, r.QPS)
}

// createFloor is the least time the creating client's rate limit allows for
// one boundary's Job creations: (CronJobs − burst) / QPS.
func createFloor(r *result) float64 { return budget(float64(r.CronJobs), clientQPS(r)) }

// budget is the seconds a client at pair (QPS/burst) needs for n requests.
func budget(n float64, pair string) float64 {
	q, b, ok := strings.Cut(pair, "/")
	if !ok {
		return math.NaN()
	}
	qps, err1 := strconv.ParseFloat(q, 64)
	burst, err2 := strconv.ParseFloat(b, 64)
	if err1 != nil || err2 != nil || qps <= 0 {
		return math.NaN()
	}
	return math.Max(0, n-burst) / qps
}

// The writes of a run, by category, as deltas() counts them; the client
// whose rate limit each one spends.
var categories = []string{"Job create", "CronJob status", "CronJob events", "Job status", "Job events"}

func perRun(n float64, runs int) float64 {
	if runs == 0 {
		return math.NaN()
	}
	return n / float64(runs)
}

// cronClient and jobClient are a run's requests through the CronJob half's
// client (kcm's cronjob-controller; jobplane's cron) and the Job half's
// (kcm's job-controller; jobplane's executor, which also creates
// jobplane's Jobs, on its own rate limit).
func cronClient(r *result) float64 {
	n := r.Writes["CronJob status"] + r.Writes["CronJob events"] + r.Writes["CronJob other"] + r.Reads["CronJob GET"]
	if r.Variant == builtin {
		n += r.Writes["Job create"]
	}
	return n
}

func jobClient(r *result) float64 {
	n := r.Writes["Job status"] + r.Writes["Job events"]
	if r.Variant == jobplane {
		n += r.Writes["Job create"]
	}
	return n
}

// qpsLabel is the pair of cron and executor, or each when they differ.
func qpsLabel(r *result) string {
	c, e := cmp.Or(r.CronQPS, r.QPS), cmp.Or(r.ExecutorQPS, r.QPS)
	if c == e {
		return c
	}
	return "cron " + c + ", executor " + e
}

func writeReport(w io.Writer, all []result) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("#### Runs and creation skew\n\n")
	p("Skew: from a run's scheduled time to its Job first seen by the driver's watch, over the runs of the measured boundaries (it includes the watch's own lag, measured beside it: a ConfigMap the driver updates every second, from the update answered to its event seen); creationTimestamp is truncated to the second; the controller's own histogram gives the upper bound of the bucket (both controllers feed it from creationTimestamp, so below a second it reads its first bucket). Create floor: (CronJobs − burst) / QPS of the client creating the Jobs (kcm's cronjob-controller, jobplane's executor), the least time its rate limit allows one boundary's creations.\n\n")
	p("| CronJobs | side by side | cron+executor QPS/burst | kcm QPS/burst | cron workers | controller | runs / expected | missed | skew p50 (s) | p99 (s) | max (s) | creationTimestamp p50 / p99 / max (s) | own histogram p50 / p99 (s, ≤) | driver's watch lag p50 / p99 / max (s) | create floor (s) |\n")
	p("|---:|---|---|---|---:|---|---:|---:|---:|---:|---:|---|---|---|---:|\n")
	for i := range all {
		r := &all[i]
		workers := "–"
		if r.Variant == jobplane {
			workers = strconv.Itoa(r.CronWorkers)
		}
		p("| %d | %s | %s | %s | %s | %s | %d / %d | %d | %s | %s | %s | %s / %s / %s | %s / %s | %s / %s / %s | %.1f |\n",
			r.CronJobs, yesNo(r.SideBySide), qpsLabel(r), r.KCMQPS, workers, variantName[r.Variant], r.Runs, r.Expected, r.Missed,
			num(r.Skew.P50), num(r.Skew.P99), num(r.Skew.Max), num0(r.SkewCT.P50), num0(r.SkewCT.P99), num0(r.SkewCT.Max),
			bound(r.SkewOwn.P50), bound(r.SkewOwn.P99), num(r.WatchLag.P50), num(r.WatchLag.P99), num(r.WatchLag.Max), createFloor(r))
	}
	p("\n")

	p("#### Skew by boundary\n\n")
	p("Runs with a Job, and skew p99 / max in seconds, for each measured minute boundary.\n\n")
	maxB := 0
	for i := range all {
		maxB = max(maxB, len(all[i].PerBoundary))
	}
	p("| CronJobs | cron+executor QPS/burst | controller |")
	for b := range maxB {
		p(" boundary %d |", b+1)
	}
	p("\n|---:|---|---|%s\n", strings.Repeat("---|", maxB))
	for i := range all {
		r := &all[i]
		p("| %d | %s | %s |", r.CronJobs, qpsLabel(r), variantName[r.Variant])
		for _, b := range r.PerBoundary {
			p(" %d: %s / %s |", b.Runs, num(b.P99), num(b.Max))
		}
		p("\n")
	}
	p("\n")

	if slices.ContainsFunc(all, func(r result) bool { return r.Quiet.N > 0 || r.QuietMissed > 0 }) {
		p("#### A quiet tenant beside them\n\n")
		p("One more CronJob per controller, in a namespace of its own, created after the others and due at the same boundaries: how long its runs waited behind the other namespace's (skew as above, over its runs of the measured boundaries).\n\n")
		p("| CronJobs beside it | their Job creations held (s) | cron+executor QPS/burst | kcm QPS/burst | controller | runs / expected | skew p50 (s) | max (s) | the crowded namespace's skew p50 / max (s) |\n")
		p("|---:|---:|---|---|---|---:|---:|---:|---|\n")
		for i := range all {
			r := &all[i]
			p("| %d | %s | %s | %s | %s | %d / %d | %s | %s | %s / %s |\n", r.CronJobs, num(r.SlowCreatesSeconds), qpsLabel(r), r.KCMQPS, variantName[r.Variant],
				r.Minutes-r.QuietMissed, r.Minutes, num(r.Quiet.P50), num(r.Quiet.Max), num(r.Skew.P50), num(r.Skew.Max))
		}
		p("\n")
	}

	p("#### API requests per run\n\n")
	p("Over the interval from just before the first measured boundary to the end of the grace, divided by the Jobs the controller created in it (Jobs of later boundaries included, on both sides of the division). Job create: the Jobs seen; CronJob status: `apiserver_request_total` PUT/PATCH cronjobs/status of the controller's group (batch, jobplane.dev); events: the Events' counts by source component (cronjob-controller / jobplane-cron, job-controller / jobplane-executor); Job status: the executor's own count (`jobplane_kube_api_requests_total`) for jobplane, the API server's jobs/status writes less it for the built-in; CronJob GET: live reads of the controller's CronJobs. Per client: the CronJob half's client (kcm's cronjob-controller creates its Jobs; jobplane's cron hands them to the executor) and the Job half's (kcm's job-controller; jobplane's executor, which creates jobplane's Jobs). Demand: that client's requests per second at one run per CronJob per minute; budget: the seconds its QPS needs for one boundary's requests ((demand × 60 − burst) / QPS; over 60 s it cannot keep up and runs are missed).\n\n")
	p("| CronJobs | cron+executor QPS/burst | controller | Jobs created | Job create | CronJob status | CronJob events | Job status | Job events | writes/run | CronJob GET/run | CronJob-half client req/run (demand req/s) | Job-half client req/run (demand req/s) | budget CronJob half / Job half (s per boundary) | failed writes |\n")
	p("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|\n")
	for i := range all {
		r := &all[i]
		p("| %d | %s | %s | %d |", r.CronJobs, qpsLabel(r), variantName[r.Variant], r.JobsCreated)
		var total float64
		for _, c := range categories {
			p(" %.2f |", perRun(r.Writes[c], r.JobsCreated))
			total += r.Writes[c]
		}
		total += r.Writes["CronJob other"]
		cc, jc := perRun(cronClient(r), r.JobsCreated), perRun(jobClient(r), r.JobsCreated)
		cronPair, jobPair := cmp.Or(r.CronQPS, r.QPS), cmp.Or(r.ExecutorQPS, r.QPS)
		if r.Variant == builtin {
			cronPair, jobPair = r.KCMQPS, r.KCMQPS
		}
		p(" %.2f | %.2f | %.2f (%.1f) | %.2f (%.1f) | %s / %s | %.0f |\n", perRun(total, r.JobsCreated), perRun(r.Reads["CronJob GET"], r.JobsCreated),
			cc, cc*float64(r.CronJobs)/60, jc, jc*float64(r.CronJobs)/60,
			num(budget(cc*float64(r.CronJobs), cronPair)), num(budget(jc*float64(r.CronJobs), jobPair)), sumMap(r.Failed))
	}
	p("\n")

	p("#### CPU\n\n")
	p("CPU seconds (`process_cpu_seconds_total`) over the interval. kube-controller-manager runs all its controllers; in a side-by-side run every process's informers follow both namespaces.\n\n")
	p("| CronJobs | cron+executor QPS/burst | controllers | interval (s) | kube-apiserver | kube-controller-manager | cron | executor |\n")
	p("|---:|---|---|---:|---:|---:|---:|---:|\n")
	for i := range all {
		r := &all[i]
		if i > 0 && sameRun(&all[i-1], r) {
			continue
		}
		p("| %d | %s | %s | %.0f | %.1f | %.1f | %.1f | %.1f |\n", r.CronJobs, qpsLabel(r), variantsOf(all, r), r.IntervalSeconds,
			r.CPU["kube-apiserver"], r.CPU["kube-controller-manager"], r.CPU["cron"], r.CPU["executor"])
	}
	p("\n")

	p("<details><summary>Cross-checks: modifications seen by the watch, events by reason, the controllers' own counters, every write the API server counted</summary>\n\n")
	p("| CronJobs | QPS/burst | controller | seen | events | own | all writes (both controllers and the driver) |\n|---:|---|---|---|---|---|---|\n")
	for i := range all {
		r := &all[i]
		p("| %d | %s | %s | %s | %s | %s | %s |\n", r.CronJobs, qpsLabel(r), variantName[r.Variant], kv(r.Seen), kv(r.Events), kv(r.Own), kv(r.Shared))
	}
	p("\n</details>\n")
}

func sameRun(a, b *result) bool {
	return a.WindowStart == b.WindowStart && a.CronJobs == b.CronJobs && a.QPS == b.QPS
}

func variantsOf(all []result, r *result) string {
	var vs []string
	for i := range all {
		if sameRun(&all[i], r) {
			vs = append(vs, variantName[all[i].Variant])
		}
	}
	return strings.Join(vs, " + ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func num(x float64) string {
	if x < 0 || math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.2f", x)
}

func num0(x float64) string {
	if x < -0.5 || math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.0f", x)
}

func bound(x float64) string {
	switch {
	case x >= beyondBuckets:
		return "> last bucket"
	case x < 0:
		return "–"
	}
	return strconv.FormatFloat(x, 'g', 4, 64)
}

func sumMap(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}

func kv(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.4g", k, m[k])
	}
	return strings.Join(parts, ", ")
}
