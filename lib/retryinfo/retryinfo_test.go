package retryinfo

import (
	"context"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func shed(delay time.Duration) error {
	st, _ := status.New(codes.ResourceExhausted, "busy").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)})
	return st.Err()
}

// invoker answers the errors in turn, then OK, and counts the calls.
func invoker(errs ...error) (grpc.UnaryInvoker, *int) {
	calls := 0
	return func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		calls++
		if calls <= len(errs) {
			return errs[calls-1]
		}
		return nil
	}, &calls
}

func TestUnaryCallsAreRetriedAfterTheDelayAsked(t *testing.T) {
	p := Policy{Attempts: 5, MaxDelay: time.Second, Jitter: 0.5}
	cases := []struct {
		name      string
		ctx       func() (context.Context, context.CancelFunc)
		errs      []error
		wantCode  codes.Code
		wantCalls int
	}{
		{"shed twice, then served", background, []error{shed(time.Millisecond), shed(time.Millisecond)}, codes.OK, 3},
		{"shed without RetryInfo: answered at once", background, []error{status.Error(codes.ResourceExhausted, "no")}, codes.ResourceExhausted, 1},
		{"another code with RetryInfo: answered at once", background, []error{status.Error(codes.InvalidArgument, "bad")}, codes.InvalidArgument, 1},
		{"shed every time: the attempts are bounded", background, []error{shed(time.Millisecond), shed(time.Millisecond), shed(time.Millisecond), shed(time.Millisecond), shed(time.Millisecond), shed(time.Millisecond)}, codes.ResourceExhausted, 5},
		{"a deadline before the delay: answered at once", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 10*time.Millisecond)
		}, []error{shed(time.Minute)}, codes.ResourceExhausted, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			invoke, calls := invoker(tc.errs...)
			err := UnaryClientInterceptor(p)(ctx, "/x.Y/Z", nil, nil, nil, invoke)
			if status.Code(err) != tc.wantCode || *calls != tc.wantCalls {
				t.Errorf("got %v after %d calls, want %s after %d", err, *calls, tc.wantCode, tc.wantCalls)
			}
		})
	}
}

func TestTheWaitGrowsAndIsBounded(t *testing.T) {
	p := Policy{Attempts: 10, MaxDelay: 30 * time.Millisecond, Jitter: 0}
	start := time.Now()
	if !p.wait(context.Background(), 4, shed(10*time.Millisecond)) { // 10ms << 3 = 80ms, bounded to 30ms
		t.Fatal("not retried")
	}
	if d := time.Since(start); d < 30*time.Millisecond || d > time.Second {
		t.Errorf("waited %s, want 30ms", d)
	}
}

func background() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}
