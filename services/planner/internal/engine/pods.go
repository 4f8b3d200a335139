package engine

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// unknownCompletionIndex marks a pod without a valid completion index.
const unknownCompletionIndex = -1

// pod is a pod of the Job with what a sync reads of it over and over,
// worked out once and kept together: its completion index and its index's
// failure counts (its annotations), whether it carries the tracking
// finalizer, its phase, deletion and readiness. With large Jobs, reading
// these from a compact array instead of the pod objects saves most cache
// misses.
type pod struct {
	*corev1.Pod
	index int
	// failures and ignoredFailures are the failures counted against the
	// pod's index before it, and those the pod failure policy ignored.
	failures, ignoredFailures int32
	tracked                   bool
	phase                     corev1.PodPhase
	deleting                  bool
	ready                     bool
}

// PodAnnotations are the values of the annotations a sync reads of a pod;
// empty when absent (an empty value reads as an absent one).
type PodAnnotations struct {
	CompletionIndex, FailureCount, IgnoredFailureCount string
}

// AnnotationKeys are the annotations PodAnnotations holds, in its order.
var AnnotationKeys = [3]string{batchv1.JobCompletionIndexAnnotation, batchv1.JobIndexFailureCountAnnotation, batchv1.JobIndexIgnoredFailureCountAnnotation}

// AnnotationsOf are the annotations a sync reads of p, from its map.
func AnnotationsOf(p *corev1.Pod) PodAnnotations {
	return PodAnnotations{
		CompletionIndex:     p.Annotations[batchv1.JobCompletionIndexAnnotation],
		FailureCount:        p.Annotations[batchv1.JobIndexFailureCountAnnotation],
		IgnoredFailureCount: p.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation],
	}
}

func viewOf(p *corev1.Pod, finalizer string) pod {
	return viewWith(p, finalizer, AnnotationsOf(p))
}

// viewWith is the view of p whose annotations a sync reads are a.
func viewWith(p *corev1.Pod, finalizer string, a PodAnnotations) pod {
	return pod{
		Pod:             p,
		index:           completionIndex(a.CompletionIndex),
		failures:        parseFailureCount(a.FailureCount),
		ignoredFailures: parseFailureCount(a.IgnoredFailureCount),
		tracked:         slices.Contains(p.Finalizers, finalizer),
		phase:           p.Status.Phase,
		deleting:        p.DeletionTimestamp != nil,
		ready:           isPodReady(p),
	}
}

func (p *pod) terminal() bool {
	return p.phase == corev1.PodSucceeded || p.phase == corev1.PodFailed
}

// active: neither terminal nor being deleted.
func (p *pod) active() bool { return !p.terminal() && !p.deleting }

// terminating: being deleted and not terminal yet.
func (p *pod) terminating() bool { return !p.terminal() && p.deleting }

func (p *pod) isReady() bool { return p.ready }

// completionIndex reads a completion index annotation's value; a missing
// or invalid one is unknownCompletionIndex.
func completionIndex(v string) int {
	if v == "" { // absent: no parse, whose error allocates
		return unknownCompletionIndex
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		return unknownCompletionIndex
	}
	return i
}

