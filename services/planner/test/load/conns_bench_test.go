package load

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/kubetest"
	"github.com/jobplane/jobplane/services/planner/scalestate"
)

// BenchmarkIdleConnections is a client opening `connections` connections
// to a planner, each an HTTP/2 connection (preface and settings) that never
// calls: the planner's peak resident memory, how many of them it keeps
// open, and how long a caller connecting afterwards waits for its answer.
// Run once per size: -benchtime 1x.
func BenchmarkIdleConnections(b *testing.B) {
	bin := kubetest.BuildBinary(b, "./services/planner/cmd/planner")
	for _, n := range []int{0, 1000, 4000} {
		b.Run(fmt.Sprintf("connections=%d", n), func(b *testing.B) {
			for range b.N {
				planner := kubetest.StartProcess(b, "planner", bin, "-shutdown-drain", "0s", "-authn-anonymous")
				measureIdle(b, n, func() (net.Conn, error) { return net.Dial("tcp", planner.GRPCAddr) },
					func() error { return planOnce(planner.GRPCAddr) }, planner.PeakRSS)
			}
		})
	}
}

// BenchmarkIdleConnectionsAPIServer is BenchmarkIdleConnections at the
// reference: kube-apiserver (with its etcd), each connection a TLS one
// (handshake, then the HTTP/2 preface and settings) that never asks;
// peak-RSS-MiB is kube-apiserver's, caller-ms a GET of /readyz on a new
// connection.
func BenchmarkIdleConnectionsAPIServer(b *testing.B) {
	for _, n := range []int{0, 1000, 4000} {
		b.Run(fmt.Sprintf("connections=%d", n), func(b *testing.B) {
			for range b.N {
				api := kubetest.StartAPIServer(b)
				host := strings.TrimPrefix(api.Config.Host, "https://")
				tlsConfig := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}
				measureIdle(b, n, func() (net.Conn, error) { return tls.Dial("tcp", host, tlsConfig) },
					func() error {
						_, err := api.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
						return err
					}, api.PeakRSS)
			}
		})
	}
}

// measureIdle opens n connections with dial, each sending the HTTP/2
// preface and settings and nothing more, then reports how many the server
// keeps open, its peak RSS, and how long call, a caller after them, waits.
func measureIdle(b *testing.B, n int, dial func() (net.Conn, error), call func() error, peakRSS func(testing.TB) int64) {
	idle := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range n {
		c, err := dial()
		if err != nil {
			b.Fatalf("connection %d: %v", len(idle), err)
		}
		idle = append(idle, c)
		if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
			continue // closed already
		}
		_ = http2.NewFramer(c, nil).WriteSettings()
	}
	time.Sleep(2 * time.Second) // the server takes them in
	start := time.Now()
	if err := call(); err != nil {
		b.Errorf("a caller after the connections: %v", err)
	}
	wait := time.Since(start)
	b.ReportMetric(float64(stillOpen(idle)), "open-connections")
	b.ReportMetric(float64(peakRSS(b)>>20), "peak-RSS-MiB")
	b.ReportMetric(float64(wait.Microseconds())/1000, "caller-ms")
}

// planOnce is one PlanSync of a 10-pod Job on a connection of its own.
func planOnce(addr string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	state := scalestate.New(10)
	req := snapshotOf(state).Request()
	_, err = jobplanev1.NewPlannerServiceClient(conn).PlanSync(ctx, req)
	return err
}

// stillOpen counts the connections the server has not closed: reading
// one drains what the server wrote and ends in a timeout, not an EOF.
func stillOpen(conns []net.Conn) int {
	open := 0
	buf := make([]byte, 4<<10)
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		for {
			_, err := c.Read(buf)
			if err == nil {
				continue
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				open++
			}
			break
		}
	}
	return open
}
