package svc

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/kubeconv"
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
	v := violationsOf(validation.ValidateCronJobCreate(c))
	if c.ResourceVersion != "" {
		// The API server answers this with an internal error.
		v.Add("metadata.resourceVersion", "Forbidden: must be empty to create a CronJob")
	}
	if err := v.Err(invalidCronJob); err != nil {
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
	created, err := s.cfg.CronJobs.Namespace(c.Namespace).Create(ctx, u, metav1.CreateOptions{})
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
	var v apierr.Violations
	requireNamespaceAndName(&v, "", req.GetNamespace(), req.GetName())
	if err := v.Err("invalid GetCronJob request"); err != nil {
		return nil, err
	}
	if s.cfg.CronJobs == nil {
		return nil, withoutCluster("GetCronJob")
	}
	u, err := s.cfg.CronJobs.Namespace(req.GetNamespace()).Get(ctx, req.GetName(), metav1.GetOptions{})
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
	var v apierr.Violations
	if _, err := labels.Parse(req.GetLabelSelector()); err != nil {
		v.Add("labelSelector", "Invalid value: %q: %v", req.GetLabelSelector(), err)
	}
	size := int64(req.GetPageSize())
	switch {
	case size == 0:
		size = defaultPageSize
	case size < 0 || size > maxPageSize:
		v.Add("pageSize", "Invalid value: %d: must be between 1 and %d (0 means %d)", size, maxPageSize, defaultPageSize)
	}
	if err := v.Err("invalid ListCronJobs request"); err != nil {
		return nil, err
	}
	if s.cfg.CronJobs == nil {
		return nil, withoutCluster("ListCronJobs")
	}
	list, err := s.cfg.CronJobs.Namespace(req.GetNamespace()).List(ctx, metav1.ListOptions{
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
		return apierr.InvalidArgument("invalid ListCronJobs request",
			apierr.Violation{Field: "pageToken", Description: "Invalid value: " + err.Error() + "; list again from the first page (empty page token)"})
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
	var v apierr.Violations
	requireNamespaceAndName(&v, "metadata.", desired.Namespace, desired.Name)
	if err := v.Err(invalidCronJob); err != nil {
		return nil, err
	}
	if s.cfg.CronJobs == nil {
		return nil, withoutCluster("UpdateCronJob")
	}
	cronJobs := s.cfg.CronJobs.Namespace(desired.Namespace)
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
	if err := violationsOf(validation.ValidateCronJobUpdate(c, old)).Err(invalidCronJob); err != nil {
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
	var v apierr.Violations
	requireNamespaceAndName(&v, "", req.GetNamespace(), req.GetName())
	propagation := apierr.PropagationPolicy(&v, "propagationPolicy", req.GetPropagationPolicy())
	if err := v.Err("invalid DeleteCronJob request"); err != nil {
		return nil, err
	}
	if s.cfg.CronJobs == nil {
		return nil, withoutCluster("DeleteCronJob")
	}
	err := s.cfg.CronJobs.Namespace(req.GetNamespace()).Delete(ctx, req.GetName(), metav1.DeleteOptions{PropagationPolicy: &propagation})
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
		return nil, apierr.InvalidArgument(invalidCronJob,
			apierr.Violation{Field: "spec.jobTemplate.spec.template.spec", Description: "Invalid value: " + err.Error()})
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

// violationsOf turns validation errors into field violations worded as the
// API server's causes.
func violationsOf(errs field.ErrorList) apierr.Violations {
	var v apierr.Violations
	for _, e := range errs {
		v.Add(e.Field, "%s", e.ErrorBody())
	}
	return v
}

// requireNamespaceAndName records the missing ones, under prefix.
func requireNamespaceAndName(v *apierr.Violations, prefix, namespace, name string) {
	if namespace == "" {
		v.Add(prefix+"namespace", "Required value")
	}
	if name == "" {
		v.Add(prefix+"name", "Required value")
	}
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
		return causesOf(err)
	}
	mapped := apierr.FromKube(err)
	if status.Code(mapped) == codes.Internal {
		return s.internal("calling the Kubernetes API", err)
	}
	return mapped
}

// noField is how the API server names the field of a cause about no field.
const noField = "<nil>"

// causesOf answers the API server's refusal of a CronJob with its causes.
func causesOf(err error) error {
	var v apierr.Violations
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Details != nil {
		for _, c := range st.Status().Details.Causes {
			if c.Field == noField {
				continue // the note that CEL rules wait for the schema's checks
			}
			v.Add(c.Field, "%s", c.Message)
		}
	}
	if len(v) == 0 {
		v.Add("", "%s", err.Error())
	}
	return v.Err("the API server rejected the CronJob")
}

// internal logs an unexpected failure and answers it without its cause.
func (s *CronService) internal(what string, err error) error {
	s.cfg.Log.Error(what, "err", err)
	return apierr.New(codes.Internal, "INTERNAL", nil, "%s failed; the cron service's log has the cause", what)
}