// parseFailureCount reads a failure count annotation's value: a non-negative
// int32; anything else is 0, as the reference treats a missing or tampered
// failure count.
func parseFailureCount(v string) int32 {
	if v == "" { // absent: no parse, whose error allocates
		return 0
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 || i > math.MaxInt32 {
		return 0
	}
	return int32(i)
}

// absoluteFailures adds the failures the pod failure policy ignored to
// those counted against the pod's index.
func (p *pod) absoluteFailures() int32 { return p.failures + p.ignoredFailures }

// isPodReady: the Ready condition is True.
func isPodReady(p *corev1.Pod) bool {
	c := podCondition(p, corev1.PodReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func filterPods(pods []*pod, keep func(*pod) bool) []*pod {
	var out []*pod
	for _, p := range pods {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

func countPods(pods []*pod, match func(*pod) bool) int32 {
	var n int32
	for _, p := range pods {
		if match(p) {
			n++
		}
	}
	return n
}

// indexesOf returns the sorted distinct valid completion indexes of pods.
func indexesOf(pods []*pod) []int {
	var out []int
	for _, p := range pods {
		if p.index != unknownCompletionIndex {
			out = append(out, p.index)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// finishedTime estimates when a pod stopped: the latest container finish
// (sidecars included), else a Ready=False transition, else the deletion time
// minus its grace period, else its creation.
func finishedTime(p *corev1.Pod) time.Time {
	if t := finishTimeFromContainers(p); t != nil {
		return *t
	}
	if c := podCondition(p, corev1.PodReady); c != nil && c.Status == corev1.ConditionFalse && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time
	}
	if p.DeletionTimestamp != nil {
		var grace int64
		if p.DeletionGracePeriodSeconds != nil {
			grace = *p.DeletionGracePeriodSeconds
		}
		return p.DeletionTimestamp.Add(-time.Duration(grace) * time.Second)
	}
	return p.CreationTimestamp.Time
}

func finishTimeFromContainers(p *corev1.Pod) *time.Time {
	finish, ok := latestFinishTime(time.Time{}, false, p.Status.ContainerStatuses, nil)
	// Sidecars finish after the regular containers: their time counts even
	// when a regular container never ran.
	finish, ok = latestFinishTime(finish, ok, p.Status.InitContainerStatuses, sidecarNames(p))
	if !ok {
		return nil
	}
	return &finish
}

// latestFinishTime folds the finish times of the statuses (only those named
// in only, when set) into prev (ok says whether there is one); there is none
// as soon as one of them has not finished.
func latestFinishTime(prev time.Time, ok bool, statuses []corev1.ContainerStatus, only map[string]bool) (time.Time, bool) {
	for i := range statuses {
		s := &statuses[i]
		if only != nil && !only[s.Name] {
			continue
		}
		if s.State.Terminated == nil || s.State.Terminated.FinishedAt.IsZero() {
			return time.Time{}, false
		}
		if t := s.State.Terminated.FinishedAt.Time; !ok || prev.Before(t) {
			prev, ok = t, true
		}
	}
	return prev, ok
}

// sortByFinishedTime orders pods by finish time, keeping the order of
// equals; finish times are computed once.
func sortByFinishedTime(pods []*pod) {
	sortByKey(pods, func(p *pod) time.Time { return finishedTime(p.Pod) }, func(a, b time.Time) int { return a.Compare(b) })
}

// sortByKey sorts pods by a key computed once per pod, keeping the order of
// equal keys. Ties are broken by position, so an unstable O(n log n) sort
// gives the result of a stable one.
func sortByKey[K any](pods []*pod, key func(*pod) K, compare func(a, b K) int) {
	type keyed struct {
		key K
		pos int
		pod *pod
	}
	ks := make([]keyed, len(pods))
	for i, p := range pods {
		ks[i] = keyed{key(p), i, p}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if c := compare(a.key, b.key); c != 0 {
			return c
		}
		return a.pos - b.pos
	})
	for i := range ks {
		pods[i] = ks[i].pod
	}
}

var podPhaseOrdinal = map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}

// sortActive orders pods by how cheap they are to remove, as the reference's
// controller.ActivePods does: unscheduled before scheduled, Pending before
// Unknown before Running, not ready before ready, ready more recently first,
// more container restarts first, newer first. Keys are computed once per pod.
func sortActive(pods []*pod) {
	sortByKey(pods, func(p *pod) activeKey { return newActiveKey(p.Pod) }, func(a, b activeKey) int {
		switch {
		case a.less(&b):
			return -1
		case b.less(&a):
			return 1
		}
		return 0
	})
}

// activeKey holds what sortActive compares of a pod.
type activeKey struct {
	nodeName         string
	phase            int
	ready            bool
	readyTime        time.Time
	regular, sidecar int32
	created          time.Time
}

func newActiveKey(p *corev1.Pod) activeKey {
	k := activeKey{nodeName: p.Spec.NodeName, phase: podPhaseOrdinal[p.Status.Phase], ready: isPodReady(p), created: p.CreationTimestamp.Time}
	if k.ready {
		k.readyTime = readyTime(p)
	}
	k.regular, k.sidecar = maxContainerRestarts(p)
	return k
}

func (a *activeKey) less(b *activeKey) bool {
	if a.nodeName != b.nodeName && (a.nodeName == "" || b.nodeName == "") {
		return a.nodeName == ""
	}
	if a.phase != b.phase {
		return a.phase < b.phase
	}
	if a.ready != b.ready {
		return !a.ready
	}
	if a.ready && b.ready && !a.readyTime.Equal(b.readyTime) {
		return afterOrZero(a.readyTime, b.readyTime)
	}
	if a.regular != b.regular {
		return a.regular > b.regular
	}
	if a.sidecar != b.sidecar {
		return a.sidecar > b.sidecar
	}
	if !a.created.Equal(b.created) {
		return afterOrZero(a.created, b.created)
	}
	return false
}

func readyTime(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// afterOrZero: a zero time sorts first, then later times first.
func afterOrZero(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero()
	}
	return a.After(b)
}

// sidecarNames are the init containers that keep running (restartPolicy
// Always); an empty, non-nil set when there are none.
func sidecarNames(p *corev1.Pod) map[string]bool {
	if len(p.Spec.InitContainers) == 0 {
		return noSidecars
	}
	names := map[string]bool{}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			names[c.Name] = true
		}
	}
	return names
}

var noSidecars = map[string]bool{}

func maxContainerRestarts(p *corev1.Pod) (regular, sidecar int32) {
	for _, c := range p.Status.ContainerStatuses {
		regular = max(regular, c.RestartCount)
	}
	sidecars := sidecarNames(p)
	for _, c := range p.Status.InitContainerStatuses {
		if sidecars[c.Name] {
			sidecar = max(sidecar, c.RestartCount)
		}
	}
	return regular, sidecar
}

// sortByCompletionIndex orders pods by index, keeping the order of equals.
func sortByCompletionIndex(pods []*pod) {
	// Indexes lie mostly within [0, completions), unknown ones at -1: a
	// counting sort, stable as sortByKey is (pods of one index keep their
	// order), so the order is the same, in linear time. Sparse indexes fall
	// back to the comparison sort.
	if len(pods) < 2 {
		return
	}
	lo, hi := pods[0].index, pods[0].index
	for _, p := range pods[1:] {
		lo, hi = min(lo, p.index), max(hi, p.index)
	}
	if hi-lo >= 4*len(pods)+64 || hi-lo < 0 {
		sortByKey(pods, func(p *pod) int { return p.index }, cmp.Compare[int])
		return
	}
	starts := make([]int, hi-lo+2)
	for _, p := range pods {
		starts[p.index-lo+1]++
	}
	for i := 1; i < len(starts); i++ {
		starts[i] += starts[i-1]
	}
	sorted := make([]*pod, len(pods))
	for _, p := range pods {
		sorted[starts[p.index-lo]] = p
		starts[p.index-lo]++
	}
	copy(pods, sorted)
}

func timePtr(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
