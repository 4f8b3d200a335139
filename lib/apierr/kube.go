package apierr

import (
	"errors"
	"net"

	"google.golang.org/grpc/codes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// FromKube maps an error of the Kubernetes API to the gRPC status a caller
// should see: the codes say the same thing in both vocabularies, and the
// API server's message is kept.
func FromKube(err error) error {
	if err == nil {
		return nil
	}
	code := codes.Internal
	reason := "KUBERNETES_API_ERROR"
	switch {
	case apierrors.IsNotFound(err):
		code, reason = codes.NotFound, "NOT_FOUND"
	case apierrors.IsAlreadyExists(err):
		code, reason = codes.AlreadyExists, "ALREADY_EXISTS"
	case apierrors.IsConflict(err):
		code, reason = codes.Aborted, "CONFLICT"
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		code, reason = codes.InvalidArgument, "INVALID"
	case apierrors.IsForbidden(err):
		code, reason = codes.PermissionDenied, "FORBIDDEN"
	case apierrors.IsUnauthorized(err):
		code, reason = codes.Unauthenticated, "UNAUTHORIZED"
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsServiceUnavailable(err), isNetError(err):
		code, reason = codes.Unavailable, "KUBERNETES_API_UNAVAILABLE"
	}
	return New(code, reason, nil, "%v", err)
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}
