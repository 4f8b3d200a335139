package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
)

// report prints the results file as markdown tables, jobplane next to the
// built-in controller measured in the same run, with their ratios.
func report(args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	path := fs.String("results", "", "JSON-lines file written by the scenarios")
	if err := fs.Parse(args); err != nil {
		return err
	}
	all, err := readResults(*path)
	if err != nil {
		return err
	}
	var qpsOrder []string
	seen := map[string]bool{}
	for _, r := range all {
		if !seen[r.QPS] {
			seen[r.QPS] = true
			qpsOrder = append(qpsOrder, r.QPS)
		}
	}
	find := func(scenario, variant, qps string) *result {
		for i := len(all) - 1; i >= 0; i-- {
			if r := &all[i]; r.Scenario == scenario && r.Variant == variant && r.QPS == qps {
				return r
			}
		}
		return nil
	}
	writeReport(os.Stdout, qpsOrder, find)
	return nil
}

// readResults reads a results file (JSON lines) written by the scenarios.
func readResults(path string) ([]result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var all []result
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		all = append(all, r)
	}
	return all, sc.Err()
}

var variantName = map[string]string{"builtin": "built-in", "jobplane": "jobplane"}

// scenarios in the order of the tables.
var scenarios = []string{"big", "many", "tenants"}

