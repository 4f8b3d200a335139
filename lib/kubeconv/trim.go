package kubeconv

import (
	"hash/maphash"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
// label and annotation maps, owner references and finalizer lists (the pods
// of a Job have the same), and the trimmed container lists. Decoded, each
// pod has its own copy. Names, UIDs and resource versions, each pod's own,
// are left as they are. Shared values are never written: a cached object
// is read only (client-go's rule). Each table is bounded (maxInterned entries, strings of at most
// maxInternedLen bytes) and starts over when full, so that no run of
// distinct values can grow it.
type PodTrimmer struct {
	mu         sync.Mutex
	strings    sharedTable[string, string]
	maps       sharedTable[uint64, map[string]string]
	owners     sharedTable[uint64, []metav1.OwnerReference]
	finalizers sharedTable[uint64, []string]
	containers sharedTable[uint64, []corev1.Container]
	seed       maphash.Seed
}

// sharedTable holds the shared value of each key, at most maxInterned of
// them: full, it starts over. The tables of lists and maps are keyed by a
// hash of the content, not the content itself, so that a value no other
// pod repeats (an Indexed Job's pod's labels) costs the table a word rather
// than its content again, and looking one up allocates nothing.
type sharedTable[K comparable, V any] struct{ m map[K]V }

// share is the value shared under key, v itself (now shared) the first
// time.
func (t *sharedTable[K, V]) share(key K, v V) V {
	if shared, ok := t.m[key]; ok {
		return shared
	}
	t.put(key, v)
	return v
}

// put makes v the value shared under key.
func (t *sharedTable[K, V]) put(key K, v V) {
	if t.m == nil || len(t.m) >= maxInterned {
		t.m = make(map[K]V, 64)
	}
	t.m[key] = v
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
	out.OwnerReferences = t.internOwners(out.OwnerReferences)
	out.Finalizers = t.internFinalizers(out.Finalizers)
	out.Spec.Containers, out.Spec.InitContainers = t.internContainers(out.Spec.Containers), t.internContainers(out.Spec.InitContainers)
	return out, nil
}

// internMap is the shared map of m's content: the first time, a copy with
// interned keys and values, now shared.
func (t *PodTrimmer) internMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	key, ok := t.mapHash(m)
	if !ok {
		return m
	}
	if shared, ok := t.maps.m[key]; ok && maps.Equal(shared, m) {
		return shared
	}
	copied := make(map[string]string, len(m))
	for k, v := range m {
		copied[t.intern(k)] = t.intern(v)
	}
	t.maps.put(key, copied)
	return copied
}

// mapHash hashes m's content (its keys sorted), or is false when m is too
// big to be worth sharing.
func (t *PodTrimmer) mapHash(m map[string]string) (uint64, bool) {
	var keysArray [16]string
	keys := keysArray[:0]
	size := 0
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + len(v) + 2
	}
	if size > maxInternedLen*2 {
		return 0, false
	}
	slices.Sort(keys)
	var h maphash.Hash
	t.seedHash(&h)
	for _, k := range keys {
		writeFields(&h, k, m[k])
	}
	return h.Sum64(), true
}

// internOwners is the shared list of owner references equal to refs (the
// pods of a Job have the same).
func (t *PodTrimmer) internOwners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return refs
	}
	var h maphash.Hash
	t.seedHash(&h)
	for _, r := range refs {
		writeFields(&h, r.APIVersion, r.Kind, r.Name, string(r.UID), optionalBool(r.Controller), optionalBool(r.BlockOwnerDeletion))
	}
	return shareList(&t.owners, h.Sum64(), refs, func(x, y metav1.OwnerReference) bool {
		return x.APIVersion == y.APIVersion && x.Kind == y.Kind && x.Name == y.Name && x.UID == y.UID &&
			ptr.Equal(x.Controller, y.Controller) && ptr.Equal(x.BlockOwnerDeletion, y.BlockOwnerDeletion)
	})
}

// internFinalizers is the shared list of finalizers equal to fs.
func (t *PodTrimmer) internFinalizers(fs []string) []string {
	if len(fs) == 0 {
		return fs
	}
	var h maphash.Hash
	t.seedHash(&h)
	writeFields(&h, fs...)
	return shareList(&t.finalizers, h.Sum64(), fs, func(x, y string) bool { return x == y })
}

// internContainers is the shared list of trimmed containers equal to cs.
func (t *PodTrimmer) internContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return cs
	}
	var h maphash.Hash
	t.seedHash(&h)
	for _, c := range cs {
		policy := "\x01" // none, unlike any policy
		if c.RestartPolicy != nil {
			policy = string(*c.RestartPolicy)
		}
		writeFields(&h, c.Name, policy)
	}
	return shareList(&t.containers, h.Sum64(), cs, func(x, y corev1.Container) bool {
		return x.Name == y.Name && ptr.Equal(x.RestartPolicy, y.RestartPolicy)
	})
}

// shareList is the list table holds under key, a hash of its content, if
// its elements are equal to list's; else list, which takes a colliding
// entry over. (The hashing stays with each caller: a maphash.Hash handed to
// a hashing callback would escape, an allocation a pod event.)
func shareList[T any](table *sharedTable[uint64, []T], key uint64, list []T, equal func(x, y T) bool) []T {
	if shared, ok := table.m[key]; ok && slices.EqualFunc(shared, list, equal) {
		return shared
	}
	list = slices.Clip(list) // an append to a shared list copies
	table.put(key, list)
	return list
}

// seedHash gives h the tables' seed; t.mu is held.
func (t *PodTrimmer) seedHash(h *maphash.Hash) {
	if t.seed == (maphash.Seed{}) {
		t.seed = maphash.MakeSeed()
	}
	h.SetSeed(t.seed)
}

// writeFields hashes fields, each ended by a zero byte.
func writeFields(h *maphash.Hash, fields ...string) {
	for _, f := range fields {
		h.WriteString(f)
		h.WriteByte(0)
	}
}

func optionalBool(b *bool) string {
	switch {
	case b == nil:
		return "\x01"
	case *b:
		return "t"
	}
	return "f"
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
