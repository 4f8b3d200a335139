package engine

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// unknownCompletionIndex marks a pod without a valid completion index.
const unknownCompletionIndex = -1

// completionIndex reads the completion index annotation of a pod.
func completionIndex(p *corev1.Pod) int {
	v, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]
	if !ok {
		return unknownCompletionIndex
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		return unknownCompletionIndex
	}
	return i
}

// annotationInt32 reads a non-negative int32 annotation; anything else is 0,
// as the reference treats a missing or tampered failure count.
func annotationInt32(p *corev1.Pod, key string) int32 {
	v, ok := p.Annotations[key]
	if !ok {
		return 0
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 || i > math.MaxInt32 {
		return 0
	}
	return int32(i)
}

// indexFailureCount is the failures counted against a pod's index before it.
func indexFailureCount(p *corev1.Pod) int32 {
	return annotationInt32(p, batchv1.JobIndexFailureCountAnnotation)
}

// indexAbsoluteFailureCount adds the failures ignored by the pod failure
// policy.
func indexAbsoluteFailureCount(p *corev1.Pod) int32 {
	return indexFailureCount(p) + annotationInt32(p, batchv1.JobIndexIgnoredFailureCountAnnotation)
}

// isPodActive: neither terminal nor being deleted.
func isPodActive(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil
}

// isPodTerminating: being deleted and not terminal yet.
func isPodTerminating(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp != nil
}

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

func filterPods(pods []*corev1.Pod, keep func(*corev1.Pod) bool) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

func countPods(pods []*corev1.Pod, match func(*corev1.Pod) bool) int32 {
	var n int32
	for _, p := range pods {
		if match(p) {
			n++
		}
	}
	return n
}

// indexesOf returns the sorted distinct valid completion indexes of pods.
func indexesOf(pods []*corev1.Pod) []int {
	var out []int
	for _, p := range pods {
		if ix := completionIndex(p); ix != unknownCompletionIndex {
			out = append(out, ix)
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
	finish := latestFinishTime(nil, p.Status.ContainerStatuses, nil)
	// Sidecars finish after the regular containers: their time counts even
	// when a regular container never ran.
	sidecars := map[string]bool{}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
		}
	}
	return latestFinishTime(finish, p.Status.InitContainerStatuses, sidecars)
}

// latestFinishTime folds the finish times of the statuses (only those named
// in only, when set) into prev; it is nil as soon as one of them has not
// finished.
func latestFinishTime(prev *time.Time, statuses []corev1.ContainerStatus, only map[string]bool) *time.Time {
	finish := prev
	for i := range statuses {
		s := &statuses[i]
		if only != nil && !only[s.Name] {
			continue
		}
		if s.State.Terminated == nil || s.State.Terminated.FinishedAt.IsZero() {
			return nil
		}
		if t := s.State.Terminated.FinishedAt.Time; finish == nil || finish.Before(t) {
			finish = &t
		}
	}
	return finish
}

func sortByFinishedTime(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool { return finishedTime(pods[i]).Before(finishedTime(pods[j])) })
}

var podPhaseOrdinal = map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}

// lessActive orders pods by how cheap they are to remove, as the reference's
// controller.ActivePods does: unscheduled before scheduled, Pending before
// Unknown before Running, not ready before ready, ready more recently first,
// more container restarts first, newer first.
func lessActive(a, b *corev1.Pod) bool {
	if a.Spec.NodeName != b.Spec.NodeName && (a.Spec.NodeName == "" || b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if pa, pb := podPhaseOrdinal[a.Status.Phase], podPhaseOrdinal[b.Status.Phase]; pa != pb {
		return pa < pb
	}
	readyA, readyB := isPodReady(a), isPodReady(b)
	if readyA != readyB {
		return !readyA
	}
	if readyA && readyB {
		ta, tb := readyTime(a), readyTime(b)
		if !ta.Equal(tb) {
			return afterOrZero(ta, tb)
		}
	}
	regularA, sidecarA := maxContainerRestarts(a)
	regularB, sidecarB := maxContainerRestarts(b)
	if regularA != regularB {
		return regularA > regularB
	}
	if sidecarA != sidecarB {
		return sidecarA > sidecarB
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return afterOrZero(a.CreationTimestamp.Time, b.CreationTimestamp.Time)
	}
	return false
}

func sortActive(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool { return lessActive(pods[i], pods[j]) })
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

func maxContainerRestarts(p *corev1.Pod) (regular, sidecar int32) {
	for _, c := range p.Status.ContainerStatuses {
		regular = max(regular, c.RestartCount)
	}
	sidecars := map[string]bool{}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
		}
	}
	for _, c := range p.Status.InitContainerStatuses {
		if sidecars[c.Name] {
			sidecar = max(sidecar, c.RestartCount)
		}
	}
	return regular, sidecar
}

// sortByCompletionIndex orders pods by index, keeping the order of equals.
func sortByCompletionIndex(pods []*corev1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool { return completionIndex(pods[i]) < completionIndex(pods[j]) })
}

func timePtr(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
