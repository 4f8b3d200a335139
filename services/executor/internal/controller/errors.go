package controller

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/apierr"
)

// Reasons of the errors of a Job the controller cannot sync.
const (
	reasonJobNotFound = "JOB_NOT_FOUND"
	reasonNotManaged  = "NOT_MANAGED"
)

func notFound(namespace, name string) error {
	return apierr.New(codes.NotFound, reasonJobNotFound, map[string]string{"namespace": namespace, "name": name},
		"Job %s/%s not found", namespace, name)
}

func notManaged(job *batchv1.Job, managedBy string) error {
	return apierr.New(codes.FailedPrecondition, reasonNotManaged, map[string]string{"managedBy": ptr.Deref(job.Spec.ManagedBy, "")},
		"Job %s/%s is not managed by %s (spec.managedBy is %q)", job.Namespace, job.Name, managedBy, ptr.Deref(job.Spec.ManagedBy, ""))
}

// jobGoneOrNotOurs says whether err is sync's notFound or notManaged: a
// retry cannot succeed (only a new event about the Job can change that).
func jobGoneOrNotOurs(err error) bool {
	st, ok := err.(interface{ GRPCStatus() *status.Status })
	if !ok {
		return false
	}
	for _, d := range st.GRPCStatus().Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason() == reasonJobNotFound || info.GetReason() == reasonNotManaged
		}
	}
	return false
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
