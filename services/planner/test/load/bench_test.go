package load

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
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
	"github.com/jobplane/jobplane/lib/retryinfo"
	"github.com/jobplane/jobplane/services/planner/scalestate"
)

// BenchmarkFlood is issue 19's first table: a caller sends the same
// 10,000-pod PlanSync from `concurrency` goroutines for floodFor at a fresh
// planner (GOMEMLIMIT=memoryLimit, default flags), while the executor's
// identity (system level) plans a 100-pod Job every 100 ms. The flood sends
// bytes encoded once and, shed, waits the RetryInfo delay, as jobplane's
// clients do; it runs in a process of its own (this test binary again, see
// TestMain),
// as an outside caller does, on the same two cores as the planner and the
// executor's calls. It reports calls/s served and shed, the planner's peak
// RSS, and the executor's p99 (concurrency=0 is its p99 without a flood).
// Run with:
//
//	go test -run '^$' -bench Flood -benchtime 1x ./services/planner/test/load/
//
// With FLOOD_SAME_PROCESS=1 the flood runs in the benchmark's own process,
// beside the executor's calls (whose latency then includes the flood's
// client, starved of the same cores). With FLOOD_SEPARATE_PLANNER=1 the
// executor plans on a second planner process the flood does not reach: what
// the machine's two shared cores alone cost its p99. FLOOD_NICE=19 runs the
// flooding process at that nice value, as a caller on another machine would
// leave these cores to the planner. FLOOD_SECONDS=60 and -count 3 give the
// figures of BENCHMARKS.md (the median of three p99s of 600 calls each).
func BenchmarkFlood(b *testing.B) {
	bin := kubetest.BuildBinary(b, "./services/planner/cmd/planner")
	small := scalestate.New(100)
	smallReq := snapshotOf(small).Request()
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
				executor := jobplanev1.NewPlannerServiceClient(certConn(b, ca, executorsPlanner.GRPCAddr, "executor"))

				target := floodTarget{addr: planner.GRPCAddr, caFile: ca.CertFile, client: ca.ClientCert(b, "flooder"), concurrency: concurrency}
				type result struct {
					counts floodCounts
					err    error
				}
				results := make(chan result, 1)
				go func() {
					var r result
					if os.Getenv("FLOOD_SAME_PROCESS") != "" {
						r.counts, r.err = flood(target, b.Logf)
					} else {
						r.counts, r.err = floodFromChild(target)
					}
					results <- r
				}()
				deadline := time.Now().Add(floodFor)
				var latencies []time.Duration
				for time.Now().Before(deadline) {
					start := time.Now()
					if _, err := executor.PlanSync(context.Background(), smallReq); err != nil {
						b.Errorf("the executor's plan: %v", err)
					}
					latencies = append(latencies, time.Since(start))
					time.Sleep(100 * time.Millisecond)
				}
				r := <-results
				if r.err != nil {
					b.Fatalf("the flood: %v", r.err)
				}
				got := r.counts
				slices.Sort(latencies)
				p99 := latencies[len(latencies)*99/100]
				b.ReportMetric(float64(got.Served)/floodFor.Seconds(), "served/s")
				b.ReportMetric(float64(got.Shed)/floodFor.Seconds(), "shed/s")
				b.ReportMetric(float64(got.Other), "other-errors")
				b.ReportMetric(float64(planner.PeakRSS(b)>>20), "peak-RSS-MiB")
				b.ReportMetric(float64(p99.Microseconds())/1000, "executor-p99-ms")
			}
		})
	}
}

// floodFor is how long a flood lasts: FLOOD_SECONDS, 20 by default (a
// longer flood gives the executor's p99 more samples: 10 a second).
var floodFor = floodDuration()

func floodDuration() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("FLOOD_SECONDS")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 20 * time.Second
}

// floodTarget is whom a flood calls, as whom, with how many calls at once.
type floodTarget struct {
	addr, caFile string
	client       grpctest.KeyPair
	concurrency  int
}

// floodCounts are a flood's answers: served, shed (RESOURCE_EXHAUSTED) and
// any other.
type floodCounts struct{ Served, Shed, Other int64 }

