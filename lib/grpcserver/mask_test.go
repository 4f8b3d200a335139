package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jobplane/jobplane/lib/apierr"
)

// An error that is not a status never reaches the caller: it is INTERNAL
// with a correlation id, and the log has the cause under that id. Status
// errors pass unchanged, a context's error is its status.
func TestUntypedErrorsAreMaskedAsInternalWithACorrelationID(t *testing.T) {
	secret := errors.New(`pods "victim-7" is forbidden: User "system:serviceaccount:team-b:runner" cannot get resource`)
	cases := []struct {
		name     string
		err      error
		wantCode codes.Code
		masked   bool
	}{
		{"untyped error", secret, codes.Internal, true},
		{"wrapped untyped error", fmt.Errorf("syncing: %w", secret), codes.Internal, true},
		{"status error", apierr.New(codes.NotFound, "JOB_NOT_FOUND", nil, "Job a/b not found"), codes.NotFound, false},
		{"context canceled", fmt.Errorf("listing: %w", context.Canceled), codes.Canceled, false},
		{"deadline exceeded", context.DeadlineExceeded, codes.DeadlineExceeded, false},
	}
	for _, tc := range cases {
		for _, rpc := range []struct {
			name string
			call func(maskInternal, error) error
		}{
			{"unary", func(m maskInternal, err error) error {
				_, got := m.unary()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/jobplane.v1.CronService/GetCronJob"},
					func(context.Context, any) (any, error) { return nil, err })
				return got
			}},
			{"stream", func(m maskInternal, err error) error {
				return m.stream()(nil, fakeStream{}, &grpc.StreamServerInfo{FullMethod: "/jobplane.v1.CronService/WatchJobInstances"},
					func(any, grpc.ServerStream) error { return err })
			}},
		} {
			t.Run(tc.name+"/"+rpc.name, func(t *testing.T) {
				var logs strings.Builder
				m := maskInternal{log: slog.New(slog.NewJSONHandler(&logs, nil))}
				err := rpc.call(m, tc.err)
				st := status.Convert(err)
				if st.Code() != tc.wantCode {
					t.Fatalf("code %s (%v), want %s", st.Code(), err, tc.wantCode)
				}
				if !tc.masked {
					if logs.Len() > 0 {
						t.Errorf("logged %s", logs.String())
					}
					return
				}
				if strings.Contains(st.Message(), "victim") {
					t.Errorf("the cause leaked to the caller: %q", st.Message())
				}
				var id string
				for _, d := range st.Details() {
					if info, ok := d.(*errdetails.ErrorInfo); ok {
						id = info.GetMetadata()["correlationId"]
					}
				}
				if len(id) != 16 || !strings.Contains(st.Message(), id) {
					t.Fatalf("correlation id %q missing from %q or its ErrorInfo", id, st.Message())
				}
				if !strings.Contains(logs.String(), id) || !strings.Contains(logs.String(), "victim-7") {
					t.Errorf("the cause is not logged under %s:\n%s", id, logs.String())
				}
			})
		}
	}
}

// fakeStream is a server stream with a context and nothing else.
type fakeStream struct{ grpc.ServerStream }

func (fakeStream) Context() context.Context { return context.Background() }
