package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// parityCase is one CronJob run both as a batch/v1 CronJob, by the
// built-in CronJob and Job controllers, and as a jobplane CronJob created
// with the CreateCronJob RPC, by the shared cron service and executor.
type parityCase struct {
	name string // the behaviour, as the subtest's name
	slug string // short DNS name: the namespaces derive from it
	spec batchv1.CronJobSpec
	// runs is how many scheduled times the case spans, from the first after
	// its creation: its end state is reached soon after the last.
	runs int
	// resumeAfter, when set, creates both CronJobs suspended and resumes
	// them that long after the first scheduled time.
	resumeAfter time.Duration
	// want is the end state, given the first scheduled time m0: both halves
	// must reach it (the built-in one shows the case does what it says),
	// and then be alike in everything cronState holds.
	want func(m0 time.Time) cronState
}

// cronState is what parity compares of a CronJob and its Jobs: the Jobs
// (names are the scheduled minutes: alike in both halves), the status
// fields the reference writes, and the events by reason. No times but
// lastScheduleTime; no messages.
type cronState struct {
	// Jobs maps each Job's name to its terminal condition.
	Jobs map[string]string
	// Scheduled maps each Job's name to its scheduled-timestamp annotation,
	// written in the CronJob's zone. Not in want.
	Scheduled          map[string]string
	Active             []string
	LastScheduleTime   string
	LastSuccessfulTime bool // set or not: it is when a pod ended
	// Events are the CronJob's events as "Type/Reason", sorted, once
	// each. In want, the ones that must be among them.
	Events []string
}

func (s cronState) String() string {
	data, _ := json.Marshal(s)
	return string(data)
}

// reached says whether s is the end state want describes.
func (s cronState) reached(want cronState) bool {
	if !maps.Equal(s.Jobs, want.Jobs) || !slices.Equal(s.Active, want.Active) ||
		s.LastScheduleTime != want.LastScheduleTime || s.LastSuccessfulTime != want.LastSuccessfulTime {
		return false
	}
	for _, ev := range want.Events {
		if !slices.Contains(s.Events, ev) {
			return false
		}
	}
	return true
}

// diff says field by field where the jobplane half differs from the
// built-in one.
func (s cronState) diff(jobplane cronState) []string {
	var out []string
	field := func(name string, b, j any) {
		bs, _ := json.Marshal(b)
		js, _ := json.Marshal(j)
		if string(bs) != string(js) {
			out = append(out, fmt.Sprintf("%s: built-in %s, jobplane %s", name, bs, js))
		}
	}
	field("jobs", s.Jobs, jobplane.Jobs)
	field("jobs' scheduled timestamps", s.Scheduled, jobplane.Scheduled)
	field("status.active", s.Active, jobplane.Active)
	field("status.lastScheduleTime", s.LastScheduleTime, jobplane.LastScheduleTime)
	field("status.lastSuccessfulTime set", s.LastSuccessfulTime, jobplane.LastSuccessfulTime)
	field("events", s.Events, jobplane.Events)
	return out
}

const parityCronJob = "cj"

// TestParity runs each case's CronJob as a batch/v1 CronJob and as a
// jobplane CronJob, same spec, each in its own namespace under the same
// name (so their Jobs have the same names), created in the same minute:
// both must reach the case's end state, and then be alike.
func TestParity(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	for _, tc := range parityCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runParity(t, e, tc)
		})
	}
}

