package load

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/lib/kubetest"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/planner/scalestate"
)

// deployedMemoryLimit is the planner's GOMEMLIMIT in deploy/.
const deployedMemoryLimit = 450 << 20

// A planner as deploy/ runs it (GOMEMLIMIT=450MiB) takes 7 MiB in one
// request. A Job of 40,000 pods (13 MB) is sent in parts by the executor's
// identity, as the executor sends it, and planned; its next sync is a
// delta. A Job of 60,000 pods, more than the planner keeps, is refused at
// its first part, naming the bound. The planner's RSS stays within its
// limit throughout.
func TestAJobLargerThanOneRequestIsPlannedWithinTheMemoryLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the planner binary and plans Jobs of tens of thousands of pods")
	}
	planner, stream, limit := deployedPlanner(t)

	large := scalestate.New(40_000)
	snap := snapshotOf(large)
	parts, sent := sendInParts(t, stream, snap, nil, "1", limit)
	if parts < 2 {
		t.Fatalf("a 40,000-pod snapshot sent in %d part(s) at a planner taking %d bytes", parts, limit)
	}
	changed, _ := scalestate.Changed(large, 400)
	if next, _ := sendInParts(t, stream, snapshotOf(changed), sent, "2", limit); next != 1 {
		t.Fatalf("the next sync, 1%% of the pods changed, sent in %d parts", next)
	}

	// A small Job's sync sent right behind the large Job's full snapshot
	// is answered first: the planner plans different Jobs at once.
	small := otherJob(scalestate.New(100))
	smallReq, err := snapshotOf(small).WireRequest("small")
	if err != nil {
		t.Fatal(err)
	}
	full, err := snap.WireRequest("4")
	if err != nil {
		t.Fatal(err)
	}
	fullParts, _ := full.Parts(limit)
	for _, p := range append(fullParts, smallReq) {
		if err := stream.SendMsg(p); err != nil {
			t.Fatal(err)
		}
	}
	var order []string
	for range len(fullParts) + 1 {
		resp, err := stream.Recv()
		if err != nil || resp.GetError() != nil {
			t.Fatalf("%v %v", err, resp.GetError())
		}
		order = append(order, resp.GetId())
	}
	if order[len(order)-1] != "4" {
		t.Errorf("answers in the order %q: the small Job's plan waited for the large Job's", order)
	}

	huge := scalestate.New(60_000)
	w, err := snapshotOf(huge).WireRequest("3")
	if err != nil {
		t.Fatal(err)
	}
	hugeParts, ok := w.Parts(limit)
	if !ok {
		t.Fatal("a 60,000-pod snapshot could not be split")
	}
	if err := stream.SendMsg(hugeParts[0]); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	refused := status.ErrorProto(resp.GetError())
	if status.Code(refused) != codes.ResourceExhausted || apierr.Reason(refused) != plan.ReasonTooLarge {
		t.Fatalf("the first part of a 60,000-pod Job: %v, want RESOURCE_EXHAUSTED %s", refused, plan.ReasonTooLarge)
	}
	t.Logf("40,000 pods in %d parts at %d bytes a request; 60,000 refused: %s", parts, limit, status.Convert(refused).Message())
	peak := planner.PeakRSS(t)
	t.Logf("the planner's peak RSS: %d MiB", peak>>20)
	if peak > deployedMemoryLimit {
		t.Errorf("peak RSS %d MiB over the memory limit of %d MiB", peak>>20, deployedMemoryLimit>>20)
	}
}

// otherJob is s with another Job's UID than scalestate's.
func otherJob(s scalestate.State) scalestate.State { return withJobUID(s, "another-job") }

// deployedPlanner starts the planner binary as deploy/ runs it
// (GOMEMLIMIT=450MiB, the executor's identity a system user), and opens
// the executor's stream: it answers the largest request the planner takes.
func deployedPlanner(tb testing.TB) (*kubetest.Process, jobplanev1.PlannerService_StreamPlanSyncClient, int) {
	planner, conn := deployedPlannerConn(tb)
	stream, limit := executorStream(tb, conn)
	return planner, stream, limit
}

