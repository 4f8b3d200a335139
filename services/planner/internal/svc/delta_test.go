package svc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/planner/internal/engine"
	"github.com/jobplane/jobplane/services/planner/internal/sim"
)

// deltaOf is the delta from the snapshot of base to req, by content: the
// Job when it differs, the pods new or different, the pods gone.
func deltaOf(baseID string, base, req *jobplanev1.PlanSyncRequest) *jobplanev1.PlanSyncDelta {
	d := &jobplanev1.PlanSyncDelta{
		BaseId:                    baseID,
		JobUid:                    req.GetJob().GetMetadata().GetUid(),
		Now:                       req.GetNow(),
		Expectations:              req.GetExpectations(),
		FinalizerRemovalsInFlight: req.GetFinalizerRemovalsInFlight(),
		BackoffRecord:             req.GetBackoffRecord(),
		TrackingFinalizer:         req.GetTrackingFinalizer(),
	}
	if !proto.Equal(base.GetJob(), req.GetJob()) {
		d.Job = req.GetJob()
	}
	old := map[string]*jobplanev1.Pod{}
	for _, p := range base.GetPods() {
		old[p.GetMetadata().GetUid()] = p
	}
	for _, p := range req.GetPods() {
		uid := p.GetMetadata().GetUid()
		if o, ok := old[uid]; !ok || !proto.Equal(o, p) {
			d.UpsertedPods = append(d.UpsertedPods, p)
		}
		delete(old, uid)
	}
	for _, p := range base.GetPods() {
		if uid := p.GetMetadata().GetUid(); old[uid] != nil {
			d.RemovedPodUids = append(d.RemovedPodUids, uid)
		}
	}
	return d
}

func deterministic(t testing.TB, m proto.Message) []byte {
	t.Helper()
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// fullPlan is the plan of req planned alone (PlanSync), or its error.
func fullPlan(t testing.TB, req *jobplanev1.PlanSyncRequest) ([]byte, error) {
	resp, err := planRequest(req, syncSettings{})
	if err != nil {
		return nil, err
	}
	return deterministic(t, resp), nil
}

func streamed(t testing.TB, bases *streamSnapshots, req *jobplanev1.StreamPlanSyncRequest) ([]byte, error) {
	resp, err := planStreamedProto(bases, req)
	if err != nil {
		return nil, err
	}
	return deterministic(t, resp), nil
}

// Along simulated lifecycles of every kind, each snapshot sent as a delta
// against the one before is planned byte for byte as the snapshot in full.
func TestDeltaPlansAsTheFullSnapshotAlongLifecycles(t *testing.T) {
	lifecycles := 48
	if testing.Short() {
		lifecycles = 12
	}
	store := newSnapshotStore(DefaultStreamSnapshotMaxPods, noByteBound)
	bases := store.stream(true, "executor")
	deltas, withJob, finished := 0, 0, 0
	for seed := range uint64(lifecycles) {
		sc := sim.Generate(seed)
		var prev *jobplanev1.PlanSyncRequest
		prevID := ""
		n := 0
		sc.Run(time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC), 3000, seed%2 == 1, func(w *sim.World) {
			req := requestFromSnapshot(t, w.Snapshot())
			id := fmt.Sprintf("%s-%d", sc.Name, n)
			n++
			want, wantErr := fullPlan(t, req)
			msg := &jobplanev1.StreamPlanSyncRequest{Id: id, Request: req}
			if prev != nil {
				msg = &jobplanev1.StreamPlanSyncRequest{Id: id, Delta: deltaOf(prevID, prev, req)}
			}
			_, held := bases.jobs[req.GetJob().GetMetadata().GetUid()]
			if prev != nil && !held {
				// The Job finished: the planner dropped it, and says so.
				if _, err := streamed(t, bases, msg); status.Code(err) != codes.FailedPrecondition {
					t.Fatalf("%s: a delta on a finished Job's dropped snapshot: %v, want FailedPrecondition", id, err)
				}
				msg = &jobplanev1.StreamPlanSyncRequest{Id: id, Request: req}
			}
			got, gotErr := streamed(t, bases, msg)
			if (wantErr == nil) != (gotErr == nil) || !bytes.Equal(got, want) {
				t.Fatalf("%s: the delta's plan (%v) differs from the full snapshot's (%v)", id, gotErr, wantErr)
			}
			if _, held := bases.jobs[req.GetJob().GetMetadata().GetUid()]; !held && gotErr == nil {
				finished++ // its plan finishes the Job: nothing kept
			}
			if msg.GetDelta() != nil {
				deltas++
				if msg.GetDelta().GetJob() != nil {
					withJob++
				}
			}
			prev, prevID = req, id
		})
	}
	if deltas < 500 || withJob == 0 || finished == 0 {
		t.Errorf("only %d deltas (%d with the Job) and %d finished Jobs", deltas, withJob, finished)
	}
	bases.close()
	if store.heldPods() != 0 || store.heldSnapshots() != 0 {
		t.Errorf("the closed stream still holds %d pods", store.heldPods())
	}
}