func parityCases() []parityCase {
	return []parityCase{
		{
			name: "AllowEveryMinutePrunesHistoryToOne",
			slug: "allow",
			spec: batchv1.CronJobSpec{ConcurrencyPolicy: batchv1.AllowConcurrent, SuccessfulJobsHistoryLimit: ptr.To[int32](1),
				JobTemplate: succeeding()},
			runs: 3,
			want: func(m0 time.Time) cronState {
				last := m0.Add(2 * time.Minute)
				return cronState{
					Jobs:             map[string]string{jobName(parityCronJob, last): "Complete/CompletionsReached"},
					LastScheduleTime: last.UTC().Format(time.RFC3339), LastSuccessfulTime: true,
					Events: []string{"Normal/SawCompletedJob", "Normal/SuccessfulCreate", "Normal/SuccessfulDelete"},
				}
			},
		},
		{
			name: "ForbidKeepsTheRunningJob",
			slug: "forbid",
			// In a zone of its own: the Jobs' scheduled timestamps are
			// written in it.
			spec: batchv1.CronJobSpec{ConcurrencyPolicy: batchv1.ForbidConcurrent, TimeZone: ptr.To("Asia/Kolkata"),
				JobTemplate: jobTemplate(fateRun, "forever")},
			runs: 2,
			want: func(m0 time.Time) cronState {
				return cronState{
					Jobs:             map[string]string{jobName(parityCronJob, m0): "Running"},
					Active:           []string{jobName(parityCronJob, m0)},
					LastScheduleTime: m0.UTC().Format(time.RFC3339),
					Events:           []string{"Normal/JobAlreadyActive", "Normal/SuccessfulCreate"},
				}
			},
		},
		{
			name: "ReplaceDeletesTheRunningJob",
			slug: "replace",
			spec: batchv1.CronJobSpec{ConcurrencyPolicy: batchv1.ReplaceConcurrent, JobTemplate: jobTemplate(fateRun, "forever")},
			runs: 2,
			want: func(m0 time.Time) cronState {
				next := m0.Add(time.Minute)
				return cronState{
					Jobs:             map[string]string{jobName(parityCronJob, next): "Running"},
					Active:           []string{jobName(parityCronJob, next)},
					LastScheduleTime: next.UTC().Format(time.RFC3339),
					Events:           []string{"Normal/SuccessfulCreate", "Normal/SuccessfulDelete"},
				}
			},
		},
		{
			name: "FailingJobsPrunedToFailedHistoryLimit",
			slug: "failing",
			spec: batchv1.CronJobSpec{ConcurrencyPolicy: batchv1.AllowConcurrent, FailedJobsHistoryLimit: ptr.To[int32](1),
				JobTemplate: jobTemplate(fateAfter, "1s", fateExitCode, "1")},
			runs: 2,
			want: func(m0 time.Time) cronState {
				next := m0.Add(time.Minute)
				return cronState{
					Jobs:             map[string]string{jobName(parityCronJob, next): "Failed/BackoffLimitExceeded"},
					LastScheduleTime: next.UTC().Format(time.RFC3339),
					Events:           []string{"Normal/SawCompletedJob", "Normal/SuccessfulCreate", "Normal/SuccessfulDelete"},
				}
			},
		},
		{
			name: "SuspendedOverTheFirstRunThenResumed",
			slug: "resume",
			spec: batchv1.CronJobSpec{Suspend: ptr.To(true), SuccessfulJobsHistoryLimit: ptr.To[int32](3), JobTemplate: succeeding()},
			// The time missed while suspended runs late, at the resume.
			resumeAfter: 20 * time.Second,
			runs:        2,
			want: func(m0 time.Time) cronState {
				next := m0.Add(time.Minute)
				return cronState{
					Jobs: map[string]string{
						jobName(parityCronJob, m0):   "Complete/CompletionsReached",
						jobName(parityCronJob, next): "Complete/CompletionsReached",
					},
					LastScheduleTime: next.UTC().Format(time.RFC3339), LastSuccessfulTime: true,
					Events: []string{"Normal/SawCompletedJob", "Normal/SuccessfulCreate"},
				}
			},
		},
	}
}

// settleMargin is how long after its last scheduled time a case may take to
// reach its end state: the run's pods end in seconds, but every case and
// test runs at once on two cores.
const settleMargin = 100 * time.Second

// alikeWithin bounds the wait for both halves to be alike once they have
// reached the end state: events are recorded asynchronously.
const alikeWithin = 30 * time.Second

