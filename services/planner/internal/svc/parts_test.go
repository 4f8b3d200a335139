package svc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/planner/internal/sim"
)

// planWire plans a request of a stream as the server decodes it from its
// encoding.
func planWire(t *testing.T, bases *streamSnapshots, w *plan.WireRequest) (*jobplanev1.PlanSyncResponse, error) {
	t.Helper()
	parts, err := w.MarshalWire()
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.Join(parts, nil)
	job, one := jobOfEncoded(b)
	r, err := decodeStreamed(bases, b, job, one)
	if err != nil {
		t.Fatal(err)
	}
	if r.deltaTogether {
		decodedTogether++
	}
	return planStreamed(bases, r, syncSettings{})
}

// decodedTogether counts the requests planWire decoded as parts
// continuing a snapshot, their pods together.
var decodedTogether int

// planParts plans the parts of a snapshot: each but the last is answered
// with neither a plan nor an error.
func planParts(t *testing.T, bases *streamSnapshots, parts []*plan.WireRequest) (*jobplanev1.PlanSyncResponse, error) {
	t.Helper()
	for _, p := range parts[:len(parts)-1] {
		if resp, err := planWire(t, bases, p); err != nil || resp != nil {
			return nil, fmt.Errorf("part %s answered %v, %v", p.ID(), resp, err)
		}
	}
	return planWire(t, bases, parts[len(parts)-1])
}

// Along simulated lifecycles, each snapshot sent in parts, in full or as a
// delta, within a random limit, is planned byte for byte as the snapshot in
// full, and the next delta is based on its last part.
func TestPartsPlanAsTheWholeSnapshotAlongLifecycles(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	bases := newSnapshotStore(DefaultStreamSnapshotMaxPods, noByteBound).stream(true, "executor")
	defer bases.close()
	split := 0
	alongExecutorLifecycles(bases, func(id string, snap *plan.Snapshot, sent *plan.Sent) {
		want, wantErr := fullPlan(t, snap.Request())
		var req *plan.WireRequest
		var err error
		if sent != nil {
			req, err = snap.WireDelta(id, sent)
		} else {
			req, err = snap.WireRequest(id)
		}
		if err != nil {
			t.Fatal(err)
		}
		// A limit of the Job and one to a few pods: some of the
		// lifecycles' Jobs are larger, and go in one part.
		parts, ok := req.Parts(800 + r.IntN(1200))
		if !ok {
			parts = []*plan.WireRequest{req}
		}
		if len(parts) > 1 {
			split++
		}
		resp, gotErr := planParts(t, bases, parts)
		var got []byte
		if gotErr == nil {
			got = deterministic(t, resp)
		}
		if (wantErr == nil) != (gotErr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%s: the plan of %d parts (%v) differs from the full snapshot's (%v)", id, len(parts), gotErr, wantErr)
		}
	})
	if split < 50 {
		t.Errorf("only %d snapshots were sent in parts", split)
	}
	if decodedTogether == 0 {
		t.Error("no part continuing a snapshot had its pods decoded together")
	}
}