// checkDeltaEquivalence plans req in full and as a delta against a base
// derived from it (some of its pods, some changed, plus a pod it does not
// have): both plan the same bytes or both refuse with InvalidArgument. It
// reports whether a delta was planned.
func checkDeltaEquivalence(t *testing.T, req *jobplanev1.PlanSyncRequest, salt int) bool {
	t.Helper()
	base := proto.Clone(req).(*jobplanev1.PlanSyncRequest)
	base.Pods = nil
	for i, p := range req.GetPods() {
		switch (i + salt) % 4 {
		case 0: // new in req
		case 1: // changed since the base
			p = proto.Clone(p).(*jobplanev1.Pod)
			if p.Status == nil {
				p.Status = &jobplanev1.PodStatus{}
			}
			p.Status.Phase = "Pending"
			p.Status.Conditions = nil
			base.Pods = append(base.Pods, p)
		default:
			base.Pods = append(base.Pods, p)
		}
	}
	if job := req.GetJob(); job != nil && salt%2 == 0 {
		gone := &jobplanev1.Pod{Metadata: &jobplanev1.ObjectMeta{
			Name: "gone", Uid: "gone-" + job.GetMetadata().GetUid(), Namespace: job.GetMetadata().GetNamespace(),
			OwnerReferences: []*jobplanev1.OwnerReference{{Uid: job.GetMetadata().GetUid(), Controller: proto.Bool(true), Kind: "Job", Name: job.GetMetadata().GetName(), ApiVersion: "batch/v1"}},
		}, Status: &jobplanev1.PodStatus{Phase: "Running"}}
		base.Pods = append(base.Pods, gone)
	}
	if salt%3 == 0 && base.GetJob().GetStatus() != nil {
		base.Job.Status.Active++
	}
	if salt%5 == 0 { // the pods' views are worked out again
		base.TrackingFinalizer = "example.com/other-finalizer"
	}
	bases := newSnapshotStore(DefaultStreamSnapshotMaxPods, noByteBound).stream(true, "executor")
	defer bases.close()
	if _, err := planStreamedProto(bases, &jobplanev1.StreamPlanSyncRequest{Id: "base", Request: base}); err != nil {
		return false // a base refused (or of a finished Job) is not a base
	}
	if bases.jobs[req.GetJob().GetMetadata().GetUid()] == nil {
		return false
	}
	want, wantErr := fullPlan(t, req)
	got, gotErr := streamed(t, bases, &jobplanev1.StreamPlanSyncRequest{Id: "delta", Delta: deltaOf("base", base, req)})
	if wantErr != nil {
		if status.Code(gotErr) != codes.InvalidArgument {
			t.Fatalf("the full snapshot is refused (%v), the delta answers %v", wantErr, gotErr)
		}
		return false
	}
	if gotErr != nil || !bytes.Equal(got, want) {
		t.Fatalf("the delta's plan (%v) differs from the full snapshot's", gotErr)
	}
	return true
}

func TestDeltaPlansAsTheFullSnapshotOnTheFuzzCorpus(t *testing.T) {
	reqs := corpusRequests(t)
	names := slices.Sorted(maps.Keys(reqs))
	planned := 0
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			if checkDeltaEquivalence(t, reqs[name], i) {
				planned++
			}
		})
	}
	if planned < 50 {
		t.Errorf("only %d of %d corpus requests planned as deltas", planned, len(names))
	}
	t.Logf("%d of %d corpus requests planned as deltas", planned, len(names))
}

