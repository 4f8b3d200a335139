package plan

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// partsSnapshot is a Job of n pods of random sizes, with the executor's
// state set.
func partsSnapshot(r *rand.Rand, n int) *Snapshot {
	job, _ := onePodJob()
	s := &Snapshot{Job: job, Now: time.Date(2026, 6, 1, 8, 1, 0, 0, time.UTC), Finalizer: "batch.kubernetes.io/job-tracking",
		State: State{Expectations: Expectations{PendingCreations: 2}, FinalizerRemovalsInFlight: []types.UID{"uid-1"}}}
	for i := range n {
		s.Pods = append(s.Pods, randomSizedPod(r, i, 1))
	}
	return s
}

func randomSizedPod(r *rand.Rand, i, rv int) *corev1.Pod {
	p := testPod(i, rv, corev1.PodRunning)
	p.OwnerReferences = nil
	p.Status.Message = strings.Repeat("m", r.IntN(300))
	return p
}

// decodeParts decodes parts, checking that each is at most limit bytes and
// encoded as protobuf-go's deterministic marshaling encodes it.
func decodeParts(t *testing.T, parts []*WireRequest, limit int) []*jobplanev1.StreamPlanSyncRequest {
	t.Helper()
	var out []*jobplanev1.StreamPlanSyncRequest
	for i, w := range parts {
		b := bytes.Join(w.parts, nil)
		if len(b) > limit || w.Size() != len(b) {
			t.Fatalf("part %d is %d bytes (Size %d), more than %d", i, len(b), w.Size(), limit)
		}
		m := &jobplanev1.StreamPlanSyncRequest{}
		if err := proto.Unmarshal(b, m); err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		canonical, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil || !bytes.Equal(canonical, b) {
			t.Fatalf("part %d is not encoded canonically", i)
		}
		if m.GetId() != w.ID() {
			t.Fatalf("part %d has id %q, ID() says %q", i, m.GetId(), w.ID())
		}
		out = append(out, m)
	}
	checkWhole(t, parts, out)
	return out
}

// checkWhole checks that the first of several parts, alone, says the bytes
// and pods of them all.
func checkWhole(t *testing.T, parts []*WireRequest, decoded []*jobplanev1.StreamPlanSyncRequest) {
	t.Helper()
	size, pods := 0, 0
	for i, m := range decoded {
		size += parts[i].Size()
		pods += len(m.GetRequest().GetPods()) + len(m.GetDelta().GetUpsertedPods())
		if i > 0 && (m.GetWholeBytes() != 0 || m.GetWholePods() != 0) {
			t.Fatalf("part %d says the whole's size", i+1)
		}
	}
	first := decoded[0]
	if len(parts) == 1 {
		if first.GetWholeBytes() != 0 || first.GetWholePods() != 0 {
			t.Fatal("a request sent whole says the size of parts")
		}
		return
	}
	if int(first.GetWholePods()) != pods || int(first.GetWholeBytes()) > size || int(first.GetWholeBytes()) < size-wholeFields {
		t.Fatalf("the first part says %d bytes and %d pods; the parts have %d and %d", first.GetWholeBytes(), first.GetWholePods(), size, pods)
	}
}

