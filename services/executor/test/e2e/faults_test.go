package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/kubetest"
)

// The fault tests kill or stop jobplane's shared services, so they are
// top-level tests that do not run in parallel: Go runs them after TestParity
// and its parallel cases have finished. Each leaves the services running.

// TestExecutorKilledAtRandomPointsEndsLikeTheBuiltIn kills the executor with
// SIGKILL at random moments while 20 Jobs run, restarting it each time: every
// Job must still end with the status its built-in twin reaches, no pod may
// keep jobplane's finalizer, and no completion index may ever have two
// running pods.
func TestExecutorKilledAtRandomPointsEndsLikeTheBuiltIn(t *testing.T) {
	if builtinOnly() {
		t.Skip("needs jobplane's services")
	}
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := newNamespace(t, e, "faults-kill")
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))

	var halves []*half
	var waits []func()
	for i := range 20 {
		spec := faultJobSpec(i)
		for _, managed := range []bool{false, true} {
			h := &half{client: e.Cluster.Client, namespace: ns, name: fmt.Sprintf("job-%02d-builtin", i), finalizer: builtinFinalizer}
			if managed {
				h.name, h.managed, h.finalizer = fmt.Sprintf("job-%02d-jobplane", i), true, jobplaneFinalizer
			}
			halves = append(halves, h)
		}
		waits = append(waits, startHalves(ctx, parityCase{spec: spec}, halves[len(halves)-2:]...))
	}
	done := make(chan struct{})
	var dupMu sync.Mutex
	var duplicates []string
	go func() {
		defer close(done)
		watchIndexDuplicates(ctx, e, ns, func(d string) {
			dupMu.Lock()
			duplicates = append(duplicates, d)
			dupMu.Unlock()
		})
	}()

	for k := range 5 {
		time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
		e.Executor.Kill(t)
		t.Logf("kill %d at %s", k+1, time.Now().Format("15:04:05.000"))
		time.Sleep(time.Duration(rng.IntN(1000)) * time.Millisecond)
		e.Executor.Start(t)
	}
	for _, w := range waits {
		w()
	}
	cancel()
	<-done
	compareTwins(t, halves)
	for _, d := range duplicates {
		t.Errorf("two running pods of one index: %s", d)
	}
}

// failLate is when the failing Jobs' pods fail: after the kills, so that
// every pod exists by then under both controllers (a kill delays creations,
// and a Job failing at its first failure counts the pods it has).
const failLate = "25s"

// faultJobSpec is the i-th Job of the kill test: NonIndexed and Indexed Jobs
// that complete, and ones that fail by backoffLimit. Each ends the same way
// whatever the timing, so that its twin is an oracle.
func faultJobSpec(i int) batchv1.JobSpec {
	switch i % 4 {
	case 0:
		return batchv1.JobSpec{Completions: ptr.To[int32](6), Parallelism: ptr.To[int32](3), Template: podTemplate(fateAfter, "1s")}
	case 1:
		return batchv1.JobSpec{Completions: ptr.To[int32](6), Parallelism: ptr.To[int32](3), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Template: podTemplate(fateAfter, "1500ms")}
	case 2:
		// One index fails while the others run on: the Job fails and stops
		// them whatever the timing, so both twins end alike.
		return batchv1.JobSpec{Completions: ptr.To[int32](4), Parallelism: ptr.To[int32](4), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			BackoffLimit: ptr.To[int32](0), Template: podTemplate(fateAfter, failLate, fateFailIndexes, "1", fateExitCode, "3", fateForeverIndexes, "0,2,3")}
	default:
		// backoffLimit 0: the first failure fails the Job. With a higher
		// limit the twins could differ by design: the pod-failure backoff
		// record lives in memory in both controllers, so an executor
		// restarted between two failures replaces the failed pod at once
		// where its twin, never restarted, waits 10 s and counts the
		// other pods' failures first.
		return batchv1.JobSpec{Completions: ptr.To[int32](3), Parallelism: ptr.To[int32](3), BackoffLimit: ptr.To[int32](0),
			Template: podTemplate(fateAfter, failLate, fateExitCode, "1")}
	}
}

