package grpcserver

import (
	"context"
	"strconv"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/jobplane/jobplane/lib/admission"
)

// A unary answer is encoded within its call's seat and held, against the
// admission's bounds of unread answers, until the transport is done with
// it: grpc-go hands the answer to its transport whole, and a client that
// never reads would otherwise have the server keep every answer it asked
// for.

// encodedAnswer is resp encoded now, while its call holds its seat, for
// grpc-go to send as it is: an answer's encoding is the bulk of a read's
// work, and it is bounded by the seats with the rest of the call. The
// interceptors have seen resp itself. The encoding is then held against
// the caller's bound of unread answers until the transport has written it
// (it gives the buffer back), dropped it (a reset call), or lost it (a
// closed connection: connTracker).
func (s *Server) encodedAnswer(ctx context.Context, level, flow string, resp any) (any, error) {
	encoded, err := Codec().Marshal(resp)
	if err != nil {
		// What grpc-go answers when it fails to encode an answer itself.
		return nil, status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	// One buffer of more than mem's pooling threshold, so that the
	// transport gives it back (to heldEncoding's Put) once done with it.
	var data []byte
	if len(encoded) == 1 { // the codec's own slice: no copy
		data = encoded[0].ReadOnlyData()
	} else {
		data = encoded.Materialize()
	}
	if mem.IsBelowBufferPoolingThreshold(cap(data)) {
		data = append(make([]byte, 0, 2<<10), data...)
	}
	held, err := s.admission.HoldAnswer(level, flow, connOf(ctx), int64(cap(data)))
	if err != nil {
		return nil, err
	}
	return heldEncoding{mem.NewBuffer(&data, heldPool{held})}, nil
}

// heldEncoding is an answer's encoding, held until the transport frees it.
type heldEncoding struct{ buf mem.Buffer }

// heldPool is the pool an answer's buffer goes back to once freed: its
// hold is released.
type heldPool struct{ held *admission.HeldAnswer }

func (p heldPool) Get(n int) *[]byte { return mem.DefaultBufferPool().Get(n) }
func (p heldPool) Put(*[]byte)       { p.held.Release() }

// connOf names the call's connection, as connTracker tagged it.
func connOf(ctx context.Context) string {
	ref, _ := ctx.Value(connKey{}).(connRef)
	return ref.id
}

type connKey struct{}

// connRef is a connection as connTracker tagged it: its name, and the
// gate's connection when the gate follows it.
type connRef struct {
	id    string
	gated *gatedConn
}

// connTracker names each connection, finds it in the gate, and tells the
// admission and the gate when one ends: what the transport held unwritten
// on it is gone, never given back to its pool. (A stats handler, not a
// wrapped net.Conn, so that grpc-go still sees the *net.TCPConn it sets
// TCP_USER_TIMEOUT on.)
type connTracker struct {
	gate  *connGate
	ended func(conn string)
	last  atomic.Uint64
}

func (t *connTracker) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	id := strconv.FormatUint(t.last.Add(1), 36)
	return context.WithValue(ctx, connKey{}, connRef{id: id, gated: t.gate.tracked(info.LocalAddr, info.RemoteAddr, id)})
}

func (t *connTracker) HandleConn(ctx context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnEnd); ok {
		t.ended(connOf(ctx))
		t.gate.ended(gateOf(ctx))
	}
}

func (t *connTracker) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (t *connTracker) HandleRPC(ctx context.Context, s stats.RPCStats) {
	switch s.(type) {
	case *stats.Begin:
		t.gate.callBegan(gateOf(ctx))
	case *stats.End:
		t.gate.callEnded(gateOf(ctx))
	}
}
