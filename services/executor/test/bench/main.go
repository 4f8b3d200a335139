// Command bench drives hack/bench-executor.sh: it runs one scenario against a
// kwok cluster for one controller (the built-in Job controller or jobplane's
// executor), times it from watch events, takes the deltas of the API
// server's request counters and of the controller's sync metrics around it,
// and appends the result to a JSON-lines file; `bench report` turns that file
// into the markdown tables of BENCHMARKS.md.
//
//	bench ports N                  N free loopback ports, one a line
//	bench big -variant builtin ... one Job of -completions pods, -parallelism
//	                               wide, and a -beside-pod Job created once a
//	                               quarter of the big Job's pods exist
//	bench many -variant jobplane . -jobs small Jobs created at once
//	bench tenants -variant ...     two namespaces: A's -jobs Jobs created at
//	                               once, then B's -beside-pod Job; B's Job
//	                               also alone, before
//	bench report -results FILE     the tables
//	bench shares -run DIR ...      each side's CPU share of a profiled run,
//	                               by what its samples' stacks were doing
//
// Times come from the driver's own informers (the moment it sees a Job or a
// pod appear, or a Job's Complete condition), not from the objects'
// timestamps, which have a resolution of one second. The driver's client has
// no rate limit.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

const managedBy = "jobplane.dev/executor"

func main() {
	log.SetFlags(log.Ltime)
	log.SetPrefix("bench: ")
	if len(os.Args) < 2 {
		log.Fatal("usage: bench ports N | big ... | many ... | tenants ... | memory ... | report -results FILE | shares -run DIR | replacement -builtin FILES -jobplane FILES")
	}
	var err error
	switch mode, args := os.Args[1], os.Args[2:]; mode {
	case "ports":
		err = ports(args)
	case "big", "many", "tenants", "flood":
		err = runScenario(mode, args)
	case "memory":
		err = memory(args)
	case "report":
		err = report(args)
	case "shares":
		err = shares(args)
	case "replacement":
		err = replacement(args)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// ports prints free loopback ports, all held open until every one is found
// so that none is printed twice.
func ports(args []string) error {
	n := 1
	if len(args) > 0 {
		var err error
		if n, err = strconv.Atoi(args[0]); err != nil {
			return err
		}
	}
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		ls = append(ls, l)
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
	}
	return nil
}

// result is one scenario run for one controller: a line of the results file.
type result struct {
	Scenario string `json:"scenario"` // big, many or tenants
	Variant  string `json:"variant"`  // builtin or jobplane
	QPS      string `json:"qps"`      // the controllers' client QPS/burst, e.g. 20/30
	TimedOut bool   `json:"timedOut,omitempty"`

	// big
	Completions int `json:"completions,omitempty"`
	Parallelism int `json:"parallelism,omitempty"`
	// big: the Job seen added to seen Complete; many: creations start to
	// the last Complete; tenants: the same for namespace A's Jobs.
	Seconds    float64 `json:"seconds"`
	BesidePods int     `json:"besidePods,omitempty"`
	BesideSecs float64 `json:"besideSeconds,omitempty"` // tenants: B's Job beside A's
	// Where the beside Job's time went: seconds from it being seen added
	// to all its pods seen created, bound to a node, and Succeeded.
	BesidePodsCreated   float64 `json:"besidePodsCreated,omitempty"`
	BesidePodsBound     float64 `json:"besidePodsBound,omitempty"`
	BesidePodsSucceeded float64 `json:"besidePodsSucceeded,omitempty"`

	// many
	Jobs           int     `json:"jobs,omitempty"`
	JobCompletions int     `json:"jobCompletions,omitempty"`
	JobParallelism int     `json:"jobParallelism,omitempty"`
	FirstPodP50    float64 `json:"firstPodP50,omitempty"`
	FirstPodP99    float64 `json:"firstPodP99,omitempty"`
	FirstPodMax    float64 `json:"firstPodMax,omitempty"`
	CreateSecs     float64 `json:"createSeconds,omitempty"` // how long the driver took to create the Jobs

	// tenants (with Jobs, JobCompletions, JobParallelism of namespace A,
	// BesidePods and BesideSecs of namespace B's Job beside them)
	PodRuntime    string  `json:"podRuntime,omitempty"`   // how long each pod runs (fate.jobplane.dev/after)
	BesideAfter   string  `json:"besideAfter,omitempty"`  // when B's Job was created (-beside-after)
	AloneSecs     float64 `json:"aloneSeconds,omitempty"` // B's Job with nothing else running: seen added to seen Complete
	AloneTimedOut bool    `json:"aloneTimedOut,omitempty"`
	// flood (with Jobs of namespace A and BesidePods of B's Jobs): by
	// phase (floodPhases).
	Flooders int                    `json:"flooders,omitempty"`
	Flood    map[string]*floodPhase `json:"flood,omitempty"`

	// ADoneAtBeside is how many of A's Jobs were Complete when B's was.
	ADoneAtBeside int `json:"aDoneAtBeside,omitempty"`
	// BesideEvents are the events about B's Job seen by the end of the run
	// (once writes stopped), the last BesideEventsSecs after B's Job.
	BesideEvents     int     `json:"besideEvents,omitempty"`
	BesideEventsSecs float64 `json:"besideEventsSeconds,omitempty"`
	// Events about Jobs (the controller's: SuccessfulCreate, Completed, …)
	// seen created or updated from the counters' first reading until the
	// last Job was seen Complete (many; tenants: A's last), and until the
	// counters' second reading.
	JobEventsAtDone int `json:"jobEventsAtDone,omitempty"`
	JobEvents       int `json:"jobEvents,omitempty"`

	// Pods created in the run (seen by the driver's pod informer; for
	// tenants not those of B's Job alone, which runs before the counters
	// are read).
	Pods int `json:"pods"`
	// Writes are the deltas of apiserver_request_total for the controller's
	// write verbs, by category; Failed the part answered with an error.
	Writes map[string]float64 `json:"writes"`
	Failed map[string]float64 `json:"failed"`
	// OtherWrites are the deltas of the other write requests (the driver's,
	// kwok's, the scheduler's), by "VERB group/resource/subresource".
	OtherWrites map[string]float64 `json:"otherWrites"`

	// The controller's own sync metrics: the executor's
	// jobplane_job_sync_duration_seconds and jobplane_planner_call_duration_seconds,
	// or kube-controller-manager's job_controller_job_sync_duration_seconds.
	Syncs          float64 `json:"syncs"`
	SyncSeconds    float64 `json:"syncSeconds"`
	PlannerCalls   float64 `json:"plannerCalls,omitempty"`
	PlannerSeconds float64 `json:"plannerSeconds,omitempty"`

	// CPU seconds (process_cpu_seconds_total) over the run of
	// kube-controller-manager (every controller of it) and of the executor
	// and planner together, whichever variant runs: the other side's
	// informers follow the same pods.
	KCMCPU      float64 `json:"kcmCPU"`
	JobplaneCPU float64 `json:"jobplaneCPU"`
	PlannerCPU  float64 `json:"plannerCPU"` // the planner's part of JobplaneCPU
}

// The controller's writes, by category, as apiserver_request_total labels
// them. Subresources tell them from kwok's and the scheduler's (pods/status,
// pods/binding); the scheduler's events are events.k8s.io, the Job
// controllers' core ones.
var categories = []struct {
	name  string
	match func(verb, group, resource, subresource string) bool
}{
	{"pods create", func(v, g, r, s string) bool { return v == "POST" && g == "" && r == "pods" && s == "" }},
	{"pods patch", func(v, g, r, s string) bool { return v == "PATCH" && g == "" && r == "pods" && s == "" }},
	{"pods delete", func(v, g, r, s string) bool { return v == "DELETE" && g == "" && r == "pods" && s == "" }},
	{"Job status", func(v, g, r, s string) bool {
		return (v == "PUT" || v == "PATCH") && g == "batch" && r == "jobs" && s == "status"
	}},
	{"events", func(v, g, r, s string) bool {
		return (v == "POST" || v == "PATCH") && g == "" && r == "events" && s == ""
	}},
}

var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "DELETECOLLECTION": true, "APPLY": true}

