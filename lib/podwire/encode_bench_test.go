package podwire_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/jobplane/jobplane/lib/podwire"
)

// forRequest is how the executor's requests write a pod (AppendPod's last
// argument in lib/plan's wireMessage).
const forRequest = true

// BenchmarkAppendPodForARequest is a pod as the executor's requests write
// it, as kubectl shows one that failed, with its own annotations, and with
// a kilobyte more of them (a sidecar injector's, a config checksum) and a
// container's termination message.
func BenchmarkAppendPodForARequest(b *testing.B) {
	failed := kubectlPods(b)[1]
	annotated := failed.DeepCopy()
	annotated.Annotations["sidecar.example.com/status"] = strings.Repeat("s", 800)
	annotated.Annotations["checksum/config"] = strings.Repeat("c", 64)
	for i := range annotated.Status.ContainerStatuses {
		if t := annotated.Status.ContainerStatuses[i].State.Terminated; t != nil {
			t.Message = strings.Repeat("m", 200)
		}
	}
	for name, p := range map[string]*corev1.Pod{"kubectl": failed, "annotated": annotated} {
		b.Run("pod="+name, func(b *testing.B) {
			buf := podwire.AppendPod(nil, 2, p, forRequest)
			b.ReportAllocs()
			for b.Loop() {
				buf = podwire.AppendPod(buf[:0], 2, p, forRequest)
			}
			b.ReportMetric(float64(len(buf)), "bytes/pod")
		})
	}
}
