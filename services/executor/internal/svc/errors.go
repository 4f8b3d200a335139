package svc

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/jobplane/jobplane/lib/apierr"
)

// fromKube maps an error of the Kubernetes API to the status a caller sees:
// apierr.FromKube's mapping, plus what only this API says. A Job the API
// server finds invalid answers its causes as field violations under "job.";
// a resourceVersion too old to watch from is OUT_OF_RANGE; a request the
// client cancelled stays cancelled; the cause of an unexpected error is
// logged here, once, and answered as Internal without it.
func (s *ExecutorService) fromKube(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case apierrors.IsInvalid(err):
		return invalidJob(err)
	case apierrors.IsResourceExpired(err), apierrors.IsGone(err):
		return apierr.New(codes.OutOfRange, "RESOURCE_VERSION_TOO_OLD", nil,
			"%v; watch again from the current state (empty resource_version)", err)
	}
	mapped := apierr.FromKube(err)
	if status.Code(mapped) == codes.Internal {
		s.log.Error("unexpected Kubernetes API error", "err", err)
		return apierr.New(codes.Internal, "KUBERNETES_API_ERROR", nil,
			"the Kubernetes API answered an unexpected error; the executor's log has its cause")
	}
	return mapped
}

// invalidJob answers the API server's causes as errors of the request's
// Job (paths under "job").
func invalidJob(err error) error {
	return apierr.Invalid("the API server rejected the Job", apierr.KubeCauses(err, field.NewPath("job")))
}
