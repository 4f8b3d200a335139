package podwire

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/kubeconv"
)

// slowPath is what the codec and the converter make of a pod.
func slowPath(b []byte) (*corev1.Pod, error) {
	var m jobplanev1.Pod
	if err := grpcserver.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	out := &corev1.Pod{}
	c := kubeconv.KubePodConverter{SkipContainers: true}
	c.IntoKube(&m, out)
	return out, nil
}

// checkDecodesAsSlowPath checks that b decodes to what the slow path makes
// of it, or fails likewise, and that the pod aliases nothing of b.
func checkDecodesAsSlowPath(t *testing.T, d *Decoder, b []byte) {
	t.Helper()
	want, wantErr := slowPath(b)
	in := append([]byte(nil), b...)
	var got corev1.Pod
	err := d.Decode(in, &got)
	if (err != nil) != (wantErr != nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("error %v, the slow path's %v", err, wantErr)
	}
	if err != nil {
		return
	}
	for i := range in {
		in[i] = 0xff // the pod keeps its own copy
	}
	if diff := cmp.Diff(want, &got); diff != "" {
		t.Fatalf("decoded pod differs from the slow path's (-slow +decoded):\n%s", diff)
	}
	checkTaking(t, b, want)
}

// takenKeys are annotations a decoder keeps out of the maps in the tests:
// one the seeds have, one they have not.
var takenKeys = []string{batchv1.JobCompletionIndexAnnotation, "absent.example.com/key"}

// checkTaking checks that a decoder taking takenKeys decodes b to want
// without those annotations (no map when none is left), and answers
// their values.
func checkTaking(t *testing.T, b []byte, want *corev1.Pod) {
	t.Helper()
	want = want.DeepCopy()
	wantValues := make([]string, len(takenKeys))
	for i, k := range takenKeys {
		wantValues[i] = want.Annotations[k]
		delete(want.Annotations, k)
	}
	if len(want.Annotations) == 0 {
		want.Annotations = nil
	}
	d := NewDecoder(1)
	d.Take(takenKeys...)
	var got corev1.Pod
	copy(d.Taken(), []string{"stale", "stale"})
	if err := d.Decode(b, &got); err != nil {
		t.Fatal(err)
	}
	values := d.Taken()
	if diff := cmp.Diff(want, &got); diff != "" {
		t.Fatalf("taking %v: decoded pod differs (-want +decoded):\n%s", takenKeys, diff)
	}
	if !slices.Equal(values, wantValues) {
		t.Fatalf("taken values %q, want %q", values, wantValues)
	}
}

// seedPods are encoded pods: the filled pod, pods of each kind a Job has
// (samplePods), and those of the planner's fuzz corpus.
func seedPods(t testing.TB) [][]byte {
	seeds := [][]byte{marshal(t, filledPod())}
	for _, p := range samplePods(20) {
		seeds = append(seeds, marshal(t, kubeconv.PodFromKube(p)))
	}
	dir := filepath.Join("..", "..", "services", "planner", "internal", "svc", "testdata", "fuzz", "FuzzPlanSync")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b := corpusBytes(t, string(data))
		var r jobplanev1.PlanSyncRequest
		if proto.Unmarshal(b, &r) != nil {
			continue
		}
		for _, p := range r.GetPods() {
			seeds = append(seeds, marshal(t, p))
		}
	}
	return seeds
}

// samplePods are n pods of an Indexed Job, of the kinds its pods come in:
// running and ready, pending, succeeded, failed (as scalestate's).
func samplePods(n int) []*corev1.Pod {
	started := metav1.NewTime(time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC))
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("job-%d-x", i), Namespace: "ns", UID: types.UID(fmt.Sprintf("uid-%d", i)), ResourceVersion: "7",
				Annotations:       map[string]string{batchv1.JobCompletionIndexAnnotation: strconv.Itoa(i)},
				OwnerReferences:   []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "job", UID: "job-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
				Finalizers:        []string{batchv1.JobTrackingFinalizer},
				CreationTimestamp: started,
			},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, NodeName: "node-1"},
		}
		switch i % 4 {
		case 0:
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &started,
				Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}}
		case 1:
			p.Spec.NodeName = ""
			p.Status = corev1.PodStatus{Phase: corev1.PodPending}
		case 2, 3:
			phase, code := corev1.PodSucceeded, int32(0)
			if i%4 == 3 {
				phase, code = corev1.PodFailed, 1
			}
			p.Status = corev1.PodStatus{Phase: phase, StartTime: &started,
				ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
					Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Completed", StartedAt: started, FinishedAt: started}}}}}
		}
		pods[i] = p
	}
	return pods
}

// filledPod is a pod with every field of the contract set: each string,
// number and bool not empty, each list and map of two, each message
// present and filled likewise.
func filledPod() *jobplanev1.Pod {
	p := &jobplanev1.Pod{}
	fill(p.ProtoReflect())
	return p
}

func fill(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for j := range 2 {
				mp.Set(protoreflect.ValueOfString(fmt.Sprintf("%s-key-%d", fd.Name(), j)).MapKey(), scalar(fd.MapValue(), j))
			}
		case fd.IsList():
			list := m.Mutable(fd).List()
			for j := range 2 {
				if fd.Message() != nil {
					v := list.NewElement()
					fill(v.Message())
					list.Append(v)
				} else {
					list.Append(scalar(fd, j))
				}
			}
		case fd.Message() != nil:
			fill(m.Mutable(fd).Message())
		default:
			m.Set(fd, scalar(fd, 1))
		}
	}
}