func failedPrecondition(t *testing.T, err error) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition {
		t.Fatalf("got %v, want FailedPrecondition", err)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "SNAPSHOT_BASE_UNKNOWN" {
			return
		}
	}
	t.Fatalf("no ErrorInfo SNAPSHOT_BASE_UNKNOWN in %v", st.Details())
}

// sizedRequest is the indexed Job of testdata with n pods, its UID uid.
func sizedRequest(t testing.TB, uid string, n int) *jobplanev1.PlanSyncRequest {
	req := scaledRequest(t, n, 0)
	req.Job.Metadata.Uid = uid
	for _, p := range req.Pods {
		p.Metadata.OwnerReferences[0].Uid = uid
		p.Metadata.Uid = uid + "-" + p.Metadata.Uid
	}
	return req
}

func TestDeltaAgainstAnUnknownBaseFailsOnlyItsResponse(t *testing.T) {
	bases := newSnapshotStore(100, noByteBound).stream(true, "executor")
	req := sizedRequest(t, "job-a", 10)
	// Never sent.
	_, err := planStreamedProto(bases, &jobplanev1.StreamPlanSyncRequest{Id: "1", Delta: deltaOf("0", req, req)})
	failedPrecondition(t, err)
	if _, err := planStreamedProto(bases, &jobplanev1.StreamPlanSyncRequest{Id: "2", Request: req}); err != nil {
		t.Fatal(err)
	}
	// Not the base held (superseded by request 2).
	_, err = planStreamedProto(bases, &jobplanev1.StreamPlanSyncRequest{Id: "3", Delta: deltaOf("1", req, req)})
	failedPrecondition(t, err)
	// The failure dropped the base: even the right id is unknown now.
	_, err = planStreamedProto(bases, &jobplanev1.StreamPlanSyncRequest{Id: "4", Delta: deltaOf("2", req, req)})
	failedPrecondition(t, err)
	if _, err := planStreamedProto(bases, &jobplanev1.StreamPlanSyncRequest{Id: "5", Request: req}); err != nil {
		t.Fatal(err)
	}
	// An invalid delta is refused with its paths, and drops the base.
	bad := deltaOf("5", req, req)
	bad.RemovedPodUids = []string{"nope"}
	_, err = planStreamedProto(bases, &jobplanev1.StreamPlanSyncRequest{Id: "6", Delta: bad})
	if status.Code(err) != codes.InvalidArgument || !bytes.Contains([]byte(err.Error()), []byte("delta.removedPodUids[0]")) {
		t.Fatalf("got %v, want InvalidArgument on delta.removedPodUids[0]", err)
	}
	_, err = planStreamedProto(bases, &jobplanev1.StreamPlanSyncRequest{Id: "7", Delta: deltaOf("5", req, req)})
	failedPrecondition(t, err)
	// Both forms at once.
	_, err = planStreamedProto(bases, &jobplanev1.StreamPlanSyncRequest{Id: "8", Request: req, Delta: deltaOf("5", req, req)})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want InvalidArgument", err)
	}
}

