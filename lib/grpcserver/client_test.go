package grpcserver_test

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/jobplane/jobplane/lib/grpcserver"
)

// TestClientWindowsSendNoPings: a client dialled with ClientWindows sends
// no PING frames for its answers; grpc-go's default (BDP estimation) sends
// one for about every answer, which the server must read and acknowledge.
func TestClientWindowsSendNoPings(t *testing.T) {
	const calls = 50
	if got := pingsFor(t, calls); got < calls/2 {
		t.Fatalf("grpc-go's default client sent %d pings for %d calls: the test no longer sees BDP pings", got, calls)
	}
	if got := pingsFor(t, calls, grpcserver.ClientWindows()...); got != 0 {
		t.Fatalf("a client with ClientWindows sent %d pings for %d calls, want 0", got, calls)
	}
}

// pingsFor is the number of PING frames (not acks) a server received from
// a client dialled with opts that made calls unary calls one after the other.
func pingsFor(t *testing.T, calls int, opts ...grpc.DialOption) int64 {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var pings atomic.Int64
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(&pingCounter{Listener: lis, pings: &pings})
	conn, err := grpc.NewClient(lis.Addr().String(), append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	client := healthpb.NewHealthClient(conn)
	for range calls {
		if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	srv.Stop()
	return pings.Load()
}

// pingCounter counts the PING frames its connections' clients send.
type pingCounter struct {
	net.Listener
	pings *atomic.Int64
}

func (l *pingCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	r, w := io.Pipe()
	go func() {
		// Whatever stops the framer, the connection reads on.
		defer io.Copy(io.Discard, r)
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(r, preface); err != nil {
			return
		}
		framer := http2.NewFramer(io.Discard, r)
		for {
			f, err := framer.ReadFrame()
			if err != nil {
				return
			}
			if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
				l.pings.Add(1)
			}
		}
	}()
	return &teeConn{Conn: c, copy: w}, nil
}

// teeConn copies what it reads to copy.
type teeConn struct {
	net.Conn
	copy *io.PipeWriter
}

func (c *teeConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.copy.Write(b[:n])
	}
	if err != nil {
		c.copy.CloseWithError(err)
	}
	return n, err
}
