package controller

import (
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// A finished Job's backstop in a namespace of 5,000 one-pod Jobs, half of
// whose pods still hold the finalizer (issue 20's many small Jobs): the
// reference lists the namespace's pods the selector matches; the executor
// looks its candidates up in the finalizer holders' index.
//
//	go test -run '^$' -bench FinishedJobsPods ./services/executor/internal/controller/
func BenchmarkFinishedJobsPods(b *testing.B) {
	const jobs = 5000
	c := &Controller{cfg: Config{Finalizer: testFinalizer}}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
		controllerUIDIndex:   indexByController,
		finalizerHolderIndex: c.indexFinalizerHolders,
	})
	c.podIndex = indexer
	for i := range jobs {
		uid := fmt.Sprintf("job-%d-uid", i)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: testNamespace, Name: fmt.Sprintf("job-%d-pod", i), UID: types.UID(uid + "-pod"),
			Labels: map[string]string{batchv1.ControllerUidLabel: uid, batchv1.JobNameLabel: fmt.Sprintf("job-%d", i)},
		}}
		if i%2 == 0 {
			pod.Finalizers = []string{testFinalizer}
		}
		if err := indexer.Add(pod); err != nil {
			b.Fatal(err)
		}
	}
	selector := labels.SelectorFromSet(labels.Set{batchv1.ControllerUidLabel: "job-1-uid"})
	b.Run("reference-list-by-selector", func(b *testing.B) {
		lister := cache.NewGenericLister(indexer, corev1.Resource("pods"))
		for b.Loop() {
			if _, err := lister.ByNamespace(testNamespace).List(selector); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("finalizer-holders", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.holdersMatching(testNamespace, selector); err != nil {
				b.Fatal(err)
			}
		}
	})
}
