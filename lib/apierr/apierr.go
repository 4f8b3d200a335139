// Package apierr builds the gRPC status errors jobplane returns: a code, a
// message, and details a client (or grpcurl) can read, such as BadRequest field
// violations with Kubernetes JSON paths.
package apierr

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Domain of the ErrorInfo details jobplane attaches.
const Domain = "jobplane.dev"

// Violation is one invalid field: its path in Kubernetes JSON form
// ("job.spec.completions", "pods[2].metadata.uid") and what is wrong with it.
type Violation struct {
	Field       string
	Description string
}

// Violations collects field violations while a request is checked.
type Violations []Violation

// Add records a violation of field.
func (v *Violations) Add(field, format string, args ...any) {
	*v = append(*v, Violation{Field: field, Description: fmt.Sprintf(format, args...)})
}

// Err is nil when nothing was recorded, else InvalidArgument carrying every
// violation as google.rpc.BadRequest field violations.
func (v Violations) Err(summary string) error {
	if len(v) == 0 {
		return nil
	}
	return InvalidArgument(summary, v...)
}

// InvalidArgument returns an InvalidArgument status whose message lists the
// violations after summary and whose details carry them as BadRequest.
func InvalidArgument(summary string, violations ...Violation) error {
	br := &errdetails.BadRequest{}
	msgs := make([]string, 0, len(violations))
	for _, v := range violations {
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{
			Field:       v.Field,
			Description: v.Description,
		})
		msgs = append(msgs, v.Field+": "+v.Description)
	}
	msg := summary
	if len(msgs) > 0 {
		msg += ": " + strings.Join(msgs, "; ")
	}
	return withDetails(codes.InvalidArgument, msg, br, "INVALID_ARGUMENT", nil)
}

// New returns a status with code and message and an ErrorInfo whose reason is
// reason (upper snake case, for example "JOB_NOT_FOUND") and whose metadata is
// meta.
func New(code codes.Code, reason string, meta map[string]string, format string, args ...any) error {
	return withDetails(code, fmt.Sprintf(format, args...), nil, reason, meta)
}

func withDetails(code codes.Code, msg string, br *errdetails.BadRequest, reason string, meta map[string]string) error {
	st := status.New(code, msg)
	info := &errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: meta}
	var err error
	if br != nil {
		st, err = st.WithDetails(info, br)
	} else {
		st, err = st.WithDetails(info)
	}
	if err != nil {
		// Only fails for messages that cannot be marshalled; ours always can.
		return status.Error(code, msg)
	}
	return st.Err()
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