// watchIndexDuplicates reports, until ctx ends, every moment a jobplane
// Indexed Job has two running (not terminal, not being deleted) pods of one
// completion index.
func watchIndexDuplicates(ctx context.Context, e *Env, ns string, report func(string)) {
	seen := map[string]bool{}
	_ = wait.PollUntilContextCancel(ctx, 300*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := e.Cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		running := map[string][]string{}
		for _, p := range pods.Items {
			ref := metav1.GetControllerOf(&p)
			ix, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]
			if ref == nil || !ok || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			if !strings.HasSuffix(ref.Name, "-jobplane") {
				continue
			}
			key := ref.Name + "/" + ix
			running[key] = append(running[key], p.Name)
		}
		for key, names := range running {
			if len(names) > 1 && !seen[key] {
				seen[key] = true
				report(fmt.Sprintf("%s: %v", key, names))
			}
		}
		return false, nil
	})
}

// startHalves runs tc's Job in each half at once; the function returned
// waits for them all.
func startHalves(ctx context.Context, tc parityCase, halves ...*half) (wait func()) {
	var wg sync.WaitGroup
	for _, h := range halves {
		wg.Go(func() { h.run(ctx, tc) })
	}
	return wg.Wait
}

// compareTwins requires each jobplane half to end as the built-in half before
// it in halves.
func compareTwins(t *testing.T, halves []*half) {
	t.Helper()
	for i := 0; i+1 < len(halves); i += 2 {
		builtin, jobplane := halves[i], halves[i+1]
		for _, h := range []*half{builtin, jobplane} {
			if h.err != nil {
				t.Errorf("%s: %v", h.name, h.err)
			}
			if h.leftFinalizers != nil {
				t.Errorf("%s finished but pods keep the finalizer %s: %v", h.name, h.finalizer, h.leftFinalizers)
			}
		}
		if builtin.err != nil || jobplane.err != nil {
			continue
		}
		for _, d := range diffOutcomes(builtin.outcome, jobplane.outcome) {
			t.Errorf("%s: status differs: %s", jobplane.name, d)
		}
	}
}

func newNamespace(t *testing.T, e *Env, name string) string {
	t.Helper()
	if _, err := e.Cluster.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Cluster.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	kubetest.ShowLogLinesOnFailure(t, name, e.Processes()...)
	return name
}

// plannerOutage is how long the planner is stopped.
const plannerOutage = 30 * time.Second

// TestPlannerStoppedMeansNoActionThenFullRecovery stops the planner for 30
// seconds while a Job runs and another is created: meanwhile the executor
// takes no action (no pod created, no status written, finished pods keep
// their finalizer); once the planner is back both Jobs end as their built-in
// twins.
func TestPlannerStoppedMeansNoActionThenFullRecovery(t *testing.T) {
	if builtinOnly() {
		t.Skip("needs jobplane's services")
	}
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := newNamespace(t, e, "faults-planner")
	client := e.Cluster.Client
	running := parityCase{spec: batchv1.JobSpec{Completions: ptr.To[int32](4), Parallelism: ptr.To[int32](2), Template: podTemplate(fateAfter, "3s")}}
	halves := []*half{
		{client: client, namespace: ns, name: "running-builtin", finalizer: builtinFinalizer},
		{client: client, namespace: ns, name: "running-jobplane", managed: true, finalizer: jobplaneFinalizer},
	}
	waitRunning := startHalves(ctx, running, halves...)
	if err := halves[1].waitStatus(ctx, "two active pods", func(j *batchv1.Job) bool { return j.Status.Active == 2 }); err != nil {
		t.Fatal(err)
	}

	e.Planner.Stop(t)
	stoppedAt := time.Now()
	before := jobplaneState(t, ctx, e, ns)
	created := parityCase{spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2), Template: podTemplate(fateAfter, "1s")}}
	outage := []*half{
		{client: client, namespace: ns, name: "during-builtin", finalizer: builtinFinalizer},
		{client: client, namespace: ns, name: "during-jobplane", managed: true, finalizer: jobplaneFinalizer},
	}
	waitCreated := startHalves(ctx, created, outage...)
	for time.Since(stoppedAt) < plannerOutage {
		time.Sleep(time.Second)
		now := jobplaneState(t, ctx, e, ns)
		if !apiequality.Semantic.DeepEqual(before.pods, now.pods) {
			t.Fatalf("pods of jobplane's Jobs changed while the planner was down:\nbefore %v\nafter  %v", before.pods, now.pods)
		}
		if st, ok := now.status["during-jobplane"]; ok && !apiequality.Semantic.DeepEqual(st, batchv1.JobStatus{}) {
			t.Fatalf("the Job created during the outage got a status: %+v", st)
		}
		if !apiequality.Semantic.DeepEqual(before.status["running-jobplane"], now.status["running-jobplane"]) {
			t.Fatalf("the running Job's status was written while the planner was down")
		}
	}
	e.Planner.Start(t)
	waitRunning()
	waitCreated()
	compareTwins(t, append(halves, outage...))
}