// flood sends the 10,000-pod PlanSync to target from its concurrency
// goroutines for floodFor; logf reports answers other than OK and
// RESOURCE_EXHAUSTED.
func flood(target floodTarget, logf func(string, ...any)) (floodCounts, error) {
	state := scalestate.New(jobPods)
	big, err := proto.MarshalOptions{Deterministic: true}.Marshal(
		snapshotOf(state).Request())
	if err != nil {
		return floodCounts{}, err
	}
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(target.caFile)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		return floodCounts{}, fmt.Errorf("the CA %s: %v", target.caFile, err)
	}
	conn, err := newConn(target.addr, pool, target.client.Certificate)
	if err != nil {
		return floodCounts{}, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), floodFor)
	defer cancel()
	var served, shed, other atomic.Int64
	var wg sync.WaitGroup
	for range target.concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := conn.Invoke(ctx, jobplanev1.PlannerService_PlanSync_FullMethodName, encoded(big), &jobplanev1.PlanSyncResponse{})
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
					// The window's end cuts the calls in flight: not the
					// planner's answer.
					other.Add(1)
					logf("flood call: %v", err)
				}
			}
		})
	}
	wg.Wait()
	return floodCounts{Served: served.Load(), Shed: shed.Load(), Other: other.Load()}, nil
}

// floodTargetEnv holds the child process's floodSpec, as JSON; it answers
// its floodCounts, as JSON, on standard output.
const floodTargetEnv = "JOBPLANE_FLOOD_TARGET"

// floodSpec is a floodTarget as the child process gets it.
type floodSpec struct {
	Addr, CA, Cert, Key string
	Concurrency         int
}

// floodFromChild runs flood in a child process: this test binary, whose
// TestMain floods when floodTargetEnv is set.
func floodFromChild(target floodTarget) (floodCounts, error) {
	spec, err := json.Marshal(floodSpec{Addr: target.addr, CA: target.caFile, Cert: target.client.CertFile,
		Key: target.client.KeyFile, Concurrency: target.concurrency})
	if err != nil {
		return floodCounts{}, err
	}
	cmd := exec.Command(os.Args[0])
	if os.Getenv("FLOOD_NICE") != "" {
		cmd = exec.Command("nice", "-n", os.Getenv("FLOOD_NICE"), os.Args[0])
	}
	cmd.Env = append(os.Environ(), floodTargetEnv+"="+string(spec))
	out, err := cmd.Output()
	if err != nil {
		return floodCounts{}, fmt.Errorf("the flooding process: %v\n%s", err, out)
	}
	var counts floodCounts
	if err := json.Unmarshal(out, &counts); err != nil {
		return floodCounts{}, fmt.Errorf("the flooding process's counts %q: %v", out, err)
	}
	return counts, nil
}

// floodChild is the child process's work: the flood of spec, its counts as
// JSON on standard output.
func floodChild(spec string) error {
	var s floodSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(s.Cert, s.Key)
	if err != nil {
		return err
	}
	counts, err := flood(floodTarget{addr: s.Addr, caFile: s.CA, client: grpctest.KeyPair{Certificate: cert}, concurrency: s.Concurrency},
		func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) })
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(counts)
}

// encoded is a request encoded once, sent as it is by the chassis' codec.
type encoded []byte

func (e encoded) MarshalWire() ([][]byte, error) { return [][]byte{e}, nil }

// certConn is a connection to addr as user, with a client certificate of ca.
func certConn(tb testing.TB, ca *grpctest.CA, addr, user string) *grpc.ClientConn {
	// The executor's windows (ClientWindows): no BDP pings on its answers.
	conn, err := newConn(addr, ca.Pool, ca.ClientCert(tb, user).Certificate, grpcserver.ClientWindows()...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// newConn is a TLS connection to addr with the client certificate cert:
// grpc-go's defaults and extra.
func newConn(addr string, roots *x509.CertPool, cert tls.Certificate, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts := append(extra,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}})),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20), grpcserver.CallCodec()))
	return grpc.NewClient(addr, opts...)
}