func runParity(t *testing.T, e *Env, tc parityCase) {
	ctx := context.Background()
	tc.spec.Schedule = everyMinute
	builtinNS := newNamespace(t, e, "cron-"+tc.slug+"-builtin")
	jobplaneNS := newNamespace(t, e, "cron-"+tc.slug+"-jobplane")

	awayFromBoundary(t, 8*time.Second)
	builtin, err := e.Cluster.Client.BatchV1().CronJobs(builtinNS).Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: parityCronJob, Namespace: builtinNS},
		Spec:       *tc.spec.DeepCopy(),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	jobplane := createByRPC(t, e.CronClient, cronJob(jobplaneNS, parityCronJob, *tc.spec.DeepCopy()))
	m0 := firstRun(builtin.CreationTimestamp.Time)
	if other := firstRun(jobplane.CreationTimestamp.Time); !other.Equal(m0) {
		t.Fatalf("the halves were created across a minute boundary: first runs %s and %s", m0, other)
	}
	want := tc.want(m0)
	last := m0.Add(time.Duration(tc.runs-1) * time.Minute)
	t.Logf("first run %s, last %s; want %s", m0.Format(time.TimeOnly), last.Format(time.TimeOnly), want)

	if tc.resumeAfter > 0 {
		sleepUntil(ctx, m0.Add(tc.resumeAfter))
		resume := []byte(`{"spec":{"suspend":false}}`)
		// Retried: the API server of a loaded machine may time out.
		var errB, errJ error = errors.New("not patched"), errors.New("not patched")
		_ = poll(ctx, 30*time.Second, func(ctx context.Context) bool {
			if errB != nil {
				_, errB = e.Cluster.Client.BatchV1().CronJobs(builtinNS).Patch(ctx, parityCronJob, types.MergePatchType, resume, metav1.PatchOptions{})
			}
			if errJ != nil {
				_, errJ = e.CronJobs.Namespace(jobplaneNS).Patch(ctx, parityCronJob, types.MergePatchType, resume, metav1.PatchOptions{})
			}
			return errB == nil && errJ == nil
		})
		if errB != nil || errJ != nil {
			t.Fatalf("resuming the CronJobs: built-in: %v; jobplane: %v", errB, errJ)
		}
	}

	halves := []struct {
		name  string
		read  func(context.Context) (cronState, error)
		state cronState
		err   error
	}{
		{name: "built-in", read: func(ctx context.Context) (cronState, error) { return builtinState(ctx, e, builtinNS) }},
		{name: "jobplane", read: func(ctx context.Context) (cronState, error) { return jobplaneState(ctx, e, jobplaneNS) }},
	}
	timeout := time.Until(last.Add(settleMargin))
	var wg sync.WaitGroup
	for i := range halves {
		h := &halves[i]
		wg.Go(func() {
			h.err = poll(ctx, timeout, func(ctx context.Context) bool {
				s, err := h.read(ctx)
				if err != nil {
					return false
				}
				h.state = s
				return s.reached(want)
			})
		})
	}
	wg.Wait()
	for _, h := range halves {
		t.Logf("%s: %s", h.name, h.state)
		if h.err != nil {
			t.Errorf("the %s half did not reach the end state within %s of its last run: %v", h.name, settleMargin, h.err)
		}
	}
	if t.Failed() {
		return
	}
	var diffs []string
	_ = poll(ctx, alikeWithin, func(ctx context.Context) bool {
		b, errB := builtinState(ctx, e, builtinNS)
		j, errJ := jobplaneState(ctx, e, jobplaneNS)
		if errB != nil || errJ != nil {
			return false
		}
		diffs = b.diff(j)
		return len(diffs) == 0
	})
	for _, d := range diffs {
		t.Errorf("the halves differ: %s", d)
	}
}

func builtinState(ctx context.Context, e *Env, ns string) (cronState, error) {
	c, err := e.Cluster.Client.BatchV1().CronJobs(ns).Get(ctx, parityCronJob, metav1.GetOptions{})
	if err != nil {
		return cronState{}, err
	}
	return stateOf(ctx, e, ns, c.Status)
}

func jobplaneState(ctx context.Context, e *Env, ns string) (cronState, error) {
	c, err := getCronJob(ctx, e, ns, parityCronJob)
	if err != nil {
		return cronState{}, err
	}
	return stateOf(ctx, e, ns, c.Status.CronJobStatus)
}

func stateOf(ctx context.Context, e *Env, ns string, st batchv1.CronJobStatus) (cronState, error) {
	s := cronState{Jobs: map[string]string{}, Scheduled: map[string]string{}, LastSuccessfulTime: st.LastSuccessfulTime != nil}
	if st.LastScheduleTime != nil {
		s.LastScheduleTime = st.LastScheduleTime.UTC().Format(time.RFC3339)
	}
	for _, ref := range st.Active {
		s.Active = append(s.Active, ref.Name)
	}
	slices.Sort(s.Active)
	jobs, err := jobsOf(ctx, e, ns)
	if err != nil {
		return cronState{}, err
	}
	for name, j := range jobs {
		s.Jobs[name] = terminal(j)
		s.Scheduled[name] = j.Annotations[batchv1.CronJobScheduledTimestampAnnotation]
	}
	events, err := cronJobEvents(ctx, e, ns, parityCronJob)
	if err != nil {
		return cronState{}, err
	}
	for _, ev := range events {
		if ev.Reason == "FailedDelete" && strings.Contains(ev.Message, "not found") {
			// The built-in deleting again a Job its informer still shows
			// after its own delete: a race of its cache, not a decision.
			continue
		}
		if name, ok := unexpectedJobName(ev); ok && jobs[name] == nil {
			// The same race: a Job it deleted (Replace), still in its
			// informer, taken for one it did not create.
			continue
		}
		if r := ev.Type + "/" + ev.Reason; !slices.Contains(s.Events, r) {
			s.Events = append(s.Events, r)
		}
	}
	slices.Sort(s.Events)
	return s, nil
}

// unexpectedJobName is the Job an UnexpectedJob event names (the
// reference's "Saw a job that the controller did not create or forgot:
// NAME"); false for another event.
func unexpectedJobName(ev corev1.Event) (string, bool) {
	_, name, ok := strings.Cut(ev.Message, "did not create or forgot: ")
	return name, ok && ev.Reason == "UnexpectedJob"
}