// deployedPlannerConn starts the planner binary as deploy/ runs it and
// connects to it as the executor.
func deployedPlannerConn(tb testing.TB) (*kubetest.Process, *grpc.ClientConn) {
	tb.Setenv("GOMEMLIMIT", fmt.Sprint(deployedMemoryLimit))
	ca := grpctest.NewCA(tb, "clients")
	server := ca.ServerCert(tb, "planner")
	planner := kubetest.StartProcess(tb, "planner", kubetest.BuildBinary(tb, "./services/planner/cmd/planner"), "-shutdown-drain", "0s",
		"-tls-cert-file", server.CertFile, "-tls-key-file", server.KeyFile, "-client-ca-file", ca.CertFile, "-system-users", "executor")
	return planner, certConn(tb, ca, planner.GRPCAddr, "executor")
}

// executorStream opens a StreamPlanSync stream on conn, and answers the
// largest request the planner takes on it.
func executorStream(tb testing.TB, conn *grpc.ClientConn) (jobplanev1.PlannerService_StreamPlanSyncClient, int) {
	stream, err := jobplanev1.NewPlannerServiceClient(conn).StreamPlanSync(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = stream.CloseSend() })
	header, err := stream.Header()
	if err != nil {
		tb.Fatal(err)
	}
	limit, err := strconv.Atoi(header.Get(grpcserver.MaxMessageHeader)[0])
	if err != nil {
		tb.Fatal(err)
	}
	return stream, limit
}

// sendInParts sends snap on stream as request id, in full (sent nil) or as
// a delta against sent, in parts within limit, and checks that the last
// part is planned; it returns the number of parts and the record of what
// the planner now holds.
func sendInParts(t *testing.T, stream jobplanev1.PlannerService_StreamPlanSyncClient, snap *plan.Snapshot, sent *plan.Sent, id string, limit int) (int, *plan.Sent) {
	t.Helper()
	var w *plan.WireRequest
	var err error
	if sent != nil {
		w, err = snap.WireDelta(id, sent)
		sent.ID = id
	} else {
		w, err = snap.WireRequest(id)
		sent = snap.Record(id)
	}
	if err != nil {
		t.Fatal(err)
	}
	parts, ok := w.Parts(limit)
	if !ok {
		t.Fatalf("%d bytes could not be split within %d", w.Size(), limit)
	}
	start := time.Now()
	for _, p := range parts {
		if err := stream.SendMsg(p); err != nil {
			t.Fatal(err)
		}
	}
	for i := range parts {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := resp.GetError(); e != nil {
			t.Fatalf("part %d of %d: %v", i+1, len(parts), status.ErrorProto(e))
		}
		if last := i == len(parts)-1; last != (resp.GetResponse().GetPlan() != nil) {
			t.Fatalf("part %d of %d answered with plan %v", i+1, len(parts), resp.GetResponse())
		}
	}
	t.Logf("%d pods, %d bytes in %d parts: planned in %s", len(snap.Pods), w.Size(), len(parts), time.Since(start).Round(time.Millisecond))
	return len(parts), sent
}

