package kubeconv

import (
	"slices"
	"strings"
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

// PodTrimmer is TrimForCache for a pod informer that also shares what pods
// repeat: strings (namespace, label and annotation keys and values, owner
// kinds, container names, phases, condition reasons and messages), whole
// label and annotation maps (the pods of a Job have the same), and the
// trimmed container lists. Decoded, each pod has its own copy. Names, UIDs
// and resource versions, each pod's own, are left as they are. Shared
// values are never written: a cached object is read only (client-go's
// rule). Each table is bounded (maxInterned entries, strings of at most
// maxInternedLen bytes) and starts over when full, so that no run of
// distinct values can grow it.
type PodTrimmer struct {
	mu         sync.Mutex
	strings    sharedTable[string]
	maps       sharedTable[map[string]string]
	containers sharedTable[[]corev1.Container]
}

// sharedTable holds the shared value of each content key, at most
// maxInterned of them: full, it starts over.
type sharedTable[V any] struct{ m map[string]V }

// share is the value shared under key, v itself (now shared) the first
// time.
func (t *sharedTable[V]) share(key string, v V) V {
	if shared, ok := t.m[key]; ok {
		return shared
	}
	if t.m == nil || len(t.m) >= maxInterned {
		t.m = make(map[string]V, 64)
	}
	t.m[key] = v
	return v
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
	out := trimPod(pod, t.intern)
	out.Labels, out.Annotations = t.internMap(out.Labels), t.internMap(out.Annotations)
	out.Spec.Containers, out.Spec.InitContainers = t.internContainers(out.Spec.Containers), t.internContainers(out.Spec.InitContainers)
	return out, nil
}

// internMap is the shared map of m's content: the first time, a copy with
// interned keys and values, now shared.
func (t *PodTrimmer) internMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	key, ok := mapKey(m)
	if !ok {
		return m
	}
	if shared, ok := t.maps.m[key]; ok {
		return shared
	}
	copied := make(map[string]string, len(m))
	for k, v := range m {
		copied[t.intern(k)] = t.intern(v)
	}
	return t.maps.share(key, copied)
}

// mapKey is m's content as a string (its keys sorted), or false when m is
// too big to be worth sharing.
func mapKey(m map[string]string) (string, bool) {
	keys := make([]string, 0, len(m))
	size := 0
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + len(v) + 2
	}
	if size > maxInternedLen*2 {
		return "", false
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(size)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return b.String(), true
}

// internContainers is the shared list of trimmed containers equal to cs.
func (t *PodTrimmer) internContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return cs
	}
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.Name)
		b.WriteByte(0)
		if c.RestartPolicy != nil {
			b.WriteString(string(*c.RestartPolicy))
		}
		b.WriteByte(1)
	}
	return t.containers.share(b.String(), cs)
}

func (t *PodTrimmer) intern(s string) string {
	if len(s) == 0 || len(s) > maxInternedLen {
		return s
	}
	return t.strings.share(s, s)
}

// trimPod is the pod with the contract's fields only (FromKube's), its
// metadata whole but managedFields; intern, when not nil, gives the
// strings pods repeat (labels and annotations are PodTrimmer's to share
// whole).
func trimPod(p *corev1.Pod, intern func(string) string) *corev1.Pod {
	if intern == nil {
		intern = func(s string) string { return s }
	}
	out := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta}
	m := &out.ObjectMeta
	m.ManagedFields = nil
	m.Namespace, m.GenerateName = intern(m.Namespace), intern(m.GenerateName)
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
