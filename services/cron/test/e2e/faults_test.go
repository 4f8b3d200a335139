package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/kubetest"
)

// The fault tests run in parallel with the others: each kills or stops
// only its own processes, which alone see its namespace (see doc.go).

// scheduledRuns are the Jobs of one CronJob the watch saw, scheduled at or
// before until, as "HH:MM:SS trigger" in the order they appeared.
func scheduledRuns(t *testing.T, w *jobWatch, cronJob string, until time.Time) []string {
	t.Helper()
	var out []string
	for _, a := range w.of(cronJob) {
		at, err := time.Parse(time.RFC3339, a.Scheduled)
		if err != nil {
			t.Errorf("Job %s has the scheduled timestamp %q: %v", a.Name, a.Scheduled, err)
			continue
		}
		if at.After(until) || a.Trigger == cronapi.TriggerManual {
			continue
		}
		trigger := a.Trigger
		if trigger == "" {
			trigger = cronapi.TriggerSchedule
		}
		if a.Name != jobName(cronJob, at) {
			t.Errorf("Job %s is scheduled at %s: its name should be %s", a.Name, at, jobName(cronJob, at))
		}
		out = append(out, at.UTC().Format(time.TimeOnly)+" "+trigger)
	}
	return out
}

func runAt(at time.Time, trigger string) string {
	return at.UTC().Format(time.TimeOnly) + " " + trigger
}

// missedRunsMetric is the cron service's count of scheduled runs that will
// not happen.
const missedRunsMetric = "jobplane_cronjob_missed_runs_total"

// restartLate is how long after the third missed time the cron service
// comes back: more than catchUp Skip's grace for a schedule every minute
// (half the interval), less than the minute to the next time.
const restartLate = 40 * time.Second

