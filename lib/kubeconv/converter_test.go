package kubeconv_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/kubeconv"
)

// The chunked converters of a request's pods give the pods one at a time
// would: chunks shared by many pods leave each its own parts.
func TestChunkedConvertersAreOneAtATime(t *testing.T) {
	var kube []*corev1.Pod
	for _, name := range podFiles {
		var p corev1.Pod
		if err := json.Unmarshal(readFile(t, name), &p); err != nil {
			t.Fatal(err)
		}
		p.ManagedFields = nil
		kube = append(kube, &p)
	}
	waiting := kube[0].DeepCopy()
	waiting.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}
	kube = append(kube, waiting, &corev1.Pod{})
	kube = append(kube, kube...) // more pods than a chunk of len(kube)/2 holds

	to := kubeconv.NewSyncPodConverter(len(kube) / 2)
	from := kubeconv.NewKubePodConverter(len(kube) / 2)
	var chunked []*jobplanev1.Pod
	for _, p := range kube {
		chunked = append(chunked, to.FromKube(p))
	}
	back := make([]corev1.Pod, len(chunked))
	for i, p := range chunked {
		from.IntoKube(p, &back[i])
	}
	for i, p := range kube {
		want := kubeconv.PodFromKubeForSync(p)
		if diff := cmp.Diff(want, chunked[i], protocmp.Transform()); diff != "" {
			t.Errorf("pod %d: PodConverter differs from PodFromKubeForSync:\n%s", i, diff)
		}
		if diff := cmp.Diff(*kubeconv.PodToKube(want), back[i]); diff != "" {
			t.Errorf("pod %d: KubePodConverter differs from PodToKube:\n%s", i, diff)
		}
	}
	// The request shares the pods' maps: it is encoded, never modified.
	if b, err := proto.Marshal(chunked[0]); err != nil || len(b) == 0 {
		t.Fatal(err)
	}
}

func TestKubePodConverterCanSkipContainers(t *testing.T) {
	p := &jobplanev1.Pod{Spec: &jobplanev1.PodSpec{
		Containers:     []*jobplanev1.Container{{Name: "main"}},
		InitContainers: []*jobplanev1.Container{{Name: "init"}},
	}}
	var out corev1.Pod
	c := kubeconv.KubePodConverter{SkipContainers: true}
	c.IntoKube(p, &out)
	if out.Spec.Containers != nil || len(out.Spec.InitContainers) != 1 {
		t.Errorf("containers %v, init containers %v: want none and one", out.Spec.Containers, out.Spec.InitContainers)
	}
}

// Times beyond a Timestamp's range (a deletion time in year 1 less its
// grace period, derived by the planner) are held at its ends, so that the
// answer can be written as JSON; times within it are kept to the
// nanosecond.
func TestTimestampsStayWithinTheirRange(t *testing.T) {
	for _, tc := range []struct{ in, want time.Time }{
		{time.Date(0, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)},
		{time.Date(2026, 11, 27, 20, 0, 0, 123, time.UTC), time.Date(2026, 11, 27, 20, 0, 0, 123, time.UTC)},
	} {
		got := kubeconv.Timestamp(tc.in)
		if err := got.CheckValid(); err != nil || !got.AsTime().Equal(tc.want) {
			t.Errorf("Timestamp(%v) = %v (%v), want %v", tc.in, got.AsTime(), err, tc.want)
		}
	}
}
