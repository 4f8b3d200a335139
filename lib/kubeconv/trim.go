package kubeconv

import (
	"sync"

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
		return trimPod(pod, nil), nil
	}
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// PodTrimmer is TrimForCache for a pod informer that also shares the
// strings pods repeat (namespace, label and annotation keys and values,
// owner kinds, container names, phases, condition reasons and messages):
// decoded, each pod has its own copy. Names, UIDs and resource versions,
// each pod's own, are left as they are. Its table is bounded
// (maxInterned strings of at most maxInternedLen bytes) and starts over
// when full, so that no run of distinct values can grow it.
type PodTrimmer struct {
	mu    sync.Mutex
	table map[string]string
}

const (
	maxInterned    = 16384
	maxInternedLen = 512
)

// Transform is the informer transform.
func (t *PodTrimmer) Transform(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return TrimForCache(obj)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return trimPod(pod, t.intern), nil
}

func (t *PodTrimmer) intern(s string) string {
	if len(s) == 0 || len(s) > maxInternedLen {
		return s
	}
	if shared, ok := t.table[s]; ok {
		return shared
	}
	if t.table == nil || len(t.table) >= maxInterned {
		t.table = make(map[string]string, 1024)
	}
	t.table[s] = s
	return s
}

// trimPod is the pod with the contract's fields only (FromKube's), its
// metadata whole but managedFields; intern, when not nil, gives the
// strings pods repeat.
func trimPod(p *corev1.Pod, intern func(string) string) *corev1.Pod {
	if intern == nil {
		intern = func(s string) string { return s }
	}
	out := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta}
	m := &out.ObjectMeta
	m.ManagedFields = nil
	m.Namespace, m.GenerateName = intern(m.Namespace), intern(m.GenerateName)
	m.Labels, m.Annotations = internMap(m.Labels, intern), internMap(m.Annotations, intern)
	for i := range m.Finalizers {
		m.Finalizers[i] = intern(m.Finalizers[i])
	}
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind, r.Name = intern(r.APIVersion), intern(r.Kind), intern(r.Name)
	}
	out.Spec.NodeName = intern(p.Spec.NodeName)
	out.Spec.RestartPolicy = corev1.RestartPolicy(intern(string(p.Spec.RestartPolicy)))
	out.Spec.Containers = trimContainers(p.Spec.Containers, intern)
	out.Spec.InitContainers = trimContainers(p.Spec.InitContainers, intern)
	out.Status.Phase = corev1.PodPhase(intern(string(p.Status.Phase)))
	out.Status.Conditions = p.Status.Conditions
	for i := range out.Status.Conditions {
		c := &out.Status.Conditions[i]
		c.Type, c.Status = corev1.PodConditionType(intern(string(c.Type))), corev1.ConditionStatus(intern(string(c.Status)))
		c.Reason, c.Message = intern(c.Reason), intern(c.Message)
	}
	out.Status.Message = intern(p.Status.Message)
	out.Status.Reason = intern(p.Status.Reason)
	out.Status.StartTime = p.Status.StartTime
	out.Status.ContainerStatuses = trimContainerStatuses(p.Status.ContainerStatuses, intern)
	out.Status.InitContainerStatuses = trimContainerStatuses(p.Status.InitContainerStatuses, intern)
	return out
}

// internMap is m with interned keys and values (m itself when intern is
// the identity: nothing to share).
func internMap(m map[string]string, intern func(string) string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[intern(k)] = intern(v)
	}
	return out
}

func trimContainers(cs []corev1.Container, intern func(string) string) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i := range cs {
		out[i] = corev1.Container{Name: intern(cs[i].Name), RestartPolicy: cs[i].RestartPolicy}
	}
	return out
}

func trimContainerStatuses(cs []corev1.ContainerStatus, intern func(string) string) []corev1.ContainerStatus {
	if cs == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(cs))
	for i := range cs {
		s := corev1.ContainerStatus{Name: intern(cs[i].Name), Ready: cs[i].Ready, RestartCount: cs[i].RestartCount, State: cs[i].State}
		if w := s.State.Waiting; w != nil {
			s.State.Waiting = &corev1.ContainerStateWaiting{Reason: intern(w.Reason), Message: intern(w.Message)}
		}
		if term := s.State.Terminated; term != nil {
			copied := *term
			copied.Reason, copied.Message = intern(term.Reason), intern(term.Message)
			s.State.Terminated = &copied
		}
		out[i] = s
	}
	return out
}
