package svc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/lib/podwire"
	"github.com/jobplane/jobplane/services/planner/internal/engine"
	"github.com/jobplane/jobplane/services/planner/internal/sim"
)

// corpusDir holds FuzzPlanSync's committed corpus: snapshots taken along
// simulated lifecycles of every kind, and what fuzzing found interesting.
const corpusDir = "testdata/fuzz/FuzzPlanSync"

// requestFromSnapshot is the PlanSync request an executor would send for s.
func requestFromSnapshot(_ testing.TB, s *engine.Snapshot) *jobplanev1.PlanSyncRequest {
	state := plan.State{Expectations: s.Expectations, FinalizerRemovalsInFlight: s.FinalizerRemovalsInFlight, Backoff: s.Backoff}
	return plan.NewRequest(s.Job, s.Pods, state, s.Now, s.TrackingFinalizer)
}

// simulatedRequests takes every 8th snapshot along lifecycles of each kind.
func simulatedRequests(t testing.TB, lifecycles int) map[string]*jobplanev1.PlanSyncRequest {
	out := map[string]*jobplanev1.PlanSyncRequest{}
	for seed := range uint64(lifecycles) {
		sc := sim.Generate(seed)
		n := 0
		sc.Run(time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC), 3000, seed%2 == 1, func(w *sim.World) {
			if n%8 == 0 {
				out[fmt.Sprintf("sim-%s-%03d", sc.Name, n)] = requestFromSnapshot(t, w.Snapshot())
			}
			n++
		})
	}
	return out
}

// The committed corpus decodes and plans; with JOBPLANE_WRITE_FUZZ_CORPUS=1
// the simulated part of it is written anew.
func TestFuzzCorpus(t *testing.T) {
	if os.Getenv("JOBPLANE_WRITE_FUZZ_CORPUS") == "1" {
		if err := os.MkdirAll(corpusDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, req := range simulatedRequests(t, 24) {
			data, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			entry := "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
			if err := os.WriteFile(filepath.Join(corpusDir, name), []byte(entry), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	planned := 0
	for name, req := range corpusRequests(t) {
		if _, err := planRequest(req, syncSettings{}); err == nil && strings.HasPrefix(name, "sim-") {
			planned++
		} else if err != nil && strings.HasPrefix(name, "sim-") {
			t.Errorf("%s: a simulated snapshot is refused: %v", name, err)
		}
	}
	if planned < 50 {
		t.Errorf("only %d simulated snapshots in the corpus", planned)
	}
}

// corpusRequests are the requests of the committed corpus that decode, by
// entry name.
func corpusRequests(t testing.TB) map[string]*jobplanev1.PlanSyncRequest {
	entries, err := os.ReadDir(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*jobplanev1.PlanSyncRequest{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(corpusDir, e.Name()))
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
		req := &jobplanev1.PlanSyncRequest{}
		if proto.Unmarshal([]byte(raw), req) != nil {
			continue // fuzzing keeps undecodable inputs too
		}
		out[e.Name()] = req
	}
	return out
}

// lib/plan leaves the pods' labels out of requests: the plan of every
// corpus request (snapshots taken with their labels along lifecycles of
// every kind, and fuzzing's finds) is the same without them.
func TestPodLabelsDoNotChangeThePlan(t *testing.T) {
	labelled := 0
	for name, req := range corpusRequests(t) {
		want, wantErr := planRequest(req, syncSettings{})
		stripped := proto.Clone(req).(*jobplanev1.PlanSyncRequest)
		for _, p := range stripped.GetPods() {
			if len(p.GetMetadata().GetLabels()) > 0 {
				labelled++
			}
			if p.GetMetadata() != nil {
				p.Metadata.Labels = nil
			}
		}
		got, gotErr := planRequest(stripped, syncSettings{})
		if (wantErr == nil) != (gotErr == nil) || !proto.Equal(got, want) {
			t.Errorf("%s: the plan without the pods' labels differs (%v, %v)", name, gotErr, wantErr)
		}
	}
	if labelled < 100 {
		t.Errorf("only %d pods with labels in the corpus", labelled)
	}
}

// The pods decoded from the wire keep the annotations a sync reads beside
// them, out of their maps: every corpus request plans, unary and streamed
// in full, the same bytes as the same request decoded into messages and
// converted, maps and all.
func TestPlansFromTheWireAreTheMessagesPlans(t *testing.T) {
	annotated := 0
	for name, req := range corpusRequests(t) {
		want, wantErr := planRequest(req, syncSettings{})
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if grpcserver.Unmarshal(b, &jobplanev1.PlanSyncRequest{}) != nil {
			continue // what fuzzing kept that the codec refuses
		}
		var unary unaryRequest
		if err := unary.UnmarshalWire(b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if unary.annotations != nil {
			annotated++
		}
		got, gotErr := planSync(unary.msg, unary.pods, unary.annotations, syncSettings{})
		unary.release()
		if (wantErr == nil) != (gotErr == nil) || !proto.Equal(got, want) {
			t.Fatalf("%s: the unary plan from the wire differs (%v, %v)", name, gotErr, wantErr)
		}
		var streamed streamRequest
		if err := streamed.UnmarshalWire(wrapped(podwire.StreamRequestRequest, b)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		bases := newSnapshotStore(DefaultStreamSnapshotMaxPods, noByteBound).stream(true, "executor")
		got, gotErr = planStreamed(bases, &streamed, syncSettings{})
		bases.close()
		if (wantErr == nil) != (gotErr == nil) || !proto.Equal(got, want) {
			t.Fatalf("%s: the streamed plan from the wire differs (%v, %v)", name, gotErr, wantErr)
		}
	}
	if annotated < 100 {
		t.Errorf("only %d requests decoded with their annotations beside the pods", annotated)
	}
}
