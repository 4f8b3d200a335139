package engine

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Tests of Indexed Jobs: the helpers of the reference's indexed_job_utils.go
// (pkg/controller/job/indexed_job_utils_test.go) and the syncs of
// TestSyncJobWithJobBackoffLimitPerIndex (job_controller_test.go).

// ---------------------------------------------------------------------------
// Shared helpers (prefixed ix; also used by success_policy_test.go).

// ixNoIndex marks a pod without the completion index annotation.
const ixNoIndex = "-"

// ixIndexPhase describes a hollow pod by its raw index annotation and phase.
type ixIndexPhase struct {
	Index string
	Phase corev1.PodPhase
}

// ixHollowPods returns pods p-0, p-1, ... with the raw index annotations and
// phases given, carrying the tracking finalizer.
func ixHollowPods(descs []ixIndexPhase) []*corev1.Pod {
	out := make([]*corev1.Pod, len(descs))
	for i, d := range descs {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:       fmt.Sprintf("p-%d", i),
				Namespace:  testNS,
				UID:        types.UID(fmt.Sprintf("p-%d-uid", i)),
				Finalizers: []string{DefaultTrackingFinalizer},
			},
			Status: corev1.PodStatus{Phase: d.Phase},
		}
		if d.Index != ixNoIndex {
			p.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: d.Index}
		}
		out[i] = p
	}
	return out
}

func ixToIndexPhases(pods []*corev1.Pod) []ixIndexPhase {
	out := make([]ixIndexPhase, len(pods))
	for i, p := range pods {
		ix := ixNoIndex
		if v, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]; ok {
			ix = v
		}
		out[i] = ixIndexPhase{ix, p.Status.Phase}
	}
	return out
}

// ixJob is an Indexed Job with an unlimited global backoffLimit (as the
// reference's per-index tests use), changed by opts.
func ixJob(parallelism, completions int32, opts ...jobOpt) *batchv1.Job {
	return newJob(parallelism, completions, append([]jobOpt{indexed(), backoffLimit(math.MaxInt32)}, opts...)...)
}

// ixPod is a pod of completion index ix.
func ixPod(name string, ix int, opts ...podOpt) *corev1.Pod {
	return newPod(name, append([]podOpt{index(ix)}, opts...)...)
}

func ixIgnoredCount(n int) podOpt {
	return annotation(batchv1.JobIndexIgnoredFailureCountAnnotation, strconv.Itoa(n))
}

// ixDeletedAt marks the pod deleted at t (no grace period): its finish time
// when it has no container statuses.
func ixDeletedAt(t time.Time) podOpt {
	return func(p *corev1.Pod) { p.DeletionTimestamp = timePtr(t) }
}

func ixDisrupted() podOpt {
	return podConditionOpt(corev1.DisruptionTarget, corev1.ConditionTrue, now.Add(-time.Minute))
}

func ixExitRule(action batchv1.PodFailurePolicyAction, codes ...int32) batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{
		Action:      action,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: codes},
	}
}

func ixDisruptionRule(action batchv1.PodFailurePolicyAction) batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{
		Action:          action,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
	}
}

// ixCtx builds a sync context the way the start of a sync does, with the
// active pods filtered.
func ixCtx(job *batchv1.Job, pods []*corev1.Pod, opts ...syncOpt) *syncCtx {
	s := &Snapshot{Job: job, Pods: pods, Now: now, TrackingFinalizer: DefaultTrackingFinalizer}
	for _, o := range opts {
		o(s)
	}
	c := newSyncCtx(s, &Plan{})
	c.activePods = filterPods(c.pods, (*pod).active)
	return c
}

func ixSameIntervals(a, b orderedIntervals) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func ixCond(t batchv1.JobConditionType, reason, message string) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message}
}