type options struct {
	kubeconfig      string
	variant         string
	qps             string
	results         string
	timeout         time.Duration
	executorMetrics string
	plannerMetrics  string
	kcmMetrics      string
	completions     int
	parallelism     int
	beside          int
	jobs            int
	jobCompletions  int
	jobParallelism  int
	creators        int
	besideAfter     string
	podRuntime      time.Duration
	countingFile    string
	executorAddr    string
	flooders        int
	floodRuns       int
}

func runScenario(mode string, args []string) error {
	var o options
	fs := flag.NewFlagSet(mode, flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	fs.StringVar(&o.variant, "variant", "", "builtin (the Job controller of kube-controller-manager) or jobplane (spec.managedBy: "+managedBy+")")
	fs.StringVar(&o.qps, "qps", "", "the controllers' QPS/burst, as a label of the result")
	fs.StringVar(&o.results, "results", "", "JSON-lines file the result is appended to")
	fs.DurationVar(&o.timeout, "timeout", 15*time.Minute, "give up waiting for the Jobs after this long")
	fs.StringVar(&o.executorMetrics, "executor-metrics", "", "URL of the executor's /metrics")
	fs.StringVar(&o.plannerMetrics, "planner-metrics", "", "URL of the planner's /metrics")
	fs.StringVar(&o.kcmMetrics, "kcm-metrics", "", "URL of kube-controller-manager's /metrics (TLS not verified)")
	fs.IntVar(&o.completions, "completions", 2000, "big: completions of the big Job")
	fs.IntVar(&o.parallelism, "parallelism", 200, "big: parallelism of the big Job")
	beside, jobs, jobParallelism, podRuntime := 2, 500, 2, time.Duration(0)
	switch mode {
	case "tenants":
		// Issue 19's measurement.
		jobs, jobParallelism, podRuntime = 200, 4, 2*time.Second
	case "flood":
		beside, jobs = 4, 200
	}
	fs.IntVar(&o.beside, "beside", beside, "big: pods (completions and parallelism) of the Job created beside the big one; 0 for none. tenants: of namespace B's Job. flood: of namespace B's Job (parallelism half of them)")
	fs.IntVar(&o.jobs, "jobs", jobs, "many: Jobs created at once. tenants: namespace A's. flood: namespace A's, suspended")
	fs.IntVar(&o.jobCompletions, "job-completions", 4, "many, tenants: completions of each of those Jobs")
	fs.IntVar(&o.jobParallelism, "job-parallelism", jobParallelism, "many, tenants: parallelism of each of those Jobs")
	fs.IntVar(&o.creators, "creators", 32, "many, tenants: Jobs created in parallel")
	fs.StringVar(&o.besideAfter, "beside-after", besideAfterCreations, "tenants: when namespace B's Job is created: "+besideAfterCreations+" (once every creation of A's Jobs has returned: B meets A's pod creations), "+besideAfterPods+" (once every pod of A's Jobs exists: B meets A's finalizer removals) or "+besideAfterDeadline+" (A's pods run until deleted; once they all exist, A's Jobs pass their deadline and B's Job is created: B meets the deletions of A's active pods, then their finalizer removals)")
	fs.StringVar(&o.executorAddr, "executor-addr", "", "flood: the executor's gRPC address (jobplane)")
	fs.IntVar(&o.flooders, "flooders", 64, "flood: the flooding caller's goroutines")
	fs.IntVar(&o.floodRuns, "flood-runs", 3, "flood: namespace B's Jobs in each phase")
	fs.StringVar(&o.countingFile, "counting-file", "", "a file that exists while the counters run (from the first reading to the last), for a profiler to follow; the run's cleanup waits for FILE.done, which the profiler writes once its last window ends")
	fs.DurationVar(&o.podRuntime, "pod-runtime", podRuntime, "how long each pod runs before it succeeds (the fate.jobplane.dev/after annotation of hack/kwok/stages); 0: at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.besideAfter != besideAfterCreations && o.besideAfter != besideAfterPods && o.besideAfter != besideAfterDeadline {
		return fmt.Errorf("-beside-after must be %s, %s or %s, not %q", besideAfterCreations, besideAfterPods, besideAfterDeadline, o.besideAfter)
	}
	if o.variant != "builtin" && o.variant != "jobplane" {
		return fmt.Errorf("-variant must be builtin or jobplane, not %q", o.variant)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS = -1 // no client-side rate limit for the driver
	cfg.UserAgent = "jobplane-bench"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	r := &runner{o: o, cfg: cfg, client: client, ns: "bench-" + mode + "-" + o.variant}
	r.namespaces = []string{r.ns}
	if mode == "tenants" || mode == "flood" {
		r.ns += "-a"
		r.nsB = "bench-" + mode + "-" + o.variant + "-b"
		r.namespaces = []string{r.ns, r.nsB}
	}
	ctx := context.Background()
	res := result{Scenario: mode, Variant: o.variant, QPS: o.qps}
	if err := r.run(ctx, &res); err != nil {
		return err
	}
	line, err := json.Marshal(res)
	if err != nil {
		return err
	}
	if o.results != "" {
		f, err := os.OpenFile(o.results, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	fmt.Println(string(line))
	return nil
}

type runner struct {
	o      options
	cfg    *rest.Config
	client kubernetes.Interface
	ns     string // the scenario's namespace; tenants, flood: namespace A
	nsB    string // tenants, flood: namespace B
	// namespaces are all the run's, recreated before it and deleted after.
	namespaces []string
	w          *watcher
	// notCounted are pods created before the counters were read (tenants:
	// those of B's Job alone).
	notCounted int
	counted    time.Time // when the counters were first read
	// beside is namespace B's Job beside A's (tenants).
	beside types.UID
}

func (r *runner) run(ctx context.Context, res *result) error {
	for _, ns := range r.namespaces {
		if err := r.recreateNamespace(ctx, ns); err != nil {
			return err
		}
	}
	defer func() {
		for _, ns := range r.namespaces {
			if err := r.deleteNamespace(ctx, ns); err != nil {
				log.Printf("cleaning up: %v", err)
			}
		}
	}()
	stop := make(chan struct{})
	defer close(stop)
	var err error
	if r.w, err = newWatcher(r.client, r.namespaces, stop); err != nil {
		return err
	}
	// Whatever the last run left going (its namespace's deletion) ends
	// before the counters are read.
	r.quiesce(ctx)
	if res.Scenario == "tenants" {
		if err := r.tenantAlone(ctx, res); err != nil {
			return err
		}
		r.quiesce(ctx)
	}
	before, err := r.scrape(ctx)
	if err != nil {
		return err
	}
	r.counted = time.Now()
	if err := r.startCounting(); err != nil {
		return err
	}
	deadline := time.Now().Add(r.o.timeout)
	switch res.Scenario {
	case "big":
		err = r.big(ctx, res, deadline)
	case "many":
		err = r.many(ctx, res, deadline)
	case "tenants":
		err = r.tenants(ctx, res, deadline)
	case "flood":
		err = r.flood(ctx, res, deadline)
	}
	if errors.Is(err, errTimeout) {
		res.TimedOut = true
		log.Printf("%s/%s timed out after %v", res.Scenario, res.Variant, r.o.timeout)
	} else if err != nil {
		return err
	}
	// Events and writes still in flight when the last Job completed are
	// the run's too.
	r.quiesce(ctx)
	after, err := r.scrape(ctx)
	if err != nil {
		return err
	}
	r.stopCounting(ctx)
	res.Pods = r.w.podCount() - r.notCounted
	res.JobEvents = r.w.jobEventsBetween(r.counted, time.Now())
	if r.beside != "" {
		res.BesideEvents, res.BesideEventsSecs = r.w.eventsOf(r.beside)
	}
	r.deltas(res, before, after)
	return nil
}

var errTimeout = errors.New("timed out")

// startCounting creates -counting-file: a profiler following it profiles
// the run from the first reading of the counters.
func (r *runner) startCounting() error {
	if r.o.countingFile == "" {
		return nil
	}
	return os.WriteFile(r.o.countingFile, nil, 0o644)
}

// stopCounting removes -counting-file and waits (at most two minutes) for
// the profiler's FILE.done, so that the run's cleanup (its namespaces'
// deletion) stays out of the profiles.
func (r *runner) stopCounting(ctx context.Context) {
	if r.o.countingFile == "" {
		return
	}
	if err := os.Remove(r.o.countingFile); err != nil {
		log.Printf("ending the count: %v", err)
		return
	}
	done := r.o.countingFile + ".done"
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
		if _, err := os.Stat(done); err == nil {
			_ = os.Remove(done)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	log.Printf("no %s after two minutes: cleaning up while the profiler may still run", done)
}

func (r *runner) newJob(ns, name string, completions, parallelism int) *batchv1.Job {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			Completions:  ptr.To(int32(completions)),
			Parallelism:  ptr.To(int32(parallelism)),
			BackoffLimit: ptr.To(int32(6)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			}},
		},
	}
	if r.o.variant == "jobplane" {
		job.Spec.ManagedBy = ptr.To(managedBy)
	}
	switch {
	case r.failsByDeadline(ns):
		job.Spec.Template.Annotations = map[string]string{"fate.jobplane.dev/run": "forever"}
	case r.o.podRuntime > 0:
		job.Spec.Template.Annotations = map[string]string{"fate.jobplane.dev/after": r.o.podRuntime.String()}
	}
	return job
}

func (r *runner) big(ctx context.Context, res *result, deadline time.Time) error {
	res.Completions, res.Parallelism, res.BesidePods = r.o.completions, r.o.parallelism, r.o.beside
	big, err := r.client.BatchV1().Jobs(r.ns).Create(ctx, r.newJob(r.ns, "big", r.o.completions, r.o.parallelism), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	log.Printf("%s: Job big created (%d completions, parallelism %d)", r.o.variant, r.o.completions, r.o.parallelism)
	var beside *batchv1.Job
	if r.o.beside > 0 {
		quarter := max(1, r.o.completions/4)
		err := r.w.waitFor(deadline, func() bool { return r.w.podsOf(big.UID) >= quarter || r.w.done(big.UID) })
		if err != nil {
			return err
		}
		beside, err = r.client.BatchV1().Jobs(r.ns).Create(ctx, r.newJob(r.ns, "beside", r.o.beside, r.o.beside), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		log.Printf("%s: Job beside created after %d pods of big", r.o.variant, r.w.podsOf(big.UID))
	}
	progress := time.NewTicker(15 * time.Second)
	defer progress.Stop()
	err = r.w.waitFor(deadline, func() bool {
		select {
		case <-progress.C:
			log.Printf("%s: big has %d pods, beside done: %v", r.o.variant, r.w.podsOf(big.UID), beside == nil || r.w.done(beside.UID))
		default:
		}
		return r.w.done(big.UID) && (beside == nil || r.w.done(beside.UID))
	})
	res.Seconds = r.w.elapsed(big.UID)
	if beside != nil {
		res.BesideSecs = r.w.elapsed(beside.UID)
		res.BesidePodsCreated, res.BesidePodsBound, res.BesidePodsSucceeded = r.w.podMilestones(beside.UID)
	}
	if err == nil {
		if failed := r.w.failedJobs(); failed > 0 {
			return fmt.Errorf("%d Jobs failed", failed)
		}
		log.Printf("%s: big Complete in %.1fs, beside in %.1fs", r.o.variant, res.Seconds, res.BesideSecs)
	}
	return err
}

func (r *runner) many(ctx context.Context, res *result, deadline time.Time) error {
	start, err := r.createSmallJobs(ctx, res)
	if err != nil {
		return err
	}
	err = r.waitSmallJobs(deadline, func() bool { return true })
	r.smallJobsDone(res, start)
	if err == nil {
		if failed := r.w.failedJobs(); failed > 0 {
			return fmt.Errorf("%d Jobs failed", failed)
		}
		log.Printf("%s: %d Jobs Complete in %.1fs; first pod p50 %.2fs p99 %.2fs", r.o.variant, r.o.jobs, res.Seconds, res.FirstPodP50, res.FirstPodP99)
	}
	return err
}

// createSmallJobs creates the -jobs Jobs of many (tenants: of namespace
// A), -creators at a time, and returns when it started.
func (r *runner) createSmallJobs(ctx context.Context, res *result) (time.Time, error) {
	res.Jobs, res.JobCompletions, res.JobParallelism = r.o.jobs, r.o.jobCompletions, r.o.jobParallelism
	start := time.Now()
	names := make(chan string)
	errs := make(chan error, r.o.creators)
	var wg sync.WaitGroup
	for range r.o.creators {
		wg.Go(func() {
			for name := range names {
				if _, err := r.client.BatchV1().Jobs(r.ns).Create(ctx, r.newJob(r.ns, name, r.o.jobCompletions, r.o.jobParallelism), metav1.CreateOptions{}); err != nil {
					errs <- err
					for range names {
					}
					return
				}
			}
		})
	}
	for i := range r.o.jobs {
		names <- smallJobName(i)
	}
	close(names)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return start, fmt.Errorf("creating the Jobs: %w", err)
	}
	res.CreateSecs = time.Since(start).Seconds()
	log.Printf("%s: %d Jobs created in %.1fs", r.o.variant, r.o.jobs, res.CreateSecs)
	return start, nil
}

// smallJobsDone records when the Jobs created from start were all done and
// how soon their first pods came.
func (r *runner) smallJobsDone(res *result, start time.Time) {
	last := r.w.lastDone(r.ns)
	res.Seconds = last.Sub(start).Seconds()
	res.JobEventsAtDone = r.w.jobEventsBetween(r.counted, last)
	lat := r.w.firstPodLatencies(r.ns)
	res.FirstPodP50, res.FirstPodP99, res.FirstPodMax = quantile(lat, 0.50), quantile(lat, 0.99), quantile(lat, 1)
}

// waitSmallJobs waits until the -jobs Jobs of r.ns are done and also holds
// (called on every check), logging the progress every 15 seconds.
func (r *runner) waitSmallJobs(deadline time.Time, also func() bool) error {
	progress := time.NewTicker(15 * time.Second)
	defer progress.Stop()
	return r.w.waitFor(deadline, func() bool {
		select {
		case <-progress.C:
			log.Printf("%s: %d of %d Jobs done, %d pods", r.o.variant, r.w.doneCount(r.ns), r.o.jobs, r.w.podCount())
		default:
		}
		return also() && r.w.doneCount(r.ns) >= r.o.jobs
	})
}

// aloneTimeout bounds B's Job alone: a Job of a few pods with nothing else
// running.
const aloneTimeout = 2 * time.Minute

// tenantAlone runs namespace B's Job with nothing else running, before the
// counters are read.
func (r *runner) tenantAlone(ctx context.Context, res *result) error {
	res.BesidePods, res.PodRuntime = r.o.beside, r.o.podRuntime.String()
	alone, err := r.client.BatchV1().Jobs(r.nsB).Create(ctx, r.newJob(r.nsB, "b-alone", r.o.beside, r.o.beside), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	err = r.w.waitFor(time.Now().Add(aloneTimeout), func() bool { return r.w.done(alone.UID) })
	res.AloneSecs = r.w.elapsed(alone.UID)
	r.notCounted = r.w.podCount()
	if errors.Is(err, errTimeout) {
		res.AloneTimedOut = true
		log.Printf("%s: B's Job alone timed out after %v", r.o.variant, aloneTimeout)
		return nil
	}
	if err != nil {
		return err
	}
	if failed := r.w.failedJobs(); failed > 0 {
		return errors.New("namespace B's Job, alone, failed")
	}
	log.Printf("%s: B's Job alone Complete in %.1fs", r.o.variant, res.AloneSecs)
	return nil
}

// When namespace B's Job is created (-beside-after).
const (
	besideAfterCreations = "creations"
	besideAfterPods      = "pods"
	besideAfterDeadline  = "deadline"
)

// failsByDeadline says whether the Jobs of ns run pods until their deadline
// deletes them: namespace A's, with -beside-after deadline.
func (r *runner) failsByDeadline(ns string) bool {
	return r.o.besideAfter == besideAfterDeadline && ns == r.ns
}

// tenants creates namespace A's -jobs Jobs at once and, once every
// creation has returned (or every pod of them exists, or then their
// deadline has passed: -beside-after), namespace B's -beside-pod Job.
func (r *runner) tenants(ctx context.Context, res *result, deadline time.Time) error {
	start, err := r.createSmallJobs(ctx, res)
	if err != nil {
		return err
	}
	res.BesideAfter = r.o.besideAfter
	if r.o.besideAfter != besideAfterCreations {
		all := r.o.jobs * r.o.jobCompletions
		if err := r.w.waitFor(deadline, func() bool { return r.w.podsIn(r.ns) >= all }); err != nil {
			return fmt.Errorf("waiting for A's %d pods: %w", all, err)
		}
		log.Printf("%s: all %d of A's pods exist after %.1fs; creating B's Job", r.o.variant, all, time.Since(start).Seconds())
	}
	if r.failsByDeadline(r.ns) {
		if err := r.passDeadlines(ctx); err != nil {
			return err
		}
	}
	b, err := r.client.BatchV1().Jobs(r.nsB).Create(ctx, r.newJob(r.nsB, "b", r.o.beside, r.o.beside), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	r.beside = b.UID
	bLogged := false
	err = r.waitSmallJobs(deadline, func() bool {
		if !r.w.done(b.UID) {
			return false
		}
		if !bLogged {
			bLogged = true
			log.Printf("%s: B's Job Complete in %.1fs beside A's, %d of whose Jobs were Complete", r.o.variant, r.w.elapsed(b.UID), r.w.doneCountBefore(r.ns, b.UID))
		}
		return true
	})
	r.smallJobsDone(res, start)
	res.BesideSecs = r.w.elapsed(b.UID)
	res.ADoneAtBeside = r.w.doneCountBefore(r.ns, b.UID)
	res.BesidePodsCreated, res.BesidePodsBound, res.BesidePodsSucceeded = r.w.podMilestones(b.UID)
	if err == nil {
		wantFailed := 0
		if r.failsByDeadline(r.ns) {
			wantFailed = r.o.jobs
			if n := r.w.finishedFor(r.ns, batchv1.JobReasonDeadlineExceeded); n != r.o.jobs {
				return fmt.Errorf("%d of A's %d Jobs finished for %s, want all", n, r.o.jobs, batchv1.JobReasonDeadlineExceeded)
			}
		}
		if failed := r.w.failedJobs(); failed != wantFailed {
			return fmt.Errorf("%d Jobs failed, want %d", failed, wantFailed)
		}
		log.Printf("%s: A's %d Jobs done in %.1fs; B's Job beside them in %.1fs (alone %.1fs)", r.o.variant, r.o.jobs, res.Seconds, res.BesideSecs, res.AloneSecs)
	}
	return err
}

// passDeadlines gives each of A's Jobs a deadline of a second, long passed:
// each fails with DeadlineExceeded at its next sync, deleting its active
// pods.
func (r *runner) passDeadlines(ctx context.Context) error {
	patch := []byte(`{"spec":{"activeDeadlineSeconds":1}}`)
	for i := range r.o.jobs {
		if _, err := r.client.BatchV1().Jobs(r.ns).Patch(ctx, smallJobName(i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("passing A's deadlines: %w", err)
		}
	}
	log.Printf("%s: A's %d Jobs past their deadline", r.o.variant, r.o.jobs)
	return nil
}

func smallJobName(i int) string { return fmt.Sprintf("small-%04d", i) }

// quantile is the nearest-rank quantile of xs (sorted in place); -1 for
// none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return -1
	}
	sort.Float64s(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

func (r *runner) recreateNamespace(ctx context.Context, ns string) error {
	if err := r.deleteNamespace(ctx, ns); err != nil {
		return err
	}
	_, err := r.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	return err
}

// deleteNamespace deletes one of the run's namespaces and waits until it is
// gone, so that its pods' deletions are not counted in the next run.
func (r *runner) deleteNamespace(ctx context.Context, ns string) error {
	err := r.client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		_, err := r.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("namespace %s still there after 5m", ns)
}

// quiesceResources are those whose writes must have stopped before the
// counters are read (node leases and heartbeats never stop).
var quiesceResources = map[string]bool{"pods": true, "jobs": true, "events": true, "namespaces": true}

// quiesce waits until the writes of pods, Jobs, events and namespaces stop
// for three seconds (at most a minute).
func (r *runner) quiesce(ctx context.Context) {
	var last float64 = -1
	stable := 0
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && stable < 3; {
		m, err := r.apiserverMetrics(ctx)
		if err != nil {
			log.Printf("reading the apiserver's metrics: %v", err)
			return
		}
		var total float64
		for _, s := range m.samples["apiserver_request_total"] {
			if writeVerbs[s.labels["verb"]] && quiesceResources[s.labels["resource"]] {
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
}

// snapshot is the metrics the deltas come from.
type snapshot struct {
	apiserver, kcm, executor, planner *metrics
}

func (r *runner) scrape(ctx context.Context) (snapshot, error) {
	var s snapshot
	var err error
	if s.apiserver, err = r.apiserverMetrics(ctx); err != nil {
		return s, fmt.Errorf("reading the apiserver's metrics: %w", err)
	}
	for _, m := range []struct {
		url string
		to  **metrics
	}{{r.o.kcmMetrics, &s.kcm}, {r.o.executorMetrics, &s.executor}, {r.o.plannerMetrics, &s.planner}} {
		if m.url == "" {
			continue
		}
		if *m.to, err = httpMetrics(ctx, m.url); err != nil {
			return s, fmt.Errorf("reading metrics: %w", err)
		}
	}
	return s, nil
}

func (r *runner) apiserverMetrics(ctx context.Context) (*metrics, error) {
	body, err := r.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return parseMetrics(bytes.NewReader(body))
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

func (r *runner) deltas(res *result, before, after snapshot) {
	res.Writes, res.Failed, res.OtherWrites = map[string]float64{}, map[string]float64{}, map[string]float64{}
	delta := map[[5]string]float64{} // verb, group, resource, subresource, code
	for _, s := range after.apiserver.samples["apiserver_request_total"] {
		delta[requestKey(s.labels)] += s.value
	}
	for _, s := range before.apiserver.samples["apiserver_request_total"] {
		delta[requestKey(s.labels)] -= s.value
	}
	for k, d := range delta {
		verb, group, resource, sub, code := k[0], k[1], k[2], k[3], k[4]
		if d == 0 || !writeVerbs[verb] {
			continue
		}
		matched := false
		for _, c := range categories {
			if c.match(verb, group, resource, sub) {
				res.Writes[c.name] += d
				if !strings.HasPrefix(code, "2") {
					res.Failed[c.name] += d
				}
				matched = true
				break
			}
		}
		if !matched {
			name := resource
			if group != "" {
				name = group + "/" + name
			}
			if sub != "" {
				name += "/" + sub
			}
			res.OtherWrites[verb+" "+name] += d
		}
	}
	d := func(before, after *metrics, name string) float64 {
		if before == nil || after == nil {
			return 0
		}
		return after.sum(name) - before.sum(name)
	}
	if r.o.variant == "jobplane" {
		e := func(name string) float64 { return d(before.executor, after.executor, name) }
		res.Syncs, res.SyncSeconds = e("jobplane_job_sync_duration_seconds_count"), e("jobplane_job_sync_duration_seconds_sum")
		res.PlannerCalls, res.PlannerSeconds = e("jobplane_planner_call_duration_seconds_count"), e("jobplane_planner_call_duration_seconds_sum")
	} else {
		k := func(name string) float64 { return d(before.kcm, after.kcm, name) }
		res.Syncs, res.SyncSeconds = k("job_controller_job_sync_duration_seconds_count"), k("job_controller_job_sync_duration_seconds_sum")
	}
	const cpu = "process_cpu_seconds_total"
	res.KCMCPU = d(before.kcm, after.kcm, cpu)
	res.PlannerCPU = d(before.planner, after.planner, cpu)
	res.JobplaneCPU = d(before.executor, after.executor, cpu) + res.PlannerCPU
}

func requestKey(l map[string]string) [5]string {
	return [5]string{l["verb"], l["group"], l["resource"], l["subresource"], l["code"]}
}

// watcher times Jobs and pods of the run's namespaces as the driver sees
// them.
type watcher struct {
	mu       sync.Mutex
	changed  chan struct{}
	jobNS    map[types.UID]string    // Job's namespace
	added    map[types.UID]time.Time // Job seen
	finished map[types.UID]time.Time // Job seen Complete or Failed
	failed   map[types.UID]bool
	reason   map[types.UID]string    // of the Job's Complete or Failed condition
	firstPod map[types.UID]time.Time // first pod of a Job seen
	pods     map[types.UID]int       // pods seen per Job
	podUIDs  map[types.UID]bool
	// Per pod: its Job, and when it was seen created, bound and Succeeded.
	podJob       map[types.UID]types.UID
	podCreated   map[types.UID]time.Time
	podBound     map[types.UID]time.Time
	podSucceeded map[types.UID]time.Time
	// jobEvents are when events about Jobs were seen created or updated.
	jobEvents []time.Time
	// eventsAdded are when each Job's events were first seen, by Job.
	eventsAdded map[types.UID][]time.Time
}

func newWatcher(client kubernetes.Interface, namespaces []string, stop chan struct{}) (*watcher, error) {
	w := &watcher{
		changed: make(chan struct{}, 1), jobNS: map[types.UID]string{},
		added: map[types.UID]time.Time{}, finished: map[types.UID]time.Time{}, failed: map[types.UID]bool{}, reason: map[types.UID]string{},
		firstPod: map[types.UID]time.Time{}, pods: map[types.UID]int{}, podUIDs: map[types.UID]bool{},
		podJob: map[types.UID]types.UID{}, podCreated: map[types.UID]time.Time{},
		podBound: map[types.UID]time.Time{}, podSucceeded: map[types.UID]time.Time{},
		eventsAdded: map[types.UID][]time.Time{},
	}
	for _, ns := range namespaces {
		factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
		jobs := factory.Batch().V1().Jobs().Informer()
		pods := factory.Core().V1().Pods().Informer()
		events := factory.Core().V1().Events().Informer()
		if _, err := jobs.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.job(obj.(*batchv1.Job), true) },
			UpdateFunc: func(_, obj any) { w.job(obj.(*batchv1.Job), false) },
		}); err != nil {
			return nil, err
		}
		if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.pod(obj.(*corev1.Pod)) },
			UpdateFunc: func(_, obj any) { w.pod(obj.(*corev1.Pod)) },
		}); err != nil {
			return nil, err
		}
		if _, err := events.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.event(obj.(*corev1.Event), true) },
			UpdateFunc: func(_, obj any) { w.event(obj.(*corev1.Event), false) },
		}); err != nil {
			return nil, err
		}
		factory.Start(stop)
		for typ, ok := range factory.WaitForCacheSync(stop) {
			if !ok {
				return nil, fmt.Errorf("the %v informer of %s did not sync", typ, ns)
			}
		}
	}
	return w, nil
}

func (w *watcher) job(job *batchv1.Job, added bool) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.added[job.UID]; !ok && added {
		w.added[job.UID] = now
		w.jobNS[job.UID] = job.Namespace
	}
	if _, ok := w.finished[job.UID]; ok {
		return
	}
	for _, c := range job.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			w.finished[job.UID] = now
			w.failed[job.UID] = c.Type == batchv1.JobFailed
			w.reason[job.UID] = c.Reason
			w.notify()
		}
	}
}

