// Command bench drives hack/bench-cron.sh: jobplane's cron service and the
// built-in CronJob controller of kube-controller-manager, side by side in one
// kwok cluster, each running the same number of identical CronJobs
// (`* * * * *`, concurrencyPolicy Allow, a suspended Job template, so no
// pods), each in a namespace of its own. It measures, over -minutes full
// minute boundaries, when each run's Job appears against its scheduled time,
// which runs never got a Job, and what each controller wrote to the API
// server per run; it appends one JSON line per controller to -results, and
// `bench report` turns that file into the markdown tables of BENCHMARKS.md.
//
//	bench run -count 1000 -minutes 3 -variants builtin,jobplane ...
//	bench report -results FILE [-results FILE ...]
//
// Times come from the driver's own watch (a metadata informer on Jobs in
// every namespace, started before the CronJobs are created): a Job's skew is
// the moment the driver first sees it less its scheduled time (the
// batch.kubernetes.io/cronjob-scheduled-timestamp annotation, else the
// minute in its name). creationTimestamp (one second resolution, truncated)
// gives a cross-check, and each controller's own skew histogram another. The
// driver's client has no rate limit. The free loopback ports the script
// needs come from services/executor/test/bench (`bench ports N`).
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

func main() {
	log.SetFlags(log.Ltime)
	log.SetPrefix("bench-cron: ")
	if len(os.Args) < 2 {
		log.Fatal("usage: bench run ... | report -results FILE")
	}
	var err error
	switch mode, args := os.Args[1], os.Args[2:]; mode {
	case "run":
		err = run(args)
	case "report":
		err = report(args)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// The two controllers, each with its namespace.
const (
	builtin  = "builtin"
	jobplane = "jobplane"
)

func namespaceOf(variant string) string { return "bench-cron-" + variant }

// quietNamespaceOf is the namespace of a controller's quiet tenant: one
// CronJob, created after the -count others, whose runs fall due with theirs.
func quietNamespaceOf(variant string) string { return namespaceOf(variant) + "-quiet" }

var (
	jobplaneCronJobs = schema.GroupVersionResource{Group: "jobplane.dev", Version: "v1", Resource: "cronjobs"}
	batchCronJobs    = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}
	batchJobs        = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
)

type options struct {
	kubeconfig      string
	results         string
	qps             string
	cronQPS         string
	executorQPS     string
	kcmQPS          string
	cronWorkers     int
	executorWorkers int
	count           int
	minutes         int
	variants        []string
	grace           time.Duration
	lead            time.Duration
	settle          time.Duration
	creators        int
	skipUnsettled   bool
	quiet           bool
	slowCreates     time.Duration
	cronMetrics     string
	executorMetrics string
	kcmMetrics      string
}

// result is one controller's part of a run: a line of the results file.
type result struct {
	Variant         string `json:"variant"`         // builtin or jobplane
	CronJobs        int    `json:"cronJobs"`        // CronJobs of this controller
	SideBySide      bool   `json:"sideBySide"`      // the other controller ran as many in the same run
	QPS             string `json:"qps"`             // jobplane's clients (cron, executor) QPS/burst
	CronQPS         string `json:"cronQPS"`         // cron's alone
	ExecutorQPS     string `json:"executorQPS"`     // the executor's alone
	KCMQPS          string `json:"kcmQPS"`          // kube-controller-manager's QPS/burst
	CronWorkers     int    `json:"cronWorkers"`     // cron -workers
	ExecutorWorkers int    `json:"executorWorkers"` // executor -workers
	Minutes         int    `json:"minutes"`
	// SlowCreatesSeconds is how long the crowded namespaces' Job creations
	// were held by the slow-creates webhook (-slow-creates).
	SlowCreatesSeconds float64 `json:"slowCreatesSeconds,omitempty"`
	WindowStart        string  `json:"windowStart"` // first boundary measured
	GraceSeconds       float64 `json:"graceSeconds"`
	CreateSeconds      float64 `json:"createSeconds"` // the driver creating this run's CronJobs (both controllers')

	Expected   int `json:"expected"`   // CronJobs × boundaries
	Runs       int `json:"runs"`       // (CronJob, boundary) pairs with a Job by the end
	Missed     int `json:"missed"`     // Expected - Runs
	Duplicates int `json:"duplicates"` // Jobs beyond the first of a run
	Later      int `json:"later"`      // Jobs of boundaries after the window (in the grace)

	// Skew of the runs of the window, seconds: first seen by the driver's
	// watch, from creationTimestamp, and from the controller's own
	// histogram (the upper bound of the bucket holding the quantile).
	Skew       quantiles `json:"skew"`
	SkewCT     quantiles `json:"skewCreationTimestamp"`
	SkewOwn    quantiles `json:"skewOwnHistogram"`
	OwnSamples float64   `json:"ownSamples"`
	// WatchLag is how late the driver's watch saw its own writes over the
	// interval (a ConfigMap updated every second): the skews include it.
	WatchLag quantiles `json:"watchLag"`
	// PerBoundary are the runs and skews of each boundary.
	PerBoundary []boundary `json:"perBoundary"`
	// Quiet is the skew of the quiet tenant's runs (one CronJob in a
	// namespace of its own, due with the others), QuietMissed its runs
	// without a Job.
	Quiet       quantiles `json:"quiet"`
	QuietMissed int       `json:"quietMissed"`

	// JobsCreated are the Jobs of this namespace first seen between the
	// two scrapes: the runs the writes are divided by.
	JobsCreated int `json:"jobsCreated"`
	// Writes and Reads are the controller's requests over the same
	// interval, by category (see categories in the report); Failed the
	// part answered with an error where it can be told.
	Writes map[string]float64 `json:"writes"`
	Reads  map[string]float64 `json:"reads"`
	Failed map[string]float64 `json:"failed"`
	// Seen are the modifications the driver's watch saw of this
	// namespace's CronJobs and Jobs (each an effective write).
	Seen map[string]float64 `json:"seen"`
	// Events are the Event writes (the sum of their counts) by the
	// component that recorded them and reason.
	Events map[string]float64 `json:"events"`
	// Own are the controller's own metric deltas (syncs, runs, misses,
	// the executor's API requests by verb and resource).
	Own map[string]float64 `json:"own"`
	// Shared are the API server's write deltas no controller can be told
	// by (every client's), by "VERB group/resource/subresource code".
	Shared map[string]float64 `json:"shared"`
	// CPU seconds over the interval, by process.
	CPU map[string]float64 `json:"cpu"`
	// IntervalSeconds is the time between the two scrapes.
	IntervalSeconds float64 `json:"intervalSeconds"`
}

type quantiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
	N   int     `json:"n"`
}