// ixNormalized drops what the reference's tests ignore: start and completion
// times, ready, condition times; empty lists are nil.
func ixNormalized(s batchv1.JobStatus) batchv1.JobStatus {
	s = *s.DeepCopy()
	s.StartTime, s.CompletionTime, s.Ready = nil, nil, nil
	for i := range s.Conditions {
		s.Conditions[i].LastProbeTime = metav1.Time{}
		s.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	if len(s.Conditions) == 0 {
		s.Conditions = nil
	}
	if s.UncountedTerminatedPods == nil {
		s.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	if len(s.UncountedTerminatedPods.Succeeded) == 0 {
		s.UncountedTerminatedPods.Succeeded = nil
	}
	if len(s.UncountedTerminatedPods.Failed) == 0 {
		s.UncountedTerminatedPods.Failed = nil
	}
	return s
}

func ixFormatStatus(s batchv1.JobStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "active=%d succeeded=%d failed=%d", s.Active, s.Succeeded, s.Failed)
	if s.Terminating != nil {
		fmt.Fprintf(&b, " terminating=%d", *s.Terminating)
	} else {
		b.WriteString(" terminating=nil")
	}
	fmt.Fprintf(&b, " completedIndexes=%q", s.CompletedIndexes)
	if s.FailedIndexes != nil {
		fmt.Fprintf(&b, " failedIndexes=%q", *s.FailedIndexes)
	} else {
		b.WriteString(" failedIndexes=nil")
	}
	if u := s.UncountedTerminatedPods; u != nil {
		fmt.Fprintf(&b, " uncounted={succeeded:%v failed:%v}", u.Succeeded, u.Failed)
	}
	for _, c := range s.Conditions {
		fmt.Fprintf(&b, "\n    %s=%s reason=%q message=%q", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// ixCreatedPods returns the pods a plan creates, by completion index.
func ixCreatedPods(p *Plan) map[int]PodToCreate {
	out := map[int]PodToCreate{}
	for _, a := range p.Actions {
		if c, ok := a.(CreatePods); ok {
			for _, pod := range c.Pods {
				if pod.CompletionIndex != nil {
					out[int(*pod.CompletionIndex)] = pod
				}
			}
		}
	}
	return out
}

func ixSorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// ixSyncCase is one sync and what the reference would do.
type ixSyncCase struct {
	job  *batchv1.Job
	pods []*corev1.Pod
	opts []syncOpt

	// wantStatus is the last status written (the Job's own when none is),
	// compared as the reference's tests do.
	wantStatus batchv1.JobStatus
	// wantCreated are the indexes of the pods created, in order.
	wantCreated []int
	// wantCreatedAnnotations are the exact annotations of pods created.
	wantCreatedAnnotations map[int]map[string]string
	// wantDeleted are the pods deleted (any order); their finalizers are
	// removed first only when wantDeletesFinalizer.
	wantDeleted          []string
	wantDeletesFinalizer bool
	// wantFinalizersGone are the pods whose finalizer is removed (any order).
	wantFinalizersGone []string
	wantRequeues       []time.Duration
	wantEvents         []string
}

func ixRunSyncCase(t *testing.T, tc ixSyncCase) {
	t.Helper()
	plan := runSync(t, tc.job, tc.pods, tc.opts...)
	o := summarize(plan)

	got := tc.job.Status
	if o.Status != nil {
		got = *o.Status
	}
	if g, w := ixNormalized(got), ixNormalized(tc.wantStatus); !reflect.DeepEqual(g, w) {
		t.Errorf("status:\n got %s\nwant %s", ixFormatStatus(g), ixFormatStatus(w))
	}
	if c := findCondition(got.Conditions, batchv1.JobComplete); c != nil && got.CompletionTime == nil {
		t.Errorf("Complete without completionTime")
	}
	if !slices.Equal(o.CreatedIndexes, tc.wantCreated) {
		t.Errorf("created indexes %v, want %v", o.CreatedIndexes, tc.wantCreated)
	}
	created := ixCreatedPods(plan)
	for ix, want := range tc.wantCreatedAnnotations {
		pod, ok := created[ix]
		if !ok {
			t.Errorf("no pod created for index %d", ix)
			continue
		}
		if !reflect.DeepEqual(pod.Annotations, want) {
			t.Errorf("index %d annotations %v, want %v", ix, pod.Annotations, want)
		}
	}
	if g, w := ixSorted(o.DeletedNames), ixSorted(tc.wantDeleted); !slices.Equal(g, w) {
		t.Errorf("deleted %v, want %v", g, w)
	}
	if o.Deleted > 0 && o.DeletesFinalizer != tc.wantDeletesFinalizer {
		t.Errorf("deletion removes the finalizer first: %v, want %v", o.DeletesFinalizer, tc.wantDeletesFinalizer)
	}
	if g, w := ixSorted(o.FinalizersGone), ixSorted(tc.wantFinalizersGone); !slices.Equal(g, w) {
		t.Errorf("finalizers removed from %v, want %v", g, w)
	}
	if !slices.Equal(o.Requeues, tc.wantRequeues) {
		t.Errorf("requeues %v, want %v", o.Requeues, tc.wantRequeues)
	}
	if !slices.Equal(o.Events, tc.wantEvents) {
		t.Errorf("events %v, want %v", o.Events, tc.wantEvents)
	}
}

func ixFailureAnnotations(ix, failures int) map[string]string {
	return map[string]string{
		batchv1.JobCompletionIndexAnnotation:   strconv.Itoa(ix),
		batchv1.JobIndexFailureCountAnnotation: strconv.Itoa(failures),
	}
}

// ---------------------------------------------------------------------------
// Unit tables.

func TestCalculateSucceededIndexes(t *testing.T) {
	cases := map[string]struct {
		prevSucceeded string
		pods          []ixIndexPhase
		completions   int32
		noFinalizer   []int // positions in pods whose finalizer is gone
		wantPrev      orderedIntervals
		wantAll       orderedIntervals
	}{
		"one index": {
			pods:        []ixIndexPhase{{"1", corev1.PodSucceeded}},
			completions: 2,
			wantAll:     orderedIntervals{{1, 1}},
		},
		"two separate, repeated and failed indexes": {
			pods: []ixIndexPhase{
				{"2", corev1.PodFailed}, {"5", corev1.PodSucceeded}, {"5", corev1.PodSucceeded},
				{"10", corev1.PodFailed}, {"10", corev1.PodSucceeded},
			},
			completions: 11,
			wantAll:     orderedIntervals{{5, 5}, {10, 10}},
		},
		"two intervals, active pods ignored": {
			pods: []ixIndexPhase{
				{"0", corev1.PodRunning}, {"1", corev1.PodPending}, {"2", corev1.PodSucceeded}, {"3", corev1.PodSucceeded},
				{"5", corev1.PodSucceeded}, {"6", corev1.PodSucceeded}, {"7", corev1.PodSucceeded},
			},
			completions: 8,
			wantAll:     orderedIntervals{{2, 3}, {5, 7}},
		},
		"pods without or with negative index ignored": {
			pods: []ixIndexPhase{
				{"0", corev1.PodSucceeded}, {"1", corev1.PodFailed}, {"2", corev1.PodSucceeded}, {"3", corev1.PodSucceeded},
				{"4", corev1.PodSucceeded}, {"5", corev1.PodSucceeded}, {ixNoIndex, corev1.PodSucceeded}, {"-2", corev1.PodSucceeded},
			},
			completions: 6,
			wantAll:     orderedIntervals{{0, 0}, {2, 5}},
		},
		"pods out of range ignored": {
			pods: []ixIndexPhase{
				{"0", corev1.PodSucceeded}, {"1", corev1.PodSucceeded}, {"2", corev1.PodSucceeded}, {"3", corev1.PodFailed},
				{"4", corev1.PodSucceeded}, {"5", corev1.PodSucceeded}, {ixNoIndex, corev1.PodSucceeded}, {"-2", corev1.PodSucceeded},
			},
			completions: 5,
			wantAll:     orderedIntervals{{0, 2}, {4, 4}},
		},
		"non-numeric index ignored": {
			pods:        []ixIndexPhase{{"abc", corev1.PodSucceeded}, {"1", corev1.PodSucceeded}},
			completions: 3,
			wantAll:     orderedIntervals{{1, 1}},
		},
		"succeeded pod without finalizer is already counted": {
			pods:        []ixIndexPhase{{"0", corev1.PodSucceeded}, {"2", corev1.PodSucceeded}},
			noFinalizer: []int{0},
			completions: 3,
			wantAll:     orderedIntervals{{2, 2}},
		},
		"prev interval out of range": {
			prevSucceeded: "0-5,8-10",
			completions:   8,
			wantPrev:      orderedIntervals{{0, 5}},
			wantAll:       orderedIntervals{{0, 5}},
		},
		"prev interval partially out of range": {
			prevSucceeded: "0-5,8-10",
			completions:   10,
			wantPrev:      orderedIntervals{{0, 5}, {8, 9}},
			wantAll:       orderedIntervals{{0, 5}, {8, 9}},
		},
		"prev and new separate": {
			prevSucceeded: "0,4,5,10-12",
			pods:          []ixIndexPhase{{"2", corev1.PodSucceeded}, {"7", corev1.PodSucceeded}, {"8", corev1.PodSucceeded}},
			completions:   13,
			wantPrev:      orderedIntervals{{0, 0}, {4, 5}, {10, 12}},
			wantAll:       orderedIntervals{{0, 0}, {2, 2}, {4, 5}, {7, 8}, {10, 12}},
		},
		"prev between new": {
			prevSucceeded: "3,4,6",
			pods:          []ixIndexPhase{{"2", corev1.PodSucceeded}, {"7", corev1.PodSucceeded}, {"8", corev1.PodSucceeded}},
			completions:   9,
			wantPrev:      orderedIntervals{{3, 4}, {6, 6}},
			wantAll:       orderedIntervals{{2, 4}, {6, 8}},
		},
		"new between prev": {
			prevSucceeded: "2,7,8",
			pods:          []ixIndexPhase{{"3", corev1.PodSucceeded}, {"4", corev1.PodSucceeded}, {"6", corev1.PodSucceeded}},
			completions:   9,
			wantPrev:      orderedIntervals{{2, 2}, {7, 8}},
			wantAll:       orderedIntervals{{2, 4}, {6, 8}},
		},
		"new within prev": {
			prevSucceeded: "2-7",
			pods: []ixIndexPhase{
				{"0", corev1.PodSucceeded}, {"3", corev1.PodSucceeded}, {"5", corev1.PodSucceeded}, {"9", corev1.PodSucceeded},
			},
			completions: 10,
			wantPrev:    orderedIntervals{{2, 7}},
			wantAll:     orderedIntervals{{0, 0}, {2, 7}, {9, 9}},
		},
		"corrupted prev interval": {
			prevSucceeded: "0,1-foo,bar",
			pods:          []ixIndexPhase{{"3", corev1.PodSucceeded}},
			completions:   4,
			wantPrev:      orderedIntervals{{0, 0}},
			wantAll:       orderedIntervals{{0, 0}, {3, 3}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := newJob(1, tc.completions, indexed(), withStatus(func(s *batchv1.JobStatus) { s.CompletedIndexes = tc.prevSucceeded }))
			pods := ixHollowPods(tc.pods)
			for _, i := range tc.noFinalizer {
				pods[i].Finalizers = nil
			}
			prev, all := ixCtx(job, pods).calculateSucceededIndexes()
			if !ixSameIntervals(prev, tc.wantPrev) {
				t.Errorf("previous succeeded indexes %v, want %v", prev, tc.wantPrev)
			}
			if !ixSameIntervals(all, tc.wantAll) {
				t.Errorf("succeeded indexes %v, want %v", all, tc.wantAll)
			}
		})
	}
}

func TestIsIndexFailed(t *testing.T) {
	cases := map[string]struct {
		job  *batchv1.Job
		pod  *corev1.Pod
		want bool
	}{
		"failed pod at backoffLimitPerIndex=0": {
			job:  ixJob(2, 2, backoffLimitPerIndex(0)),
			pod:  ixPod("a", 0, failed, failureCount(0)),
			want: true,
		},
		"failed pod at backoffLimitPerIndex=1": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1)),
			pod:  ixPod("a", 1, failed, failureCount(1)),
			want: true,
		},
		"failed pod below backoffLimitPerIndex": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1)),
			pod:  ixPod("a", 1, failed, failureCount(0)),
			want: false,
		},
		"running pod never fails its index": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1)),
			pod:  ixPod("a", 1, running, failureCount(3)),
			want: false,
		},
		"matching FailIndex rule fails the index at once": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1), failurePolicy(ixExitRule(batchv1.PodFailurePolicyActionFailIndex, 3))),
			pod:  ixPod("a", 0, failed, failureCount(0), exitCode("x", 3, now.Add(-time.Minute))),
			want: true,
		},
		"matching Ignore rule never fails the index": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1), failurePolicy(ixExitRule(batchv1.PodFailurePolicyActionIgnore, 3))),
			pod:  ixPod("a", 0, failed, failureCount(5), exitCode("x", 3, now.Add(-time.Minute))),
			want: false,
		},
		"matching Count rule counts against the limit": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1), failurePolicy(ixExitRule(batchv1.PodFailurePolicyActionCount, 3))),
			pod:  ixPod("a", 0, failed, failureCount(1), exitCode("x", 3, now.Add(-time.Minute))),
			want: true,
		},
		"no rule matched counts against the limit": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1), failurePolicy(ixExitRule(batchv1.PodFailurePolicyActionFailIndex, 3))),
			pod:  ixPod("a", 0, failed, failureCount(1), exitCode("x", 4, now.Add(-time.Minute))),
			want: true,
		},
		"deleted running pod counts as failed when terminating pods are replaced": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1)),
			pod:  ixPod("a", 0, running, deleting(), failureCount(1)),
			want: true,
		},
		"deleted running pod is not failed when only failed pods are replaced": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1), replacementPolicy(batchv1.Failed)),
			pod:  ixPod("a", 0, running, deleting(), failureCount(1)),
			want: false,
		},
		"tampered failure count reads as zero": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1)),
			pod:  ixPod("a", 0, failed, annotation(batchv1.JobIndexFailureCountAnnotation, "-3")),
			want: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := ixCtx(tc.job, []*corev1.Pod{tc.pod})
			if got := c.isIndexFailed(wrapPod(tc.pod)); got != tc.want {
				t.Errorf("isIndexFailed = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCalculateFailedIndexes(t *testing.T) {
	cases := map[string]struct {
		job  *batchv1.Job
		pods []*corev1.Pod
		want orderedIntervals
	}{
		"one new index failed": {
			job: ixJob(2, 2, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, failureCount(0)),
				ixPod("b", 1, failed, failureCount(1)),
			},
			want: orderedIntervals{{1, 1}},
		},
		"pod without finalizer is ignored": {
			job:  ixJob(2, 2, backoffLimitPerIndex(0)),
			pods: []*corev1.Pod{ixPod("a", 0, failed, failureCount(0), noFinalizer())},
		},
		"pod outside completions is ignored": {
			job:  ixJob(2, 2, backoffLimitPerIndex(0)),
			pods: []*corev1.Pod{ixPod("a", 3, failed, failureCount(0))},
		},
		"extend the failed indexes": {
			job:  ixJob(2, 2, backoffLimitPerIndex(0), withStatus(func(s *batchv1.JobStatus) { s.FailedIndexes = ptr.To("0") })),
			pods: []*corev1.Pod{ixPod("a", 1, failed, failureCount(0))},
			want: orderedIntervals{{0, 1}},
		},
		"prev failed indexes empty": {
			job:  ixJob(2, 2, backoffLimitPerIndex(0), withStatus(func(s *batchv1.JobStatus) { s.FailedIndexes = ptr.To("") })),
			pods: []*corev1.Pod{ixPod("a", 1, failed, failureCount(0))},
			want: orderedIntervals{{1, 1}},
		},
		"prev failed indexes outside the completions": {
			job:  ixJob(2, 2, backoffLimitPerIndex(0), withStatus(func(s *batchv1.JobStatus) { s.FailedIndexes = ptr.To("9") })),
			pods: []*corev1.Pod{ixPod("a", 1, failed, failureCount(0))},
			want: orderedIntervals{{1, 1}},
		},
		"several pods of one failed index count once": {
			job: ixJob(4, 4, backoffLimitPerIndex(0), withStatus(func(s *batchv1.JobStatus) { s.FailedIndexes = ptr.To("3") })),
			pods: []*corev1.Pod{
				ixPod("a", 1, failed, failureCount(0)),
				ixPod("b", 1, failed, failureCount(0)),
				ixPod("c", 2, succeeded),
			},
			want: orderedIntervals{{1, 1}, {3, 3}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ixCtx(tc.job, tc.pods).calculateFailedIndexes()
			if got == nil {
				t.Fatalf("calculateFailedIndexes = nil, want %v", tc.want)
			}
			if !ixSameIntervals(*got, tc.want) {
				t.Errorf("failed indexes %v, want %v", *got, tc.want)
			}
		})
	}
}