// scalar is a value of fd's kind, not the zero one; a timestamp's nanos
// within a second.
func scalar(fd protoreflect.FieldDescriptor, i int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s-%d", fd.Name(), i))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(int32(-3 - i))
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(int64(1_700_000_000 + i))
	}
	panic(fmt.Sprintf("no value for %s (%s)", fd.FullName(), fd.Kind()))
}

// The filled pod, every field of the contract set, takes the fast path
// (a field it does not know would leave it to the slow path) and decodes
// as the slow path does; AppendPod writes it as protobuf-go does.
func TestEveryFieldTakesTheFastPath(t *testing.T) {
	filled := filledPod()
	b := marshal(t, filled)
	var got corev1.Pod
	if !NewDecoder(1).pod(b, &got) {
		t.Fatal("the filled pod left the fast path")
	}
	want, err := slowPath(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, &got); diff != "" {
		t.Fatalf("the fast path's pod differs from the slow path's (-slow +fast):\n%s", diff)
	}
	kube := kubeconv.PodToKube(filled)
	for forSync, m := range map[bool]*jobplanev1.Pod{false: kubeconv.PodFromKube(kube), true: kubeconv.PodFromKubeForSync(kube)} {
		if written := AppendPod(nil, 1, kube, forSync); !bytes.Equal(written, protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), marshal(t, m))) {
			t.Fatalf("AppendPod (for a sync %v) wrote the filled pod otherwise than protobuf-go", forSync)
		}
	}
}

// corpusBytes reads the []byte of a go test fuzz v1 file.
func corpusBytes(t testing.TB, file string) []byte {
	lines := strings.Split(strings.TrimSpace(file), "\n")
	v, ok := strings.CutPrefix(lines[len(lines)-1], "[]byte(")
	if !ok {
		t.Fatalf("not a []byte corpus entry: %q", lines[len(lines)-1])
	}
	s, err := strconv.Unquote(strings.TrimSuffix(v, ")"))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(s)
}

func marshal(t testing.TB, m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeIsTheSlowPath(t *testing.T) {
	seeds := seedPods(t)
	if len(seeds) < 100 {
		t.Fatalf("%d seed pods", len(seeds))
	}
	d := NewDecoder(4)
	for _, b := range seeds {
		checkDecodesAsSlowPath(t, d, b)
	}
}

// The encodings the fast path leaves to the slow path decode as it does.
func TestOddEncodingsTakeTheSlowPath(t *testing.T) {
	pod := seedPods(t)[0]
	meta := protowire.AppendTag(nil, 3, protowire.BytesType)
	meta = protowire.AppendBytes(meta, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "other-name"))
	status := func(fields []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), fields)
	}
	startTime := func(seconds, nanos uint64) []byte {
		ts := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), seconds)
		ts = protowire.AppendVarint(protowire.AppendTag(ts, 2, protowire.VarintType), nanos)
		return protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), ts)
	}
	cases := map[string][]byte{
		"metadata twice (merged)":   append(append([]byte{}, pod...), meta...),
		"start time twice (merged)": append(status(startTime(1, 2_000_000_000)), status(startTime(5, 0))...),
		"unknown field":             protowire.AppendString(protowire.AppendTag(append([]byte{}, pod...), 99, protowire.BytesType), "x"),
		"fixed32 field":             protowire.AppendFixed32(protowire.AppendTag(nil, 1, protowire.Fixed32Type), 7),
		"invalid UTF-8":             protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff"),
		"wrong wire type":           protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 7),
		"truncated":                 pod[:len(pod)-3],
		"empty":                     nil,
		"empty timestamp":           status(protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), nil)),
		"negative nanos":            status(startTime(1, uint64(1<<64-5))),
	}
	d := NewDecoder(1)
	for name, b := range cases {
		t.Run(name, func(t *testing.T) { checkDecodesAsSlowPath(t, d, b) })
	}
}

// FuzzDecodePod: any bytes decode as the slow path decodes them.
func FuzzDecodePod(f *testing.F) {
	for _, b := range seedPods(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecodesAsSlowPath(t, NewDecoder(2), b)
	})
}

func BenchmarkDecode(b *testing.B) {
	var pods [][]byte
	for _, p := range samplePods(10_000) {
		pods = append(pods, marshal(b, kubeconv.PodFromKubeForSync(p)))
	}
	out := make([]corev1.Pod, len(pods))
	b.Run("podwire", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			d := NewDecoder(len(pods))
			clear(out)
			for i, p := range pods {
				if err := d.Decode(p, &out[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("vtprotobuf+kubeconv", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			c := kubeconv.NewKubePodConverter(len(pods))
			c.SkipContainers = true
			for i, p := range pods {
				var m jobplanev1.Pod
				if err := grpcserver.Unmarshal(p, &m); err != nil {
					b.Fatal(err)
				}
				c.IntoKube(&m, &out[i])
			}
		}
	})
}