// A snapshot sent in parts that the planner could never keep is refused
// at its first part, which says how large the whole is, with
// RESOURCE_EXHAUSTED SNAPSHOT_TOO_LARGE naming the bounds: it evicts no
// other Job's snapshot to make room for parts it would refuse later.
func TestAPartBeyondWhatThePlannerKeepsIsTooLarge(t *testing.T) {
	store := newSnapshotStore(DefaultStreamSnapshotMaxPods, 64<<10)
	bases := store.stream(true, "executor")
	defer bases.close()
	if _, err := planStreamedProto(bases, &jobplanev1.StreamPlanSyncRequest{Id: "other", Request: sizedRequest(t, "other", 2)}); err != nil {
		t.Fatal(err)
	}
	s := sim.Generate(1)
	var snap *plan.Snapshot
	s.Run(time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC), 1, false, func(w *sim.World) {
		e := w.Snapshot()
		snap = &plan.Snapshot{Job: e.Job, Pods: e.Pods, Now: e.Now, Finalizer: e.TrackingFinalizer}
	})
	for len(snap.Pods) < 40 { // 40 pods of 3 KB: more than 64 KiB kept
		p := snap.Pods[0].DeepCopy()
		p.Name, p.UID = fmt.Sprint("p-", len(snap.Pods)), types.UID(fmt.Sprint("uid-", len(snap.Pods)))
		p.Status.Message = strings.Repeat("m", 3000)
		snap.Pods = append(snap.Pods, p)
	}
	w, err := snap.WireRequest("9")
	if err != nil {
		t.Fatal(err)
	}
	parts, ok := w.Parts(16 << 10)
	if !ok || len(parts) < 4 {
		t.Fatalf("%d bytes in %d parts", w.Size(), len(parts))
	}
	_, refused := planWire(t, bases, parts[0])
	st := status.Convert(refused)
	if st.Code() != codes.ResourceExhausted || apierr.Reason(refused) != plan.ReasonTooLarge || !strings.Contains(st.Message(), "-stream-snapshot-max-bytes") {
		t.Fatalf("the first part of a whole beyond the bound: %v, want RESOURCE_EXHAUSTED %s naming the flag", refused, plan.ReasonTooLarge)
	}
	if _, held := bases.jobs["other"]; !held || store.heldSnapshots() != 1 {
		t.Fatalf("%d snapshots held once the parts were refused, want the other Job's alone", store.heldSnapshots())
	}
	failedPrecondition(t, func() error { _, err := planWire(t, bases, parts[1]); return err }())
}

// A snapshot kept from parts weighs what it holds: every part's bytes (the
// continuing parts' pods are views of them) and each of its pods once.
func TestASnapshotFromPartsWeighsItsParts(t *testing.T) {
	bases := newSnapshotStore(DefaultStreamSnapshotMaxPods, noByteBound).stream(true, "executor")
	defer bases.close()
	var snap *plan.Snapshot
	sim.Generate(1).Run(time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC), 1, false, func(w *sim.World) {
		e := w.Snapshot()
		snap = &plan.Snapshot{Job: e.Job, Pods: e.Pods, Now: e.Now, Finalizer: e.TrackingFinalizer}
	})
	for len(snap.Pods) < 40 {
		p := snap.Pods[0].DeepCopy()
		p.Name, p.UID = fmt.Sprint("p-", len(snap.Pods)), types.UID(fmt.Sprint("uid-", len(snap.Pods)))
		snap.Pods = append(snap.Pods, p)
	}
	w, err := snap.WireRequest("9")
	if err != nil {
		t.Fatal(err)
	}
	parts, ok := w.Parts(w.Size() / 3)
	if !ok || len(parts) < 3 {
		t.Fatalf("%d bytes in %d parts", w.Size(), len(parts))
	}
	if _, err := planParts(t, bases, parts); err != nil {
		t.Fatal(err)
	}
	sent := int64(0)
	for _, p := range parts {
		sent += int64(p.Size())
	}
	b := bases.jobs[string(snap.Job.UID)]
	if b == nil {
		t.Fatal("the snapshot from parts was not kept")
	}
	if b.allocated != len(snap.Pods) || b.sent != sent || len(b.order) != len(snap.Pods) {
		t.Fatalf("kept %d pods, %d allocated, %d bytes sent; want %d pods, %d bytes", len(b.order), b.allocated, b.sent, len(snap.Pods), sent)
	}
}

// A base gives back every array of pods it was handed, once, when dropped.
func TestABaseGivesBackEveryArrayOnce(t *testing.T) {
	var released [3]int
	b := &baseSnapshot{}
	for i := range released {
		b.keep(func() { released[i]++ })
	}
	b.dispose()
	b.dispose()
	if released != [3]int{1, 1, 1} {
		t.Fatalf("arrays given back %v times, want once each", released)
	}
}