func TestPodsWithDelayedDeletion(t *testing.T) {
	cases := map[string]struct {
		job       *batchv1.Job
		pods      []*corev1.Pod
		inFlight  []types.UID
		wantNames []string
	}{
		"failed pods of indexes not failed are kept": {
			job: ixJob(3, 3, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, failureCount(0)),
				ixPod("b", 1, failed, failureCount(1)),
				ixPod("c", 2, failed, failureCount(0)),
			},
			wantNames: []string{"a", "c"},
		},
		"failed pod without finalizer is not kept: its deletion already started": {
			job:  ixJob(2, 2, backoffLimitPerIndex(0)),
			pods: []*corev1.Pod{ixPod("a", 0, failed, failureCount(0), noFinalizer())},
		},
		"failed pod with finalizer removal in flight is not kept": {
			job:      ixJob(2, 2, backoffLimitPerIndex(1)),
			pods:     []*corev1.Pod{ixPod("a", 0, failed, failureCount(0))},
			inFlight: []types.UID{"a-uid"},
		},
		"failed pod with index outside completions is not kept": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{ixPod("a", 4, failed, failureCount(0))},
		},
		"failed pod of an active index is not kept: it is replaced already": {
			job: ixJob(2, 2, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{
				ixPod("a1", 0, failed, failureCount(0)),
				ixPod("a2", 0, running, failureCount(1)),
			},
		},
		"failed pod of a succeeded index is not kept": {
			job: ixJob(2, 2, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{
				ixPod("a1", 0, failed, failureCount(0)),
				ixPod("a2", 0, succeeded, failureCount(1)),
			},
		},
		"failed pod of an index succeeded earlier is not kept": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1), withStatus(func(s *batchv1.JobStatus) { s.CompletedIndexes = "0" })),
			pods: []*corev1.Pod{ixPod("a1", 0, failed, failureCount(0))},
		},
		"only the pod with the highest failure count is kept": {
			job: ixJob(2, 2, backoffLimitPerIndex(4)),
			pods: []*corev1.Pod{
				ixPod("a1", 0, failed, failureCount(0)),
				ixPod("a3", 0, failed, failureCount(2)),
				ixPod("a2", 0, failed, failureCount(1)),
			},
			wantNames: []string{"a3"},
		},
		"with equal failure counts only the last failed pod is kept": {
			job: ixJob(2, 2, backoffLimitPerIndex(4)),
			pods: []*corev1.Pod{
				ixPod("a1", 0, failed, failureCount(1), ixDeletedAt(now.Add(-time.Second))),
				ixPod("a3", 0, failed, failureCount(1), ixDeletedAt(now)),
				ixPod("a2", 0, failed, failureCount(1), ixDeletedAt(now.Add(-2*time.Second))),
			},
			wantNames: []string{"a3"},
		},
		"ignored failures count to pick the last failed pod": {
			job: ixJob(2, 2, backoffLimitPerIndex(4)),
			pods: []*corev1.Pod{
				ixPod("a1", 0, failed, failureCount(1)),
				ixPod("a2", 0, failed, failureCount(0), ixIgnoredCount(2)),
			},
			wantNames: []string{"a2"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := ixCtx(tc.job, tc.pods, finalizerRemovalsInFlight(tc.inFlight...))
			c.prevSucceededIndexes, c.succeededIndexes = c.calculateSucceededIndexes()
			c.failedIndexes = c.calculateFailedIndexes()
			var got []string
			for ix, p := range c.podsWithDelayedDeletion() {
				if p.index != ix {
					t.Errorf("pod %s kept for index %d", p.Name, ix)
				}
				got = append(got, p.Name)
			}
			if g, w := ixSorted(got), ixSorted(tc.wantNames); !slices.Equal(g, w) {
				t.Errorf("pods with delayed deletion %v, want %v", g, w)
			}
		})
	}
}

func TestNewIndexFailureCounts(t *testing.T) {
	ignoreDisruption := failurePolicy(ixDisruptionRule(batchv1.PodFailurePolicyActionIgnore))
	cases := map[string]struct {
		job          *batchv1.Job
		pod          *corev1.Pod
		wantFailures int32
		wantIgnored  int32
	}{
		"first pod of the index": {
			job: ixJob(1, 1, backoffLimitPerIndex(1)),
		},
		"replacing a failed pod with no failure yet": {
			job:          ixJob(1, 1, backoffLimitPerIndex(1)),
			pod:          ixPod("a", 0, failed, failureCount(0)),
			wantFailures: 1,
		},
		"replacing a failed pod with failures": {
			job:          ixJob(1, 1, backoffLimitPerIndex(1)),
			pod:          ixPod("a", 0, failed, failureCount(3)),
			wantFailures: 4,
		},
		"replacing a pod without the annotation": {
			job:          ixJob(1, 1, backoffLimitPerIndex(1)),
			pod:          ixPod("a", 0, failed),
			wantFailures: 1,
		},
		"replacing a pod whose failure matches an Ignore rule": {
			job:          ixJob(1, 4, backoffLimitPerIndex(1), ignoreDisruption),
			pod:          ixPod("a", 3, failed, failureCount(3), ixDisrupted()),
			wantFailures: 3,
			wantIgnored:  1,
		},
		"ignored failures accumulate": {
			job:          ixJob(1, 4, backoffLimitPerIndex(1), ignoreDisruption),
			pod:          ixPod("a", 3, failed, failureCount(1), ixIgnoredCount(2), ixDisrupted()),
			wantFailures: 1,
			wantIgnored:  3,
		},
		"ignored failures carried over by a counted failure": {
			job:          ixJob(1, 4, backoffLimitPerIndex(1), ignoreDisruption),
			pod:          ixPod("a", 3, failed, failureCount(1), ixIgnoredCount(2)),
			wantFailures: 2,
			wantIgnored:  2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var pods []*corev1.Pod
			if tc.pod != nil {
				pods = append(pods, tc.pod)
			}
			failures, ignored := ixCtx(tc.job, pods).newIndexFailureCounts(wrapPod(tc.pod))
			if failures != tc.wantFailures || ignored != tc.wantIgnored {
				t.Errorf("newIndexFailureCounts = (%d, %d), want (%d, %d)", failures, ignored, tc.wantFailures, tc.wantIgnored)
			}
		})
	}
}

