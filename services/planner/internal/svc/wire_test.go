package svc

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/podwire"
	"github.com/jobplane/jobplane/services/planner/internal/engine"
)

// checkDecodesAsUnmarshalVT checks that b decodes, as a unaryRequest and as
// a streamRequest, to what the codec decodes as a PlanSyncRequest and a
// StreamPlanSyncRequest, its pods converted, or fails where the codec fails.
func checkDecodesAsUnmarshalVT(t testing.TB, b []byte) {
	t.Helper()
	checkUnaryRequestDecoding(t, b)
	checkStreamRequestDecoding(t, b)
}

// checkUnaryRequestDecoding checks that b decodes as a unaryRequest to what
// the codec decodes as a PlanSyncRequest, its pods converted, or fails where
// the codec fails. (The request keeps b: its pods' strings are views of it.)
func checkUnaryRequestDecoding(t testing.TB, b []byte) {
	t.Helper()
	m := &jobplanev1.PlanSyncRequest{}
	wantErr := grpcserver.Unmarshal(b, m)
	var got unaryRequest
	err := got.UnmarshalWire(bytes.Clone(b))
	defer got.release()
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("decoding failed with %v, the codec with %v", err, wantErr)
	}
	if err != nil {
		return
	}
	want := convertPods(m.GetPods(), true)
	m.Pods = nil
	got.msg.Pods = nil // the slow path's, converted
	if !proto.Equal(got.msg, m) {
		t.Fatalf("decoded %v, the codec %v", got.msg, m)
	}
	checkPods(t, "pods", want, got.pods, got.annotations)
}