func (w *watcher) pod(pod *corev1.Pod) {
	now := time.Now()
	ref := metav1.GetControllerOf(pod)
	w.mu.Lock()
	defer w.mu.Unlock()
	if pod.Spec.NodeName != "" {
		if _, ok := w.podBound[pod.UID]; !ok {
			w.podBound[pod.UID] = now
		}
	}
	if pod.Status.Phase == corev1.PodSucceeded {
		if _, ok := w.podSucceeded[pod.UID]; !ok {
			w.podSucceeded[pod.UID] = now
		}
	}
	if w.podUIDs[pod.UID] {
		return
	}
	w.podUIDs[pod.UID] = true
	w.podCreated[pod.UID] = now
	if ref != nil {
		w.podJob[pod.UID] = ref.UID
		if _, ok := w.firstPod[ref.UID]; !ok {
			w.firstPod[ref.UID] = now
		}
		w.pods[ref.UID]++
	}
	w.notify()
}

func (w *watcher) event(ev *corev1.Event, added bool) {
	if ev.InvolvedObject.Kind != "Job" {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.jobEvents = append(w.jobEvents, now)
	if added {
		w.eventsAdded[ev.InvolvedObject.UID] = append(w.eventsAdded[ev.InvolvedObject.UID], now)
	}
}

// eventsOf is how many events about the Job of uid were seen, and the
// seconds from the Job seen added to the last of them (-1: none).
func (w *watcher) eventsOf(uid types.UID) (n int, lastSecs float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := w.eventsAdded[uid]
	if len(seen) == 0 {
		return 0, -1
	}
	return len(seen), slices.MaxFunc(seen, time.Time.Compare).Sub(w.added[uid]).Seconds()
}

// jobEventsBetween is the number of events about Jobs seen created or
// updated from one time to another.
func (w *watcher) jobEventsBetween(from, to time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, t := range w.jobEvents {
		if !t.Before(from) && !t.After(to) {
			n++
		}
	}
	return n
}

func (w *watcher) notify() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// waitFor waits until cond holds (checked on every change, and every
// second) or the deadline passes.
func (w *watcher) waitFor(deadline time.Time, cond func() bool) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
	for !cond() {
		select {
		case <-w.changed:
		case <-tick.C:
		case <-timeout.C:
			return errTimeout
		}
	}
	return nil
}