func writeReport(w io.Writer, qpsOrder []string, find func(scenario, variant, qps string) *result) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	variants := []string{"builtin", "jobplane"}
	// rows calls, for each QPS pair in turn, row for each controller's
	// result of scenario, then pair with both when both are there; either
	// may be nil.
	rows := func(scenario string, row func(qps, variant string, r *result), pair func(qps string, b, j *result)) {
		for _, qps := range qpsOrder {
			for _, v := range variants {
				if r := find(scenario, v, qps); r != nil && row != nil {
					row(qps, v, r)
				}
			}
			if b, j := find(scenario, "builtin", qps), find(scenario, "jobplane", qps); b != nil && j != nil && pair != nil {
				pair(qps, b, j)
			}
		}
	}
	// pairs calls pair for each QPS pair and scenario with both controllers'
	// results.
	pairs := func(pair func(qps, scenario string, b, j *result)) {
		for _, qps := range qpsOrder {
			for _, s := range scenarios {
				if b, j := find(s, "builtin", qps), find(s, "jobplane", qps); b != nil && j != nil {
					pair(qps, s, b, j)
				}
			}
		}
	}

	// The big Job.
	if r := firstOf(qpsOrder, find, "big"); r != nil {
		p("#### One Job of %d completions, parallelism %d\n\n", r.Completions, r.Parallelism)
		p("API writes per pod, from `apiserver_request_total` deltas over the run, divided by the pods created (the %d-pod Job created beside the big one is in the same run and counted with it).\n\n", r.BesidePods)
		p("| QPS/burst | controller | create→Complete (s) | pods/s | pods create | pods patch | pods delete | Job status | events | writes/pod | failed writes | syncs |\n")
		p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		rows("big", func(qps, v string, r *result) {
			p("| %s | %s | %s | %.1f |", qps, variantName[v], secs(r.Seconds, r.TimedOut), float64(r.Completions)/r.Seconds)
			for _, c := range categories {
				p(" %.3f |", perPod(r.Writes[c.name], r.Pods))
			}
			p(" %.3f | %.0f | %.0f |\n", perPod(totalWrites(r), r.Pods), sum(r.Failed), r.Syncs)
		}, func(qps string, b, j *result) {
			p("| %s | **jobplane / built-in** | %s | %s |", qps, ratio(j.Seconds, b.Seconds), ratio(float64(j.Completions)/j.Seconds, float64(b.Completions)/b.Seconds))
			for _, c := range categories {
				p(" %s |", ratio(perPod(j.Writes[c.name], j.Pods), perPod(b.Writes[c.name], b.Pods)))
			}
			p(" %s | | %s |\n", ratio(perPod(totalWrites(j), j.Pods), perPod(totalWrites(b), b.Pods)), ratio(j.Syncs, b.Syncs))
		})
		p("\n")

		p("#### A %d-pod Job created beside it (once a quarter of the big Job's pods exist)\n\n", r.BesidePods)
		p("| QPS/burst | built-in create→Complete (s) | jobplane create→Complete (s) | jobplane / built-in |\n")
		p("|---|---:|---:|---:|\n")
		rows("big", nil, func(qps string, b, j *result) {
			p("| %s | %s | %s | %s |\n", qps, secs(b.BesideSecs, b.TimedOut), secs(j.BesideSecs, j.TimedOut), ratio(j.BesideSecs, b.BesideSecs))
		})
		p("\n")
		p("Where its time went: seconds from the Job seen added until both its pods were seen created (the controller), bound to a node (the scheduler), Succeeded (kwok), and the Job seen Complete (the controller again).\n\n")
		p("| QPS/burst | controller | pods created | pods bound | pods Succeeded | Job Complete |\n")
		p("|---|---|---:|---:|---:|---:|\n")
		rows("big", func(qps, v string, r *result) {
			p("| %s | %s | %s | %s | %s | %s |\n", qps, variantName[v], milestone(r.BesidePodsCreated), milestone(r.BesidePodsBound),
				milestone(r.BesidePodsSucceeded), secs(r.BesideSecs, r.TimedOut))
		}, nil)
		p("\n")
	}

	// Many small Jobs.
	if r := firstOf(qpsOrder, find, "many"); r != nil {
		p("#### %d Jobs of %d completions, parallelism %d, created at once\n\n", r.Jobs, r.JobCompletions, r.JobParallelism)
		p("All Complete: from the first creation to the last Job seen Complete. First pod: from a Job seen added to its first pod seen, over the %d Jobs.\n\n", r.Jobs)
		p("| QPS/burst | controller | all Complete (s) | first pod p50 (s) | first pod p99 (s) | pods create | pods patch | Job status | events | writes/pod | failed writes | syncs |\n")
		p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		rows("many", func(qps, v string, r *result) {
			p("| %s | %s | %s | %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.0f | %.0f |\n", qps, variantName[v], secs(r.Seconds, r.TimedOut),
				milestone2(r.FirstPodP50), milestone2(r.FirstPodP99), perPod(r.Writes["pods create"], r.Pods), perPod(r.Writes["pods patch"], r.Pods),
				perPod(r.Writes["Job status"], r.Pods), perPod(r.Writes["events"], r.Pods), perPod(totalWrites(r), r.Pods), sum(r.Failed), r.Syncs)
		}, func(qps string, b, j *result) {
			p("| %s | **jobplane / built-in** | %s | %s | %s | %s | %s | %s | %s | %s | | %s |\n", qps, ratio(j.Seconds, b.Seconds),
				ratio(j.FirstPodP50, b.FirstPodP50), ratio(j.FirstPodP99, b.FirstPodP99),
				ratio(perPod(j.Writes["pods create"], j.Pods), perPod(b.Writes["pods create"], b.Pods)),
				ratio(perPod(j.Writes["pods patch"], j.Pods), perPod(b.Writes["pods patch"], b.Pods)),
				ratio(perPod(j.Writes["Job status"], j.Pods), perPod(b.Writes["Job status"], b.Pods)),
				ratio(perPod(j.Writes["events"], j.Pods), perPod(b.Writes["events"], b.Pods)),
				ratio(perPod(totalWrites(j), j.Pods), perPod(totalWrites(b), b.Pods)), ratio(j.Syncs, b.Syncs))
		})
		p("\n")
	}

	// Tenants.
	if r := firstOf(qpsOrder, find, "tenants"); r != nil {
		p("#### Tenants: namespace A's %d Jobs of %d completions, parallelism %d, created at once, then namespace B's %d-pod Job; pods run %s\n\n",
			r.Jobs, r.JobCompletions, r.JobParallelism, r.BesidePods, r.PodRuntime)
		when := "once all of A's creations returned"
		switch r.BesideAfter {
		case besideAfterPods:
			when = "once every pod of A's Jobs existed (A's finalizer removals under way)"
		case besideAfterDeadline:
			when = "once every pod of A's Jobs existed, running until deleted, and A's Jobs were past their deadline (A's deletions of their active pods under way; A's Jobs end Failed, not Complete)"
		}
		p("B alone: B's Job with nothing else running (before A's). B beside A: B's Job created %s, seen added to seen Complete. A all Complete: from A's first creation to A's last Job seen Complete. API requests per pod: the controller's writes over A's and B's Jobs beside them, divided by their pods.\n\n", when)
		p("| QPS/burst | controller | B alone (s) | B beside A (s) | B beside / alone | A all Complete (s) | API requests per pod |\n")
		p("|---|---|---:|---:|---:|---:|---:|\n")
		rows("tenants", func(qps, v string, r *result) {
			p("| %s | %s | %s | %s | %s | %s | %.3f |\n", qps, variantName[v], secs(r.AloneSecs, r.AloneTimedOut), secs(r.BesideSecs, r.TimedOut),
				ratio(r.BesideSecs, r.AloneSecs), secs(r.Seconds, r.TimedOut), perPod(totalWrites(r), r.Pods))
		}, func(qps string, b, j *result) {
			p("| %s | **jobplane / built-in** | %s | %s | | %s | %s |\n", qps, ratio(j.AloneSecs, b.AloneSecs), ratio(j.BesideSecs, b.BesideSecs),
				ratio(j.Seconds, b.Seconds), ratio(perPod(totalWrites(j), j.Pods), perPod(totalWrites(b), b.Pods)))
		})
		p("\n")
		p("Where B's time went beside A (seconds from B's Job seen added until both its pods were seen created, bound, Succeeded, and the Job seen Complete; A's Jobs Complete by then), the events about B's Job seen by the run's end and when the last was, the writes per pod by kind, and the events about Jobs (the controller's) the driver saw created or updated by A's last Complete, of all in the run.\n\n")
		p("| QPS/burst | controller | B pods created | B pods bound | B pods Succeeded | B Complete | A's Jobs Complete by then | B's events: seen, last after (s) | A first pod p50 (s) | A first pod p99 (s) | pods create | pods patch | Job status | events | failed writes | syncs | Job events by A's last Complete |\n")
		p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		rows("tenants", func(qps, v string, r *result) {
			p("| %s | %s | %s | %s | %s | %s | %d of %d | %d, %s | %s | %s | %.3f | %.3f | %.3f | %.3f | %.0f | %.0f | %d of %d |\n", qps, variantName[v],
				milestone(r.BesidePodsCreated), milestone(r.BesidePodsBound), milestone(r.BesidePodsSucceeded), secs(r.BesideSecs, r.TimedOut),
				r.ADoneAtBeside, r.Jobs, r.BesideEvents, milestone(r.BesideEventsSecs), milestone2(r.FirstPodP50), milestone2(r.FirstPodP99),
				perPod(r.Writes["pods create"], r.Pods), perPod(r.Writes["pods patch"], r.Pods), perPod(r.Writes["Job status"], r.Pods),
				perPod(r.Writes["events"], r.Pods), sum(r.Failed), r.Syncs, r.JobEventsAtDone, r.JobEvents)
		}, nil)
		p("\n")
	}

	// A tenant's flood.
	if r := firstOf(qpsOrder, find, "flood"); r != nil {
		p("#### A tenant's flood: %d goroutines read namespace A's %d suspended Jobs while namespace B's %d-pod Job runs\n\n", r.Flooders, r.Jobs, r.BesidePods)
		p("B's Job, seen added to seen Complete, %d times in each phase: quiet; while another caller, allowed to read namespace A, lists A's Jobs (100 a call) at the controller's front door as fast as it is answered (the API server for the built-in, the executor's ListJobs for jobplane); while the same caller lists B's, which it may not; while it lists a namespace of a new name each call, whose authorization no cache holds. Calls: the flood's answers in the phase, by code, and their rate.\n\n", len(r.Flood["quiet"].Seconds))
		p("| QPS/burst | controller | flood | B's Job (s) | mean (s) | mean / quiet | calls answered | calls/s |\n")
		p("|---|---|---|---|---:|---:|---|---:|\n")
		rows("flood", func(qps, v string, r *result) {
			quiet := mean(r.Flood["quiet"].Seconds)
			for _, phase := range floodPhases {
				ph := r.Flood[phase]
				if ph == nil {
					continue
				}
				calls, n := callsByCode(ph.Calls)
				p("| %s | %s | %s | %s | %.2f | %s | %s | %s |\n", qps, variantName[v], phase, joinSecs(ph.Seconds), mean(ph.Seconds),
					ratio(mean(ph.Seconds), quiet), calls, rate(n, ph.CallSeconds))
			}
		}, nil)
		p("\n")
		p("#### Another caller's reads during the flood\n\n")
		p("Through every phase a bystander, allowed to read namespace B only, lists B's Jobs at the same front door every %s, one call at a time: on the API server as user %s, in the flooder's priority level as another flow; on the executor as ServiceAccount B/%s, in the flooder's level as another caller. Times of its answered calls.\n\n", bystanderEvery, bystanderUser, bystanderUser)
		p("| QPS/burst | controller | flood | reads answered | p50 (ms) | p99 (ms) | max (ms) | p99 / quiet p99 |\n")
		p("|---|---|---|---|---:|---:|---:|---:|\n")
		rows("flood", func(qps, v string, r *result) {
			quiet := r.Flood["quiet"].Bystander
			for _, phase := range floodPhases {
				ph := r.Flood[phase]
				if ph == nil || ph.Bystander == nil || quiet == nil {
					continue
				}
				calls, _ := callsByCode(ph.Bystander.Calls)
				p("| %s | %s | %s | %s | %.1f | %.1f | %.1f | %s |\n", qps, variantName[v], phase, calls,
					ph.Bystander.P50, ph.Bystander.P99, ph.Bystander.Max, ratio(ph.Bystander.P99, quiet.P99))
			}
		}, nil)
		p("\n")
	}

	// Syncs and the planner's share.
	p("#### Sync time and the planner's share\n\n")
	p("Deltas over each run of the executor's `jobplane_job_sync_duration_seconds` and `jobplane_planner_call_duration_seconds`, and of kube-controller-manager's `job_controller_job_sync_duration_seconds`.\n\n")
	p("| QPS/burst | scenario | built-in syncs | built-in mean sync (ms) | jobplane syncs | jobplane mean sync (ms) | mean planner call (ms) | planner share of sync time |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|\n")
	pairs(func(qps, s string, b, j *result) {
		p("| %s | %s | %.0f | %s | %.0f | %s | %s | %s |\n", qps, s, b.Syncs, ms(b.SyncSeconds, b.Syncs), j.Syncs, ms(j.SyncSeconds, j.Syncs),
			ms(j.PlannerSeconds, j.PlannerCalls), pct(j.PlannerSeconds, j.SyncSeconds))
	})
	p("\n")

	// CPU.
	p("#### CPU\n\n")
	p("CPU seconds (`process_cpu_seconds_total`) over each run of kube-controller-manager (all its controllers) and of the executor and planner together. Both sides run in every run and their informers follow the same pods, so each side's cost of running the Jobs is estimated as its CPU in its own run less its CPU in the other side's run, per pod created.\n\n")
	p("| QPS/burst | scenario | kcm, built-in run (s) | kcm, jobplane run (s) | executor+planner, jobplane run (s) | of which planner (s) | executor+planner, built-in run (s) | built-in Job controller (ms/pod) | executor+planner (ms/pod) |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	pairs(func(qps, s string, b, j *result) {
		p("| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |\n", qps, s, b.KCMCPU, j.KCMCPU, j.JobplaneCPU, j.PlannerCPU, b.JobplaneCPU,
			1000*perPod(b.KCMCPU-j.KCMCPU, b.Pods), 1000*perPod(j.JobplaneCPU-b.JobplaneCPU, j.Pods))
	})
	p("\n")

	// What else wrote, for the reading of the figures.
	p("<details><summary>Other writes in the runs (not the controller's: the driver's, the scheduler's, kwok's)</summary>\n\n")
	p("| QPS/burst | scenario | controller | other writes |\n|---|---|---|---|\n")
	for _, qps := range qpsOrder {
		for _, s := range scenarios {
			for _, v := range variants {
				r := find(s, v, qps)
				if r == nil {
					continue
				}
				p("| %s | %s | %s | %s |\n", qps, s, variantName[v], otherWrites(r))
			}
		}
	}
	p("\n</details>\n")
}