func TestSnapshotsAreEvictedLeastRecentlyUsedFirstWithinTheBound(t *testing.T) {
	store := newSnapshotStore(25, noByteBound)
	s1, s2 := store.stream(true, "executor"), store.stream(true, "executor")
	a, b, c := sizedRequest(t, "job-a", 10), sizedRequest(t, "job-b", 10), sizedRequest(t, "job-c", 10)
	send := func(s *streamSnapshots, id string, m *jobplanev1.StreamPlanSyncRequest) error {
		m.Id = id
		_, err := planStreamedProto(s, m)
		return err
	}
	if err := send(s1, "a1", &jobplanev1.StreamPlanSyncRequest{Request: a}); err != nil {
		t.Fatal(err)
	}
	if err := send(s2, "b1", &jobplanev1.StreamPlanSyncRequest{Request: b}); err != nil {
		t.Fatal(err)
	}
	// a is used again, so b is the least recently used.
	if err := send(s1, "a2", &jobplanev1.StreamPlanSyncRequest{Delta: deltaOf("a1", a, a)}); err != nil {
		t.Fatal(err)
	}
	if err := send(s1, "c1", &jobplanev1.StreamPlanSyncRequest{Request: c}); err != nil {
		t.Fatal(err)
	}
	if got := store.heldPods(); got != 22 {
		t.Errorf("%d held, want 22 (two Jobs of 10 pods, bound 25)", got)
	}
	failedPrecondition(t, send(s2, "b2", &jobplanev1.StreamPlanSyncRequest{Delta: deltaOf("b1", b, b)}))
	if err := send(s1, "a3", &jobplanev1.StreamPlanSyncRequest{Delta: deltaOf("a2", a, a)}); err != nil {
		t.Fatal(err)
	}
	// A snapshot beyond the bound is planned, not kept.
	big := sizedRequest(t, "job-big", 30)
	if err := send(s2, "big1", &jobplanev1.StreamPlanSyncRequest{Request: big}); err != nil {
		t.Fatal(err)
	}
	failedPrecondition(t, send(s2, "big2", &jobplanev1.StreamPlanSyncRequest{Delta: deltaOf("big1", big, big)}))
	if got := store.heldPods(); got > 25 {
		t.Errorf("%d pods held beyond the bound 25", got)
	}
	s1.close()
	s2.close()
	if store.heldPods() != 0 {
		t.Errorf("%d pods held after the streams closed", store.heldPods())
	}
}

// Over gRPC: deltas on a stream, the snapshots dropped when the stream
// ends, and a new stream knows none of the old one's bases.
func TestStreamEndDropsItsSnapshots(t *testing.T) {
	impl := NewPlannerServiceWith(Config{StreamSnapshotMaxPods: 1000})
	srv := grpctest.Start(t, func(s *grpcserver.Server) {
		s.RegisterService(&ServiceDesc, impl)
	})
	c := jobplanev1.NewPlannerServiceClient(srv.Conn)
	req := sizedRequest(t, "job-a", 12)
	next := proto.Clone(req).(*jobplanev1.PlanSyncRequest)
	next.Pods[3].Status.Phase = "Failed"
	next.Pods = next.Pods[1:]
	want, err := fullPlan(t, next)
	if err != nil {
		t.Fatal(err)
	}
	exchange := func(stream jobplanev1.PlannerService_StreamPlanSyncClient, m *jobplanev1.StreamPlanSyncRequest) *jobplanev1.StreamPlanSyncResponse {
		t.Helper()
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	ctx := context.Background()
	stream, err := c.StreamPlanSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exchange(stream, &jobplanev1.StreamPlanSyncRequest{Id: "1", Request: req})
	resp := exchange(stream, &jobplanev1.StreamPlanSyncRequest{Id: "2", Delta: deltaOf("1", req, next)})
	if resp.GetError() != nil || !bytes.Equal(deterministic(t, resp.GetResponse()), want) {
		t.Fatalf("the delta's plan differs from the full snapshot's: %v", resp.GetError())
	}
	if got := impl.snapshots.heldPods(); got != 12 {
		t.Errorf("%d held, want 12 (11 pods and the Job)", got)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("got %v, want the end of the stream", err)
	}
	for deadline := time.Now().Add(5 * time.Second); impl.snapshots.heldPods() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d pods still held after the stream ended", impl.snapshots.heldPods())
		}
	}
	// A reconnect starts afresh.
	stream, err = c.StreamPlanSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp = exchange(stream, &jobplanev1.StreamPlanSyncRequest{Id: "3", Delta: deltaOf("2", next, next)})
	failedPrecondition(t, status.ErrorProto(resp.GetError()))
	resp = exchange(stream, &jobplanev1.StreamPlanSyncRequest{Id: "4", Request: next})
	if resp.GetError() != nil || !bytes.Equal(deterministic(t, resp.GetResponse()), want) {
		t.Fatalf("the full resend's plan differs: %v", resp.GetError())
	}
}

// stamper gives the objects of simulated snapshots resourceVersions, as the
// API server would: a new one whenever an object's content changes.
type stamper struct {
	last map[string]string // UID to the object's content
	rv   map[string]string
	next int
}

