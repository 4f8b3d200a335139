package svc

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// FuzzPlanSync feeds arbitrary bytes as a PlanSync request: every input that
// decodes is either planned or refused with InvalidArgument, never a panic,
// and planning it twice gives the same plan; sent on a stream as a delta
// against a base derived from it, it is planned byte for byte the same, or
// refused likewise. The committed corpus is in testdata/fuzz/FuzzPlanSync;
// `make fuzz` runs it longer.
func FuzzPlanSync(f *testing.F) {
	for _, name := range []string{"plansync-indexed-job.json"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		req := &jobplanev1.PlanSyncRequest{}
		if err := protojson.Unmarshal(data, req); err != nil {
			f.Fatal(err)
		}
		seed, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &jobplanev1.PlanSyncRequest{}
		if err := proto.Unmarshal(data, req); err != nil {
			return
		}
		first, err := planRequest(req, syncSettings{})
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("refused with %v, want InvalidArgument", err)
			}
			return
		}
		second, err := planRequest(req, syncSettings{})
		if err != nil || !proto.Equal(first, second) {
			t.Fatalf("the same request planned twice differs: %v", err)
		}
		checkDeltaEquivalence(t, req, len(data))
	})
}

// FuzzPlanSyncDelta feeds arbitrary bytes as a delta against a fixed base
// (the indexed Job of testdata, planned in full on the stream): every input
// that decodes is planned, refused with InvalidArgument, or answered
// FailedPrecondition (a base it does not name), never a panic; a delta
// planned is planned byte for byte as the full snapshot it stands for.
func FuzzPlanSyncDelta(f *testing.F) {
	base := fuzzBase(f)
	next := proto.Clone(base).(*jobplanev1.PlanSyncRequest)
	next.Pods[0].Status.Phase = "Failed"
	extra := proto.Clone(next.Pods[1]).(*jobplanev1.Pod)
	extra.Metadata.Uid, extra.Metadata.Name = "pod-new", "render-9-x9"
	next.Pods = append(next.Pods[:1], extra)
	next.Job.Status.Active = 1
	for _, d := range []*jobplanev1.PlanSyncDelta{deltaOf("base", base, base), deltaOf("base", base, next)} {
		seed, err := proto.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &jobplanev1.PlanSyncDelta{}
		if err := proto.Unmarshal(data, d); err != nil {
			return
		}
		bases := newSnapshotStore(DefaultStreamSnapshotMaxPods, noByteBound).stream(true, "executor")
		defer bases.close()
		if _, err := planStreamedProto(bases, &jobplanev1.StreamPlanSyncRequest{Id: "base", Request: base}); err != nil {
			t.Fatal(err)
		}
		got, err := streamed(t, bases, &jobplanev1.StreamPlanSyncRequest{Id: "delta", Delta: d})
		if err != nil {
			if c := status.Code(err); c != codes.InvalidArgument && c != codes.FailedPrecondition {
				t.Fatalf("refused with %v, want InvalidArgument or FailedPrecondition", err)
			}
			return
		}
		want, err := fullPlan(t, applied(base, d))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("the delta's plan differs from the full snapshot's (%v)", err)
		}
	})
}

// fuzzBase is the base of FuzzPlanSyncDelta.
func fuzzBase(tb testing.TB) *jobplanev1.PlanSyncRequest {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "plansync-indexed-job.json"))
	if err != nil {
		tb.Fatal(err)
	}
	req := &jobplanev1.PlanSyncRequest{}
	if err := protojson.Unmarshal(data, req); err != nil {
		tb.Fatal(err)
	}
	return req
}

// applied is the full snapshot a delta stands for, as the contract defines
// it, against base.
func applied(base *jobplanev1.PlanSyncRequest, d *jobplanev1.PlanSyncDelta) *jobplanev1.PlanSyncRequest {
	out := &jobplanev1.PlanSyncRequest{Job: base.GetJob(), Now: d.GetNow(), Expectations: d.GetExpectations(),
		FinalizerRemovalsInFlight: d.GetFinalizerRemovalsInFlight(), BackoffRecord: d.GetBackoffRecord(), TrackingFinalizer: d.GetTrackingFinalizer()}
	if d.GetJob() != nil {
		out.Job = d.GetJob()
	}
	gone := map[string]bool{}
	for _, uid := range d.GetRemovedPodUids() {
		gone[uid] = true
	}
	for _, p := range d.GetUpsertedPods() {
		gone[p.GetMetadata().GetUid()] = true // replaced
	}
	for _, p := range base.GetPods() {
		if !gone[p.GetMetadata().GetUid()] {
			out.Pods = append(out.Pods, p)
		}
	}
	out.Pods = append(out.Pods, d.GetUpsertedPods()...)
	return out
}