func firstOf(qpsOrder []string, find func(string, string, string) *result, scenario string) *result {
	for _, qps := range qpsOrder {
		for _, v := range []string{"builtin", "jobplane"} {
			if r := find(scenario, v, qps); r != nil {
				return r
			}
		}
	}
	return nil
}

func totalWrites(r *result) float64 { return sum(r.Writes) }

func sum(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}

func perPod(n float64, pods int) float64 {
	if pods == 0 {
		return math.NaN()
	}
	return n / float64(pods)
}

func secs(s float64, timedOut bool) string {
	if timedOut {
		return fmt.Sprintf("> %.0f (timed out)", s)
	}
	return fmt.Sprintf("%.1f", s)
}

func milestone(s float64) string {
	if s <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", s)
}

func milestone2(s float64) string {
	if s < 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", s)
}

func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func ms(total, n float64) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", 1000*total/n)
}

func pct(part, whole float64) string {
	if whole == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*part/whole)
}

func otherWrites(r *result) string {
	keys := make([]string, 0, len(r.OtherWrites))
	for k := range r.OtherWrites {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.0f", k, r.OtherWrites[k])
	}
	return strings.Join(parts, ", ")
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

func joinSecs(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ", ")
}

// callsByCode is "N CODE, …" in code order, and the total.
func callsByCode(calls map[string]int) (string, int) {
	codes := slices.Sorted(maps.Keys(calls))
	parts := make([]string, len(codes))
	n := 0
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%d %s", calls[c], c)
		n += calls[c]
	}
	if len(parts) == 0 {
		return "–", 0
	}
	return strings.Join(parts, ", "), n
}

func rate(n int, seconds float64) string {
	if seconds <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", float64(n)/seconds)
}