type boundary struct {
	Time string  `json:"time"`
	Runs int     `json:"runs"`
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

func run(args []string) error {
	var o options
	var variants string
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	fs.StringVar(&o.results, "results", "", "JSON-lines file the results are appended to")
	fs.StringVar(&o.qps, "qps", "", "QPS/burst of cron and executor, as a label of the results")
	fs.StringVar(&o.cronQPS, "cron-qps", "", "QPS/burst of cron when it differs from -qps")
	fs.StringVar(&o.executorQPS, "executor-qps", "", "QPS/burst of the executor when it differs from -qps")
	fs.StringVar(&o.kcmQPS, "kcm-qps", "", "QPS/burst of kube-controller-manager, as a label of the results")
	fs.IntVar(&o.cronWorkers, "cron-workers", 0, "cron -workers, as a label of the results")
	fs.IntVar(&o.executorWorkers, "executor-workers", 0, "executor -workers, as a label of the results")
	fs.IntVar(&o.count, "count", 1000, "CronJobs per controller")
	fs.IntVar(&o.minutes, "minutes", 3, "minute boundaries measured")
	fs.StringVar(&variants, "variants", "builtin,jobplane", "controllers run, side by side: builtin, jobplane or both")
	fs.DurationVar(&o.grace, "grace", 90*time.Second, "wait after the last boundary for late Jobs")
	fs.DurationVar(&o.lead, "lead", 5*time.Second, "least time between the counters read and the first boundary")
	fs.DurationVar(&o.settle, "settle", 2*time.Minute, "longest wait for the controllers' first syncs of the new CronJobs to end (the wait ends before the next boundary anyway)")
	fs.IntVar(&o.creators, "creators", 32, "CronJobs created in parallel")
	fs.BoolVar(&o.skipUnsettled, "skip-unsettled", true, "when the first syncs have not ended by the next boundary, measure from the one after")
	fs.BoolVar(&o.quiet, "quiet", true, "give each controller a quiet tenant too: one CronJob in a namespace of its own, created after the others, due with them")
	fs.DurationVar(&o.slowCreates, "slow-creates", 0, "hold every Job creation in the crowded namespaces this long, by an admission webhook on loopback (0: none): the quiet tenant's skew then says whether a worker waiting on a slow creation is given up to it")
	fs.StringVar(&o.cronMetrics, "cron-metrics", "", "URL of the cron service's /metrics")
	fs.StringVar(&o.executorMetrics, "executor-metrics", "", "URL of the executor's /metrics")
	fs.StringVar(&o.kcmMetrics, "kcm-metrics", "", "URL of kube-controller-manager's /metrics (TLS not verified)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, v := range strings.Split(variants, ",") {
		if v != builtin && v != jobplane {
			return fmt.Errorf("-variants: %q is neither builtin nor jobplane", v)
		}
		o.variants = append(o.variants, v)
	}
	if o.count < 1 || o.minutes < 1 {
		return errors.New("-count and -minutes must be positive")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS = -1 // no client-side rate limit for the driver
	cfg.UserAgent = "jobplane-bench-cron"
	b := &bench{o: o}
	typed := rest.CopyConfig(cfg)
	typed.ContentType = "application/vnd.kubernetes.protobuf" // the Events listed at 10,000 CronJobs
	if b.kube, err = kubernetes.NewForConfig(typed); err != nil {
		return err
	}
	if b.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if b.w, err = newWatcher(ctx, meta); err != nil {
		return err
	}
	if b.probe, err = startProbe(ctx, b.kube, meta); err != nil {
		return err
	}
	if o.slowCreates > 0 {
		var crowded []string
		for _, v := range o.variants {
			crowded = append(crowded, namespaceOf(v))
		}
		stop, err := startSlowCreates(ctx, b.kube, crowded, o.slowCreates)
		if err != nil {
			return err
		}
		defer stop()
	}
	results, err := b.run(ctx)
	if err != nil {
		return err
	}
	var out *os.File
	if o.results != "" {
		if out, err = os.OpenFile(o.results, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err != nil {
			return err
		}
		defer out.Close()
	}
	for _, r := range results {
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if out != nil {
			if _, err := out.Write(append(line, '\n')); err != nil {
				return err
			}
		}
		fmt.Println(string(line))
	}
	return nil
}

type bench struct {
	o     options
	kube  kubernetes.Interface
	dyn   dynamic.Interface
	w     *watcher
	probe *probe
}

// snapshot is what the deltas of the interval come from.
type snapshot struct {
	at                             time.Time
	apiserver, kcm, cron, executor *metrics
	events                         map[string]float64 // namespace|component|reason → sum of counts
	jobMods, cronJobMods           map[string]int     // by namespace
}

func (b *bench) run(ctx context.Context) ([]result, error) {
	o := b.o
	for _, v := range o.variants {
		for _, ns := range []string{namespaceOf(v), quietNamespaceOf(v)} {
			if err := b.ensureNamespace(ctx, ns); err != nil {
				return nil, err
			}
		}
	}
	// Created just after a minute boundary, the CronJobs leave the
	// controllers most of a minute for their first syncs (jobplane writes
	// nextScheduleTime) before the first boundary measured.
	if now := time.Now(); now.Sub(now.Truncate(time.Minute)) > 10*time.Second {
		start := now.Truncate(time.Minute).Add(time.Minute + 2*time.Second)
		log.Printf("creating the CronJobs at %s, just after a boundary", start.Format("15:04:05"))
		sleepUntil(ctx, start)
	}
	start := time.Now()
	if err := b.createCronJobs(ctx); err != nil {
		return nil, err
	}
	createSecs := time.Since(start).Seconds()
	log.Printf("%d CronJobs per controller created in %.1fs", o.count, createSecs)
	// The controllers' first syncs of the new CronJobs are not the runs':
	// let them end before the counters are read, by the next boundary.
	// When they have not (jobplane's nextScheduleTime writes at a low QPS
	// or 10,000 CronJobs), the boundary after is measured from instead,
	// the first one's runs left unmeasured as those of a steady state.
	deadline := time.Now().Truncate(time.Minute).Add(time.Minute - o.lead - 3*time.Second)
	if time.Until(deadline) < 5*time.Second {
		deadline = deadline.Add(time.Minute)
	}
	if !b.quiesce(ctx, min(time.Until(deadline), o.settle)) && o.skipUnsettled {
		log.Printf("leaving the next boundary unmeasured")
		sleepUntil(ctx, deadline.Add(time.Minute))
	}
	before, err := b.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	first := before.at.Add(o.lead).Truncate(time.Minute).Add(time.Minute)
	last := first.Add(time.Duration(o.minutes-1) * time.Minute)
	end := last.Add(o.grace)
	log.Printf("measuring the boundaries %s to %s, until %s", first.Format("15:04:05"), last.Format("15:04:05"), end.Format("15:04:05"))
	for t := first; !t.After(last); t = t.Add(time.Minute) {
		sleepUntil(ctx, t.Add(30*time.Second))
		var parts []string
		for _, v := range o.variants {
			n, maxSkew := b.w.progress(namespaceOf(v), t)
			parts = append(parts, fmt.Sprintf("%s %d/%d (max %.1fs)", v, n, o.count, maxSkew))
		}
		log.Printf("boundary %s after 30s: %s", t.Format("15:04"), strings.Join(parts, ", "))
	}
	sleepUntil(ctx, end)
	after, err := b.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var results []result
	for _, v := range o.variants {
		r := result{
			Variant: v, CronJobs: o.count, SideBySide: len(o.variants) == 2, QPS: o.qps, KCMQPS: o.kcmQPS,
			CronQPS: cmp.Or(o.cronQPS, o.qps), ExecutorQPS: cmp.Or(o.executorQPS, o.qps),
			CronWorkers: o.cronWorkers, ExecutorWorkers: o.executorWorkers, Minutes: o.minutes, SlowCreatesSeconds: o.slowCreates.Seconds(),
			WindowStart: first.UTC().Format(time.RFC3339), GraceSeconds: o.grace.Seconds(), CreateSeconds: createSecs,
			IntervalSeconds: after.at.Sub(before.at).Seconds(),
		}
		b.runs(&r, first, last, before.at, after.at)
		r.WatchLag = quantilesOf(b.probe.lagsBetween(before.at, after.at))
		deltas(&r, before, after)
		results = append(results, r)
		log.Printf("%s: %d of %d runs, %d missed; skew p50 %.2fs p99 %.2fs max %.2fs", v, r.Runs, r.Expected, r.Missed, r.Skew.P50, r.Skew.P99, r.Skew.Max)
		if o.quiet {
			log.Printf("%s's quiet tenant: %d runs missed; skew p50 %.2fs max %.2fs", v, r.QuietMissed, r.Quiet.P50, r.Quiet.Max)
		}
	}
	return results, nil
}

func sleepUntil(ctx context.Context, t time.Time) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(t)):
	}
}

