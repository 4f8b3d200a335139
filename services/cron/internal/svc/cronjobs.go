package svc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/services/cron/internal/batchcron"
	"github.com/jobplane/jobplane/services/cron/internal/validation"
)

// Page sizes of ListCronJobs.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// invalidCronJob is the summary of a CronJob's violations, whose fields are
// the CronJob's Kubernetes JSON paths ("spec.schedule"), as the API server
// names them for a CronJob created directly.
const invalidCronJob = "invalid CronJob"

// CreateCronJob defaults and validates a CronJob as the API server does a
// batch/v1 one, then stores it.
func (s *CronService) CreateCronJob(ctx context.Context, req *jobplanev1.CreateCronJobRequest) (*jobplanev1.CreateCronJobResponse, error) {
	c, err := cronJobToKube(req.GetCronJob())
	if err != nil {
		return nil, err
	}
	validation.Default(c)
	errs := validation.ValidateCronJobCreate(c)
	if c.ResourceVersion != "" {
		// The API server answers this with an internal error.
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "resourceVersion"), "must be empty to create a CronJob"))
	}
	for i, ref := range c.OwnerReferences {
		if ptr.Deref(ref.BlockOwnerDeletion, false) && ref.Kind == cronapi.Kind && (ref.APIVersion == cronapi.APIVersion || ref.APIVersion == batchcron.APIVersion) {
			// The API server lets only who may update the owner's
			// finalizers set it, and asks that of the cron service, which
			// may for CronJobs (for other owners it may not, and is refused).
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "ownerReferences").Index(i).Child("blockOwnerDeletion"),
				"the cron service creates CronJobs as itself and may update CronJobs' finalizers, so the API server could not check that you may block this CronJob's deletion; create the CronJob directly to set it"))
		}
	}
	if err := apierr.Invalid(invalidCronJob, errs); err != nil {
		return nil, err
	}
	if s.cfg.CronJobs == nil {
		return nil, withoutCluster("CreateCronJob")
	}
	c.Status = cronapi.CronJobStatus{} // the cron service's to write
	u, err := cronapi.ToUnstructured(c)
	if err != nil {
		return nil, s.internal("encoding a CronJob", err)
	}
	created, err := s.cfg.CronJobs.Namespace(c.Namespace).Create(cronJobLane(ctx, c.Namespace, c.Name), u, metav1.CreateOptions{})
	if err != nil {
		return nil, s.kubeError(err)
	}
	out, err := s.cronJobFromKube(created)
	if err != nil {
		return nil, err
	}
	return &jobplanev1.CreateCronJobResponse{CronJob: out}, nil
}

// GetCronJob reads a CronJob from the API server.
func (s *CronService) GetCronJob(ctx context.Context, req *jobplanev1.GetCronJobRequest) (*jobplanev1.GetCronJobResponse, error) {
	if err := apierr.Invalid("invalid GetCronJob request", cronJobKey(nil, req.GetNamespace(), req.GetName())); err != nil {
		return nil, err
	}
	if s.cfg.CronJobs == nil {
		return nil, withoutCluster("GetCronJob")
	}
	u, err := s.cfg.CronJobs.Namespace(req.GetNamespace()).Get(cronJobLane(ctx, req.GetNamespace(), req.GetName()), req.GetName(), metav1.GetOptions{})
	if err != nil {
		return nil, s.kubeError(err)
	}
	out, err := s.cronJobFromKube(u)
	if err != nil {
		return nil, err
	}
	return &jobplanev1.GetCronJobResponse{CronJob: out}, nil
}