// clusterState is what jobplane's Jobs of a namespace show: their statuses,
// and their pods with finalizers.
type clusterState struct {
	status map[string]batchv1.JobStatus
	// pods maps a pod's name to its finalizers.
	pods map[string]string
}

func jobplaneState(t *testing.T, ctx context.Context, e *Env, ns string) clusterState {
	t.Helper()
	s := clusterState{status: map[string]batchv1.JobStatus{}, pods: map[string]string{}}
	jobs, err := e.Cluster.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if ptr.Deref(j.Spec.ManagedBy, "") == jobplaneManager {
			s.status[j.Name] = j.Status
		}
	}
	pods, err := e.Cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && strings.HasSuffix(ref.Name, "-jobplane") {
			s.pods[p.Name] = fmt.Sprint(p.Finalizers)
		}
	}
	return s
}

// Lease timing of the failover test: a standby takes over at most
// leaseDuration after the leader's last renewal.
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

// TestStandbyTakesOverWithinTheLeaseDuration runs two executors with leader
// election, kills the leader with SIGKILL and requires the standby to hold
// the Lease within the lease duration (plus two jittered retries) and then run a
// Job to completion.
func TestStandbyTakesOverWithinTheLeaseDuration(t *testing.T) {
	if builtinOnly() {
		t.Skip("needs jobplane's services")
	}
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := newNamespace(t, e, "faults-failover")
	e.Executor.Stop(t)
	t.Cleanup(func() { e.Executor.Start(t) })

	leaseName := "jobplane-executor-failover"
	bin := e.Executor.Binary()
	var replicas []*kubetest.Process
	for i := range 2 {
		replicas = append(replicas, kubetest.StartProcess(t, "executor-"+strconv.Itoa(i), bin,
			"-kubeconfig", e.Cluster.Kubeconfig, "-planner-addr", e.Planner.GRPCAddr,
			"-leader-elect-namespace", "kube-system", "-leader-elect-id", leaseName,
			"-leader-elect-lease-duration", leaseDuration.String(),
			"-leader-elect-renew-deadline", renewDeadline.String(),
			"-leader-elect-retry-period", retryPeriod.String()))
	}
	kubetest.ShowLogLinesOnFailure(t, "lease", replicas...)
	holder := func() string {
		lease, err := e.Cluster.Client.CoordinationV1().Leases("kube-system").Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return ptr.Deref(lease.Spec.HolderIdentity, "")
	}
	var leader *kubetest.Process
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		for _, r := range replicas {
			if r.Tail(1000, `"msg":"leading"`) != "" {
				leader = r
			}
		}
		return leader != nil, nil
	}); err != nil {
		t.Fatal("no replica leads")
	}
	first := holder()
	leader.Kill(t)
	killedAt := time.Now()
	var took time.Duration
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		h := holder()
		took = time.Since(killedAt)
		return h != "" && h != first, nil
	}); err != nil {
		t.Fatal("the standby never took the Lease")
	}
	t.Logf("the standby took the Lease %s after the leader was killed", took.Round(10*time.Millisecond))
	// client-go's standby times the Lease from the try at which it saw the
	// last renewal, and takes it at the first try after the lease duration
	// from then: two tries late at most, each up to 2.2 retry periods
	// (client-go's jitter) after the one before. A second's margin for the
	// API server and this poll. (CI once measured 5.504 s against the bound
	// of a single late try, 5.5 s.)
	if limit := leaseDuration + 2*retryPeriod*22/10 + time.Second; took > limit {
		t.Errorf("failover took %s, more than the lease duration and two jittered retries (%s)", took, limit)
	}
	h := &half{client: e.Cluster.Client, namespace: ns, name: "after-failover", managed: true, finalizer: jobplaneFinalizer}
	h.run(ctx, parityCase{spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2), Template: podTemplate(fateAfter, "1s")}})
	if h.err != nil {
		t.Fatal(h.err)
	}
	if h.outcome.terminal() != "Complete/CompletionsReached" {
		t.Fatalf("the Job run by the new leader ended %s", h.outcome)
	}
}
