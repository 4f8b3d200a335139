package plan

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkWireRequest measures what the executor spends encoding one
// sync of a one-pod Job for the planner: in full, and as a delta whose pod
// changed, with the Job or without.
func BenchmarkWireRequest(b *testing.B) {
	job, pod := onePodJob()
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