func TestIndexFailureCountAnnotationParsing(t *testing.T) {
	cases := map[string]struct {
		value        *string
		ignored      string
		wantCount    int32
		wantAbsolute int32
	}{
		"no annotation":           {},
		"valid value":             {value: ptr.To("2"), wantCount: 2, wantAbsolute: 2},
		"valid maxint32 value":    {value: ptr.To(strconv.FormatInt(math.MaxInt32, 10)), wantCount: math.MaxInt32, wantAbsolute: math.MaxInt32},
		"too large value":         {value: ptr.To(strconv.FormatInt(math.MaxInt32+1, 10))},
		"negative value":          {value: ptr.To("-1")},
		"invalid int value":       {value: ptr.To("xyz")},
		"with ignored failures":   {value: ptr.To("2"), ignored: "3", wantCount: 2, wantAbsolute: 5},
		"invalid ignored failure": {value: ptr.To("2"), ignored: "x", wantCount: 2, wantAbsolute: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := &corev1.Pod{}
			if tc.value != nil {
				p.Annotations = map[string]string{batchv1.JobIndexFailureCountAnnotation: *tc.value}
			}
			if tc.ignored != "" {
				if p.Annotations == nil {
					p.Annotations = map[string]string{}
				}
				p.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = tc.ignored
			}
			view := viewOf(p, DefaultTrackingFinalizer)
			if got := view.failures; got != tc.wantCount {
				t.Errorf("failures = %d, want %d", got, tc.wantCount)
			}
			if got := view.absoluteFailures(); got != tc.wantAbsolute {
				t.Errorf("absoluteFailures = %d, want %d", got, tc.wantAbsolute)
			}
		})
	}
}

func TestIntervalsHave(t *testing.T) {
	cases := map[string]struct {
		intervals orderedIntervals
		index     int
		want      bool
	}{
		"empty":         {index: 4},
		"before all":    {index: 1, intervals: orderedIntervals{{2, 4}, {5, 7}}},
		"after all":     {index: 9, intervals: orderedIntervals{{2, 4}, {6, 8}}},
		"in between":    {index: 5, intervals: orderedIntervals{{2, 4}, {6, 8}}},
		"in first":      {index: 2, intervals: orderedIntervals{{2, 4}, {6, 8}}, want: true},
		"in second":     {index: 8, intervals: orderedIntervals{{2, 4}, {6, 8}}, want: true},
		"inside middle": {index: 13, intervals: orderedIntervals{{0, 0}, {2, 4}, {10, 20}, {30, 31}}, want: true},
		"single index":  {index: 0, intervals: orderedIntervals{{0, 0}}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.intervals.has(tc.index); got != tc.want {
				t.Errorf("has(%d) = %v, want %v", tc.index, got, tc.want)
			}
		})
	}
	t.Run("nil intervals have nothing", func(t *testing.T) {
		var oi *orderedIntervals
		if oi.has(0) {
			t.Errorf("nil intervals have 0")
		}
	})
}

