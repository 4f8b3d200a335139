package grpcserver_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
)

// bigAnswers answers each ValidateJob with bigAnswer bytes.
type bigAnswers struct {
	jobplanev1.UnimplementedPlannerServiceServer
}

const bigAnswer = 256 << 10

func (bigAnswers) ValidateJob(context.Context, *jobplanev1.ValidateJobRequest) (*jobplanev1.ValidateJobResponse, error) {
	return &jobplanev1.ValidateJobResponse{Job: &jobplanev1.Job{Metadata: &jobplanev1.ObjectMeta{Name: strings.Repeat("x", bigAnswer)}}}, nil
}

// unreadServer serves bigAnswers over TCP to users known by their tokens,
// with room for 8 MiB of unread answers (4 MiB a priority level), 2 MiB a
// caller.
func unreadServer(t *testing.T, users ...string) *grpctest.Server {
	t.Helper()
	cluster, cfg := usersCluster(users...)
	cfg.Admission.UnreadAnswerBytes = 8 << 20
	cfg.Admission.UnreadAnswerBytesPerCaller = 2 << 20
	return grpctest.StartWith(t, grpctest.Options{Config: &cfg, Server: []grpcserver.Option{grpcserver.WithKubeClient(cluster)}},
		func(s *grpcserver.Server) { s.RegisterService(&jobplanev1.PlannerService_ServiceDesc, bigAnswers{}) })
}

// Answers a client reads are given back as they are written: many more of
// them than the bound pass, and none is held after.
func TestAnswersReadAreGivenBack(t *testing.T) {
	srv := unreadServer(t, "alice")
	for i := range 64 { // 16 MiB: four times the level's bound
		if err := validate(srv, "alice", nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	waitFor(t, "the answers given back", func() bool { all, _ := grpcserver.AnswersHeld(srv.Server, "alice"); return all == 0 })
}

// A hostile caller that never reads its answers has at most its bound of
// them held: its calls beyond are refused RESOURCE_EXHAUSTED, another
// caller's are served, and everything held is given back when its
// connection closes.
func TestACallerThatNeverReadsIsBounded(t *testing.T) {
	srv := unreadServer(t, "alice", "mallory")
	hostile := dialNeverReading(t, srv.Addr, "mallory-token")
	const calls = 40 // 10 MiB asked for
	for range calls {
		hostile.call("/jobplane.v1.PlannerService/ValidateJob")
	}
	waitFor(t, "every call of the hostile caller answered or held", func() bool {
		_, mine := grpcserver.AnswersHeld(srv.Server, "mallory")
		return int64(hostile.refusals())*bigAnswer+mine >= calls*bigAnswer
	})
	all, mine := grpcserver.AnswersHeld(srv.Server, "mallory")
	if mine > 2<<20 || all != mine {
		t.Fatalf("%d bytes held for the caller that does not read (%d in all), more than its 2 MiB", mine, all)
	}
	if hostile.refusals() < calls-8 {
		t.Fatalf("%d of %d calls refused", hostile.refusals(), calls)
	}
	if err := validate(srv, "alice", nil); err != nil {
		t.Fatalf("another caller beside it: %v", err)
	}
	hostile.conn.Close()
	waitFor(t, "its answers given back once its connection closed", func() bool {
		all, _ := grpcserver.AnswersHeld(srv.Server, "mallory")
		return all == 0
	})
}

// neverReading is a raw HTTP/2 client that opens calls and gives the server
// no flow-control window to answer them: their answers can never be
// written. It counts the calls refused with RESOURCE_EXHAUSTED (trailers
// only, which flow control does not hold back).
type neverReading struct {
	conn   net.Conn
	mu     sync.Mutex
	framer *http2.Framer
	next   uint32
	token  string
	// refused counts the RESOURCE_EXHAUSTED answers naming unread answers.
	refused int
}

func dialNeverReading(t *testing.T, addr, token string) *neverReading {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	c := &neverReading{conn: conn, framer: http2.NewFramer(conn, conn), next: 1, token: token}
	c.framer.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := c.framer.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	go c.readFrames()
	return c
}

func (c *neverReading) call(path string) { c.callWith(path, nil) }

// callWith opens a call of path whose request is msg's encoding.
func (c *neverReading) callWith(path string, msg []byte) {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", "jobplane"},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {"authorization", "Bearer " + c.token}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.next
	c.next += 2
	c.framer.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true})
	// The gRPC message: not compressed, its length, itself.
	c.framer.WriteData(id, true, append([]byte{0, byte(len(msg) >> 24), byte(len(msg) >> 16), byte(len(msg) >> 8), byte(len(msg))}, msg...))
}

func (c *neverReading) readFrames() {
	for {
		f, err := c.framer.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.mu.Lock()
				c.framer.WriteSettingsAck()
				c.mu.Unlock()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.mu.Lock()
				c.framer.WritePing(true, f.Data)
				c.mu.Unlock()
			}
		case *http2.MetaHeadersFrame:
			st := ""
			for _, h := range f.Fields {
				if h.Name == "grpc-status" {
					st = h.Value
				}
			}
			if st == "8" {
				c.mu.Lock()
				c.refused++
				c.mu.Unlock()
			}
		}
	}
}

func (c *neverReading) refusals() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

// The refusal says what to do.
func TestUnreadAnswersRefusalIsResourceExhaustedWithRetryInfo(t *testing.T) {
	srv := unreadServer(t, "mallory")
	hostile := dialNeverReading(t, srv.Addr, "mallory-token")
	for range 12 {
		hostile.call("/jobplane.v1.PlannerService/ValidateJob")
	}
	waitFor(t, "the caller's bound taken", func() bool { return hostile.refusals() > 0 })
	err := validate(srv, "mallory", nil)
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "not read") {
		t.Fatalf("got %v, want RESOURCE_EXHAUSTED naming the unread answers", err)
	}
	if _, ok := retryDelay(err); !ok {
		t.Fatalf("no RetryInfo in %v", err)
	}
}
