package engine

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// benchSnapshot is an Indexed Job with n pods in mixed states, as a busy
// Job looks between two syncs: a third counted and gone from the finalizer,
// some succeeded and failed still carrying it, duplicates, pods being
// deleted, running pods ready or not, pending and unscheduled pods.
func benchSnapshot(n int) *Snapshot {
	completions := int32(n + n/10)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "default", UID: "bench-uid"},
		Spec: batchv1.JobSpec{
			Parallelism:          ptr.To(int32(n)),
			Completions:          ptr.To(completions),
			BackoffLimit:         ptr.To[int32](1 << 30),
			CompletionMode:       ptr.To(batchv1.IndexedCompletion),
			Suspend:              ptr.To(false),
			PodReplacementPolicy: ptr.To(batchv1.TerminatingOrFailed),
			Template:             corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever}},
		},
		Status: batchv1.JobStatus{StartTime: timePtr(now.Add(-time.Hour)), CompletedIndexes: fmt.Sprintf("0-%d", n/3), Succeeded: int32(n/3 + 1)},
	}
	pods := make([]*corev1.Pod, 0, n)
	for i := range n {
		ix := n/3 + 1 + i%(n-n/3)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:              fmt.Sprintf("bench-%d-%06d", ix, i),
				Namespace:         "default",
				UID:               types.UID(fmt.Sprintf("uid-%06d", i)),
				Annotations:       map[string]string{batchv1.JobCompletionIndexAnnotation: strconv.Itoa(ix)},
				Finalizers:        []string{DefaultTrackingFinalizer},
				CreationTimestamp: metav1.NewTime(now.Add(-time.Duration(i) * time.Second)),
				OwnerReferences:   []metav1.OwnerReference{{Kind: "Job", Name: "bench", UID: "bench-uid", Controller: ptr.To(true)}},
			},
			Spec:   corev1.PodSpec{NodeName: "node"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		}
		switch i % 10 {
		case 0, 1:
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(now.Add(-time.Minute))}}}}
		case 2:
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.NewTime(now.Add(-time.Hour))}}}}
		case 3:
			p.DeletionTimestamp = timePtr(now.Add(-time.Second))
		case 4:
			p.Status.Phase = corev1.PodPending
			p.Spec.NodeName = ""
		case 5, 6, 7:
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Duration(i) * time.Millisecond))}}
		}
		pods = append(pods, p)
	}
	return &Snapshot{Job: job, Pods: pods, Now: now, TrackingFinalizer: DefaultTrackingFinalizer}
}

// BenchmarkSyncIndexed measures one sync of an Indexed Job against its pod
// count; BENCHMARKS.md reports how it grows.
func BenchmarkSyncIndexed(b *testing.B) {
	for _, n := range []int{100, 1_000, 10_000, 100_000} {
		s := benchSnapshot(n)
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Sync(s)
			}
		})
	}
}