// BenchmarkASmallJobBehindALargeOne is the wait of a 100-pod Job's sync
// sent on the executor's stream just after a 40,000-pod Job's (another
// Job): its full snapshot (in parts of what the planner takes, or of a
// quarter of it, as the executor sent them on its one stream before the
// bulk lane), or a delta of 1 % of its pods, against the same sync alone,
// from the small sync's sending to its answer; and the same small sync
// while the full snapshot goes on a stream of its own, in parts of what the
// planner takes, as the executor sends it now (behind-full-own-stream).
// Run with:
//
//	go test -run '^$' -bench SmallJobBehind -benchtime 5x ./services/planner/test/load/
func BenchmarkASmallJobBehindALargeOne(b *testing.B) {
	_, conn := deployedPlannerConn(b)
	stream, limit := executorStream(b, conn)
	bulk, _ := executorStream(b, conn)
	large, small := scalestate.New(40_000), otherJob(scalestate.New(100))
	changed, _ := scalestate.Changed(large, 400)
	states := []*plan.Snapshot{snapshotOf(changed), snapshotOf(large)}
	smallReq := wire(snapshotOf(small).WireRequest("small"))
	next := 0
	// send sends the large Job's snapshot, in full (sent nil) or as a
	// delta against sent, in parts if it must be, then the small Job's
	// sync, and waits for both: the time from the small sync's sending
	// to its answer, and what the planner holds of the large Job.
	send := func(snap *plan.Snapshot, sent *plan.Sent, partLimit int) (time.Duration, *plan.Sent) {
		next++
		id := strconv.Itoa(next)
		var w *plan.WireRequest
		if sent == nil {
			w, sent = wire(snap.WireRequest(id)), snap.Record(id)
		} else {
			w = wire(snap.WireDelta(id, sent))
			sent.ID = id
		}
		parts, _ := w.Parts(partLimit)
		for _, p := range append(parts, smallReq) {
			if err := stream.SendMsg(p); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		var wait time.Duration
		for range len(parts) + 1 {
			resp, err := stream.Recv()
			if err != nil || resp.GetError() != nil {
				b.Fatalf("%v %v", err, resp.GetError())
			}
			if resp.GetId() == "small" {
				wait = time.Since(start)
			}
		}
		return wait, sent
	}
	alone := func() time.Duration {
		start := time.Now()
		if err := stream.SendMsg(smallReq); err != nil {
			b.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	// beside sends the large Job's full snapshot on the bulk stream, then,
	// once its first part is on its way, the small Job's sync on the
	// executor's stream: the small sync's wait.
	beside := func(snap *plan.Snapshot) time.Duration {
		next++
		parts, _ := wire(snap.WireRequest(strconv.Itoa(next))).Parts(limit)
		bulkDone := make(chan error, 1)
		go func() {
			for _, p := range parts {
				if err := bulk.SendMsg(p); err != nil {
					bulkDone <- err
					return
				}
			}
			for range parts {
				if resp, err := bulk.Recv(); err != nil || resp.GetError() != nil {
					bulkDone <- fmt.Errorf("%v %v", err, resp.GetError())
					return
				}
			}
			bulkDone <- nil
		}()
		time.Sleep(time.Millisecond)
		wait := alone()
		if err := <-bulkDone; err != nil {
			b.Fatal(err)
		}
		return wait
	}
	var quiet, behindDelta, behindFull, behindQuarters, besideFull time.Duration
	for i := range b.N {
		quiet += alone()
		wait, sent := send(states[1], nil, limit)
		behindFull += wait
		wait, _ = send(states[i%2], sent, limit)
		behindDelta += wait
		wait, _ = send(states[1], nil, limit/4)
		behindQuarters += wait
		besideFull += beside(states[1])
	}
	n := float64(b.N)
	b.ReportMetric(float64(quiet.Microseconds())/1000/n, "alone-ms")
	b.ReportMetric(float64(behindDelta.Microseconds())/1000/n, "behind-delta-ms")
	b.ReportMetric(float64(behindFull.Microseconds())/1000/n, "behind-full-ms")
	b.ReportMetric(float64(behindQuarters.Microseconds())/1000/n, "behind-full-quarters-ms")
	b.ReportMetric(float64(besideFull.Microseconds())/1000/n, "behind-full-own-stream-ms")
}

// snapshotOf is the executor's snapshot of a scalestate state.
func snapshotOf(s scalestate.State) *plan.Snapshot {
	return &plan.Snapshot{Job: s.Job, Pods: s.Pods, Now: scalestate.Now, Finalizer: scalestate.Finalizer}
}

// wire is the encoded request, or the benchmark's end.
func wire(w *plan.WireRequest, err error) *plan.WireRequest {
	if err != nil {
		panic(err)
	}
	return w
}