func (s *stamper) stamp(uid string, content fmt.Stringer) string {
	c := content.String()
	if s.last[uid] != c {
		s.next++
		s.last[uid], s.rv[uid] = c, strconv.Itoa(s.next)
	}
	return s.rv[uid]
}

// executorSnapshot is the world's snapshot as the executor sends it, each
// object's resourceVersion stamped by its content.
func (st *stamper) executorSnapshot(w *sim.World) *plan.Snapshot {
	s := w.Snapshot()
	s.Job.ResourceVersion = ""
	s.Job.ResourceVersion = st.stamp(string(s.Job.UID), s.Job)
	for _, p := range s.Pods {
		p.ResourceVersion = ""
		p.ResourceVersion = st.stamp(string(p.UID), p)
	}
	return &plan.Snapshot{Job: s.Job, Pods: s.Pods, Now: s.Now, Finalizer: s.TrackingFinalizer,
		State: plan.State{Expectations: s.Expectations, FinalizerRemovalsInFlight: s.FinalizerRemovalsInFlight, Backoff: s.Backoff}}
}

// nextSent is what the executor remembers of its Job once the planner
// answered snap, sent as request id on top of sent (nil: in full): nil
// when the planner dropped the Job.
func nextSent(bases *streamSnapshots, snap *plan.Snapshot, sent *plan.Sent, id string) *plan.Sent {
	switch _, held := bases.jobs[string(snap.Job.UID)]; {
	case !held:
		return nil
	case sent == nil:
		return snap.Record(id)
	default:
		sent.ID = id
		return sent
	}
}

// The executor's own deltas (lib/plan.Snapshot.Delta, by resourceVersion)
// along simulated lifecycles are planned byte for byte as the snapshots in
// full.
func TestExecutorDeltasPlanAsTheFullSnapshotAlongLifecycles(t *testing.T) {
	bases := newSnapshotStore(DefaultStreamSnapshotMaxPods, noByteBound).stream(true, "executor")
	defer bases.close()
	deltas := 0
	alongExecutorLifecycles(bases, func(id string, snap *plan.Snapshot, sent *plan.Sent) {
		want, wantErr := fullPlan(t, snap.Request())
		msg := &jobplanev1.StreamPlanSyncRequest{Id: id, Request: snap.Request()}
		if sent != nil {
			msg = &jobplanev1.StreamPlanSyncRequest{Id: id, Delta: snap.Delta(sent)}
			deltas++
		}
		got, gotErr := streamed(t, bases, msg)
		if (wantErr == nil) != (gotErr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%s: the delta's plan (%v) differs from the full snapshot's (%v)", id, gotErr, wantErr)
		}
	})
	if deltas < 300 {
		t.Errorf("only %d deltas", deltas)
	}
}

// alongExecutorLifecycles calls sync with each snapshot of the simulated
// lifecycles (fewer with -short) as the executor sends it on the stream of
// bases: its request id, and what the executor remembers of the Job (nil:
// nothing, it sends in full); then it remembers what the planner holds.
func alongExecutorLifecycles(bases *streamSnapshots, sync func(id string, snap *plan.Snapshot, sent *plan.Sent)) {
	lifecycles := 24
	if testing.Short() {
		lifecycles = 8
	}
	st := &stamper{last: map[string]string{}, rv: map[string]string{}}
	for seed := range uint64(lifecycles) {
		sc := sim.Generate(seed)
		var sent *plan.Sent
		n := 0
		sc.Run(time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC), 3000, seed%2 == 1, func(w *sim.World) {
			snap := st.executorSnapshot(w)
			id := fmt.Sprintf("%s-%d", sc.Name, n)
			n++
			sync(id, snap, sent)
			sent = nextSent(bases, snap, sent, id)
		})
	}
}

