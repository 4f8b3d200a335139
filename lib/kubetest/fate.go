package kubetest

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodTemplate is a pod template whose pods end, on a cluster of
// StartCluster, as its fate.jobplane.dev/ annotations say
// (hack/kwok/stages/pod-fate.yaml), given as name, value pairs: succeed after
// a while, fail with an exit code, on some indexes or attempts only, be
// evicted, or run until deleted.
func PodTemplate(fate ...string) corev1.PodTemplateSpec {
	annotations := map[string]string{}
	for i := 0; i+1 < len(fate); i += 2 {
		annotations[fate[i]] = fate[i+1]
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
		},
	}
}
