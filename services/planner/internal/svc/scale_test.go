package svc

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/planner/scalestate"
)

// scaledRequest is the PlanSync request of scalestate's Job of n pods after
// changes of them succeeded.
func scaledRequest(_ testing.TB, n, changes int) *jobplanev1.PlanSyncRequest {
	s, _ := scalestate.Changed(scalestate.New(n), changes)
	return plan.NewRequest(s.Job, s.Pods, plan.State{}, scalestate.Now, scalestate.Finalizer)
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

// BenchmarkScale is the round trip an executor pays for one sync of
// scalestate's Job over a loopback StreamPlanSync stream to the planner:
// encoding the request from the Kubernetes objects (plan.Snapshot's
// WireRequest or WireDelta, as plannerclient does), the call (server
// decoding, engine, response marshal, client unmarshal) and reading the
// plan (plan.FromProto). mode=full sends every sync in full (the Job after
// 1% of its pods succeeded); mode=unary the same by unary PlanSync; mode=
// delta-P% alternates between the Job before and after P% of its pods
// succeeded (and a new resourceVersion of the Job, as after a status write),
// each sync a delta against the one before; mode=parts is mode=full sent in
// parts of at most 1 MiB, as the executor sends a snapshot larger than the
// planner takes. Allocations count both sides.
func BenchmarkScale(b *testing.B) {
	sizes := []int{1000, 10_000, 100_000}
	if s := os.Getenv("JOBPLANE_SCALE_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	// The executor's connection to the planner decodes with the chassis'
	// codec (services/executor/cmd/executor).
	srv := grpctest.StartWith(b, grpctest.Options{
		Dial: []grpc.DialOption{grpc.WithDefaultCallOptions(grpcserver.CallCodec())},
	}, func(s *grpcserver.Server) {
		s.RegisterService(&ServiceDesc, NewPlannerService())
	})
	c := jobplanev1.NewPlannerServiceClient(srv.Conn)
	for _, n := range sizes {
		base := scalestate.New(n)
		for _, mode := range []struct {
			name    string
			percent int
			delta   bool
		}{{"full", 1, false}, {"parts", 1, false}, {"unary", 1, false}, {"delta-1%", 1, true}, {"delta-10%", 10, true}} {
			changed, _ := scalestate.Changed(base, n*mode.percent/100)
			job := changed.Job.DeepCopy()
			job.ResourceVersion = "1001"
			changed.Job = job
			b.Run(fmt.Sprintf("pods=%d/mode=%s", n, mode.name), func(b *testing.B) {
				stream, err := c.StreamPlanSync(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = stream.CloseSend() }()
				states := []*plan.Snapshot{snapshotOf(changed), snapshotOf(base)}
				var sent *plan.Sent
				next := 0
				call := func(msg *plan.WireRequest) (*jobplanev1.SyncPlan, int) {
					if mode.name == "unary" {
						resp := &jobplanev1.PlanSyncResponse{}
						if err := srv.Conn.Invoke(context.Background(), jobplanev1.PlannerService_PlanSync_FullMethodName, msg, resp); err != nil {
							b.Fatal(err)
						}
						return resp.GetPlan(), proto.Size(resp)
					}
					parts := []*plan.WireRequest{msg}
					if mode.name == "parts" {
						parts, _ = msg.Parts(1 << 20)
					}
					for _, part := range parts {
						if err := stream.SendMsg(part); err != nil {
							b.Fatal(err)
						}
					}
					var resp *jobplanev1.StreamPlanSyncResponse
					for range parts {
						if resp, err = stream.Recv(); err != nil || resp.GetError() != nil {
							b.Fatalf("%v %v", err, resp.GetError())
						}
					}
					return resp.GetResponse().GetPlan(), proto.Size(resp)
				}
				if mode.delta { // the first sync, in full, untimed
					next++
					snap := states[1]
					call(wire(snap.WireRequest(strconv.Itoa(next))))
					sent = snap.Record(strconv.Itoa(next))
				}
				var reqBytes, respBytes int
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					next++
					id := strconv.Itoa(next)
					var msg *plan.WireRequest
					switch {
					case mode.delta:
						msg = wire(states[i%2].WireDelta(id, sent))
						sent.ID = id
					case mode.name == "unary":
						msg = wire(states[0].WirePlanSync())
					default:
						msg = wire(states[0].WireRequest(id))
					}
					p, size := call(msg)
					if _, err := plan.FromProto(p, field.NewPath("plan")); err != nil {
						b.Fatal(err)
					}
					if i == 0 {
						reqBytes, respBytes = msg.Size(), size
					}
				}
				b.ReportMetric(float64(reqBytes), "req-bytes")
				b.ReportMetric(float64(respBytes), "resp-bytes")
			})
		}
	}
}

// TestStreamSnapshotMemory holds, on 100 streams, the snapshot of a
// 10,000-pod Job each, decoded from the wire as the server decodes it
// (streamRequest.UnmarshalWire), under
// the bounds JOBPLANE_SNAPSHOT_BOUND (default 1,000,000 pods) and
// JOBPLANE_SNAPSHOT_BYTES (default DefaultStreamSnapshotMaxBytes), and reports
// the pods held, the Go heap and the process's RSS. It runs only when
// JOBPLANE_SNAPSHOT_MEMORY=1 (it takes a few GB).
func TestStreamSnapshotMemory(t *testing.T) {
	if os.Getenv("JOBPLANE_SNAPSHOT_MEMORY") != "1" {
		t.Skip("JOBPLANE_SNAPSHOT_MEMORY=1 runs it")
	}
	bound := DefaultStreamSnapshotMaxPods
	if s := os.Getenv("JOBPLANE_SNAPSHOT_BOUND"); s != "" {
		var err error
		if bound, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	byteBound := DefaultStreamSnapshotMaxBytes()
	if s := os.Getenv("JOBPLANE_SNAPSHOT_BYTES"); s != "" {
		var err error
		if byteBound, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	const streams, pods = 100, 10_000
	store := newSnapshotStore(bound, byteBound)
	wire, err := proto.Marshal(scaledRequest(t, pods, 0))
	if err != nil {
		t.Fatal(err)
	}
	before := heapInuse()
	var held []*streamSnapshots
	for i := range streams {
		req := &jobplanev1.PlanSyncRequest{}
		if err := proto.Unmarshal(wire, req); err != nil {
			t.Fatal(err)
		}
		uid := fmt.Sprintf("job-%03d", i)
		req.Job.Metadata.Uid = uid
		for _, p := range req.Pods {
			p.Metadata.OwnerReferences[0].Uid = uid
		}
		b, err := proto.Marshal(&jobplanev1.StreamPlanSyncRequest{Id: "1", Request: req})
		if err != nil {
			t.Fatal(err)
		}
		var decoded streamRequest // as the server decodes it
		if err := decoded.UnmarshalWire(b); err != nil {
			t.Fatal(err)
		}
		s := store.stream(true, "executor")
		if _, err := planStreamed(s, &decoded, syncSettings{}); err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
		if store.heldPods() > bound {
			t.Fatalf("%d pods held beyond the bound %d", store.heldPods(), bound)
		}
	}
	heap := heapInuse() - before
	t.Logf("bound %d pods, %d MiB: %d snapshots, %d pods held, %d MiB counted; Go heap in use %.0f MiB (%.0f B/pod held); RSS %s",
		bound, byteBound>>20, store.heldSnapshots(), store.heldPods(), store.heldWeight().bytes>>20, float64(heap)/(1<<20), float64(heap)/float64(max(store.heldPods(), 1)), rss())
	for _, s := range held {
		s.close()
	}
	if store.heldPods() != 0 {
		t.Errorf("%d pods held after every stream ended", store.heldPods())
	}
}

func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// rss is the process's resident set size, from /proc.
func rss() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
