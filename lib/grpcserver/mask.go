package grpcserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jobplane/jobplane/lib/apierr"
)

// maskInternal answers a handler's error that is not a gRPC status (a client
// library's, a bug) as INTERNAL with a correlation id, and logs the cause
// under that id: its words could name another tenant's objects or the
// server's internals. Status errors, which handlers build on purpose, pass as
// they are; a context's error becomes its status (CANCELED,
// DEADLINE_EXCEEDED). The anchor is Temporal's mask-internal-error
// interceptor.
type maskInternal struct{ log *slog.Logger }

func (m maskInternal) unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil {
			return resp, m.mask(ctx, info.FullMethod, err)
		}
		return resp, nil
	}
}

func (m maskInternal) stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := handler(srv, ss); err != nil {
			return m.mask(ss.Context(), info.FullMethod, err)
		}
		return nil
	}
}

func (m maskInternal) mask(ctx context.Context, method string, err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	id := correlationID()
	m.log.ErrorContext(ctx, "internal error", "method", method, "correlationId", id, "err", err)
	return apierr.New(codes.Internal, "INTERNAL", map[string]string{"correlationId": id},
		"internal error; the server logged its cause under correlation id %s", id)
}

// correlationID names one logged cause: 16 hex digits, random.
func correlationID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