func TestIntervalsString(t *testing.T) {
	cases := map[string]struct {
		intervals orderedIntervals
		want      string
	}{
		"empty":                           {want: ""},
		"single index":                    {intervals: orderedIntervals{{3, 3}}, want: "3"},
		"two adjacent indexes use commas": {intervals: orderedIntervals{{3, 4}}, want: "3,4"},
		"range":                           {intervals: orderedIntervals{{0, 2}}, want: "0-2"},
		"mixed":                           {intervals: orderedIntervals{{1, 1}, {3, 5}, {7, 8}, {10, 20}}, want: "1,3-5,7,8,10-20"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.intervals.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseIndexes(t *testing.T) {
	cases := map[string]struct {
		in          string
		completions int
		want        orderedIntervals
		wantTotal   int
	}{
		"empty":                          {in: "", completions: 5},
		"single":                         {in: "3", completions: 5, want: orderedIntervals{{3, 3}}, wantTotal: 1},
		"round trip":                     {in: "1,3-5,7,8", completions: 10, want: orderedIntervals{{1, 1}, {3, 5}, {7, 8}}, wantTotal: 6},
		"adjacent parts merged":          {in: "1,2,3-4,5", completions: 10, want: orderedIntervals{{1, 5}}, wantTotal: 5},
		"intervals beyond completions":   {in: "0-5,8-10", completions: 8, want: orderedIntervals{{0, 5}}, wantTotal: 6},
		"interval cut at completions":    {in: "0-5,8-10", completions: 10, want: orderedIntervals{{0, 5}, {8, 9}}, wantTotal: 8},
		"malformed parts skipped":        {in: "0,1-foo,bar,3", completions: 4, want: orderedIntervals{{0, 0}, {3, 3}}, wantTotal: 2},
		"malformed first limit skipped":  {in: "x-3,5", completions: 6, want: orderedIntervals{{5, 5}}, wantTotal: 1},
		"negative index skipped":         {in: "-1,2", completions: 4, want: orderedIntervals{{2, 2}}, wantTotal: 1},
		"extra limits ignored":           {in: "1-2-3", completions: 6, want: orderedIntervals{{1, 2}}, wantTotal: 2},
		"spaces make a part malformed":   {in: "1, 3", completions: 6, want: orderedIntervals{{1, 1}}, wantTotal: 1},
		"everything beyond completions":  {in: "7-9", completions: 3},
		"zero completions parse nothing": {in: "0", completions: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := parseIndexes(tc.in, tc.completions)
			if !ixSameIntervals(got, tc.want) {
				t.Errorf("parseIndexes(%q, %d) = %v, want %v", tc.in, tc.completions, got, tc.want)
			}
			if got.total() != tc.wantTotal {
				t.Errorf("total = %d, want %d", got.total(), tc.wantTotal)
			}
		})
	}
}

func TestIntervalsMerge(t *testing.T) {
	cases := map[string]struct {
		a, b orderedIntervals
		want orderedIntervals
	}{
		"both empty":         {},
		"into empty":         {b: orderedIntervals{{1, 2}}, want: orderedIntervals{{1, 2}}},
		"disjoint":           {a: orderedIntervals{{0, 1}, {8, 9}}, b: orderedIntervals{{4, 5}}, want: orderedIntervals{{0, 1}, {4, 5}, {8, 9}}},
		"adjacent joined":    {a: orderedIntervals{{0, 1}}, b: orderedIntervals{{2, 3}}, want: orderedIntervals{{0, 3}}},
		"overlapping":        {a: orderedIntervals{{0, 4}, {7, 9}}, b: orderedIntervals{{3, 8}}, want: orderedIntervals{{0, 9}}},
		"contained":          {a: orderedIntervals{{0, 9}}, b: orderedIntervals{{2, 3}, {5, 5}}, want: orderedIntervals{{0, 9}}},
		"same first indexes": {a: orderedIntervals{{2, 3}}, b: orderedIntervals{{2, 6}}, want: orderedIntervals{{2, 6}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.a.merge(tc.b); !ixSameIntervals(got, tc.want) {
				t.Errorf("merge = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("withOrderedIndexes", func(t *testing.T) {
		got := orderedIntervals{{3, 4}}.withOrderedIndexes([]int{0, 2, 5, 9})
		if want := (orderedIntervals{{0, 0}, {2, 5}, {9, 9}}); !ixSameIntervals(got, want) {
			t.Errorf("withOrderedIndexes = %v, want %v", got, want)
		}
	})
}

func TestFirstPendingIndexes(t *testing.T) {
	cases := map[string]struct {
		cnt              int
		completions      int
		activePods       []ixIndexPhase
		terminatingPods  []ixIndexPhase
		onlyReplaceFail  bool
		succeededIndexes orderedIntervals
		failedIndexes    *orderedIntervals
		want             []int
	}{
		"zero count":                   {cnt: 0, completions: 3},
		"cnt greater than completions": {cnt: 5, completions: 3, want: []int{0, 1, 2}},
		"cnt less than completions":    {cnt: 2, completions: 5, want: []int{0, 1}},
		"first pods active": {
			activePods: []ixIndexPhase{{"0", corev1.PodRunning}, {"1", corev1.PodPending}},
			cnt:        3, completions: 10,
			want: []int{2, 3, 4},
		},
		"last pods active or succeeded": {
			activePods:       []ixIndexPhase{{"6", corev1.PodPending}},
			succeededIndexes: orderedIntervals{{4, 5}},
			cnt:              6, completions: 6,
			want: []int{0, 1, 2, 3},
		},
		"mixed": {
			activePods: []ixIndexPhase{
				{"3", corev1.PodPending}, {"5", corev1.PodRunning}, {"8", corev1.PodPending},
				{ixNoIndex, corev1.PodRunning}, {"-3", corev1.PodRunning},
			},
			succeededIndexes: orderedIntervals{{2, 4}, {9, 9}},
			cnt:              5, completions: 20,
			want: []int{0, 1, 6, 7, 10},
		},
		"with failed indexes": {
			activePods:       []ixIndexPhase{{"3", corev1.PodPending}, {"9", corev1.PodPending}},
			succeededIndexes: orderedIntervals{{1, 1}, {5, 5}, {9, 9}},
			failedIndexes:    &orderedIntervals{{2, 2}, {6, 7}},
			cnt:              5, completions: 20,
			want: []int{0, 4, 8, 10, 11},
		},
		"all indexes taken": {
			activePods:       []ixIndexPhase{{"0", corev1.PodRunning}},
			succeededIndexes: orderedIntervals{{1, 1}},
			failedIndexes:    &orderedIntervals{{2, 2}},
			cnt:              3, completions: 3,
		},
		"terminating pods' indexes are pending when terminating pods are replaced": {
			terminatingPods: []ixIndexPhase{{"0", corev1.PodRunning}},
			cnt:             2, completions: 3,
			want: []int{0, 1},
		},
		"terminating pods' indexes are not pending when only failed pods are replaced": {
			terminatingPods: []ixIndexPhase{{"0", corev1.PodRunning}},
			onlyReplaceFail: true,
			cnt:             2, completions: 3,
			want: []int{1, 2},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var opts []jobOpt
			if tc.onlyReplaceFail {
				opts = append(opts, replacementPolicy(batchv1.Failed))
			}
			active := ixHollowPods(tc.activePods)
			terminating := ixHollowPods(tc.terminatingPods)
			for i, p := range terminating {
				p.Name = fmt.Sprintf("t-%d", i)
				p.DeletionTimestamp = timePtr(now)
			}
			c := ixCtx(newJob(1, int32(tc.completions), append(opts, indexed())...), append(active, terminating...))
			c.completions = tc.completions
			c.activePods = wrapPods(active)
			c.succeededIndexes = tc.succeededIndexes
			c.failedIndexes = tc.failedIndexes
			got := c.firstPendingIndexes(tc.cnt)
			if len(got) != 0 || len(tc.want) != 0 {
				if !slices.Equal(got, tc.want) {
					t.Errorf("firstPendingIndexes(%d) = %v, want %v", tc.cnt, got, tc.want)
				}
			}
		})
	}
}

func TestDuplicatedIndexPodsForRemoval(t *testing.T) {
	cases := map[string]struct {
		pods        []ixIndexPhase
		completions int
		wantRm      []ixIndexPhase
		wantLeft    []ixIndexPhase
	}{
		"all unique": {
			pods: []ixIndexPhase{
				{ixNoIndex, corev1.PodPending}, {"2", corev1.PodPending}, {"5", corev1.PodRunning}, {"6", corev1.PodRunning},
			},
			wantRm:      []ixIndexPhase{{ixNoIndex, corev1.PodPending}, {"6", corev1.PodRunning}},
			wantLeft:    []ixIndexPhase{{"2", corev1.PodPending}, {"5", corev1.PodRunning}},
			completions: 6,
		},
		"all with index": {
			pods: []ixIndexPhase{
				{"5", corev1.PodPending}, {"0", corev1.PodRunning}, {"3", corev1.PodPending}, {"0", corev1.PodRunning},
				{"3", corev1.PodRunning}, {"0", corev1.PodPending}, {"6", corev1.PodRunning}, {"6", corev1.PodPending},
			},
			wantRm: []ixIndexPhase{
				{"0", corev1.PodPending}, {"0", corev1.PodRunning}, {"3", corev1.PodPending}, {"6", corev1.PodRunning}, {"6", corev1.PodPending},
			},
			wantLeft:    []ixIndexPhase{{"0", corev1.PodRunning}, {"3", corev1.PodRunning}, {"5", corev1.PodPending}},
			completions: 6,
		},
		"mixed": {
			pods: []ixIndexPhase{
				{ixNoIndex, corev1.PodPending}, {"invalid", corev1.PodRunning}, {"-2", corev1.PodRunning},
				{"0", corev1.PodPending}, {"1", corev1.PodPending}, {"1", corev1.PodPending}, {"1", corev1.PodRunning},
			},
			wantRm: []ixIndexPhase{
				{ixNoIndex, corev1.PodPending}, {"invalid", corev1.PodRunning}, {"-2", corev1.PodRunning},
				{"1", corev1.PodPending}, {"1", corev1.PodPending},
			},
			wantLeft:    []ixIndexPhase{{"0", corev1.PodPending}, {"1", corev1.PodRunning}},
			completions: 6,
		},
		"no pods": {completions: 3},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rmWrapped, leftWrapped := duplicatedIndexPodsForRemoval(wrapPods(ixHollowPods(tc.pods)), tc.completions)
			rm, left := unwrapPods(rmWrapped), unwrapPods(leftWrapped)
			if got := ixToIndexPhases(rm); !slices.Equal(got, tc.wantRm) && (len(got) != 0 || len(tc.wantRm) != 0) {
				t.Errorf("pods for removal %v, want %v", got, tc.wantRm)
			}
			if got := ixToIndexPhases(left); !slices.Equal(got, tc.wantLeft) && (len(got) != 0 || len(tc.wantLeft) != 0) {
				t.Errorf("pods left %v, want %v", got, tc.wantLeft)
			}
		})
	}
}

func TestPodGenerateNameWithIndex(t *testing.T) {
	cases := map[string]struct {
		jobName string
		index   int
		want    string
	}{
		"short job name": {
			jobName: "indexed-job", index: 1,
			want: "indexed-job-1-",
		},
		"job name exceeds the generated name limit": {
			jobName: "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooo", index: 1,
			want: "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhh-1-",
		},
		"job name with index suffix exceeds the generated name limit": {
			jobName: "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhoo", index: 1,
			want: "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhh-1-",
		},
		"job name with index suffix exactly at the limit": {
			jobName: strings.Repeat("a", 55), index: 1,
			want: strings.Repeat("a", 55) + "-1-",
		},
		"long index keeps all its digits": {
			jobName: strings.Repeat("b", 60), index: 123456,
			want: strings.Repeat("b", 50) + "-123456-",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := podGenerateNameWithIndex(tc.jobName, tc.index)
			if got != tc.want {
				t.Errorf("podGenerateNameWithIndex = %q, want %q", got, tc.want)
			}
			if len(got) > maxGeneratedNameLength {
				t.Errorf("generateName %q longer than %d", got, maxGeneratedNameLength)
			}
		})
	}
}

func TestIndexesReadyForCreation(t *testing.T) {
	failedAt := func(count int, t time.Time) *corev1.Pod {
		return ixPod("x", 0, failed, failureCount(count), ixDeletedAt(t))
	}
	cases := map[string]struct {
		indexes  []int
		delayed  map[int]*corev1.Pod
		want     []int
		wantWait time.Duration
	}{
		"no index to create": {},
		"simple index creation": {
			indexes: []int{1, 3},
			want:    []int{1, 3},
		},
		"subset of indexes can be recreated now": {
			indexes: []int{1, 3},
			delayed: map[int]*corev1.Pod{1: failedAt(0, now)},
			want:    []int{3},
		},
		"subset of indexes can be recreated now as the pods failed long ago": {
			indexes: []int{1, 3},
			delayed: map[int]*corev1.Pod{1: failedAt(0, now), 3: failedAt(0, now.Add(-DefaultPodFailureBackoff))},
			want:    []int{3},
		},
		"no index can be recreated now: wait the shortest backoff": {
			indexes:  []int{1, 2, 3},
			delayed:  map[int]*corev1.Pod{1: failedAt(1, now), 2: failedAt(0, now), 3: failedAt(2, now)},
			wantWait: DefaultPodFailureBackoff,
		},
		"no index can be recreated now: 1s already passed": {
			indexes: []int{1, 2, 3},
			delayed: map[int]*corev1.Pod{
				1: failedAt(1, now.Add(-time.Second)),
				2: failedAt(0, now.Add(-time.Second)),
				3: failedAt(2, now.Add(-time.Second)),
			},
			wantWait: DefaultPodFailureBackoff - time.Second,
		},
		"backoff doubles with each failure of the index": {
			indexes:  []int{0},
			delayed:  map[int]*corev1.Pod{0: failedAt(3, now)},
			wantWait: 80 * time.Second,
		},
		"backoff is capped": {
			indexes:  []int{0},
			delayed:  map[int]*corev1.Pod{0: failedAt(20, now)},
			wantWait: MaxPodFailureBackoff,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := ixCtx(ixJob(3, 4, backoffLimitPerIndex(30)), nil)
			c.podsWithDelayedDeletionPerIndex = map[int]*pod{}
			for ix, p := range tc.delayed {
				c.podsWithDelayedDeletionPerIndex[ix] = wrapPod(p)
			}
			got, wait := c.indexesReadyForCreation(tc.indexes)
			if !slices.Equal(got, tc.want) && (len(got) != 0 || len(tc.want) != 0) {
				t.Errorf("indexes ready %v, want %v", got, tc.want)
			}
			if wait != tc.wantWait {
				t.Errorf("wait %v, want %v", wait, tc.wantWait)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Syncs with backoffLimitPerIndex.

func TestSyncWithBackoffLimitPerIndex(t *testing.T) {
	longAgo := now.Add(-time.Hour)
	failIndexOn3 := failurePolicy(ixExitRule(batchv1.PodFailurePolicyActionFailIndex, 3))
	cases := map[string]ixSyncCase{
		"successful job after a single failure within index": {
			job: ixJob(2, 2, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{
				ixPod("a1", 0, failed, failureCount(0)),
				ixPod("a2", 0, succeeded, failureCount(1)),
				ixPod("b", 1, succeeded, failureCount(0)),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 1, Succeeded: 2, Terminating: ptr.To[int32](0),
				CompletedIndexes: "0,1", FailedIndexes: ptr.To(""),
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
					ixCond(batchv1.JobComplete, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
				},
			},
			wantFinalizersGone: []string{"a1", "a2", "b"},
			wantEvents:         []string{"Normal Completed"},
		},
		"single failed pod keeps its finalizer until its replacement is created": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{ixPod("a", 0, failed, failureCount(0))},
			wantStatus: batchv1.JobStatus{
				Active: 2, Terminating: ptr.To[int32](0), FailedIndexes: ptr.To(""),
			},
			wantCreated: []int{0, 1},
			wantCreatedAnnotations: map[int]map[string]string{
				0: ixFailureAnnotations(0, 1),
				1: ixFailureAnnotations(1, 0),
			},
		},
		"single failed pod replaced already loses its finalizer": {
			job: ixJob(2, 2, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, failureCount(0)),
				ixPod("b", 0, pending, failureCount(1)),
			},
			wantStatus: batchv1.JobStatus{
				Active: 2, Failed: 1, Terminating: ptr.To[int32](0), FailedIndexes: ptr.To(""),
			},
			wantCreated:        []int{1},
			wantFinalizersGone: []string{"a"},
		},
		"replacement delayed by per-index backoff while another index runs": {
			job: ixJob(2, 2, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{
				ixPod("a", 0, running, failureCount(0)),
				ixPod("b", 1, failed, failureCount(0), exitCode("x", 1, now)),
			},
			wantStatus: batchv1.JobStatus{
				Active: 1, Terminating: ptr.To[int32](0), FailedIndexes: ptr.To(""),
			},
			wantRequeues: []time.Duration{DefaultPodFailureBackoff},
		},
		"per-index backoff counts the time since the last failure of the index": {
			job:          ixJob(1, 1, backoffLimitPerIndex(3)),
			pods:         []*corev1.Pod{ixPod("a", 0, failed, failureCount(1), exitCode("x", 1, now.Add(-5*time.Second)))},
			wantStatus:   batchv1.JobStatus{Terminating: ptr.To[int32](0), FailedIndexes: ptr.To("")},
			wantRequeues: []time.Duration{15 * time.Second},
		},
		"per-index backoff counts ignored failures": {
			job:          ixJob(1, 1, backoffLimitPerIndex(3)),
			pods:         []*corev1.Pod{ixPod("a", 0, failed, failureCount(0), ixIgnoredCount(2), exitCode("x", 1, now.Add(-10*time.Second)))},
			wantStatus:   batchv1.JobStatus{Terminating: ptr.To[int32](0), FailedIndexes: ptr.To("")},
			wantRequeues: []time.Duration{30 * time.Second},
		},
		"per-index backoff is capped at ten minutes": {
			job:          ixJob(1, 1, backoffLimitPerIndex(30)),
			pods:         []*corev1.Pod{ixPod("a", 0, failed, failureCount(12), exitCode("x", 1, now))},
			wantStatus:   batchv1.JobStatus{Terminating: ptr.To[int32](0), FailedIndexes: ptr.To("")},
			wantRequeues: []time.Duration{MaxPodFailureBackoff},
		},
		"per-index requeue waits at least the batch period": {
			job:          ixJob(1, 1, backoffLimitPerIndex(3)),
			pods:         []*corev1.Pod{ixPod("a", 0, failed, failureCount(0), exitCode("x", 1, now.Add(-9500*time.Millisecond)))},
			wantStatus:   batchv1.JobStatus{Terminating: ptr.To[int32](0), FailedIndexes: ptr.To("")},
			wantRequeues: []time.Duration{SyncJobBatchPeriod},
		},
		"failure finished in the future extends the per-index backoff": {
			job:          ixJob(1, 1, backoffLimitPerIndex(3)),
			pods:         []*corev1.Pod{ixPod("a", 0, failed, failureCount(0), exitCode("x", 1, now.Add(5*time.Second)))},
			wantStatus:   batchv1.JobStatus{Terminating: ptr.To[int32](0), FailedIndexes: ptr.To("")},
			wantRequeues: []time.Duration{15 * time.Second},
		},
		"only indexes past their backoff are recreated, without requeue": {
			job: ixJob(2, 2, backoffLimitPerIndex(3)),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, failureCount(0), exitCode("x", 1, now)),
				ixPod("b", 1, failed, failureCount(0), exitCode("x", 1, longAgo)),
			},
			// b stays the pod awaiting its replacement for the whole sync.
			wantStatus: batchv1.JobStatus{
				Active: 1, Terminating: ptr.To[int32](0), FailedIndexes: ptr.To(""),
			},
			wantCreated:            []int{1},
			wantCreatedAnnotations: map[int]map[string]string{1: ixFailureAnnotations(1, 1)},
		},
		"the lowest pending index waiting for its backoff holds back higher free indexes": {
			job: ixJob(1, 3, backoffLimitPerIndex(3)),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, failureCount(0), exitCode("x", 1, now)),
			},
			wantStatus:   batchv1.JobStatus{Terminating: ptr.To[int32](0), FailedIndexes: ptr.To("")},
			wantRequeues: []time.Duration{DefaultPodFailureBackoff},
		},
		"global pod failure backoff is not used with backoffLimitPerIndex": {
			job:  ixJob(1, 1, backoffLimitPerIndex(3)),
			pods: []*corev1.Pod{ixPod("a", 0, failed, failureCount(0), exitCode("x", 1, longAgo))},
			opts: []syncOpt{withBackoff(6, now)},
			wantStatus: batchv1.JobStatus{
				Active: 1, Terminating: ptr.To[int32](0), FailedIndexes: ptr.To(""),
			},
			wantCreated:            []int{0},
			wantCreatedAnnotations: map[int]map[string]string{0: ixFailureAnnotations(0, 1)},
		},
		"only the last failed pod of an index is kept for its replacement": {
			job: ixJob(1, 1, backoffLimitPerIndex(3)),
			pods: []*corev1.Pod{
				ixPod("a1", 0, failed, failureCount(0), exitCode("x", 1, now.Add(-3*time.Minute))),
				ixPod("a2", 0, failed, failureCount(1), exitCode("x", 1, now.Add(-2*time.Minute))),
			},
			wantStatus: batchv1.JobStatus{
				Active: 1, Failed: 1, Terminating: ptr.To[int32](0), FailedIndexes: ptr.To(""),
			},
			wantCreated:            []int{0},
			wantCreatedAnnotations: map[int]map[string]string{0: ixFailureAnnotations(0, 2)},
			wantFinalizersGone:     []string{"a1"},
		},
		"tampered failure count restarts at one": {
			job:  ixJob(1, 1, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{ixPod("a", 0, failed, annotation(batchv1.JobIndexFailureCountAnnotation, "xyz"))},
			wantStatus: batchv1.JobStatus{
				Active: 1, Terminating: ptr.To[int32](0), FailedIndexes: ptr.To(""),
			},
			wantCreated:            []int{0},
			wantCreatedAnnotations: map[int]map[string]string{0: ixFailureAnnotations(0, 1)},
		},
		"new pods of an index carry its metadata": {
			job:         ixJob(1, 1, backoffLimitPerIndex(1)),
			wantStatus:  batchv1.JobStatus{Active: 1, Terminating: ptr.To[int32](0), FailedIndexes: ptr.To("")},
			wantCreated: []int{0},
			wantCreatedAnnotations: map[int]map[string]string{
				0: ixFailureAnnotations(0, 0),
			},
		},
		"single failed index due to exceeding the backoff limit per index, the job continues": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{ixPod("a", 0, failed, failureCount(1))},
			wantStatus: batchv1.JobStatus{
				Active: 1, Failed: 1, FailedIndexes: ptr.To("0"), Terminating: ptr.To[int32](0),
			},
			wantCreated:        []int{1},
			wantFinalizersGone: []string{"a"},
		},
		"backoffLimitPerIndex 0 fails the index at its first failure": {
			job:  ixJob(3, 3, backoffLimitPerIndex(0)),
			pods: []*corev1.Pod{ixPod("a", 1, failed, failureCount(0)), ixPod("b", 0, running, failureCount(0))},
			wantStatus: batchv1.JobStatus{
				Active: 2, Failed: 1, FailedIndexes: ptr.To("1"), Terminating: ptr.To[int32](0),
			},
			wantCreated:        []int{2},
			wantFinalizersGone: []string{"a"},
		},
		"failed indexes from status are not recreated": {
			job: ixJob(3, 3, backoffLimitPerIndex(1), withStatus(func(s *batchv1.JobStatus) {
				s.FailedIndexes = ptr.To("0")
				s.Failed = 2
			})),
			wantStatus: batchv1.JobStatus{
				Active: 2, Failed: 2, FailedIndexes: ptr.To("0"), Terminating: ptr.To[int32](0),
			},
			wantCreated: []int{1, 2},
		},
		"single failed index due to FailIndex action, the job continues": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1), failIndexOn3),
			pods: []*corev1.Pod{ixPod("a", 0, failed, failureCount(0), exitCode("x", 3, longAgo))},
			wantStatus: batchv1.JobStatus{
				Active: 1, Failed: 1, FailedIndexes: ptr.To("0"), Terminating: ptr.To[int32](0),
			},
			wantCreated:        []int{1},
			wantFinalizersGone: []string{"a"},
		},
		"failure not matching the FailIndex rule is retried within the index": {
			job:  ixJob(1, 1, backoffLimitPerIndex(1), failIndexOn3),
			pods: []*corev1.Pod{ixPod("a", 0, failed, failureCount(0), exitCode("x", 4, longAgo))},
			wantStatus: batchv1.JobStatus{
				Active: 1, FailedIndexes: ptr.To(""), Terminating: ptr.To[int32](0),
			},
			wantCreated:            []int{0},
			wantCreatedAnnotations: map[int]map[string]string{0: ixFailureAnnotations(0, 1)},
		},
		"job failed due to FailJob action": {
			job: ixJob(2, 2, backoffLimit(6), backoffLimitPerIndex(1),
				failurePolicy(ixExitRule(batchv1.PodFailurePolicyActionFailJob, 3))),
			pods: []*corev1.Pod{ixPod("a", 0, failed, failureCount(0), exitCode("x", 3, longAgo))},
			wantStatus: batchv1.JobStatus{
				Failed: 1, FailedIndexes: ptr.To(""), Terminating: ptr.To[int32](0),
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, "Container x for pod default/a failed with exit code 3 matching FailJob rule at index 0"),
					ixCond(batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy, "Container x for pod default/a failed with exit code 3 matching FailJob rule at index 0"),
				},
			},
			wantFinalizersGone: []string{"a"},
			wantEvents:         []string{"Warning PodFailurePolicy"},
		},
		"pod failure ignored due to matching Ignore action": {
			job: ixJob(2, 2, backoffLimit(6), backoffLimitPerIndex(1),
				failurePolicy(ixExitRule(batchv1.PodFailurePolicyActionIgnore, 3))),
			pods: []*corev1.Pod{ixPod("a", 0, failed, failureCount(0), exitCode("x", 3, longAgo))},
			wantStatus: batchv1.JobStatus{
				Active: 2, FailedIndexes: ptr.To(""), Terminating: ptr.To[int32](0),
			},
			wantCreated: []int{0, 1},
			wantCreatedAnnotations: map[int]map[string]string{
				0: {
					batchv1.JobCompletionIndexAnnotation:          "0",
					batchv1.JobIndexFailureCountAnnotation:        "0",
					batchv1.JobIndexIgnoredFailureCountAnnotation: "1",
				},
				1: ixFailureAnnotations(1, 0),
			},
		},
		"ignored failures accumulate in the replacement's annotation": {
			job: ixJob(1, 1, backoffLimitPerIndex(2),
				failurePolicy(ixExitRule(batchv1.PodFailurePolicyActionIgnore, 3))),
			pods: []*corev1.Pod{ixPod("a", 0, failed, failureCount(1), ixIgnoredCount(2), exitCode("x", 3, longAgo))},
			wantStatus: batchv1.JobStatus{
				Active: 1, FailedIndexes: ptr.To(""), Terminating: ptr.To[int32](0),
			},
			wantCreated: []int{0},
			wantCreatedAnnotations: map[int]map[string]string{
				0: {
					batchv1.JobCompletionIndexAnnotation:          "0",
					batchv1.JobIndexFailureCountAnnotation:        "1",
					batchv1.JobIndexIgnoredFailureCountAnnotation: "3",
				},
			},
		},
		"counted failure keeps the ignored count of the index": {
			job: ixJob(1, 1, backoffLimitPerIndex(2),
				failurePolicy(ixExitRule(batchv1.PodFailurePolicyActionIgnore, 3))),
			pods: []*corev1.Pod{ixPod("a", 0, failed, failureCount(0), ixIgnoredCount(1), exitCode("x", 1, longAgo))},
			wantStatus: batchv1.JobStatus{
				Active: 1, FailedIndexes: ptr.To(""), Terminating: ptr.To[int32](0),
			},
			wantCreated: []int{0},
			wantCreatedAnnotations: map[int]map[string]string{
				0: {
					batchv1.JobCompletionIndexAnnotation:          "0",
					batchv1.JobIndexFailureCountAnnotation:        "1",
					batchv1.JobIndexIgnoredFailureCountAnnotation: "1",
				},
			},
		},
		"job failed due to exceeding backoffLimit before backoffLimitPerIndex": {
			job: ixJob(2, 2, backoffLimit(1), backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, failureCount(0)),
				ixPod("b", 1, failed, failureCount(0)),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 2, FailedIndexes: ptr.To(""), Terminating: ptr.To[int32](0),
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"),
					ixCond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"),
				},
			},
			wantFinalizersGone: []string{"a", "b"},
			wantEvents:         []string{"Warning BackoffLimitExceeded"},
		},
		"job failed due to failed indexes": {
			job: ixJob(2, 2, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, failureCount(1)),
				ixPod("b", 1, succeeded, failureCount(0)),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 1, Succeeded: 1, Terminating: ptr.To[int32](0),
				FailedIndexes: ptr.To("0"), CompletedIndexes: "1",
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes, "Job has failed indexes"),
					ixCond(batchv1.JobFailed, batchv1.JobReasonFailedIndexes, "Job has failed indexes"),
				},
			},
			wantFinalizersGone: []string{"a", "b"},
			wantEvents:         []string{"Warning FailedIndexes"},
		},
		"job failed when all indexes failed": {
			job: ixJob(2, 2, backoffLimitPerIndex(0)),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, failureCount(0)),
				ixPod("b", 1, failed, failureCount(0)),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 2, Terminating: ptr.To[int32](0), FailedIndexes: ptr.To("0,1"),
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes, "Job has failed indexes"),
					ixCond(batchv1.JobFailed, batchv1.JobReasonFailedIndexes, "Job has failed indexes"),
				},
			},
			wantFinalizersGone: []string{"a", "b"},
			wantEvents:         []string{"Warning FailedIndexes"},
		},
		"job failed due to exceeding max failed indexes": {
			job: ixJob(4, 4, backoffLimitPerIndex(1), maxFailedIndexes(1)),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, failureCount(1)),
				ixPod("b", 1, succeeded, failureCount(0)),
				ixPod("c", 2, failed, failureCount(1)),
				ixPod("d", 3, running, failureCount(0)),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 3, Succeeded: 1, Terminating: ptr.To[int32](1),
				FailedIndexes: ptr.To("0,2"), CompletedIndexes: "1",
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes"),
				},
			},
			wantDeleted:        []string{"d"},
			wantFinalizersGone: []string{"a", "b", "c", "d"},
		},
		"failed indexes within maxFailedIndexes, the job continues": {
			job:  ixJob(3, 3, backoffLimitPerIndex(1), maxFailedIndexes(1)),
			pods: []*corev1.Pod{ixPod("a", 0, failed, failureCount(1))},
			wantStatus: batchv1.JobStatus{
				Active: 2, Failed: 1, FailedIndexes: ptr.To("0"), Terminating: ptr.To[int32](0),
			},
			wantCreated:        []int{1, 2},
			wantFinalizersGone: []string{"a"},
		},
		"FailIndex with maxFailedIndexes 0 fails the job": {
			job: ixJob(2, 2, backoffLimitPerIndex(1), maxFailedIndexes(0), failIndexOn3),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, failureCount(0), exitCode("x", 3, longAgo)),
				ixPod("b", 1, running, failureCount(0)),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 2, Terminating: ptr.To[int32](1), FailedIndexes: ptr.To("0"),
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes"),
				},
			},
			wantDeleted:        []string{"b"},
			wantFinalizersGone: []string{"a", "b"},
		},
		"job with FailureTarget fails once its pods are gone": {
			job: ixJob(4, 4, backoffLimitPerIndex(1), maxFailedIndexes(1), withStatus(func(s *batchv1.JobStatus) {
				s.Failed, s.Succeeded = 3, 1
				s.FailedIndexes, s.CompletedIndexes = ptr.To("0,2"), "1"
				s.Terminating = ptr.To[int32](1)
				s.Conditions = []batchv1.JobCondition{ixCond(batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes")}
			})),
			pods: []*corev1.Pod{ixPod("d", 3, failed, failureCount(0), noFinalizer())},
			wantStatus: batchv1.JobStatus{
				Failed: 3, Succeeded: 1, Terminating: ptr.To[int32](0),
				FailedIndexes: ptr.To("0,2"), CompletedIndexes: "1",
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes"),
					ixCond(batchv1.JobFailed, batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes"),
				},
			},
			wantEvents: []string{"Warning MaxFailedIndexesExceeded"},
		},
		"terminating pod counts as a failure of its index when terminating pods are replaced": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{ixPod("a", 0, running, deleting(), failureCount(1))},
			wantStatus: batchv1.JobStatus{
				Active: 1, Failed: 1, Terminating: ptr.To[int32](1), FailedIndexes: ptr.To("0"),
			},
			wantCreated:        []int{1},
			wantFinalizersGone: []string{"a"},
		},
		"terminating pod holds its index when only failed pods are replaced": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1), replacementPolicy(batchv1.Failed)),
			pods: []*corev1.Pod{ixPod("a", 0, running, deleting(), failureCount(1))},
			wantStatus: batchv1.JobStatus{
				Active: 1, Terminating: ptr.To[int32](1), FailedIndexes: ptr.To(""),
			},
			wantCreated: []int{1},
		},
		"maxFailedIndexes exceeded takes precedence over failed indexes": {
			job: ixJob(2, 2, backoffLimitPerIndex(0), maxFailedIndexes(1)),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, failureCount(0)),
				ixPod("b", 1, failed, failureCount(0)),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 2, Terminating: ptr.To[int32](0), FailedIndexes: ptr.To("0,1"),
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes"),
					ixCond(batchv1.JobFailed, batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes"),
				},
			},
			wantFinalizersGone: []string{"a", "b"},
			wantEvents:         []string{"Warning MaxFailedIndexesExceeded"},
		},
		"unsatisfied expectations keep the failed pod awaiting its replacement": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{ixPod("a", 0, failed, failureCount(0)), ixPod("b", 1, running)},
			opts: []syncOpt{unsatisfiedExpectations()},
			wantStatus: batchv1.JobStatus{
				Active: 1, Terminating: ptr.To[int32](0), FailedIndexes: ptr.To(""),
			},
		},
		"deleted job releases the failed pod awaiting its replacement": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1), deletingJob()),
			pods: []*corev1.Pod{ixPod("a", 0, failed, failureCount(0)), ixPod("b", 1, running)},
			wantStatus: batchv1.JobStatus{
				Active: 1, Failed: 1, Terminating: ptr.To[int32](0), FailedIndexes: ptr.To(""),
			},
			// Every finalizer goes once the Job is deleted; b is not counted.
			wantFinalizersGone: []string{"a", "b"},
		},
		"suspended job deletes its active pods and keeps the failed pod awaiting its replacement": {
			job:  ixJob(2, 2, backoffLimitPerIndex(1), suspended()),
			pods: []*corev1.Pod{ixPod("a", 0, failed, failureCount(0)), ixPod("b", 1, running)},
			wantStatus: batchv1.JobStatus{
				Terminating: ptr.To[int32](1), FailedIndexes: ptr.To(""),
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobSuspended, "JobSuspended", "Job suspended"),
				},
			},
			wantDeleted:          []string{"b"},
			wantDeletesFinalizer: true,
			wantEvents:           []string{"Normal Suspended"},
		},
		"duplicate pods of an index are removed before any creation": {
			job: ixJob(2, 2, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{
				ixPod("a", 0, running, failureCount(0)),
				ixPod("b", 0, pending, failureCount(1)),
			},
			wantStatus: batchv1.JobStatus{
				Active: 1, Terminating: ptr.To[int32](1), FailedIndexes: ptr.To(""),
			},
			wantDeleted:          []string{"b"},
			wantDeletesFinalizer: true,
		},
		"failedIndexes are cleaned when the job has no backoffLimitPerIndex": {
			job: ixJob(3, 3, withStatus(func(s *batchv1.JobStatus) {
				s.FailedIndexes, s.CompletedIndexes, s.Succeeded = ptr.To("0"), "1", 1
			})),
			pods: []*corev1.Pod{ixPod("c", 2, pending, failureCount(1))},
			wantStatus: batchv1.JobStatus{
				Active: 2, Succeeded: 1, Terminating: ptr.To[int32](0), CompletedIndexes: "1",
			},
			wantCreated:            []int{0},
			wantCreatedAnnotations: map[int]map[string]string{0: {batchv1.JobCompletionIndexAnnotation: "0"}},
		},
		"failed indexes are cleared of indexes beyond completions": {
			job: ixJob(2, 2, backoffLimitPerIndex(1), withStatus(func(s *batchv1.JobStatus) {
				s.FailedIndexes = ptr.To("0,5")
			})),
			pods: []*corev1.Pod{ixPod("b", 1, running, failureCount(0))},
			wantStatus: batchv1.JobStatus{
				Active: 1, Terminating: ptr.To[int32](0), FailedIndexes: ptr.To("0"),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { ixRunSyncCase(t, tc) })
	}

	t.Run("created pods carry the index in name, hostname, label and env", func(t *testing.T) {
		plan := runSync(t, ixJob(2, 2, backoffLimitPerIndex(1)), []*corev1.Pod{ixPod("a", 0, failed, failureCount(0))})
		created := ixCreatedPods(plan)
		pod, ok := created[0]
		if !ok {
			t.Fatalf("no pod created for index 0: %+v", summarize(plan))
		}
		if pod.GenerateName != "job-0-" || pod.Hostname != "job-0" {
			t.Errorf("generateName %q hostname %q, want job-0- and job-0", pod.GenerateName, pod.Hostname)
		}
		if pod.Labels[batchv1.JobCompletionIndexAnnotation] != "0" {
			t.Errorf("labels %v", pod.Labels)
		}
		wantEnv := []EnvVarFromField{{Name: "JOB_COMPLETION_INDEX", FieldPath: "metadata.labels['batch.kubernetes.io/job-completion-index']"}}
		if !reflect.DeepEqual(pod.Env, wantEnv) {
			t.Errorf("env %v, want %v", pod.Env, wantEnv)
		}
		if !slices.Contains(pod.Finalizers, DefaultTrackingFinalizer) {
			t.Errorf("finalizers %v", pod.Finalizers)
		}
	})
}

// A pod decoded with the annotations a sync reads kept out of its map
// (ViewWith) is viewed as the same pod with them in its map (View).
func TestViewWithIsView(t *testing.T) {
	for _, annotations := range []map[string]string{
		nil,
		{batchv1.JobCompletionIndexAnnotation: "3"},
		{batchv1.JobCompletionIndexAnnotation: "7", batchv1.JobIndexFailureCountAnnotation: "2", batchv1.JobIndexIgnoredFailureCountAnnotation: "1", "other": "x"},
		{batchv1.JobCompletionIndexAnnotation: "-1", batchv1.JobIndexFailureCountAnnotation: "x", batchv1.JobIndexIgnoredFailureCountAnnotation: "99999999999"},
	} {
		p := newPod("a", failed, deleting())
		p.Annotations = annotations
		without := p.DeepCopy()
		for _, k := range AnnotationKeys {
			delete(without.Annotations, k)
		}
		got := ViewWith(without, "", AnnotationsOf(p)).view
		want := View(p, "").view
		got.Pod, want.Pod = nil, nil
		if got != want {
			t.Errorf("annotations %v: ViewWith %+v, View %+v", annotations, got, want)
		}
	}
}
