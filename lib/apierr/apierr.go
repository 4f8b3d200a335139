// Package apierr builds the gRPC status errors jobplane returns: a code, a
// message, and details a client (or grpcurl) can read, such as BadRequest field
// violations with Kubernetes JSON paths.
package apierr

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Domain of the ErrorInfo details jobplane attaches.
const Domain = "jobplane.dev"

// Violation is one invalid field as a client reads it from a status: its
// path in Kubernetes JSON form ("job.spec.completions",
// "pods[2].metadata.uid") and what is wrong with it.
type Violation struct {
	Field       string
	Description string
}

// Invalid is the one way validation errors become a status: nil when errs is
// empty, else an *InvalidError. Validation everywhere returns
// field.ErrorList, as the API server's does; the handler passes it here.
func Invalid(summary string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return &InvalidError{Summary: summary, Errs: errs}
}

// InvalidError is a request that failed validation. Its status is
// InvalidArgument with a message listing each error after Summary and
// google.rpc.BadRequest field violations (the field's path, the error's body
// in the API server's words: "Required value", "Invalid value: 3: ...").
type InvalidError struct {
	Summary string
	Errs    field.ErrorList
}

func (e *InvalidError) Error() string { return e.GRPCStatus().Message() }

// GRPCStatus makes the error a status error for grpc-go and status.FromError.
func (e *InvalidError) GRPCStatus() *status.Status {
	br := &errdetails.BadRequest{}
	msgs := make([]string, 0, len(e.Errs))
	for _, fe := range e.Errs {
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{
			Field:       fe.Field,
			Description: fe.ErrorBody(),
		})
		msgs = append(msgs, fe.Field+": "+fe.ErrorBody())
	}
	msg := e.Summary
	if len(msgs) > 0 {
		msg += ": " + strings.Join(msgs, "; ")
	}
	return withDetails(codes.InvalidArgument, msg, br, "INVALID_ARGUMENT", nil)
}

// Prefixed returns errs with each path under prefix (prefix.field), for
// errors of a part of a request validated on its own.
func Prefixed(prefix *field.Path, errs field.ErrorList) field.ErrorList {
	out := make(field.ErrorList, len(errs))
	for i, fe := range errs {
		moved := *fe
		moved.Field = prefix.String() + "." + fe.Field
		out[i] = &moved
	}
	return out
}

// New returns a status with code and message and an ErrorInfo whose reason is
// reason (upper snake case, for example "JOB_NOT_FOUND") and whose metadata is
// meta.
func New(code codes.Code, reason string, meta map[string]string, format string, args ...any) error {
	return withDetails(code, fmt.Sprintf(format, args...), nil, reason, meta).Err()
}

// Exhausted is RESOURCE_EXHAUSTED, as New, with a RetryInfo whose delay is
// jittered around wait (from half to one and a half of it), so that the
// callers shed together do not come back together.
func Exhausted(reason string, meta map[string]string, wait time.Duration, format string, args ...any) error {
	st := status.Convert(New(codes.ResourceExhausted, reason, meta, format, args...))
	delay := wait/2 + rand.N(wait+1)
	withRetry, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)})
	if err != nil {
		return st.Err()
	}
	return withRetry.Err()
}

func withDetails(code codes.Code, msg string, br *errdetails.BadRequest, reason string, meta map[string]string) *status.Status {
	st := status.New(code, msg)
	info := &errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: meta}
	var details []protoadapt.MessageV1
	details = append(details, info)
	if br != nil {
		details = append(details, br)
	}
	withDetails, err := st.WithDetails(details...)
	if err != nil {
		// Only fails for messages that cannot be marshalled; ours always can.
		return st
	}
	return withDetails
}

// FieldViolations returns the BadRequest field violations of err, sorted by
// field, or nil.
func FieldViolations(err error) []Violation {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	var out []Violation
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, fv := range br.GetFieldViolations() {
				out = append(out, Violation{Field: fv.GetField(), Description: fv.GetDescription()})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

// Reason is the ErrorInfo reason of err, a status error or one wrapping
// it; "" when it has none.
func Reason(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}
