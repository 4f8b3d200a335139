package fairqueue

import (
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/jobplane/jobplane/lib/fairorder"
)

// WeightAnnotation on a Namespace is its weight, an integer from 1 to
// MaxWeight. Namespaces are cluster-scoped: whoever may annotate one is a
// cluster administrator, not its tenant.
const WeightAnnotation = "executor.jobplane.dev/weight"

// NamespaceShares are the namespaces' weights: a namespace's WeightAnnotation
// when it has a valid one, else the configured Weights (the flag). It follows
// the namespaces through an informer; Of is a map read, for it is asked at
// every turn of the queue and of the API budget.
type NamespaceShares struct {
	configured fairorder.Weights
	log        *slog.Logger
	// annotated holds the valid annotations, replaced whole on a change
	// (namespaces change rarely; turns are many).
	annotated atomic.Pointer[map[string]int]
	version   atomic.Uint64
	// mu serialises the replacements.
	mu sync.Mutex
}

// NewNamespaceShares returns the shares of the configured weights, until
// Watch sees the namespaces' annotations.
func NewNamespaceShares(configured fairorder.Weights, log *slog.Logger) *NamespaceShares {
	s := &NamespaceShares{configured: configured, log: log}
	s.annotated.Store(&map[string]int{})
	return s
}

// Of is namespace ns's weight.
func (s *NamespaceShares) Of(ns string) int {
	if w, ok := (*s.annotated.Load())[ns]; ok {
		return w
	}
	return s.configured.Of(ns)
}

// Version counts the changes of weights.
func (s *NamespaceShares) Version() uint64 { return s.version.Load() }

// Watch follows the annotations of the namespaces informer holds.
func (s *NamespaceShares) Watch(informer cache.SharedInformer) error {
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.set,
		UpdateFunc: func(_, obj any) { s.set(obj) },
		DeleteFunc: s.unset,
	})
	return err
}

// unset forgets a deleted namespace's weight.
func (s *NamespaceShares) unset(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if ns, ok := obj.(*corev1.Namespace); ok {
		s.replace(ns.Name, 0)
	}
}

// set reads a namespace's weight from its annotation.
func (s *NamespaceShares) set(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return
	}
	value, annotated := ns.Annotations[WeightAnnotation]
	if !annotated {
		s.replace(ns.Name, 0)
		return
	}
	weight, err := fairorder.ParseWeight(value)
	if err != nil {
		// An invalid weight is as none: the namespace keeps its
		// configured one, and the administrator learns why.
		s.log.Warn("ignoring the namespace's weight annotation", "namespace", ns.Name, "annotation", WeightAnnotation, "value", value, "err", err)
		s.replace(ns.Name, 0)
		return
	}
	if s.replace(ns.Name, weight) {
		s.log.Info("namespace weight set by its annotation", "namespace", ns.Name, "weight", weight)
	}
}

// replace sets namespace ns's annotated weight (0 removes it) and says
// whether that changed it.
func (s *NamespaceShares) replace(ns string, weight int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	current := *s.annotated.Load()
	if old, ok := current[ns]; ok == (weight != 0) && old == weight {
		return false
	}
	next := maps.Clone(current)
	if weight == 0 {
		delete(next, ns)
	} else {
		next[ns] = weight
	}
	s.annotated.Store(&next)
	s.version.Add(1)
	return true
}
