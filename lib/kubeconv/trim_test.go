package kubeconv_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"google.golang.org/protobuf/proto"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/randfill"

	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/lib/podwire"
)

// What the cache keeps of a pod is all any decision reads: the contract's
// Pod (what the planner sees, as message and as AppendPod's bytes) is the
// same from the trimmed pod as from the whole one, and the metadata the
// executor reads itself is whole. Checked on the recorded pods and on
// random ones.
func TestTrimForCacheKeepsWhatDecisionsRead(t *testing.T) {
	var pods []*corev1.Pod
	for _, name := range podFiles {
		var p corev1.Pod
		if err := json.Unmarshal(readFile(t, name), &p); err != nil {
			t.Fatal(err)
		}
		if len(p.ManagedFields) == 0 {
			t.Fatalf("%s has no managedFields to drop", name)
		}
		pods = append(pods, &p)
	}
	fill := randfill.NewWithSeed(1).NilChance(0.2).NumElements(0, 3)
	for range 500 {
		p := &corev1.Pod{}
		fill.Fill(p)
		pods = append(pods, p, p.DeepCopy()) // the second meets interned strings
	}
	trimmer := &kubeconv.PodTrimmer{}
	for i, p := range pods {
		whole := p.DeepCopy()
		transform := kubeconv.TrimForCache
		if i%2 == 1 {
			transform = trimmer.Transform
		}
		obj, err := transform(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		trimmed := obj.(*corev1.Pod)
		if !proto.Equal(kubeconv.PodFromKube(trimmed), kubeconv.PodFromKube(whole)) {
			t.Fatalf("pod %d: the contract's Pod differs once trimmed", i)
		}
		if !bytes.Equal(podwire.AppendPod(nil, 1, trimmed, true), podwire.AppendPod(nil, 1, whole, true)) {
			t.Fatalf("pod %d: AppendPod differs once trimmed", i)
		}
		wantMeta := whole.ObjectMeta.DeepCopy()
		wantMeta.ManagedFields = nil
		if !equality.Semantic.DeepEqual(trimmed.ObjectMeta, *wantMeta) {
			t.Fatalf("pod %d: metadata other than managedFields changed", i)
		}
		if !equality.Semantic.DeepEqual(p, whole) {
			t.Fatalf("pod %d: the informer's object was changed", i)
		}
	}
}

// Other objects lose their managedFields only; tombstones pass.
func TestTrimForCacheDropsOnlyManagedFieldsElsewhere(t *testing.T) {
	var job batchv1.Job
	if err := json.Unmarshal(readFile(t, "kubectl-job-in-flight.json"), &job); err != nil {
		t.Fatal(err)
	}
	want := job.DeepCopy()
	want.ManagedFields = nil
	obj, _ := kubeconv.TrimForCache(&job)
	if !equality.Semantic.DeepEqual(obj, want) {
		t.Error("a Job lost more than its managedFields")
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "a/b", Obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b"}}}
	if obj, err := kubeconv.TrimForCache(tombstone); err != nil || obj != any(tombstone) {
		t.Errorf("a tombstone became %v (%v)", obj, err)
	}
}

// BenchmarkCachedPodHeap is the live heap a cached pod costs, whole (as an
// informer without a transform keeps it), as TrimForCache keeps it, and with
// the strings pods repeat shared (PodTrimmer, the executor's): the
// recorded succeeded pod, decoded anew for each of 2,000 names, as an
// informer decodes each pod it lists.
//
//	go test -run '^$' -bench CachedPodHeap -benchtime 1x ./lib/kubeconv/
func BenchmarkCachedPodHeap(b *testing.B) {
	raw := readFile(b, "kubectl-pod-succeeded.json")
	for _, tc := range []struct {
		name      string
		transform func(any) (any, error)
	}{
		{"whole", func(obj any) (any, error) { return obj, nil }},
		{"trimmed", kubeconv.TrimForCache},
		{"trimmed-interned", (&kubeconv.PodTrimmer{}).Transform},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				const pods = 2000
				store := cache.NewStore(cache.MetaNamespaceKeyFunc)
				before := liveHeap()
				for i := range pods {
					p := &corev1.Pod{}
					if err := json.Unmarshal(raw, p); err != nil {
						b.Fatal(err)
					}
					p.Name = fmt.Sprintf("pod-%d", i)
					obj, err := tc.transform(p)
					if err != nil {
						b.Fatal(err)
					}
					if err := store.Add(obj); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(liveHeap()-before)/pods, "B/pod")
				runtime.KeepAlive(store)
			}
		})
	}
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