// reassemble applies parts to h, as the planner does, and returns the
// snapshot the last one stands for; it checks the ids, the partial flags and
// that every part carries the sync's fields.
func reassemble(t *testing.T, h *held, parts []*jobplanev1.StreamPlanSyncRequest, id string) *jobplanev1.PlanSyncRequest {
	t.Helper()
	var snap *jobplanev1.PlanSyncRequest
	for i, m := range parts {
		last := i == len(parts)-1
		if m.GetPartial() == last {
			t.Fatalf("part %d of %d: partial %v", i+1, len(parts), m.GetPartial())
		}
		if wantID := fmt.Sprintf("%s.%d", id, i+1); last && m.GetId() != id || !last && m.GetId() != wantID {
			t.Fatalf("part %d has id %q", i+1, m.GetId())
		}
		if i > 0 && m.GetRequest() != nil {
			t.Fatalf("part %d is a full request", i+1)
		}
		if full := m.GetRequest(); full != nil {
			h.id, h.job, h.pods = m.GetId(), full.GetJob(), map[string]*jobplanev1.Pod{}
			for _, p := range full.GetPods() {
				h.pods[p.GetMetadata().GetUid()] = p
			}
			snap = proto.Clone(full).(*jobplanev1.PlanSyncRequest)
			snap.Pods = nil
			for _, p := range h.pods {
				snap.Pods = append(snap.Pods, p)
			}
		} else {
			snap = h.apply(t, m.GetId(), m.GetDelta())
		}
		if snap.GetNow() == nil || len(snap.GetFinalizerRemovalsInFlight()) != 1 {
			t.Fatalf("part %d lacks the sync's fields: %v", i+1, m)
		}
	}
	return snap
}

// A snapshot larger than the planner takes, in full or as a delta, is sent
// in parts within the limit that together are the snapshot, whatever the
// limit and the pods' sizes.
func TestPartsAreTheSnapshot(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 60 {
		s := partsSnapshot(r, 1+r.IntN(60))
		w, err := s.WireRequest("7")
		if err != nil {
			t.Fatal(err)
		}
		limit := 1200 + r.IntN(w.Size())
		parts, ok := w.Parts(limit)
		if !ok {
			t.Fatalf("round %d: %d bytes could not be split within %d", round, w.Size(), limit)
		}
		if w.Size() > limit && len(parts) < 2 {
			t.Fatalf("round %d: %d bytes sent in one part within %d", round, w.Size(), limit)
		}
		h := &held{}
		got := reassemble(t, h, decodeParts(t, parts, limit), "7")
		if !sameSnapshot(got, s.Request()) {
			t.Fatalf("round %d: the parts stand for\n%v\nthe snapshot is\n%v", round, got, s.Request())
		}

		// The next snapshot: pods changed, added and gone, the Job changed.
		base := s.Record("7")
		next := &Snapshot{Job: s.Job.DeepCopy(), Now: s.Now.Add(time.Second), Finalizer: s.Finalizer, State: s.State}
		next.Job.ResourceVersion = "2000"
		for i, p := range s.Pods {
			switch r.IntN(3) {
			case 0:
				next.Pods = append(next.Pods, p)
			case 1:
				next.Pods = append(next.Pods, randomSizedPod(r, i, 2))
			}
		}
		for i := range r.IntN(40) {
			next.Pods = append(next.Pods, randomSizedPod(r, 1000+i, 1))
		}
		d, err := next.WireDelta("8", base)
		if err != nil {
			t.Fatal(err)
		}
		parts, ok = d.Parts(limit)
		if !ok {
			t.Fatalf("round %d: a delta of %d bytes could not be split within %d", round, d.Size(), limit)
		}
		got = reassemble(t, h, decodeParts(t, parts, limit), "8")
		if !sameSnapshot(got, next.Request()) {
			t.Fatalf("round %d: the delta's parts stand for\n%v\nthe snapshot is\n%v", round, got, next.Request())
		}
	}
}

// A snapshot is not split when its Job and sync fields alone, or one pod
// with a delta's fields, are more than the limit.
func TestPartsNeedRoomForTheJobAndAPod(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	s := partsSnapshot(r, 10)
	w, err := s.WireRequest("7")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := w.Parts(len(w.parts[1]) + len(w.parts[3])); ok {
		t.Error("split within a limit smaller than the Job and the sync fields")
	}
	s.Pods[3].Status.Message = strings.Repeat("m", 4000)
	if w, err = s.WireRequest("7"); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.Parts(3000); ok {
		t.Error("split within a limit smaller than one of the pods")
	}
	if parts, ok := w.Parts(w.Size()); !ok || len(parts) != 1 || parts[0] != w {
		t.Error("a request within the limit is not sent as it is")
	}
}