func (w *watcher) podsOf(uid types.UID) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pods[uid]
}

// podsIn is the number of pods seen of the Jobs of ns.
func (w *watcher) podsIn(ns string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for uid, pods := range w.pods {
		if w.jobNS[uid] == ns {
			n += pods
		}
	}
	return n
}

func (w *watcher) podCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.podUIDs)
}

func (w *watcher) done(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.finished[uid]
	return ok
}

// doneCount is the number of Jobs of ns done.
func (w *watcher) doneCount(ns string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for uid := range w.finished {
		if w.jobNS[uid] == ns {
			n++
		}
	}
	return n
}

// doneCountBefore is the number of Jobs of ns done no later than the Job of
// uid (all of them done so far if it is not).
func (w *watcher) doneCountBefore(ns string, uid types.UID) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	end, ok := w.finished[uid]
	n := 0
	for other, t := range w.finished {
		if w.jobNS[other] == ns && (!ok || !t.After(end)) {
			n++
		}
	}
	return n
}

// finishedFor is the number of Jobs of ns finished for reason.
func (w *watcher) finishedFor(ns, reason string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for uid, r := range w.reason {
		if w.jobNS[uid] == ns && r == reason {
			n++
		}
	}
	return n
}

func (w *watcher) failedJobs() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, f := range w.failed {
		if f {
			n++
		}
	}
	return n
}

