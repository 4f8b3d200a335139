package podwire

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/planner/scalestate"
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
}

// seedPods are encoded pods: scalestate's kinds, and those of the planner's
// fuzz corpus.
func seedPods(t testing.TB) [][]byte {
	var seeds [][]byte
	s := scalestate.New(20)
	s, _ = scalestate.Changed(s, 5)
	req := plan.NewRequest(s.Job, s.Pods, plan.State{}, scalestate.Now, scalestate.Finalizer)
	for _, p := range req.GetPods() {
		seeds = append(seeds, marshal(t, p))
	}
	dir := filepath.Join("..", "svc", "testdata", "fuzz", "FuzzPlanSync")
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
	s := scalestate.New(10_000)
	req := plan.NewRequest(s.Job, s.Pods, plan.State{}, scalestate.Now, scalestate.Finalizer)
	var pods [][]byte
	for _, p := range req.GetPods() {
		pods = append(pods, marshal(b, p))
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
