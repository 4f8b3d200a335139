package engine

import (
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Numbers at the ends of their types, which PlanSync's callers can send
// (its Jobs come from callers, not from the API server's validation): the
// plan stays one the executor performs and the next request is accepted.

// An index annotation of the largest int sorts last, not first: only the
// pods without a valid index are deleted (the comparison used to subtract,
// overflowing, and deleted every pod).
func TestAnIndexOfTheLargestIntSortsLast(t *testing.T) {
	job := newJob(4, 4, indexed())
	pods := []*corev1.Pod{
		newPod("a", running),
		newPod("b", running, annotation(batchv1.JobCompletionIndexAnnotation, strconv.Itoa(math.MaxInt))),
		newPod("c", running, index(0)),
		newPod("d", running, index(1)),
	}
	o := summarize(runSync(t, job, pods))
	slices.Sort(o.DeletedNames)
	if !slices.Equal(o.DeletedNames, []string{"a", "b"}) {
		t.Errorf("deleted %v, want the pods without a valid index: [a b]", o.DeletedNames)
	}
}

// An active deadline longer than a Duration holds (292 years) is none,
// even for a Job started longer ago than that; the reference's product
// overflows into another deadline, often a negative one.
func TestAnActiveDeadlineBeyondADurationIsNone(t *testing.T) {
	for _, seconds := range []int64{math.MaxInt64/int64(time.Second) + 1, 18_446_744_074, math.MaxInt64} {
		for _, start := range []time.Time{now.Add(-15 * time.Second), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)} {
			job := newJob(1, 1, activeDeadline(seconds), startedAt(start))
			o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", running)}))
			if c := o.conditionOf(batchv1.JobFailureTarget); c != nil || o.Deleted != 0 || len(o.Requeues) != 0 {
				t.Errorf("deadline %ds, started %v: condition %v, deleted %d, requeues %v; want the Job left running, no requeue",
					seconds, start, c, o.Deleted, o.Requeues)
			}
		}
	}
}

// A Job whose start is centuries ahead of now is requeued for its
// deadline, never after a negative delay (which the executor refuses).
func TestAStartCenturiesAheadRequeuesAfterANonNegativeDelay(t *testing.T) {
	job := newJob(1, 1, activeDeadline(1), startedAt(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)))
	o := summarize(runSync(t, job, []*corev1.Pod{newPod("a", running)}))
	if len(o.Requeues) != 1 || o.Requeues[0] < 0 {
		t.Errorf("requeues %v, want one after a delay not negative", o.Requeues)
	}
}

// Counters sent at the largest int32 stay there rather than wrap around to
// a negative count the next request would be refused for.
func TestCountersAtTheirLimitStayThere(t *testing.T) {
	job := newJob(2, 0, withStatus(func(s *batchv1.JobStatus) {
		s.Succeeded, s.Failed = math.MaxInt32, math.MaxInt32
	}))
	job.Spec.Completions = nil
	job.Spec.BackoffLimit = ptr.To(int32(math.MaxInt32))
	pods := []*corev1.Pod{newPod("a", succeeded), newPod("b", failed, createdAt(trLongAgo))}
	p := runSync(t, job, pods, withBackoff(math.MaxInt32, trLongAgo))
	o := summarize(p)
	if o.Status == nil || o.Status.Succeeded != math.MaxInt32 || o.Status.Failed != math.MaxInt32 {
		t.Fatalf("status %+v, want both counters at the largest int32", o.Status)
	}
	for _, a := range p.Actions {
		if w, ok := a.(WriteStatus); ok && w.BackoffRecord != nil && w.BackoffRecord.FailuresAfterLastSuccess < 0 {
			t.Errorf("backoff record %+v wrapped around", w.BackoffRecord)
		}
	}
}

// A reversed interval ("9-0"), which the API server refuses in a status, is
// skipped as the other malformed parts are, not counted as -8 indexes.
func TestAReversedIndexIntervalIsSkipped(t *testing.T) {
	if got := parseIndexes("1,9-0,3-4", 10); !slices.Equal(got, orderedIntervals{{1, 1}, {3, 4}}) {
		t.Errorf("parsed %v, want [{1 1} {3 4}]", got)
	}
	job := newJob(1, 10, indexed(), withStatus(func(s *batchv1.JobStatus) { s.CompletedIndexes = "9-0" }))
	o := summarize(runSync(t, job, nil))
	if o.Status != nil && (o.Status.Succeeded < 0 || o.Status.CompletedIndexes != "") {
		t.Errorf("status succeeded %d, completed %q; want the interval dropped", o.Status.Succeeded, o.Status.CompletedIndexes)
	}
}

// Pod failure backoff at the ends of time: a last failure centuries ahead
// waits the longest (the difference used to wrap around to no wait at
// all), and a limit of centuries doubles without overflowing.
func TestBackoffAtTheEndsOfTime(t *testing.T) {
	ahead := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	if got := (PodFailureBackoff{}).remaining(now, 1, &ahead); got != math.MaxInt64 {
		t.Errorf("a failure centuries ahead: wait %v, want the longest", got)
	}
	b := PodFailureBackoff{Initial: time.Second, Max: 200 * 365 * 24 * time.Hour}
	last := now
	if got := b.remaining(now, math.MaxInt32, &last); got != b.Max {
		t.Errorf("a limit of 200 years: wait %v, want the limit", got)
	}
}