func (b *bench) ensureNamespace(ctx context.Context, ns string) error {
	_, err := b.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// spec is every CronJob's spec, the same for both controllers.
func spec() batchv1.CronJobSpec {
	return batchv1.CronJobSpec{
		Schedule:          "* * * * *",
		ConcurrencyPolicy: batchv1.AllowConcurrent,
		JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			}},
		}},
	}
}

func cronJobName(i int) string { return fmt.Sprintf("cj-%05d", i) }

// createCronJobs creates -count CronJobs per controller, the two kinds
// interleaved so that both exist at about the same time, and waits until
// the watch has seen them all.
func (b *bench) createCronJobs(ctx context.Context) error {
	s := spec()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&s)
	if err != nil {
		return err
	}
	type item struct {
		namespace, variant string
		i                  int
	}
	items := make(chan item)
	errs := make(chan error, b.o.creators)
	var wg sync.WaitGroup
	for range b.o.creators {
		wg.Go(func() {
			for it := range items {
				ns, name := it.namespace, cronJobName(it.i)
				var err error
				if it.variant == builtin {
					_, err = b.kube.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{
						ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: s,
					}, metav1.CreateOptions{})
				} else {
					u := &unstructured.Unstructured{Object: map[string]any{
						"apiVersion": "jobplane.dev/v1", "kind": "CronJob",
						"metadata": map[string]any{"name": name, "namespace": ns},
						"spec":     runtime.DeepCopyJSON(content),
					}}
					_, err = b.dyn.Resource(jobplaneCronJobs).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
				}
				if err != nil && !apierrors.IsAlreadyExists(err) {
					errs <- fmt.Errorf("creating %s CronJob %s/%s: %w", it.variant, ns, name, err)
					for range items {
					}
					return
				}
			}
		})
	}
	for i := range b.o.count {
		for _, v := range b.o.variants {
			items <- item{namespaceOf(v), v, i}
		}
	}
	if b.o.quiet {
		for _, v := range b.o.variants {
			items <- item{quietNamespaceOf(v), v, 0}
		}
	}
	close(items)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, v := range b.o.variants {
		for b.w.cronJobCount(namespaceOf(v)) < b.o.count {
			if time.Now().After(deadline) {
				return fmt.Errorf("the watch saw %d of the %d %s CronJobs after 2m", b.w.cronJobCount(namespaceOf(v)), b.o.count, v)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// quiesce waits until the API server's writes of CronJobs, Jobs and events
// stop for three seconds, at most max.
func (b *bench) quiesce(ctx context.Context, max time.Duration) bool {
	resources := map[string]bool{"cronjobs": true, "jobs": true, "events": true}
	var last float64 = -1
	stable := 0
	start := time.Now()
	for time.Since(start) < max && stable < 3 {
		m, err := b.apiserverMetrics(ctx)
		if err != nil {
			log.Printf("reading the API server's metrics: %v", err)
			return false
		}
		var total float64
		for _, s := range m.samples("apiserver_request_total") {
			if writeVerbs[s.labels["verb"]] && resources[s.labels["resource"]] {
				total += s.value
			}
		}
		if total == last {
			stable++
		} else {
			stable = 0
		}
		last = total
		time.Sleep(time.Second)
	}
	if stable < 3 {
		log.Printf("the writes of CronJobs, Jobs and events did not stop within %.0fs", max.Seconds())
		return false
	}
	log.Printf("quiet after %.0fs", time.Since(start).Seconds())
	return true
}

func (b *bench) snapshot(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now()}
	var err error
	if s.apiserver, err = b.apiserverMetrics(ctx); err != nil {
		return s, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	for _, m := range []struct {
		url string
		to  **metrics
	}{{b.o.kcmMetrics, &s.kcm}, {b.o.cronMetrics, &s.cron}, {b.o.executorMetrics, &s.executor}} {
		if m.url == "" {
			continue
		}
		if *m.to, err = httpMetrics(ctx, m.url); err != nil {
			return s, fmt.Errorf("reading metrics: %w", err)
		}
	}
	s.jobMods, s.cronJobMods = b.w.modifications()
	if s.events, err = b.events(ctx); err != nil {
		return s, fmt.Errorf("listing events: %w", err)
	}
	return s, nil
}

// events sums the counts of the Events of the benchmark's namespaces by
// namespace, recording component and reason: each Event object is one
// create, each increment of its count one patch.
func (b *bench) events(ctx context.Context) (map[string]float64, error) {
	out := map[string]float64{}
	for _, v := range b.o.variants {
		ns := namespaceOf(v)
		opts := metav1.ListOptions{Limit: 1000}
		for {
			list, err := b.kube.CoreV1().Events(ns).List(ctx, opts)
			if err != nil {
				return nil, err
			}
			for _, e := range list.Items {
				component := e.Source.Component
				if component == "" {
					component = e.ReportingController
				}
				out[ns+"|"+component+"|"+e.Reason] += float64(max(e.Count, 1))
			}
			if list.Continue == "" {
				break
			}
			opts.Continue = list.Continue
		}
	}
	return out, nil
}
