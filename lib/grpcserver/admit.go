package grpcserver

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/jobplane/jobplane/lib/admission"
	"github.com/jobplane/jobplane/lib/auth"
)

// admitted returns desc with each handler wrapped so that a call is admitted
// before its request is read: grpc-go reads a unary request, and a stream's
// messages, inside the handler (its dec and RecvMsg), so a call waiting for
// its seat holds no more than the transport's flow-control window. Its bytes
// are charged as the codec decodes them (chargeFor).
func (s *Server) admitted(desc *grpc.ServiceDesc) *grpc.ServiceDesc {
	out := *desc
	out.Methods = slices.Clone(desc.Methods)
	for i, m := range out.Methods {
		handler, method := m.Handler, "/"+desc.ServiceName+"/"+m.MethodName
		out.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			ctx, level, flow, err := s.flowOf(ctx, method)
			if err != nil {
				return nil, err
			}
			ticket, err := s.admission.Admit(ctx, level, flow, auth.ClassOf(method))
			if err != nil {
				return nil, err
			}
			defer ticket.Release()
			resp, err := handler(srv, ctx, chargingDecoder(ctx, ticket, dec), interceptor)
			if err != nil {
				return nil, err
			}
			return s.encodedAnswer(ctx, level, flow, resp)
		}
	}
	out.Streams = slices.Clone(desc.Streams)
	for i, sd := range out.Streams {
		handler, method := sd.Handler, "/"+desc.ServiceName+"/"+sd.StreamName
		out.Streams[i].Handler = func(srv any, stream grpc.ServerStream) error {
			ctx, level, flow, err := s.flowOf(stream.Context(), method)
			if err != nil {
				return err
			}
			ctx, preempt, ended := s.preemptible(ctx)
			defer ended()
			ticket, err := s.admission.OpenStream(level, flow, preempt)
			if err != nil {
				return err
			}
			defer ticket.Release()
			if err := stream.SendHeader(s.largestMessageHeader(level)); err != nil {
				return err
			}
			err = handler(srv, &chargingStream{ServerStream: stream, ctx: context.WithValue(ctx, ticketKey{}, ticket), ticket: ticket})
			if preempted := ticket.Preempted(); preempted != nil {
				return preempted
			}
			return err
		}
	}
	return &out
}

// MaxMessageHeader is the header a stream opens with: the largest message
// the server takes on it, in bytes. A larger one would end the stream (and
// every call a client multiplexes on it), so a client checks its messages
// against it and fails only the one that cannot be sent.
const MaxMessageHeader = "jobplane-max-message-bytes"

// largestMessageHeader is the header naming the largest message a stream
// of level can receive: the transport's bound, or its level's budget.
func (s *Server) largestMessageHeader(level string) metadata.MD {
	return metadata.Pairs(MaxMessageHeader, strconv.FormatInt(min(int64(s.cfg.RecvMsgBytes()), s.admission.LargestMessage(level)), 10))
}

// preemptible is a stream's context, cancelled by preempt when another
// caller takes the stream's place; a handler that does not end then (it
// waits for a client that does not read) has its connection closed after
// the gate's grace. ended says the handler returned.
func (s *Server) preemptible(ctx context.Context) (_ context.Context, preempt, ended func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	preempt = func() {
		cancel()
		go func() {
			select {
			case <-done:
			case <-time.After(s.conns.preemptedStreamGrace):
				s.conns.close(gateOf(ctx), "stream_preempted")
			}
		}()
	}
	return ctx, preempt, func() { close(done); cancel() }
}

// flowOf is the caller's priority level and flow: its tenant (a
// ServiceAccount's namespace, any other user itself), so that a tenant's
// many accounts share one flow's turns and bounds; the call's connection
// is the caller's, within its bound of connections. The returned context
// carries the identity on to the auth interceptor (identified once).
func (s *Server) flowOf(ctx context.Context, method string) (_ context.Context, level, flow string, err error) {
	defer s.conns.authenticating(ctx)() // until its connection is identified
	id, err := s.auth.Identify(ctx, method)
	if err != nil {
		return ctx, "", "", err
	}
	level, flow = s.priorityLevel(id), id.Tenant()
	if err := s.conns.identify(gateOf(ctx), level, flow); err != nil {
		return ctx, "", "", err
	}
	return context.WithValue(auth.NewContext(ctx, id), levelKey{}, level), level, flow, nil
}

type levelKey struct{}

// SystemCaller reports whether the call of ctx is of the system priority
// level: the services' own identities (-system-users). What a server keeps
// for its callers can then put theirs first.
func SystemCaller(ctx context.Context) bool {
	level, _ := ctx.Value(levelKey{}).(string)
	return level == admission.System
}

// priorityLevel is System for the identities configured as the services'
// own, Workload for everyone else.
func (s *Server) priorityLevel(id *auth.Identity) string {
	if slices.Contains(s.cfg.Admission.SystemUsers, id.User) {
		return admission.System
	}
	return admission.Workload
}

// charges maps a message being decoded to its call's ticket: the codec's
// Unmarshal is given only the message.
var charges sync.Map // any (a message pointer) -> *charge

type charge struct {
	ctx    context.Context
	ticket *admission.Ticket
	err    error
}

// chargeFor charges n received bytes to the call decoding v, if any; false
// when the call may not have them: v is then left undecoded and the refusal
// is the call's answer.
func chargeFor(v any, n int) bool {
	c, ok := charges.Load(v)
	if !ok {
		return true
	}
	ch := c.(*charge)
	ch.err = ch.ticket.Charge(ch.ctx, int64(n))
	return ch.err == nil
}

// chargingDecoder decodes a unary request with its bytes charged to ticket.
func chargingDecoder(ctx context.Context, ticket *admission.Ticket, dec func(any) error) func(any) error {
	return func(v any) error {
		ch := &charge{ctx: ctx, ticket: ticket}
		charges.Store(v, ch)
		err := dec(v)
		charges.Delete(v)
		if ch.err != nil {
			return ch.err
		}
		return err
	}
}

type ticketKey struct{}

// HoldReceived keeps the bytes of the last message received on the stream
// of ctx charged to its caller until release, though the handler asks for
// the next message: for a handler that works on several at once. Without
// admission (a server without the chassis) it holds nothing.
func HoldReceived(ctx context.Context) (release func()) {
	if t, ok := ctx.Value(ticketKey{}).(*admission.Ticket); ok {
		return t.Hold()
	}
	return func() {}
}

// chargingStream charges each message received to the stream's ticket, and
// gives back the previous message's bytes when the handler asks for the
// next: it is done with it by then (what it keeps is bounded on its own).
type chargingStream struct {
	grpc.ServerStream
	ctx    context.Context
	ticket *admission.Ticket
}

func (s *chargingStream) Context() context.Context { return s.ctx }

func (s *chargingStream) RecvMsg(m any) error {
	s.ticket.Uncharge()
	return chargingDecoder(s.Context(), s.ticket, s.ServerStream.RecvMsg)(m)
}
