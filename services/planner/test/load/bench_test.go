package load

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/lib/kubetest"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/lib/retryinfo"
	"github.com/jobplane/jobplane/services/planner/scalestate"
)

// BenchmarkFlood is issue 19's first table: a caller sends the same
// 10,000-pod PlanSync from `concurrency` goroutines for floodFor at a fresh
// planner (GOMEMLIMIT=memoryLimit, default flags), while the executor's
// identity (system level) plans a 100-pod Job every 100 ms. The flood sends
// bytes encoded once (the client shares the machine's two cores with the
// planner) and, shed, waits the RetryInfo delay, as jobplane's clients do.
// It reports calls/s served and shed, the planner's peak RSS, and the
// executor's p99 (concurrency=0 is its p99 without a flood). Run with:
//
//	go test -run '^$' -bench Flood -benchtime 1x ./services/planner/test/load/
//
// With FLOOD_SEPARATE_PLANNER=1 the executor plans on a second planner
// process the flood does not reach: what the machine's two shared cores
// alone cost its p99.
func BenchmarkFlood(b *testing.B) {
	bin := kubetest.BuildBinary(b, "./services/planner/cmd/planner")
	state := scalestate.New(jobPods)
	big, err := proto.MarshalOptions{Deterministic: true}.Marshal(
		(&plan.Snapshot{Job: state.Job, Pods: state.Pods, Now: scalestate.Now, Finalizer: scalestate.Finalizer}).Request())
	if err != nil {
		b.Fatal(err)
	}
	small := scalestate.New(100)
	smallReq := (&plan.Snapshot{Job: small.Job, Pods: small.Pods, Now: scalestate.Now, Finalizer: scalestate.Finalizer}).Request()
	const floodFor = 20 * time.Second
	for _, concurrency := range []int{0, 1, 16, 128, 512} {
		b.Run(fmt.Sprintf("concurrency=%d", concurrency), func(b *testing.B) {
			for range b.N {
				b.Setenv("GOMEMLIMIT", fmt.Sprint(memoryLimit))
				ca := grpctest.NewCA(b, "clients")
				server := ca.ServerCert(b, "planner")
				planner := kubetest.StartProcess(b, "planner", bin, "-shutdown-drain", "0s",
					"-tls-cert-file", server.CertFile, "-tls-key-file", server.KeyFile, "-client-ca-file", ca.CertFile, "-system-users", "executor")
				executorsPlanner := planner
				if os.Getenv("FLOOD_SEPARATE_PLANNER") != "" {
					executorsPlanner = kubetest.StartProcess(b, "executors-planner", bin, "-shutdown-drain", "0s",
						"-tls-cert-file", server.CertFile, "-tls-key-file", server.KeyFile, "-client-ca-file", ca.CertFile, "-system-users", "executor")
				}
				flooder, executor := certConn(b, ca, planner, "flooder"), jobplanev1.NewPlannerServiceClient(certConn(b, ca, executorsPlanner, "executor"))

				ctx, cancel := context.WithTimeout(context.Background(), floodFor)
				var served, shed, other atomic.Int64
				var wg sync.WaitGroup
				for range concurrency {
					wg.Go(func() {
						for ctx.Err() == nil {
							err := flooder.Invoke(ctx, jobplanev1.PlannerService_PlanSync_FullMethodName, encoded(big), &jobplanev1.PlanSyncResponse{})
							switch {
							case err == nil:
								served.Add(1)
							case status.Code(err) == codes.ResourceExhausted:
								shed.Add(1)
								delay, _ := retryinfo.Delay(err)
								select {
								case <-time.After(max(delay, 100*time.Millisecond)):
								case <-ctx.Done():
								}
							case ctx.Err() == nil && status.Code(err) != codes.DeadlineExceeded && status.Code(err) != codes.Canceled:
								// The window's end cuts the calls in flight: not
								// the planner's answer.
								other.Add(1)
								b.Logf("flood call: %v", err)
							}
						}
					})
				}
				var latencies []time.Duration
				for ctx.Err() == nil {
					start := time.Now()
					if _, err := executor.PlanSync(context.Background(), smallReq); err != nil {
						b.Errorf("the executor's plan: %v", err)
					}
					latencies = append(latencies, time.Since(start))
					time.Sleep(100 * time.Millisecond)
				}
				wg.Wait()
				cancel()
				slices.Sort(latencies)
				p99 := latencies[len(latencies)*99/100]
				b.ReportMetric(float64(served.Load())/floodFor.Seconds(), "served/s")
				b.ReportMetric(float64(shed.Load())/floodFor.Seconds(), "shed/s")
				b.ReportMetric(float64(other.Load()), "other-errors")
				b.ReportMetric(float64(planner.PeakRSS(b)>>20), "peak-RSS-MiB")
				b.ReportMetric(float64(p99.Microseconds())/1000, "executor-p99-ms")
			}
		})
	}
}

// encoded is a request encoded once, sent as it is by the chassis' codec.
type encoded []byte

func (e encoded) MarshalWire() ([][]byte, error) { return [][]byte{e}, nil }

func certConn(b *testing.B, ca *grpctest.CA, planner *kubetest.Process, user string) *grpc.ClientConn {
	cert := ca.ClientCert(b, user)
	conn, err := grpc.NewClient(planner.GRPCAddr,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{cert.Certificate}})),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20), grpcserver.CallCodec()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return conn
}
