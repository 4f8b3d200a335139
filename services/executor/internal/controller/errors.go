package controller

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/apierr"
)

func notFound(namespace, name string) error {
	return apierr.New(codes.NotFound, "JOB_NOT_FOUND", map[string]string{"namespace": namespace, "name": name},
		"Job %s/%s not found", namespace, name)
}

func notManaged(job *batchv1.Job, managedBy string) error {
	return apierr.New(codes.FailedPrecondition, "NOT_MANAGED", map[string]string{"managedBy": ptr.Deref(job.Spec.ManagedBy, "")},
		"Job %s/%s is not managed by %s (spec.managedBy is %q)", job.Namespace, job.Name, managedBy, ptr.Deref(job.Spec.ManagedBy, ""))
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