// checkPods checks that pods decoded with the annotations a sync reads
// kept beside them (annotations; nil when left in the maps) are the
// converted pods want.
func checkPods(t testing.TB, what string, want, pods []*corev1.Pod, annotations []engine.PodAnnotations) {
	t.Helper()
	got := pods
	if annotations != nil {
		got = slices.Clone(pods)
	}
	for i, p := range pods {
		if annotations == nil {
			break
		}
		got[i] = p.DeepCopy()
		a := annotations[i]
		for j, v := range []string{a.CompletionIndex, a.FailureCount, a.IgnoredFailureCount} {
			if v == "" {
				continue
			}
			if got[i].Annotations == nil {
				got[i].Annotations = map[string]string{}
			}
			got[i].Annotations[engine.AnnotationKeys[j]] = v
		}
	}
	// An annotation taken with an empty value is absent: so is it there.
	want = slices.Clone(want)
	for i, p := range want {
		for _, k := range engine.AnnotationKeys {
			if v, ok := p.Annotations[k]; ok && v == "" && annotations != nil {
				want[i] = p.DeepCopy()
				delete(want[i].Annotations, k)
				if len(want[i].Annotations) == 0 {
					want[i].Annotations = nil
				}
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s differ (-codec +decoded):\n%s", what, diff)
	}
}

// checkStreamRequestDecoding checks that b decodes as a streamRequest to
// what the codec decodes as a StreamPlanSyncRequest, its pods converted
// (streamRequestOf), or fails where the codec fails. (The request keeps b:
// its full snapshot's strings are views of it.)
func checkStreamRequestDecoding(t testing.TB, b []byte) {
	t.Helper()
	m := &jobplanev1.StreamPlanSyncRequest{}
	wantErr := grpcserver.Unmarshal(b, m)
	in := bytes.Clone(b)
	var got streamRequest
	err := got.UnmarshalWire(in)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("decoding failed with %v, the codec with %v", err, wantErr)
	}
	if err != nil {
		return
	}
	want := streamRequestOf(m)
	if !proto.Equal(withoutPods(got.msg), withoutPods(want.msg)) {
		t.Fatalf("decoded %v, the codec %v", withoutPods(got.msg), withoutPods(want.msg))
	}
	checkPods(t, "request pods", want.requestPods, got.requestPods, got.requestAnnotations)
	checkPods(t, "delta pods", want.deltaPods, got.deltaPods, got.deltaAnnotations)
}

// withoutPods is a copy of m without its pods.
func withoutPods(m *jobplanev1.StreamPlanSyncRequest) *jobplanev1.StreamPlanSyncRequest {
	c := proto.Clone(m).(*jobplanev1.StreamPlanSyncRequest)
	if c.Request != nil {
		c.Request.Pods = nil
	}
	if c.Delta != nil {
		c.Delta.UpsertedPods = nil
	}
	return c
}

// fuzzCorpus is the committed corpus of a fuzz target, every entry.
func fuzzCorpus(t testing.TB, target string) [][]byte {
	dir := filepath.Join("testdata", "fuzz", target)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		body, ok := strings.CutPrefix(string(data), "go test fuzz v1\n[]byte(")
		if !ok {
			t.Fatalf("%s is not a fuzz corpus entry", e.Name())
		}
		raw, err := strconv.Unquote(strings.TrimSuffix(strings.TrimSpace(body), ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out = append(out, []byte(raw))
	}
	return out
}

// wrapped is v as the value of field num of a message.
func wrapped(num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The corpora of FuzzPlanSync (requests) and FuzzPlanSyncDelta (deltas),
// each also inside a stream request.
func TestDecodeCorpusAsUnmarshalVT(t *testing.T) {
	for _, b := range fuzzCorpus(t, "FuzzPlanSync") {
		checkDecodesAsUnmarshalVT(t, b)
		checkDecodesAsUnmarshalVT(t, wrapped(podwire.StreamRequestRequest, b))
	}
	for _, b := range fuzzCorpus(t, "FuzzPlanSyncDelta") {
		checkDecodesAsUnmarshalVT(t, b)
		checkDecodesAsUnmarshalVT(t, wrapped(podwire.StreamRequestDelta, b))
	}
}

func TestDecodeScaledRequestsAsUnmarshalVT(t *testing.T) {
	for _, n := range []int{0, 1, 1000} {
		req := scaledRequest(t, n, n/10)
		checkDecodesAsUnmarshalVT(t, marshal(t, req))
		checkDecodesAsUnmarshalVT(t, marshal(t, &jobplanev1.StreamPlanSyncRequest{Id: "1", Request: req}))
		checkDecodesAsUnmarshalVT(t, marshal(t, &jobplanev1.StreamPlanSyncRequest{Id: "2", Delta: deltaOf("1", scaledRequest(t, n, 0), req)}))
	}
}

// Fields repeated or split on the wire merge as UnmarshalVT merges them:
// messages merge, lists append (pods in wire order), the last scalar wins.
func TestDecodeSplitFieldsAsUnmarshalVT(t *testing.T) {
	req := scaledRequest(t, 6, 2)
	delta := deltaOf("1", scaledRequest(t, 6, 0), req)
	part := func(pods ...int) *jobplanev1.PlanSyncRequest {
		r := &jobplanev1.PlanSyncRequest{}
		for _, i := range pods {
			r.Pods = append(r.Pods, req.Pods[i])
		}
		return r
	}
	unknown := protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "u")
	pods := marshal(t, part(0, 1, 2))
	job := marshal(t, &jobplanev1.PlanSyncRequest{Job: req.Job, TrackingFinalizer: "a"})
	rest := marshal(t, &jobplanev1.PlanSyncRequest{Now: req.Now, Expectations: req.Expectations, FinalizerRemovalsInFlight: []string{"x"}, TrackingFinalizer: "b"})
	stream := func(m *jobplanev1.StreamPlanSyncRequest) []byte { return marshal(t, m) }
	for name, b := range map[string][]byte{
		"request pods among its fields": slicesConcat(marshal(t, part(3)), job, pods, unknown, rest, marshal(t, part(4, 5)), job),
		"request twice in a stream": slicesConcat(
			stream(&jobplanev1.StreamPlanSyncRequest{Id: "a", Request: part(0, 1)}),
			wrapped(podwire.StreamRequestRequest, slicesConcat(job, pods, unknown)),
			stream(&jobplanev1.StreamPlanSyncRequest{Id: "b", Delta: delta}),
			stream(&jobplanev1.StreamPlanSyncRequest{Request: part(5, 4)}),
			wrapped(podwire.StreamRequestDelta, marshal(t, &jobplanev1.PlanSyncDelta{BaseId: "2", UpsertedPods: req.Pods[:2], RemovedPodUids: []string{"r"}})),
			unknown,
			wrapped(podwire.StreamRequestRequest, rest),
		),
		"empty request and delta":         slicesConcat(wrapped(podwire.StreamRequestRequest, nil), wrapped(podwire.StreamRequestDelta, nil)),
		"empty pod":                       wrapped(podwire.PlanSyncRequestPods, nil),
		"pods field not length-delimited": protowire.AppendVarint(protowire.AppendTag(pods, podwire.PlanSyncRequestPods, protowire.VarintType), 1),
		"a group":                         protowire.AppendTag(protowire.AppendTag(slicesConcat(pods), 50, protowire.StartGroupType), 50, protowire.EndGroupType),
		"a 10-byte tag":                   slicesConcat(pods, []byte{0x92, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0}),
		"truncated":                       pods[:len(pods)-1],
	} {
		t.Run(name, func(t *testing.T) { checkDecodesAsUnmarshalVT(t, b) })
	}
}

func slicesConcat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// FuzzDecodeStreamRequest: on any input, the planner's decoders fail where
// UnmarshalVT fails, and otherwise decode what it decodes, aliasing nothing
// of their input.
func FuzzDecodeStreamRequest(f *testing.F) {
	for _, b := range fuzzCorpus(f, "FuzzPlanSync") {
		f.Add(wrapped(podwire.StreamRequestRequest, b))
	}
	for _, b := range fuzzCorpus(f, "FuzzPlanSyncDelta") {
		f.Add(wrapped(podwire.StreamRequestDelta, b))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodesAsUnmarshalVT(t, b) })
}

// The codec decodes the planner's requests with its decoders (far fewer
// allocations than UnmarshalVT and the conversion of its pods), and still
// refuses invalid UTF-8.
func TestCodecDecodesRequestsWithTheDecoders(t *testing.T) {
	req := scaledRequest(t, 1000, 10)
	b := marshal(t, &jobplanev1.StreamPlanSyncRequest{Id: "1", Request: req})
	codec := grpcserver.Codec()
	var got streamRequest
	byCodec := testing.AllocsPerRun(5, func() {
		if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got); err != nil {
			t.Fatal(err)
		}
	})
	if !proto.Equal(got.msg.GetRequest(), withoutPods(&jobplanev1.StreamPlanSyncRequest{Request: req}).GetRequest()) || len(got.requestPods) != 1000 {
		t.Fatal("the codec decoded another request")
	}
	byVT := testing.AllocsPerRun(5, func() {
		m := &jobplanev1.StreamPlanSyncRequest{}
		if err := m.UnmarshalVT(b); err != nil {
			t.Fatal(err)
		}
		streamRequestOf(m)
	})
	if byCodec > byVT/3 {
		t.Fatalf("the codec allocates %.0f times, UnmarshalVT and conversion %.0f: not the planner's decoder", byCodec, byVT)
	}
	t.Logf("allocations decoding 1,000 pods: %.0f by the codec, %.0f by UnmarshalVT and conversion", byCodec, byVT)

	var unary unaryRequest
	byCodec = testing.AllocsPerRun(5, func() {
		if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(marshal(t, req))}, &unary); err != nil {
			t.Fatal(err)
		}
		unary.release()
	})
	byVT = testing.AllocsPerRun(5, func() {
		m := &jobplanev1.PlanSyncRequest{}
		if err := m.UnmarshalVT(marshal(t, req)); err != nil {
			t.Fatal(err)
		}
		convertPods(m.GetPods(), true)
	})
	if !proto.Equal(unary.msg, withoutPods(&jobplanev1.StreamPlanSyncRequest{Request: req}).GetRequest()) || len(unary.pods) != 1000 || byCodec > byVT/3 {
		t.Fatalf("PlanSync: %.0f allocations by the codec, %.0f by UnmarshalVT and conversion: not the planner's decoder", byCodec, byVT)
	}
	t.Logf("PlanSync: allocations decoding 1,000 pods: %.0f by the codec, %.0f by UnmarshalVT and conversion", byCodec, byVT)

	req = scaledRequest(t, 3, 0)
	req.Pods[1].Metadata.Name = "@@"
	b = bytes.Replace(marshal(t, req), []byte("@@"), []byte("\xc3\x28"), 1)
	if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &unaryRequest{}); err == nil {
		t.Fatal("the codec accepted a pod's invalid UTF-8")
	}
	if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wrapped(podwire.StreamRequestRequest, b))}, &streamRequest{}); err == nil {
		t.Fatal("the codec accepted a streamed pod's invalid UTF-8")
	}
}

// BenchmarkDecodeRequest compares the planner's decoder with UnmarshalVT on
// a stream request of 10,000 pods.
func BenchmarkDecodeRequest(b *testing.B) {
	data := marshal(b, &jobplanev1.StreamPlanSyncRequest{Id: "1", Request: scaledRequest(b, 10_000, 100)})
	b.Run("decoder=planner", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := (&streamRequest{}).UnmarshalWire(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoder=UnmarshalVT+conversion", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			m := &jobplanev1.StreamPlanSyncRequest{}
			if err := m.UnmarshalVT(data); err != nil {
				b.Fatal(err)
			}
			streamRequestOf(m)
		}
	})
}