// ListCronJobs answers a page of the API server's list: its order (by
// namespace and name) and its continue token as the page token.
func (s *CronService) ListCronJobs(ctx context.Context, req *jobplanev1.ListCronJobsRequest) (*jobplanev1.ListCronJobsResponse, error) {
	errs := apierr.Namespace(field.NewPath("namespace"), req.GetNamespace(), false)
	_, selectorErrs := apierr.LabelSelector(field.NewPath("labelSelector"), req.GetLabelSelector())
	errs = append(errs, selectorErrs...)
	size := int64(req.GetPageSize())
	switch {
	case size == 0:
		size = defaultPageSize
	case size < 0 || size > maxPageSize:
		errs = append(errs, field.Invalid(field.NewPath("pageSize"), size, fmt.Sprintf("must be between 1 and %d (0 means %d)", maxPageSize, defaultPageSize)))
	}
	if err := apierr.Invalid("invalid ListCronJobs request", errs); err != nil {
		return nil, err
	}
	if s.cfg.CronJobs == nil {
		return nil, withoutCluster("ListCronJobs")
	}
	lane := fairlimit.WithLane(ctx, fairlimit.NamespaceLane(req.GetNamespace()))
	list, err := s.cfg.CronJobs.Namespace(req.GetNamespace()).List(lane, metav1.ListOptions{
		LabelSelector: req.GetLabelSelector(),
		Limit:         size,
		Continue:      req.GetPageToken(),
	})
	if err != nil {
		return nil, s.listError(err, req.GetPageToken())
	}
	items := list.Items
	// The API server's order already; kept when the store is another.
	slices.SortFunc(items, func(a, b unstructured.Unstructured) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
	resp := &jobplanev1.ListCronJobsResponse{NextPageToken: list.GetContinue()}
	for i := range items {
		out, err := s.cronJobFromKube(&items[i])
		if err != nil {
			return nil, err
		}
		resp.CronJobs = append(resp.CronJobs, out)
	}
	return resp, nil
}

// listError answers a refused continue token as a bad page token: the API
// server says BadRequest for a malformed one and Gone for an expired one.
func (s *CronService) listError(err error, token string) error {
	if token != "" && (apierrors.IsBadRequest(err) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) {
		return apierr.Invalid("invalid ListCronJobs request", field.ErrorList{field.Invalid(field.NewPath("pageToken"), field.OmitValueType{},
			err.Error()+"; list again from the first page (empty page token)")})
	}
	return s.kubeError(err)
}

// UpdateCronJob replaces a CronJob's spec, labels and annotations, keeping
// the rest of what is stored (status included). Without a resourceVersion
// it replaces the latest version, retrying when the cron service's own
// status writes race it; with one, it replaces that version or is ABORTED.
func (s *CronService) UpdateCronJob(ctx context.Context, req *jobplanev1.UpdateCronJobRequest) (*jobplanev1.UpdateCronJobResponse, error) {
	desired, err := cronJobToKube(req.GetCronJob())
	if err != nil {
		return nil, err
	}
	if err := apierr.Invalid(invalidCronJob, cronJobKey(field.NewPath("metadata"), desired.Namespace, desired.Name)); err != nil {
		return nil, err
	}
	if s.cfg.CronJobs == nil {
		return nil, withoutCluster("UpdateCronJob")
	}
	cronJobs := s.cfg.CronJobs.Namespace(desired.Namespace)
	ctx = cronJobLane(ctx, desired.Namespace, desired.Name)
	var updated *unstructured.Unstructured
	replace := func() (replaceErr error) {
		updated, replaceErr = s.replaceSpec(ctx, cronJobs, desired)
		return replaceErr
	}
	if desired.ResourceVersion != "" {
		err = replace() // a conflict is the caller's to resolve
	} else {
		err = retry.RetryOnConflict(retry.DefaultRetry, replace)
	}
	if err != nil {
		return nil, s.kubeError(err)
	}
	out, err := s.cronJobFromKube(updated)
	if err != nil {
		return nil, err
	}
	return &jobplanev1.UpdateCronJobResponse{CronJob: out}, nil
}

// replaceSpec reads the stored CronJob, puts desired's spec, labels and
// annotations on it, validates the change and writes it, at desired's
// resourceVersion when it has one.
func (s *CronService) replaceSpec(ctx context.Context, cronJobs dynamic.ResourceInterface, desired *cronapi.CronJob) (*unstructured.Unstructured, error) {
	u, err := cronJobs.Get(ctx, desired.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	old, err := cronapi.FromUnstructured(u)
	if err != nil {
		return nil, s.internal("decoding a stored CronJob", err)
	}
	c := old.DeepCopy()
	desired.Spec.DeepCopyInto(&c.Spec)
	c.Labels, c.Annotations = desired.Labels, desired.Annotations
	if desired.ResourceVersion != "" {
		c.ResourceVersion = desired.ResourceVersion
	}
	validation.Default(c)
	if err := apierr.Invalid(invalidCronJob, validation.ValidateCronJobUpdate(c, old)); err != nil {
		return nil, err
	}
	if u, err = cronapi.ToUnstructured(c); err != nil {
		return nil, s.internal("encoding a CronJob", err)
	}
	return cronJobs.Update(ctx, u, metav1.UpdateOptions{})
}

// DeleteCronJob deletes a CronJob; its Jobs follow by the propagation
// policy (background by default, as kubectl does).
func (s *CronService) DeleteCronJob(ctx context.Context, req *jobplanev1.DeleteCronJobRequest) (*jobplanev1.DeleteCronJobResponse, error) {
	errs := cronJobKey(nil, req.GetNamespace(), req.GetName())
	propagation, policyErr := apierr.PropagationPolicy(field.NewPath("propagationPolicy"), req.GetPropagationPolicy())
	if policyErr != nil {
		errs = append(errs, policyErr)
	}
	if err := apierr.Invalid("invalid DeleteCronJob request", errs); err != nil {
		return nil, err
	}
	if s.cfg.CronJobs == nil {
		return nil, withoutCluster("DeleteCronJob")
	}
	err := s.cfg.CronJobs.Namespace(req.GetNamespace()).Delete(cronJobLane(ctx, req.GetNamespace(), req.GetName()),
		req.GetName(), metav1.DeleteOptions{PropagationPolicy: &propagation})
	if err != nil {
		return nil, s.kubeError(err)
	}
	return &jobplanev1.DeleteCronJobResponse{}, nil
}

// cronJobToKube converts a CronJob of a request; a template that does not
// decode is the caller's fault.
func cronJobToKube(c *jobplanev1.CronJob) (*cronapi.CronJob, error) {
	out, err := kubeconv.CronJobToKube(withJobSpec(c))
	if err != nil {
		return nil, apierr.Invalid(invalidCronJob, field.ErrorList{
			field.Invalid(field.NewPath("spec", "jobTemplate", "spec", "template", "spec"), field.OmitValueType{}, err.Error())})
	}
	return out, nil
}

// withJobSpec returns c, or a copy of it with an empty Job template spec
// where it has none: kubeconv converts only a Job with a spec, and an
// absent one is for validation to report.
func withJobSpec(c *jobplanev1.CronJob) *jobplanev1.CronJob {
	if c.GetSpec().GetJobTemplate().GetSpec() != nil {
		return c
	}
	if c == nil {
		c = &jobplanev1.CronJob{}
	} else {
		c = proto.Clone(c).(*jobplanev1.CronJob)
	}
	if c.Spec == nil {
		c.Spec = &jobplanev1.CronJobSpec{}
	}
	if c.Spec.JobTemplate == nil {
		c.Spec.JobTemplate = &jobplanev1.JobTemplateSpec{}
	}
	c.Spec.JobTemplate.Spec = &jobplanev1.JobSpec{}
	return c
}

// cronJobLane queues ctx's API requests in the fair budget's lane of the
// CronJob's syncs (namespace/name), or of its namespace while it has no name
// (generateName).
func cronJobLane(ctx context.Context, namespace, name string) context.Context {
	if name == "" {
		return fairlimit.WithLane(ctx, fairlimit.NamespaceLane(namespace))
	}
	return fairlimit.WithLane(ctx, namespace+"/"+name)
}

// cronJobFromKube converts a stored CronJob for a response.
func (s *CronService) cronJobFromKube(u *unstructured.Unstructured) (*jobplanev1.CronJob, error) {
	c, err := cronapi.FromUnstructured(u)
	if err != nil {
		return nil, s.internal("decoding a stored CronJob", err)
	}
	out, err := kubeconv.CronJobFromKube(c)
	if err != nil {
		return nil, s.internal("converting a stored CronJob", err)
	}
	return out, nil
}

// cronJobKey checks the namespace and name a request names a CronJob by,
// under parent (nil: at the top).
func cronJobKey(parent *field.Path, namespace, name string) field.ErrorList {
	if parent == nil {
		return apierr.ObjectKey(field.NewPath("namespace"), field.NewPath("name"), namespace, name)
	}
	return apierr.ObjectKey(parent.Child("namespace"), parent.Child("name"), namespace, name)
}

// withoutCluster answers an RPC that needs the API server when the service
// has none.
func withoutCluster(rpc string) error {
	return apierr.New(codes.Unavailable, "NOT_CONFIGURED", nil, "%s needs a cluster: this cron service runs without one", rpc)
}

// kubeError maps an error of the API server to the caller's status:
// apierr.FromKube's mapping, a CronJob the API server finds invalid as its
// causes' field violations, a cancelled request as cancelled, and an
// unexpected error logged here and answered without its cause.
func (s *CronService) kubeError(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case apierrors.IsInvalid(err):
		return apierr.Invalid("the API server rejected the CronJob", apierr.KubeCauses(err, nil))
	}
	mapped := apierr.FromKube(err)
	if status.Code(mapped) == codes.Internal {
		return s.internal("calling the Kubernetes API", err)
	}
	return mapped
}

// internal logs an unexpected failure and answers it without its cause.
func (s *CronService) internal(what string, err error) error {
	s.cfg.Log.Error(what, "err", err)
	return apierr.New(codes.Internal, "INTERNAL", nil, "%s failed; the cron service's log has the cause", what)
}