// elapsed is the seconds from the Job seen added to seen finished (or to
// now if it has not finished).
func (w *watcher) elapsed(uid types.UID) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	end, ok := w.finished[uid]
	if !ok {
		end = time.Now()
	}
	return end.Sub(w.added[uid]).Seconds()
}

// lastDone is when the last Job of ns was seen done (now if one is not).
func (w *watcher) lastDone(ns string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	for uid := range w.added {
		if w.jobNS[uid] != ns {
			continue
		}
		t, ok := w.finished[uid]
		if !ok {
			return time.Now()
		}
		if t.After(last) {
			last = t
		}
	}
	return last
}

// podMilestones are the seconds from the Job of uid seen added to the last
// of its pods seen created, bound to a node, and Succeeded; -1 for a
// milestone some pod has not reached.
func (w *watcher) podMilestones(uid types.UID) (created, bound, succeeded float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	added := w.added[uid]
	last := func(at map[types.UID]time.Time) float64 {
		var latest time.Time
		for pod, job := range w.podJob {
			if job != uid {
				continue
			}
			t, ok := at[pod]
			if !ok {
				return -1
			}
			if t.After(latest) {
				latest = t
			}
		}
		return latest.Sub(added).Seconds()
	}
	return last(w.podCreated), last(w.podBound), last(w.podSucceeded)
}

