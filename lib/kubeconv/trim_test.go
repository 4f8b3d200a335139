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
	"k8s.io/apimachinery/pkg/types"
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
		if !bytes.Equal(podwire.AppendPod(nil, 1, trimmed, false), podwire.AppendPod(nil, 1, whole, false)) {
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

// The pods of a Job share what they repeat once trimmed: labels,
// annotations, owner references, finalizers; a pod of its own labels keeps
// its own, equal to what it was decoded with.
func TestPodTrimmerSharesWhatAJobsPodsRepeat(t *testing.T) {
	pod := func(name, index string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: name, UID: types.UID(name + "-uid"),
			Labels:          map[string]string{batchv1.JobNameLabel: "job", batchv1.JobCompletionIndexAnnotation: index},
			Annotations:     map[string]string{batchv1.JobCompletionIndexAnnotation: index},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "job", UID: "job-uid"}}, batchv1.SchemeGroupVersion.WithKind("Job"))},
			Finalizers:      []string{"jobplane.dev/tracking"},
		}}
	}
	trimmer := &kubeconv.PodTrimmer{}
	trim := func(p *corev1.Pod) *corev1.Pod {
		obj, err := trimmer.Transform(p)
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*corev1.Pod)
	}
	a, b, other := trim(pod("a", "0")), trim(pod("b", "0")), trim(pod("c", "1"))
	same := func(what string, x, y any) {
		t.Helper()
		if fmt.Sprintf("%p", x) != fmt.Sprintf("%p", y) {
			t.Errorf("%s not shared", what)
		}
	}
	same("labels", a.Labels, b.Labels)
	same("annotations", a.Annotations, b.Annotations)
	same("owner references", &a.OwnerReferences[0], &b.OwnerReferences[0])
	same("finalizers", &a.Finalizers[0], &b.Finalizers[0])
	same("owner references of another index", &a.OwnerReferences[0], &other.OwnerReferences[0])
	if want := pod("c", "1"); !equality.Semantic.DeepEqual(other.ObjectMeta, want.ObjectMeta) {
		t.Errorf("the pod of another index has %+v, want %+v", other.ObjectMeta, want.ObjectMeta)
	}
	if other.Labels[batchv1.JobCompletionIndexAnnotation] != "1" || a.Labels[batchv1.JobCompletionIndexAnnotation] != "0" {
		t.Error("a shared map of another index")
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
// what pods repeat shared (PodTrimmer, the executor's): the recorded
// succeeded pod, decoded anew for each of 2,000 names, as an informer
// decodes each pod it lists; "indexed" gives each its own completion index
// (label and annotation) and UID, as an Indexed Job's pods have.
//
//	go test -run '^$' -bench CachedPodHeap -benchtime 1x ./lib/kubeconv/
func BenchmarkCachedPodHeap(b *testing.B) {
	raw := readFile(b, "kubectl-pod-succeeded.json")
	for _, tc := range []struct {
		name string
		// transform is a new cache's transform.
		transform func() func(any) (any, error)
	}{
		{"whole", func() func(any) (any, error) { return func(obj any) (any, error) { return obj, nil } }},
		{"trimmed", func() func(any) (any, error) { return kubeconv.TrimForCache }},
		{"trimmed-interned", func() func(any) (any, error) { return (&kubeconv.PodTrimmer{}).Transform }},
	} {
		for _, indexed := range []bool{false, true} {
			name := tc.name
			if indexed {
				name += "/indexed"
			}
			b.Run(name, func(b *testing.B) {
				for range b.N {
					const pods = 2000
					store := cache.NewStore(cache.MetaNamespaceKeyFunc)
					before := liveHeap()
					transform := tc.transform()
					for i := range pods {
						p := &corev1.Pod{}
						if err := json.Unmarshal(raw, p); err != nil {
							b.Fatal(err)
						}
						p.Name = fmt.Sprintf("pod-%d", i)
						if indexed {
							index := fmt.Sprint(i)
							p.UID = types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
							p.Labels[batchv1.JobCompletionIndexAnnotation] = index
							p.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: index}
						}
						obj, err := transform(p)
						if err != nil {
							b.Fatal(err)
						}
						if err := store.Add(obj); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(liveHeap()-before)/pods, "B/pod")
					runtime.KeepAlive(store)
					runtime.KeepAlive(transform)
				}
			})
		}
	}
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkPodTrimmerTransform is what the informer pays per pod event to
// trim and share a pod of a Job whose other pods it has seen.
//
//	go test -run '^$' -bench PodTrimmerTransform -benchmem ./lib/kubeconv/
func BenchmarkPodTrimmerTransform(b *testing.B) {
	var decoded corev1.Pod
	if err := json.Unmarshal(readFile(b, "kubectl-pod-succeeded.json"), &decoded); err != nil {
		b.Fatal(err)
	}
	trimmer := &kubeconv.PodTrimmer{}
	if _, err := trimmer.Transform(decoded.DeepCopy()); err != nil {
		b.Fatal(err)
	}
	pods := make([]*corev1.Pod, b.N)
	for i := range pods {
		pods[i] = decoded.DeepCopy()
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := trimmer.Transform(pods[i]); err != nil {
			b.Fatal(err)
		}
	}
}
