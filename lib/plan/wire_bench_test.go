package plan

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// benchJob is a one-pod Job as kubectl creates it, defaulted by the API
// server, with its pod running.
func benchJob() (*batchv1.Job, *corev1.Pod) {
	labels := map[string]string{"batch.kubernetes.io/controller-uid": "job-uid", "batch.kubernetes.io/job-name": "pi", "controller-uid": "job-uid", "job-name": "pi"}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "tenant-a", UID: "job-uid", ResourceVersion: "1042", Generation: 1,
			Labels: labels, CreationTimestamp: metav1.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](6),
			CompletionMode: ptr.To(batchv1.NonIndexedCompletion), Suspend: ptr.To(false),
			PodReplacementPolicy: ptr.To(batchv1.TerminatingOrFailed), ManagedBy: ptr.To("jobplane.dev/executor"),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "job-uid"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "pi", Image: "perl:5.34.0", Command: []string{"perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
					}},
				},
			},
		},
		Status: batchv1.JobStatus{Active: 1, StartTime: ptr.To(metav1.Date(2026, 6, 1, 8, 0, 1, 0, time.UTC))},
	}
	pod := testPod(1, 1050, corev1.PodRunning)
	pod.Labels = labels
	pod.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
	return job, pod
}

// BenchmarkWireRequest measures what the executor spends encoding one
// sync of a one-pod Job for the planner: in full, and as a delta whose pod
// changed, with the Job or without.
func BenchmarkWireRequest(b *testing.B) {
	job, pod := benchJob()
	s := &Snapshot{Job: job, Pods: []*corev1.Pod{pod}, Now: time.Date(2026, 6, 1, 8, 0, 2, 0, time.UTC), Finalizer: "batch.kubernetes.io/job-tracking"}
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.WireRequest("1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, jobChanged := range []bool{false, true} {
		b.Run(fmt.Sprintf("delta/job-changed=%t", jobChanged), func(b *testing.B) {
			b.ReportAllocs()
			base := s.Record("1")
			for b.Loop() {
				base.pods[pod.UID] = sentPod{resourceVersion: "old"}
				if jobChanged {
					base.JobResourceVersion = "old"
				}
				if _, err := s.WireDelta("2", base); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
