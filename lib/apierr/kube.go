package apierr

import (
	"errors"
	"net"
	"strings"

	"google.golang.org/grpc/codes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

// noField is how the API server names the field of a cause about no field.
const noField = "<nil>"

// KubeCauses returns the causes of the API server's Invalid answer as
// errors in its words, their paths under prefix (nil: as they are). Causes
// about no field (such as the note that CEL rules wait for the schema's
// checks) are left out; without any cause, err itself is the error of
// prefix.
func KubeCauses(err error, prefix *field.Path) field.ErrorList {
	var errs field.ErrorList
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Details != nil {
		for _, c := range st.Status().Details.Causes {
			if c.Field == noField {
				continue
			}
			errs = append(errs, causeError(joinPath(prefix, c.Field), c))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, &field.Error{Type: field.ErrorTypeInvalid, Field: joinPath(prefix, ""), BadValue: field.OmitValueType{}, Detail: err.Error()})
	}
	return errs
}

// causeError is a cause as the field error whose body is the cause's
// message: the API server words its causes as field errors' bodies.
func causeError(path string, c metav1.StatusCause) *field.Error {
	typ := field.ErrorType(c.Type)
	if rest, ok := strings.CutPrefix(c.Message, typ.String()); ok && !strings.HasPrefix(typ.String(), "<unknown") {
		return &field.Error{Type: typ, Field: path, BadValue: field.OmitValueType{}, Detail: strings.TrimPrefix(rest, ": ")}
	}
	return &field.Error{Type: field.ErrorTypeInvalid, Field: path, BadValue: field.OmitValueType{}, Detail: c.Message}
}

func joinPath(prefix *field.Path, name string) string {
	switch {
	case prefix == nil:
		return name
	case name == "":
		return prefix.String()
	}
	return prefix.String() + "." + name
}
