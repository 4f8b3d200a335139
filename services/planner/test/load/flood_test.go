// Package load floods a real planner process from outside, as a hostile or
// careless caller would, and checks what admission promises: memory within
// its budget, and only OK or RESOURCE_EXHAUSTED answers.
package load

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/wait"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/lib/kubetest"
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
	req := snapshotOf(state).Request()
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

// The executor's identity has the planner's system priority level: its
// plans are served while an outside caller floods the planner, never shed,
// each before the flood is through. Identities are client certificates (CN
// the user), so no API server is needed.
func TestTheExecutorsPlansAreServedThroughAFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and floods the planner binary")
	}
	t.Setenv("GOMEMLIMIT", fmt.Sprint(memoryLimit))
	ca := grpctest.NewCA(t, "clients")
	server := ca.ServerCert(t, "planner")
	planner := kubetest.StartProcess(t, "planner", kubetest.BuildBinary(t, "./services/planner/cmd/planner"),
		"-shutdown-drain", "0s", "-tls-cert-file", server.CertFile, "-tls-key-file", server.KeyFile, "-client-ca-file", ca.CertFile,
		"-system-users", "executor", "-allow-unauthenticated-metrics")
	flooder, executor := certConn(t, ca, planner.GRPCAddr, "flooder"), jobplanev1.NewPlannerServiceClient(certConn(t, ca, planner.GRPCAddr, "executor"))
	state := scalestate.New(jobPods)
	// Encoded once: 64 goroutines encoding 3.3 MB each (under -race, beside
	// other test binaries) starve this process's own executor calls, which
	// would then measure the client, not the planner's priority levels.
	big, err := proto.MarshalOptions{Deterministic: true}.Marshal(
		snapshotOf(state).Request())
	if err != nil {
		t.Fatal(err)
	}
	small := scalestate.New(100)
	smallReq := snapshotOf(small).Request()

	var flooded atomic.Int32
	var wg sync.WaitGroup
	for range floodCalls {
		wg.Go(func() {
			_ = flooder.Invoke(context.Background(), jobplanev1.PlannerService_PlanSync_FullMethodName, encoded(big), &jobplanev1.PlanSyncResponse{})
			flooded.Add(1)
		})
	}
	// The flood is at the planner: its workload seat taken, calls queued.
	metricsURL := "https://" + planner.MetricsAddr + "/metrics"
	insecureClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		resp, err := insecureClient.Get(metricsURL)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return err == nil && strings.Contains(string(body), `jobplane_admission_in_use{budget="seats",priority_level="workload"} 1`) &&
			!strings.Contains(string(body), `jobplane_admission_waiting{budget="seats",priority_level="workload"} 0`), nil
	})
	if err != nil {
		t.Fatalf("the flood never took the workload level's seat with calls waiting: %v", err)
	}
	// The executor's syncs, one after another, while the flood lasts.
	const syncs = 10
	for i := range syncs {
		if _, err := executor.PlanSync(context.Background(), smallReq); err != nil {
			t.Fatalf("the executor's plan %d during the flood: %v", i, err)
		}
	}
	done := flooded.Load()
	wg.Wait()
	t.Logf("the executor's %d plans were served while %d of the flood's %d calls were answered", syncs, done, floodCalls)
	if done >= floodCalls {
		t.Errorf("the executor's plans were served only after the whole flood")
	}
}
