package svc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/jobplane/jobplane/lib/apierr"
)

func TestFromKubeSaysTheSameThingInGRPCCodes(t *testing.T) {
	jobs := schema.GroupResource{Group: "batch", Resource: "jobs"}
	refused := &url.Error{Op: "Post", URL: "https://127.0.0.1:6443", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	cases := []struct {
		name   string
		err    error
		code   codes.Code
		fields []string
	}{
		{"not found", apierrors.NewNotFound(jobs, "work"), codes.NotFound, nil},
		{"already exists", apierrors.NewAlreadyExists(jobs, "work"), codes.AlreadyExists, nil},
		{"conflict", apierrors.NewConflict(jobs, "work", errors.New("the object has been modified")), codes.Aborted, nil},
		{"invalid, with causes", apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "work", field.ErrorList{
			field.Invalid(field.NewPath("metadata", "name"), "Work", "a lowercase RFC 1123 subdomain"),
			field.Required(field.NewPath("spec", "template"), ""),
		}), codes.InvalidArgument, []string{"job.metadata.name", "job.spec.template"}},
		{"invalid, without causes", apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "work", nil), codes.InvalidArgument, []string{"job"}},
		{"forbidden", apierrors.NewForbidden(jobs, "work", errors.New("quota")), codes.PermissionDenied, nil},
		{"resource version too old", apierrors.NewResourceExpired("too old resource version: 1 (5)"), codes.OutOfRange, nil},
		{"server timeout", apierrors.NewServerTimeout(jobs, "create", 1), codes.Unavailable, nil},
		{"timeout", apierrors.NewTimeoutError("timed out", 1), codes.Unavailable, nil},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), codes.Unavailable, nil},
		{"service unavailable", apierrors.NewServiceUnavailable("starting"), codes.Unavailable, nil},
		{"connection refused", refused, codes.Unavailable, nil},
		{"request cancelled", fmt.Errorf("list: %w", context.Canceled), codes.Canceled, nil},
		{"request deadline", &url.Error{Op: "Get", URL: "https://x", Err: context.DeadlineExceeded}, codes.DeadlineExceeded, nil},
		{"already a status", apierr.New(codes.FailedPrecondition, "NOT_MANAGED", nil, "no"), codes.FailedPrecondition, nil},
		{"unauthorized", apierrors.NewUnauthorized("token expired"), codes.Unauthenticated, nil},
		{"anything else", errors.New("boom"), codes.Internal, nil},
	}
	s := NewExecutorService(Config{Log: slog.New(slog.DiscardHandler)})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.fromKube(tc.err)
			if status.Code(err) != tc.code {
				t.Errorf("got %v, want %v", err, tc.code)
			}
			var got []string
			for _, v := range apierr.FieldViolations(err) {
				got = append(got, v.Field)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.fields) {
				t.Errorf("fields %v, want %v", got, tc.fields)
			}
		})
	}
	if s.fromKube(nil) != nil {
		t.Error("fromKube(nil) is not nil")
	}
}
