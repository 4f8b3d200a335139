package load

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

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
	t.Setenv("GOMEMLIMIT", fmt.Sprint(deployedMemoryLimit))
	ca := grpctest.NewCA(t, "clients")
	server := ca.ServerCert(t, "planner")
	planner := kubetest.StartProcess(t, "planner", kubetest.BuildBinary(t, "./services/planner/cmd/planner"), "-shutdown-drain", "0s",
		"-tls-cert-file", server.CertFile, "-tls-key-file", server.KeyFile, "-client-ca-file", ca.CertFile, "-system-users", "executor")
	stream, err := jobplanev1.NewPlannerServiceClient(certConn(t, ca, planner.GRPCAddr, "executor")).StreamPlanSync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.CloseSend() }()
	header, err := stream.Header()
	if err != nil {
		t.Fatal(err)
	}
	limit, err := strconv.Atoi(header.Get(grpcserver.MaxMessageHeader)[0])
	if err != nil {
		t.Fatal(err)
	}

	large := scalestate.New(40_000)
	snap := &plan.Snapshot{Job: large.Job, Pods: large.Pods, Now: scalestate.Now, Finalizer: scalestate.Finalizer}
	parts, sent := sendInParts(t, stream, snap, nil, "1", limit)
	if parts < 2 {
		t.Fatalf("a 40,000-pod snapshot sent in %d part(s) at a planner taking %d bytes", parts, limit)
	}
	changed, _ := scalestate.Changed(large, 400)
	if next, _ := sendInParts(t, stream, &plan.Snapshot{Job: changed.Job, Pods: changed.Pods, Now: scalestate.Now, Finalizer: scalestate.Finalizer}, sent, "2", limit); next != 1 {
		t.Fatalf("the next sync, 1%% of the pods changed, sent in %d parts", next)
	}

	huge := scalestate.New(60_000)
	w, err := (&plan.Snapshot{Job: huge.Job, Pods: huge.Pods, Now: scalestate.Now, Finalizer: scalestate.Finalizer}).WireRequest("3")
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
// sent on the executor's stream just after a 40,000-pod Job's full snapshot
// (in parts), against the same sync alone: the planner answers a stream's
// requests one after another, so every Job's plan waits for those sent
// before it. Run with:
//
//	go test -run '^$' -bench SmallJobBehind -benchtime 5x ./services/planner/test/load/
func BenchmarkASmallJobBehindALargeOne(b *testing.B) {
	b.Setenv("GOMEMLIMIT", fmt.Sprint(deployedMemoryLimit))
	ca := grpctest.NewCA(b, "clients")
	server := ca.ServerCert(b, "planner")
	planner := kubetest.StartProcess(b, "planner", kubetest.BuildBinary(b, "./services/planner/cmd/planner"), "-shutdown-drain", "0s",
		"-tls-cert-file", server.CertFile, "-tls-key-file", server.KeyFile, "-client-ca-file", ca.CertFile, "-system-users", "executor")
	stream, err := jobplanev1.NewPlannerServiceClient(certConn(b, ca, planner.GRPCAddr, "executor")).StreamPlanSync(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = stream.CloseSend() }()
	header, err := stream.Header()
	if err != nil {
		b.Fatal(err)
	}
	limit, err := strconv.Atoi(header.Get(grpcserver.MaxMessageHeader)[0])
	if err != nil {
		b.Fatal(err)
	}
	large, small := scalestate.New(40_000), scalestate.New(100)
	largeReq, err := (&plan.Snapshot{Job: large.Job, Pods: large.Pods, Now: scalestate.Now, Finalizer: scalestate.Finalizer}).WireRequest("large")
	if err != nil {
		b.Fatal(err)
	}
	largeParts, _ := largeReq.Parts(limit)
	smallReq, err := (&plan.Snapshot{Job: small.Job, Pods: small.Pods, Now: scalestate.Now, Finalizer: scalestate.Finalizer}).WireRequest("small")
	if err != nil {
		b.Fatal(err)
	}
	// smallAnswer sends the small Job's sync after ahead, and waits for its
	// answer: the time from its sending to its answer.
	smallAnswer := func(ahead []*plan.WireRequest) time.Duration {
		for _, p := range ahead {
			if err := stream.SendMsg(p); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		if err := stream.SendMsg(smallReq); err != nil {
			b.Fatal(err)
		}
		for {
			resp, err := stream.Recv()
			if err != nil || resp.GetError() != nil {
				b.Fatalf("%v %v", err, resp.GetError())
			}
			if resp.GetId() == "small" {
				return time.Since(start)
			}
		}
	}
	var alone, behind time.Duration
	for range b.N {
		alone += smallAnswer(nil)
		behind += smallAnswer(largeParts)
	}
	b.ReportMetric(float64(alone.Microseconds())/1000/float64(b.N), "alone-ms")
	b.ReportMetric(float64(behind.Microseconds())/1000/float64(b.N), "behind-ms")
}
