// Package retryinfo makes a gRPC client behave when a server sheds its calls:
// a call answered RESOURCE_EXHAUSTED (or UNAVAILABLE) with
// google.rpc.RetryInfo is tried again after the delay the server asked for,
// jittered and growing as client-go's backoff does, while the call's context
// allows; without RetryInfo the answer is the caller's, as it is. Unary
// calls are retried, and stream openings that fail at once; grpc-go opens
// most streams without waiting for the server, so a stream shed by the
// server shows at its first receive, and its owner opens it again (the
// executor's planner client reconnects with backoff).
package retryinfo

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Policy bounds the retries.
type Policy struct {
	// Attempts is the most tries of one call, the first included.
	Attempts int
	// MaxDelay bounds one wait, whatever the server asked.
	MaxDelay time.Duration
	// Jitter adds up to this fraction of the delay, at random.
	Jitter float64
}

// DefaultPolicy: five tries, waits of at most 30 s, up to 50% more at random.
var DefaultPolicy = Policy{Attempts: 5, MaxDelay: 30 * time.Second, Jitter: 0.5}

// Delay is the wait err asks for before a retry: its RetryInfo's, on
// RESOURCE_EXHAUSTED or UNAVAILABLE; false when it asks for none.
func Delay(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok || (st.Code() != codes.ResourceExhausted && st.Code() != codes.Unavailable) {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// wait sleeps before try n (from 1) of a call answered err: the delay asked,
// doubled per earlier retry, jittered, at most MaxDelay. False when the call
// is not to be retried or its context ends first.
func (p Policy) wait(ctx context.Context, n int, err error) bool {
	if n >= p.Attempts {
		return false
	}
	delay, ok := Delay(err)
	if !ok {
		return false
	}
	delay <<= n - 1
	delay += time.Duration(float64(delay) * p.Jitter * rand.Float64())
	delay = min(delay, p.MaxDelay)
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < delay {
		return false // no time left to try again: answer now
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// UnaryClientInterceptor retries unary calls by p.
func UnaryClientInterceptor(p Policy) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		for n := 1; ; n++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil || !p.wait(ctx, n, err) {
				return err
			}
		}
	}
}

// StreamClientInterceptor retries the opening of streams by p.
func StreamClientInterceptor(p Policy) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		for n := 1; ; n++ {
			stream, err := streamer(ctx, desc, cc, method, opts...)
			if err == nil || !p.wait(ctx, n, err) {
				return stream, err
			}
		}
	}
}

// DialOptions installs both interceptors with p.
func DialOptions(p Policy) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(p)),
		grpc.WithChainStreamInterceptor(StreamClientInterceptor(p)),
	}
}