// TestCatchUpPoliciesAfterCronOutage kills the cron service (SIGKILL) just
// after the first run of three CronJobs every minute, with catchUp Latest,
// Skip and All (maxRuns 5), no startingDeadlineSeconds, and restarts it 40
// seconds after the third scheduled time it missed. Then Latest creates
// exactly the most recent missed run; Skip creates none (the last one is
// too late for Skip, and a SkippedMissedRun warning says so); All creates
// all three, oldest first, the older two as CatchUp. The restarted
// service's jobplane_cronjob_missed_runs_total counts Latest's two given-up
// times and Skip's three. The next scheduled time runs for all three. No
// two Jobs ever appear for one scheduled time.
func TestCatchUpPoliciesAfterCronOutage(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cron := e.startCron(t, "cron-catchup", only(nsCatchUp), e.Executor)
	ns := newNamespace(t, e, nsCatchUp, cron, e.Executor)
	jobs := watchJobs(t, e, ns)
	client := dialCron(t, cron)

	policies := []struct {
		name    string
		catchUp *cronapi.CatchUpPolicy
	}{
		{"latest", &cronapi.CatchUpPolicy{Policy: cronapi.CatchUpLatest}},
		{"skip", &cronapi.CatchUpPolicy{Policy: cronapi.CatchUpSkip}},
		{"all", &cronapi.CatchUpPolicy{Policy: cronapi.CatchUpAll, MaxRuns: ptr.To[int32](5)}},
	}
	awayFromBoundary(t, 15*time.Second)
	var m0 time.Time
	for i, p := range policies {
		c := cronJob(ns, p.name, batchv1.CronJobSpec{JobTemplate: succeeding()})
		c.Spec.CatchUp = p.catchUp
		created := createByRPC(t, client, c)
		first := firstRun(created.CreationTimestamp.Time)
		if i > 0 && !first.Equal(m0) {
			t.Fatalf("the CronJobs were created across a minute boundary")
		}
		m0 = first
	}
	m1, m2, m3, m4 := m0.Add(time.Minute), m0.Add(2*time.Minute), m0.Add(3*time.Minute), m0.Add(4*time.Minute)
	t.Logf("first run at %s; the cron service is down over %s, %s and %s", m0.Format(time.TimeOnly), m1.Format(time.TimeOnly), m2.Format(time.TimeOnly), m3.Format(time.TimeOnly))

	// The first runs, recorded in each status: the mark the outage is
	// counted from.
	if err := poll(ctx, time.Until(m0)+time.Minute, func(ctx context.Context) bool {
		for _, p := range policies {
			c, err := getCronJob(ctx, e, ns, p.name)
			if err != nil || c.Status.LastScheduleTime == nil || !c.Status.LastScheduleTime.Time.Equal(m0) {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("the first runs were not all recorded: %v", jobs.appearances())
	}
	cron.Kill(t)
	if killed := time.Now(); !killed.Before(m1.Add(-5 * time.Second)) {
		t.Fatalf("the cron service was killed at %s, too close to %s for the outage to span three scheduled times", killed.Format(time.TimeOnly), m1.Format(time.TimeOnly))
	}
	sleepUntil(ctx, m3.Add(restartLate))
	cron.Start(t)
	t.Logf("cron service restarted at %s", time.Now().Format(time.TimeOnly))

	want := map[string][]string{
		"latest": {runAt(m0, "Schedule"), runAt(m3, "Schedule")},
		"skip":   {runAt(m0, "Schedule")},
		"all":    {runAt(m0, "Schedule"), runAt(m1, "CatchUp"), runAt(m2, "CatchUp"), runAt(m3, "Schedule")},
	}
	var skipped bool
	if err := poll(ctx, time.Minute, func(ctx context.Context) bool {
		for name, runs := range want {
			if len(scheduledRuns(t, jobs, name, m3)) < len(runs) {
				return false
			}
		}
		events, err := cronJobEvents(ctx, e, ns, "skip")
		skipped = err == nil && findEvent(events, "SkippedMissedRun", rfc1123(m3)) != nil
		return skipped
	}); err != nil {
		t.Errorf("after the restart, not every catch-up happened (SkippedMissedRun for %s seen: %t): %v", rfc1123(m3), skipped, jobs.appearances())
	}
	// What the restart did, before the next scheduled time.
	var missed float64
	if err := poll(ctx, 30*time.Second, func(ctx context.Context) bool {
		var err error
		missed, err = metric(ctx, cron.MetricsAddr, missedRunsMetric)
		return err == nil && missed >= 5
	}); err != nil {
		t.Errorf("%s is %g after the restart, want 5: Latest's 2 given-up times and Skip's 3", missedRunsMetric, missed)
	}

	// The schedule goes on.
	if err := poll(ctx, time.Until(m4)+time.Minute, func(ctx context.Context) bool {
		for _, p := range policies {
			if !slices.Contains(scheduledRuns(t, jobs, p.name, m4), runAt(m4, "Schedule")) {
				return false
			}
		}
		return true
	}); err != nil {
		t.Errorf("the run at %s did not happen for every CronJob: %v", m4.Format(time.TimeOnly), jobs.appearances())
	}
	for name, runs := range want {
		if got := scheduledRuns(t, jobs, name, m3); !slices.Equal(got, runs) {
			t.Errorf("catchUp %s: runs up to %s are %v, want %v", name, m3.Format(time.TimeOnly), got, runs)
		}
	}
	if missed, err := metric(ctx, cron.MetricsAddr, missedRunsMetric); err != nil || missed != 5 {
		t.Errorf("%s is %g (%v) once the schedule went on, want 5", missedRunsMetric, missed, err)
	}
	for _, p := range policies {
		events, err := cronJobEvents(ctx, e, ns, p.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			t.Logf("%s: %s %s %q (x%d)", p.name, ev.Type, ev.Reason, ev.Message, ev.Count)
		}
	}
}

// outage is how long the executor is down over its scheduled time: it is
// killed outageLead before it.
const (
	outage     = 25 * time.Second
	outageLead = 5 * time.Second
)

// TestExecutorOutageWithinAndPastTheStartingDeadline kills the executor
// (SIGKILL) 5 seconds before a scheduled time of two CronJobs and starts it
// again 25 seconds later. The one with startingDeadlineSeconds 120 gets
// its run once the executor is back: the Job's scheduled timestamp is the
// time the outage spanned, and it completes. The one with
// startingDeadlineSeconds 10 gets a MissSchedule warning for that time and
// no Job for it.
func TestExecutorOutageWithinAndPastTheStartingDeadline(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	executor := e.startExecutor(t, "executor-outage", only(nsExecutorOutage))
	cron := e.startCron(t, "cron-outage", only(nsExecutorOutage), executor)
	ns := newNamespace(t, e, nsExecutorOutage, cron, executor)
	jobs := watchJobs(t, e, ns)
	client := dialCron(t, cron)

	awayFromBoundary(t, 15*time.Second)
	var m time.Time
	for _, deadline := range []int64{120, 10} {
		created := createByRPC(t, client, cronJob(ns, fmt.Sprintf("deadline-%d", deadline), batchv1.CronJobSpec{
			StartingDeadlineSeconds: ptr.To(deadline), JobTemplate: succeeding(),
		}))
		m = firstRun(created.CreationTimestamp.Time)
	}
	t.Logf("the executor is down from %s to %s", m.Add(-outageLead).Format(time.TimeOnly), m.Add(outage-outageLead).Format(time.TimeOnly))
	sleepUntil(ctx, m.Add(-outageLead))
	executor.Kill(t)
	sleepUntil(ctx, m.Add(outage-outageLead))
	executor.Start(t)
	back := time.Now()

	delivered := jobName("deadline-120", m)
	var job *batchv1.Job
	if err := poll(ctx, time.Until(m.Add(120*time.Second)), func(ctx context.Context) bool {
		var err error
		job, err = e.Cluster.Client.BatchV1().Jobs(ns).Get(ctx, delivered, metav1.GetOptions{})
		return err == nil
	}); err != nil {
		t.Fatalf("the run of deadline-120 at %s was not delivered within its starting deadline: %v", m.Format(time.TimeOnly), jobs.appearances())
	}
	t.Logf("deadline-120's run delivered %s after the executor came back", job.CreationTimestamp.Sub(back).Round(time.Second))
	if at, err := scheduledTime(job); err != nil || !at.Equal(m) {
		t.Errorf("Job %s has the scheduled timestamp %q, want %s", delivered, job.Annotations[batchv1.CronJobScheduledTimestampAnnotation], m)
	}
	if err := poll(ctx, time.Minute, func(ctx context.Context) bool {
		j, err := e.Cluster.Client.BatchV1().Jobs(ns).Get(ctx, delivered, metav1.GetOptions{})
		return err == nil && terminal(j) == "Complete/CompletionsReached"
	}); err != nil {
		t.Errorf("Job %s did not complete", delivered)
	}

	var events []string
	if err := poll(ctx, time.Minute, func(ctx context.Context) bool {
		evs, err := cronJobEvents(ctx, e, ns, "deadline-10")
		if err != nil {
			return false
		}
		events = nil
		for _, ev := range evs {
			events = append(events, ev.Type+"/"+ev.Reason+": "+ev.Message)
		}
		ev := findEvent(evs, "MissSchedule", rfc1123(m))
		return ev != nil && ev.Type == "Warning"
	}); err != nil {
		t.Errorf("no MissSchedule warning for %s on deadline-10; its events: %v", rfc1123(m), events)
	}
	if runs := scheduledRuns(t, jobs, "deadline-10", m); len(runs) != 0 {
		t.Errorf("deadline-10 has runs %v, want none: its time was missed", runs)
	}
	if _, err := e.Cluster.Client.BatchV1().Jobs(ns).Get(ctx, jobName("deadline-10", m), metav1.GetOptions{}); err == nil {
		t.Errorf("Job %s exists: the run past its starting deadline was delivered", jobName("deadline-10", m))
	}
	if runs := scheduledRuns(t, jobs, "deadline-120", m); !slices.Equal(runs, []string{runAt(m, "Schedule")}) {
		t.Errorf("deadline-120 has runs %v, want the one at %s", runs, m.Format(time.TimeOnly))
	}
}

// Lease timing of the failover test: a standby takes over at most
// leaseDuration after the leader's last renewal.
const (
	leaseName     = "jobplane-cron-e2e-failover"
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = time.Second
)

// TestLeaderFailoverRunsTheBoundaryOnce runs two cron replicas with leader
// election on one Lease. The standby answers TriggerCronJob with
// UNAVAILABLE naming the leader. The leader is killed (SIGKILL) a second
// before a scheduled time: the standby takes the Lease and creates that
// time's run, exactly once. The killed replica, started again, stands by
// and names the new leader; the new leader runs TriggerCronJob.
func TestLeaderFailoverRunsTheBoundaryOnce(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var replicas []*kubetest.Process
	for i := range 2 {
		replicas = append(replicas, e.startCron(t, fmt.Sprintf("cron-failover-%d", i), only(nsFailover), e.Executor,
			"-leader-elect-namespace", "kube-system", "-leader-elect-id", leaseName,
			"-leader-elect-lease-duration", leaseDuration.String(),
			"-leader-elect-renew-deadline", renewDeadline.String(),
			"-leader-elect-retry-period", retryPeriod.String()))
	}
	ns := newNamespace(t, e, nsFailover, append(replicas, e.Executor)...)
	kubetest.ShowLogLinesOnFailure(t, "lead", replicas...)
	clients := []jobplanev1.CronServiceClient{dialCron(t, replicas[0]), dialCron(t, replicas[1])}
	jobs := watchJobs(t, e, ns)
	created := createByRPC(t, clients[0], cronJob(ns, "cj", batchv1.CronJobSpec{JobTemplate: succeeding()}))
	t.Logf("CronJob created at %s", created.CreationTimestamp.Format(time.TimeOnly))

	holder := func(ctx context.Context) string {
		lease, err := e.Cluster.Client.CoordinationV1().Leases("kube-system").Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return ptr.Deref(lease.Spec.HolderIdentity, "")
	}
	// leaderOf is the index of the replica whose log says it leads as
	// identity, or -1.
	leaderOf := func(identity string) int {
		for i, r := range replicas {
			if strings.Contains(r.Tail(1000, `"msg":"leading"`), identity) {
				return i
			}
		}
		return -1
	}
	var first string
	leader := -1
	if err := poll(ctx, time.Minute, func(ctx context.Context) bool {
		first = holder(ctx)
		leader = leaderOf(first)
		return first != "" && leader >= 0
	}); err != nil {
		t.Fatalf("no replica leads (Lease holder %q)", first)
	}
	standby := 1 - leader
	t.Logf("cron-failover-%d leads as %s", leader, first)
	requireNotLeader(t, ctx, clients[standby], ns, first)

	// The next scheduled time at least 10 s away: the leader dies a second
	// before it.
	boundary := time.Now().Add(10 * time.Second).Truncate(time.Minute).Add(time.Minute)
	sleepUntil(ctx, boundary.Add(-time.Second))
	replicas[leader].Kill(t)
	killed := time.Now()
	t.Logf("leader killed at %s, before the run at %s", killed.Format(time.TimeOnly+".000"), boundary.Format(time.TimeOnly))
	var second string
	if err := poll(ctx, time.Minute, func(ctx context.Context) bool {
		second = holder(ctx)
		return second != "" && second != first
	}); err != nil {
		t.Fatalf("the standby never took the Lease")
	}
	t.Logf("the standby took the Lease %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	run := jobName("cj", boundary)
	if err := poll(ctx, time.Minute, func(ctx context.Context) bool {
		_, err := e.Cluster.Client.BatchV1().Jobs(ns).Get(ctx, run, metav1.GetOptions{})
		return err == nil
	}); err != nil {
		t.Fatalf("the run at %s was not created after the failover: %v", boundary.Format(time.TimeOnly), jobs.appearances())
	}

	replicas[leader].Start(t)
	var lastErr error
	if err := poll(ctx, time.Minute, func(ctx context.Context) bool {
		lastErr = notLeaderError(ctx, clients[leader], ns, second)
		return lastErr == nil
	}); err != nil {
		t.Errorf("the restarted replica does not stand by naming the new leader: %v", lastErr)
	}
	resp, err := clients[standby].TriggerCronJob(ctx, &jobplanev1.TriggerCronJobRequest{Namespace: ns, Name: "cj"})
	if err != nil {
		t.Fatalf("TriggerCronJob on the new leader: %v", err)
	}
	manual := resp.GetJob().GetMetadata().GetName()
	if err := poll(ctx, time.Minute, func(ctx context.Context) bool {
		for _, a := range jobs.of("cj") {
			if a.Name == manual {
				return true
			}
		}
		return false
	}); err != nil {
		t.Errorf("the triggered Job %s never appeared", manual)
	}
	var once int
	for _, a := range jobs.of("cj") {
		if a.Name == run {
			once++
		}
	}
	if once != 1 {
		t.Errorf("the run at %s appeared %d times, want once: %v", boundary.Format(time.TimeOnly), once, jobs.appearances())
	}
}

// requireNotLeader fails unless TriggerCronJob on client answers
// UNAVAILABLE naming leader.
func requireNotLeader(t *testing.T, ctx context.Context, client jobplanev1.CronServiceClient, ns, leader string) {
	t.Helper()
	if err := notLeaderError(ctx, client, ns, leader); err != nil {
		t.Error(err)
	}
}

// notLeaderError says how TriggerCronJob on client fails to be UNAVAILABLE
// naming leader (in its message and in the ErrorInfo's metadata), or nil.
func notLeaderError(ctx context.Context, client jobplanev1.CronServiceClient, ns, leader string) error {
	_, err := client.TriggerCronJob(ctx, &jobplanev1.TriggerCronJobRequest{Namespace: ns, Name: "cj"})
	st := status.Convert(err)
	if err == nil || st.Code() != codes.Unavailable || !strings.Contains(st.Message(), leader) {
		return fmt.Errorf("TriggerCronJob on the standby answered %v, want UNAVAILABLE naming the leader %s", err, leader)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "NOT_LEADER" && info.GetMetadata()["leader"] == leader {
			return nil
		}
	}
	return fmt.Errorf("TriggerCronJob on the standby answered %v without an ErrorInfo NOT_LEADER naming %s: %v", err, leader, st.Details())
}
