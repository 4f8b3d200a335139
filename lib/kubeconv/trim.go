package kubeconv

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// TrimForCache is an informer transform (client-go's SetTransform): what an
// informer of the executor keeps of an object. Every object loses its
// managedFields, which no decision reads (kube-controller-manager drops
// them too), left nil so that an update sent from the cache keeps the
// stored ones. A pod keeps only what the contract's Pod carries (the
// planner's whole view of it) and the metadata the executor itself reads:
// the executor never writes a cached pod back, it patches. Anything else,
// a tombstone included, passes as it is.
func TrimForCache(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		return trimPod(pod), nil
	}
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// trimPod is the pod with the contract's fields only (FromKube's), its
// metadata whole but managedFields.
func trimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta}
	out.ManagedFields = nil
	out.Spec.NodeName = p.Spec.NodeName
	out.Spec.RestartPolicy = p.Spec.RestartPolicy
	out.Spec.Containers = trimContainers(p.Spec.Containers)
	out.Spec.InitContainers = trimContainers(p.Spec.InitContainers)
	out.Status.Phase = p.Status.Phase
	out.Status.Conditions = p.Status.Conditions
	out.Status.Message = p.Status.Message
	out.Status.Reason = p.Status.Reason
	out.Status.StartTime = p.Status.StartTime
	out.Status.ContainerStatuses = trimContainerStatuses(p.Status.ContainerStatuses)
	out.Status.InitContainerStatuses = trimContainerStatuses(p.Status.InitContainerStatuses)
	return out
}

func trimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = corev1.Container{Name: cs[i].Name, RestartPolicy: cs[i].RestartPolicy}
	}
	return out
}

func trimContainerStatuses(cs []corev1.ContainerStatus) []corev1.ContainerStatus {
	if cs == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(cs))
	for i := range cs {
		out[i] = corev1.ContainerStatus{Name: cs[i].Name, Ready: cs[i].Ready, RestartCount: cs[i].RestartCount, State: cs[i].State}
	}
	return out
}