// firstPodLatencies are, for every Job of ns with a pod, the seconds from
// the Job seen added to its first pod seen.
func (w *watcher) firstPodLatencies(ns string) []float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []float64
	for uid, added := range w.added {
		if first, ok := w.firstPod[uid]; ok && w.jobNS[uid] == ns {
			out = append(out, first.Sub(added).Seconds())
		}
	}
	return out
}

// metrics is a parsed Prometheus text exposition: samples by name.
type metrics struct {
	samples map[string][]sample
}

type sample struct {
	labels map[string]string
	value  float64
}

// sum adds up every sample of name.
func (m *metrics) sum(name string) float64 {
	var total float64
	for _, s := range m.samples[name] {
		total += s.value
	}
	return total
}

// parseMetrics reads the text exposition format: `name{l="v",...} value`.
func parseMetrics(r io.Reader) (*metrics, error) {
	m := &metrics{samples: map[string][]sample{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		labels := map[string]string{}
		if i := strings.IndexByte(line, '{'); i >= 0 {
			name = line[:i]
			var err error
			if labels, rest, err = parseLabels(line[i+1:]); err != nil {
				return nil, fmt.Errorf("%w in %q", err, line)
			}
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("no value in %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", line, err)
		}
		m.samples[name] = append(m.samples[name], sample{labels: labels, value: v})
	}
	return m, sc.Err()
}

// parseLabels reads `l="v",...}` and returns the labels and what follows.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return labels, s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 || len(s) < eq+2 || s[eq+1] != '"' {
			return nil, "", errors.New("malformed labels")
		}
		key := s[:eq]
		s = s[eq+2:]
		var b strings.Builder
		i := 0
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				default:
					b.WriteByte(s[i])
				}
				continue
			}
			b.WriteByte(s[i])
		}
		if i == len(s) {
			return nil, "", errors.New("unterminated label value")
		}
		labels[key] = b.String()
		s = s[i+1:]
	}
}