// Streams evicting each other's snapshots concurrently: every delta is
// planned as its full snapshot or answered FailedPrecondition, and the
// bound holds throughout (run with -race).
func TestConcurrentStreamsShareTheBound(t *testing.T) {
	const streams, rounds = 6, 20
	store := newSnapshotStore(35, noByteBound) // room for three Jobs of 10 pods
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := range streams {
		req := sizedRequest(t, fmt.Sprintf("job-%d", i), 10)
		next := proto.Clone(req).(*jobplanev1.PlanSyncRequest)
		next.Pods[2].Status.Phase = "Failed"
		reqs := []*jobplanev1.PlanSyncRequest{req, next}
		var want [2][]byte
		for k, r := range reqs {
			w, err := fullPlan(t, r)
			if err != nil {
				t.Fatal(err)
			}
			want[k] = w
		}
		wg.Go(func() {
			bases := store.stream(true, "executor")
			defer bases.close()
			id, prev := 0, -1
			for r := range rounds {
				k := r % 2
				id++
				msg := &jobplanev1.StreamPlanSyncRequest{Id: strconv.Itoa(id), Request: reqs[k]}
				if prev >= 0 {
					msg = &jobplanev1.StreamPlanSyncRequest{Id: strconv.Itoa(id), Delta: deltaOf(strconv.Itoa(id-1), reqs[prev], reqs[k])}
				}
				got, err := streamed(t, bases, msg)
				if status.Code(err) == codes.FailedPrecondition {
					id++
					got, err = streamed(t, bases, &jobplanev1.StreamPlanSyncRequest{Id: strconv.Itoa(id), Request: reqs[k]})
				}
				if err != nil || !bytes.Equal(got, want[k]) {
					errs <- fmt.Errorf("round %d: %v, or a plan not the full snapshot's", r, err)
					return
				}
				if held := store.heldPods(); held > 35 {
					errs <- fmt.Errorf("%d held beyond the bound 35", held)
					return
				}
				prev = k
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if store.heldPods() != 0 {
		t.Errorf("%d held after every stream ended", store.heldPods())
	}
}

// planStreamedProto plans a decoded request of a stream, its pods
// converted as the codec's decoding would (wire_test.go checks it does).
func planStreamedProto(bases *streamSnapshots, m *jobplanev1.StreamPlanSyncRequest) (*jobplanev1.PlanSyncResponse, error) {
	return planStreamed(bases, streamRequestOf(m), syncSettings{})
}

// The planner's configured pod failure backoff (-pod-failure-backoff,
// -max-pod-failure-backoff) and feature gates (-feature-gates) are the ones
// it plans with, unary and streamed: over the simulated lifecycles each plan
// is the engine's with them, and some differ from the defaults'.
func TestTheConfiguredSettingsArePlanned(t *testing.T) {
	fast := syncSettings{backoff: engine.PodFailureBackoff{Initial: time.Second, Max: 4 * time.Second},
		features: engine.Features{JobPodReplacementPolicyOff: true, JobManagedByOff: true, JobSuccessPolicyOff: true}}
	differ := 0
	for seed := range uint64(30) {
		sim.Generate(seed).Run(time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC), 300, false, func(w *sim.World) {
			s := w.Snapshot()
			req := (&plan.Snapshot{Job: s.Job, Pods: s.Pods, Now: s.Now, Finalizer: s.TrackingFinalizer,
				State: plan.State{Expectations: s.Expectations, FinalizerRemovalsInFlight: s.FinalizerRemovalsInFlight, Backoff: s.Backoff}}).Request()
			clone := func() *jobplanev1.PlanSyncRequest { return proto.Clone(req).(*jobplanev1.PlanSyncRequest) }
			snap, err := snapshotFromRequest(clone(), convertPods(req.GetPods(), false))
			if err != nil {
				return
			}
			fast.apply(snap)
			want := deterministic(t, &jobplanev1.PlanSyncResponse{Plan: plan.ToProto(engine.Sync(snap))})

			unary, err := planRequest(clone(), fast)
			if err != nil {
				t.Fatal(err)
			}
			bases := newSnapshotStore(DefaultStreamSnapshotMaxPods, noByteBound).stream(true, "executor")
			defer bases.close()
			streamed, err := planStreamed(bases, streamRequestOf(&jobplanev1.StreamPlanSyncRequest{Id: "1", Request: clone()}), fast)
			if err != nil {
				t.Fatal(err)
			}
			for what, resp := range map[string]*jobplanev1.PlanSyncResponse{"unary": unary, "streamed": streamed} {
				if !bytes.Equal(deterministic(t, resp), want) {
					t.Fatalf("%s, seed %d: the plan is not the engine's with the configured backoff", what, seed)
				}
			}
			if reference, err := planRequest(clone(), syncSettings{}); err == nil && !bytes.Equal(deterministic(t, reference), want) {
				differ++
			}
		})
	}
	if differ == 0 {
		t.Fatal("no simulated sync plans differently with a 1s backoff: the test shows nothing")
	}
}

// planStreamedWire plans a request of a stream decoded from the wire, as
// the server decodes it.
func planStreamedWire(t *testing.T, bases *streamSnapshots, m *jobplanev1.StreamPlanSyncRequest) error {
	t.Helper()
	var r streamRequest
	if err := r.UnmarshalWire(deterministic(t, m)); err != nil {
		t.Fatal(err)
	}
	_, err := planStreamed(bases, &r, syncSettings{})
	return err
}

// The snapshots kept are bounded by their memory too, counted from the
// bytes they were sent as: a caller sending pods of 100 KB of annotations
// each has as many kept as fit the bound, the least recently used evicted;
// a delta's pods count what they weigh, and what it removes no longer.
func TestSnapshotsAreBoundedByTheirMemory(t *testing.T) {
	const bound = 1 << 20
	store := newSnapshotStore(DefaultStreamSnapshotMaxPods, bound)
	s := store.stream(true, "executor")
	heavy := func(req *jobplanev1.PlanSyncRequest) {
		for _, p := range req.Pods {
			p.Metadata.Annotations = map[string]string{"note": strings.Repeat("x", 100<<10)}
		}
	}
	var reqs []*jobplanev1.PlanSyncRequest
	for i := range 20 {
		req := sizedRequest(t, fmt.Sprint("job-", i), 1)
		heavy(req)
		reqs = append(reqs, req)
		if err := planStreamedWire(t, s, &jobplanev1.StreamPlanSyncRequest{Id: fmt.Sprint("full-", i), Request: req}); err != nil {
			t.Fatal(err)
		}
		if held := store.heldWeight(); held.bytes > bound {
			t.Fatalf("%d bytes held after %d snapshots, beyond the bound %d", held.bytes, i+1, bound)
		}
	}
	if n := store.heldSnapshots(); n < 5 || n >= 20 {
		t.Fatalf("%d snapshots of 100 KB held within 1 MiB, want some, not all", n)
	}
	failedPrecondition(t, planStreamedWire(t, s, &jobplanev1.StreamPlanSyncRequest{Id: "d0", Delta: deltaOf("full-0", reqs[0], reqs[0])}))

	// A light Job's base, then a delta adding a heavy pod, then one
	// removing it.
	light := sizedRequest(t, "light", 2)
	if err := planStreamedWire(t, s, &jobplanev1.StreamPlanSyncRequest{Id: "l1", Request: light}); err != nil {
		t.Fatal(err)
	}
	lightHeld := func() int64 {
		store.mu.Lock()
		defer store.mu.Unlock()
		return s.jobs["light"].held.bytes
	}
	before := lightHeld()
	withHeavy := proto.Clone(light).(*jobplanev1.PlanSyncRequest)
	extra := sizedRequest(t, "light", 3).Pods[2]
	withHeavy.Pods = append(withHeavy.Pods, extra)
	heavy(&jobplanev1.PlanSyncRequest{Pods: []*jobplanev1.Pod{extra}})
	if err := planStreamedWire(t, s, &jobplanev1.StreamPlanSyncRequest{Id: "l2", Delta: deltaOf("l1", light, withHeavy)}); err != nil {
		t.Fatal(err)
	}
	if grown := lightHeld() - before; grown < 100<<10 {
		t.Fatalf("a delta adding a pod of 100 KB grew the held bytes by %d", grown)
	}
	if err := planStreamedWire(t, s, &jobplanev1.StreamPlanSyncRequest{Id: "l3", Delta: deltaOf("l2", withHeavy, light)}); err != nil {
		t.Fatal(err)
	}
	if after := lightHeld(); after != before {
		t.Fatalf("%d bytes held once the heavy pod was removed, %d before it came", after, before)
	}
	s.close()
	if held := store.heldWeight(); held != (weight{}) {
		t.Fatalf("%+v held after the stream closed", held)
	}
}

// Among outside callers, a tenant flooding the store with snapshots evicts
// its own, the largest share, and never a quiet tenant's: the quiet
// tenant's deltas keep their bases.
func TestAFloodingTenantEvictsItsOwnSnapshots(t *testing.T) {
	const bound = 1 << 20
	store := newSnapshotStore(DefaultStreamSnapshotMaxPods, bound)
	quiet, flood := store.stream(false, "ns:quiet"), store.stream(false, "ns:flood")
	send := func(s *streamSnapshots, uid string) *jobplanev1.PlanSyncRequest {
		req := sizedRequest(t, uid, 1)
		req.Pods[0].Metadata.Annotations = map[string]string{"note": strings.Repeat("x", 100<<10)}
		if err := planStreamedWire(t, s, &jobplanev1.StreamPlanSyncRequest{Id: uid + "-1", Request: req}); err != nil {
			t.Fatal(err)
		}
		return req
	}
	var mine []*jobplanev1.PlanSyncRequest
	for i := range 2 {
		mine = append(mine, send(quiet, fmt.Sprint("quiet-", i)))
	}
	for i := range 40 {
		send(flood, fmt.Sprint("flood-", i))
	}
	for i, req := range mine {
		uid := req.Job.Metadata.Uid
		if err := planStreamedWire(t, quiet, &jobplanev1.StreamPlanSyncRequest{Id: uid + "-2", Delta: deltaOf(uid+"-1", req, req)}); err != nil {
			t.Fatalf("the quiet tenant's Job %d after another tenant's flood: %v", i, err)
		}
	}
	if held := store.heldWeight(); held.bytes > bound {
		t.Fatalf("%d bytes held, beyond %d", held.bytes, bound)
	}
}

// An outside caller's heavy snapshots never evict the system level's (the
// executor's): they are not kept once only the executor's would have to
// go, and are evicted first to keep the executor's.
func TestOutsideSnapshotsNeverEvictTheExecutors(t *testing.T) {
	const bound = 1 << 20
	store := newSnapshotStore(DefaultStreamSnapshotMaxPods, bound)
	executor, outsider := store.stream(true, "executor"), store.stream(false, "outsider")
	send := func(s *streamSnapshots, uid string, note int) *jobplanev1.PlanSyncRequest {
		req := sizedRequest(t, uid, 1)
		req.Pods[0].Metadata.Annotations = map[string]string{"note": strings.Repeat("x", note)}
		if err := planStreamedWire(t, s, &jobplanev1.StreamPlanSyncRequest{Id: uid + "-1", Request: req}); err != nil {
			t.Fatal(err)
		}
		return req
	}
	var mine []*jobplanev1.PlanSyncRequest
	for i := range 4 {
		mine = append(mine, send(executor, fmt.Sprint("executor-", i), 100<<10))
	}
	for i := range 20 {
		send(outsider, fmt.Sprint("outside-", i), 100<<10)
	}
	for i, req := range mine {
		uid := req.Job.Metadata.Uid
		if err := planStreamedWire(t, executor, &jobplanev1.StreamPlanSyncRequest{Id: uid + "-2", Delta: deltaOf(uid+"-1", req, req)}); err != nil {
			t.Fatalf("the executor's Job %d after the outside flood: %v", i, err)
		}
	}
	// The executor's new snapshots evict the outside caller's first.
	for i := range 4 {
		send(executor, fmt.Sprint("executor-more-", i), 100<<10)
	}
	store.mu.Lock()
	outside := 0
	if h := store.outside["outsider"]; h != nil {
		outside = h.lru.Len()
	}
	store.mu.Unlock()
	if err := planStreamedWire(t, executor, &jobplanev1.StreamPlanSyncRequest{Id: "again", Delta: deltaOf(mine[0].Job.Metadata.Uid+"-2", mine[0], mine[0])}); err != nil {
		t.Fatalf("the executor's first Job after its own new ones, %d outside snapshots held: %v", outside, err)
	}
	if held := store.heldWeight(); held.bytes > bound {
		t.Fatalf("%d bytes held, beyond %d", held.bytes, bound)
	}
}
