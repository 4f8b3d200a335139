// Package load floods a real planner process from outside, as a hostile or
// careless caller would, and checks what admission promises: memory within
// its budget, and only OK or RESOURCE_EXHAUSTED answers.
package load

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/kubetest"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/planner/scalestate"
)

// The planner's memory limit in this test, and the calls of the flood: 64
// unary PlanSync calls of a 10,000-pod Job (3.3 MB each; unbounded, 128 of
// them took the planner to 6.5 GiB).
const (
	memoryLimit = 512 << 20
	floodCalls  = 64
	jobPods     = 10_000
)

func TestPlannerMemoryStaysWithinItsLimitUnderAFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and floods the planner binary")
	}
	t.Setenv("GOMEMLIMIT", fmt.Sprint(memoryLimit))
	planner := kubetest.StartProcess(t, "planner", kubetest.BuildBinary(t, "./services/planner/cmd/planner"),
		"-authn-anonymous", "-shutdown-drain", "0s")
	conn, err := grpc.NewClient(planner.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20), grpcserver.CallCodec()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	state := scalestate.New(jobPods)
	req := (&plan.Snapshot{Job: state.Job, Pods: state.Pods, Now: scalestate.Now, Finalizer: scalestate.Finalizer}).Request()
	api := jobplanev1.NewPlannerServiceClient(conn)

	var mu sync.Mutex
	codesSeen := map[codes.Code]int{}
	var wg sync.WaitGroup
	for range floodCalls {
		wg.Go(func() {
			_, err := api.PlanSync(context.Background(), req)
			mu.Lock()
			codesSeen[status.Code(err)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	peak := planner.PeakRSS(t)
	t.Logf("answers %v; planner peak RSS %d MiB (limit %d MiB)", codesSeen, peak>>20, memoryLimit>>20)
	for code := range codesSeen {
		if code != codes.OK && code != codes.ResourceExhausted {
			t.Errorf("%d calls answered %s; want only OK and ResourceExhausted", codesSeen[code], code)
		}
	}
	if codesSeen[codes.OK] == 0 {
		t.Error("no call was served")
	}
	if peak > memoryLimit {
		t.Errorf("peak RSS %d MiB over the memory limit of %d MiB", peak>>20, memoryLimit>>20)
	}
}
