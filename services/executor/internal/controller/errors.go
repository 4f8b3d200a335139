package controller

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/apierr"
)

// jobNotFoundError: the Job to sync or execute on does not exist. A retry
// cannot succeed; only a new event about the Job can change that.
type jobNotFoundError struct{ namespace, name string }

func (e *jobNotFoundError) Error() string { return e.GRPCStatus().Message() }

// GRPCStatus is NOT_FOUND, reason JOB_NOT_FOUND.
func (e *jobNotFoundError) GRPCStatus() *status.Status {
	return status.Convert(apierr.New(codes.NotFound, "JOB_NOT_FOUND", map[string]string{"namespace": e.namespace, "name": e.name},
		"Job %s/%s not found", e.namespace, e.name))
}

// notManagedError: the Job is another controller's (spec.managedBy). A
// retry cannot succeed either.
type notManagedError struct {
	namespace, name string
	managedBy, ours string
}

func notManaged(job *batchv1.Job, ours string) error {
	return &notManagedError{namespace: job.Namespace, name: job.Name, managedBy: ptr.Deref(job.Spec.ManagedBy, ""), ours: ours}
}

func (e *notManagedError) Error() string { return e.GRPCStatus().Message() }

// GRPCStatus is FAILED_PRECONDITION, reason NOT_MANAGED.
func (e *notManagedError) GRPCStatus() *status.Status {
	return status.Convert(apierr.New(codes.FailedPrecondition, "NOT_MANAGED", map[string]string{"managedBy": e.managedBy},
		"Job %s/%s is not managed by %s (spec.managedBy is %q)", e.namespace, e.name, e.ours, e.managedBy))
}

// jobGoneOrNotOurs says whether err means a retry cannot succeed.
func jobGoneOrNotOurs(err error) bool {
	var gone *jobNotFoundError
	var notOurs *notManagedError
	return errors.As(err, &gone) || errors.As(err, &notOurs)
}

// asStatus returns err when it is already a gRPC status error.
func asStatus(err error) (error, bool) {
	var st interface{ GRPCStatus() *status.Status }
	if errors.As(err, &st) {
		return err, true
	}
	return nil, false
}

// fromKube maps an API error to a gRPC status.
func fromKube(err error) error { return apierr.FromKube(err) }

// podsNotOfJobError: a caller's plan names pods the Job does not control.
// It says which references, never why (another namespace's pod, another
// Job's, one that is gone look the same).
type podsNotOfJobError struct {
	namespace, name string
	// refs are the paths of the references in the plan and the pod names.
	refs []podRefPath
}

type podRefPath struct{ path, pod string }

func (e *podsNotOfJobError) Error() string { return e.GRPCStatus().Message() }

// GRPCStatus is FAILED_PRECONDITION, reason POD_NOT_OF_JOB, with a
// PreconditionFailure violation per reference.
func (e *podsNotOfJobError) GRPCStatus() *status.Status {
	msgs := make([]string, len(e.refs))
	failure := &errdetails.PreconditionFailure{}
	for i, r := range e.refs {
		msgs[i] = fmt.Sprintf("%s (%s)", r.path, r.pod)
		failure.Violations = append(failure.Violations, &errdetails.PreconditionFailure_Violation{
			Type: "POD_NOT_OF_JOB", Subject: r.path,
			Description: fmt.Sprintf("pod %q of that UID is not controlled by Job %s/%s", r.pod, e.namespace, e.name),
		})
	}
	st := status.Convert(apierr.New(codes.FailedPrecondition, "POD_NOT_OF_JOB", map[string]string{"namespace": e.namespace, "name": e.name},
		"the plan names pods Job %s/%s does not control: %s; nothing was performed", e.namespace, e.name, strings.Join(msgs, ", ")))
	if withFailure, err := st.WithDetails(failure); err == nil {
		return withFailure
	}
	return st
}
