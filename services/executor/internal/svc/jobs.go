package svc

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/auth"
	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/jobvalidation"
	"github.com/jobplane/jobplane/lib/kubeconv"
)

// Page sizes of ListJobs.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// SubmitJob creates a Job managed by jobplane, or answers the existing one
// when the same Job was submitted before. Every request it makes for it
// (the create, and the read and dry run of a resubmission) is the caller's,
// impersonated: the API server's RBAC, admission and audit see who asked,
// and jobplane creates no Job its caller could not create himself. The cron
// service submits its runs as itself, as the built-in CronJob controller
// creates them.
func (s *ExecutorService) SubmitJob(ctx context.Context, req *jobplanev1.SubmitJobRequest) (*jobplanev1.SubmitJobResponse, error) {
	job, errs := jobvalidation.Check(s.withManagedBy(req.GetJob()), field.NewPath("job"))
	if job != nil && !s.manages(job) {
		errs = append(errs, field.Invalid(field.NewPath("job", "spec", "managedBy"), *job.Spec.ManagedBy,
			fmt.Sprintf("jobplane runs only Jobs managed by %q (leave it empty for that)", s.cfg.ManagedBy)))
	}
	if job != nil && job.ResourceVersion != "" {
		// The API server answers this with an internal error.
		errs = append(errs, field.Forbidden(field.NewPath("job", "metadata", "resourceVersion"), "must be empty to create a Job"))
	}
	if err := apierr.Invalid("invalid Job", errs); err != nil {
		return nil, err
	}
	if err := s.mustLead(); err != nil {
		return nil, err
	}
	jobs, err := s.asCaller(ctx, job.Namespace)
	if err != nil {
		return nil, err
	}
	// The creation waits in the Job's lane of the fair limiter (that of its
	// syncs), not in the one lane of unkeyed requests: a burst of
	// submissions (a cron boundary) would wait there behind the status
	// writes of the Jobs it created. It is not counted as the Job's work,
	// as the built-in controller's cost does not count it. A generateName's
	// Job has no name yet: its namespace's lane.
	ctx = fairlimit.WithLane(ctx, job.Namespace+"/"+job.Name)
	job.Status = batchv1.JobStatus{} // the API server ignores it on create
	created, err := jobs.Create(ctx, job, metav1.CreateOptions{})
	switch {
	case err == nil:
		return s.submitted(created, true)
	case apierrors.IsAlreadyExists(err) && job.Name != "":
		return s.resubmitted(ctx, jobs, job)
	}
	return nil, s.fromKube(err)
}

// asCaller returns the Jobs of namespace as the caller of ctx sees them.
func (s *ExecutorService) asCaller(ctx context.Context, namespace string) (typedbatchv1.JobInterface, error) {
	id, ok := auth.FromContext(ctx)
	if !ok {
		// The chassis authenticates every call: a call without an
		// identity is a bug, and acting as the executor would be worse.
		s.log.Error("a call without an identity reached SubmitJob")
		return nil, apierr.New(codes.Internal, "NO_IDENTITY", nil, "the caller's identity is unknown; the executor's log has the cause")
	}
	client, err := s.cfg.Impersonate(id)
	if err != nil {
		s.log.Error("building a client impersonating the caller", "user", id.User, "err", err)
		return nil, apierr.New(codes.Internal, "IMPERSONATION", nil, "cannot act as the caller; the executor's log has the cause")
	}
	return client.Jobs(namespace), nil
}

// withManagedBy returns job with an empty spec.managedBy set to jobplane's,
// leaving the request untouched; in drop-in mode it stays empty.
func (s *ExecutorService) withManagedBy(job *jobplanev1.Job) *jobplanev1.Job {
	if job == nil || job.GetSpec().GetManagedBy() != "" || s.cfg.DropIn {
		return job
	}
	job = proto.Clone(job).(*jobplanev1.Job)
	if job.Spec == nil {
		job.Spec = &jobplanev1.JobSpec{}
	}
	job.Spec.ManagedBy = proto.String(s.cfg.ManagedBy)
	return job
}

func (s *ExecutorService) submitted(job *batchv1.Job, created bool) (*jobplanev1.SubmitJobResponse, error) {
	out, err := s.jobToProto(job)
	if err != nil {
		return nil, err
	}
	return &jobplanev1.SubmitJobResponse{Job: out, Created: created}, nil
}

// resubmitted answers a submission whose name is taken: the existing Job when
// it is jobplane's and has the spec this submission would have been stored
// with, else ALREADY_EXISTS saying what differs.
func (s *ExecutorService) resubmitted(ctx context.Context, jobs typedbatchv1.JobInterface, job *batchv1.Job) (*jobplanev1.SubmitJobResponse, error) {
	existing, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, apierr.New(codes.Aborted, "DELETED_MEANWHILE", nil,
			"Job %s/%s existed and was deleted while it was submitted; submit it again", job.Namespace, job.Name)
	}
	if err != nil {
		return nil, s.fromKube(err)
	}
	if !s.manages(existing) {
		return nil, apierr.New(codes.AlreadyExists, "ALREADY_EXISTS", nil,
			"Job %s/%s already exists and is not managed by %s (spec.managedBy is %q)",
			job.Namespace, job.Name, s.cfg.ManagedBy, ptr.Deref(existing.Spec.ManagedBy, ""))
	}
	if existing.DeletionTimestamp != nil {
		return nil, apierr.New(codes.AlreadyExists, "ALREADY_EXISTS", nil,
			"Job %s/%s already exists and is being deleted; submit it again once it is gone", job.Namespace, job.Name)
	}
	wouldBe, err := dryRunCreate(ctx, jobs, job)
	if err != nil {
		return nil, s.fromKube(err)
	}
	if diff := specDiff(submitterSpec(existing), submitterSpec(wouldBe)); len(diff) > 0 {
		const shown = 8
		more := ""
		if len(diff) > shown {
			more = fmt.Sprintf(" and %d more", len(diff)-shown)
			diff = diff[:shown]
		}
		return nil, apierr.New(codes.AlreadyExists, "ALREADY_EXISTS", map[string]string{"uid": string(existing.UID)},
			"a different Job %s/%s already exists: its spec differs in %s%s", job.Namespace, job.Name, strings.Join(diff, ", "), more)
	}
	return s.submitted(existing, false)
}

// The template labels the API server generates from a Job's name and UID
// when its selector is not manual, under their current and legacy keys.
var generatedTemplateLabels = []string{batchv1.ControllerUidLabel, batchv1.JobNameLabel, "controller-uid", "job-name"}

// dryRunCreate returns the Job the API server would store for job, with every
// default and admission mutation applied: how kubectl diff learns what the
// server makes of an object, since the pod template's defaults are the API
// server's and not modelled here. The dry run takes a name the API server
// generates, as the real one is taken, no longer than the real one: the name
// bounds the pods' hostnames, which validation checks.
func dryRunCreate(ctx context.Context, jobs typedbatchv1.JobInterface, job *batchv1.Job) (*batchv1.Job, error) {
	const suffix = 5 // characters the API server adds to a generateName
	probe := job.DeepCopy()
	probe.GenerateName = job.Name
	if len(job.Name) > suffix {
		probe.GenerateName = strings.TrimRight(job.Name[:len(job.Name)-suffix], ".")
	}
	probe.Name = ""
	if !ptr.Deref(probe.Spec.ManualSelector, false) {
		// Labels generated for the real name would not match the probe's.
		for _, l := range generatedTemplateLabels {
			delete(probe.Spec.Template.Labels, l)
		}
	}
	return jobs.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
}

// submitterSpec is what a submitter controls of a stored Job's spec: all of
// it but, when the selector is not manual, the selector and template labels
// the API server generated from the Job's name and UID.
func submitterSpec(job *batchv1.Job) batchv1.JobSpec {
	spec := *job.Spec.DeepCopy()
	if ptr.Deref(spec.ManualSelector, false) {
		return spec
	}
	spec.Selector = nil
	for _, l := range generatedTemplateLabels {
		delete(spec.Template.Labels, l)
	}
	if len(spec.Template.Labels) == 0 {
		spec.Template.Labels = nil
	}
	return spec
}

// GetJob returns one of jobplane's Jobs from the informer cache and, on
// request, its pods by name.
func (s *ExecutorService) GetJob(_ context.Context, req *jobplanev1.GetJobRequest) (*jobplanev1.GetJobResponse, error) {
	if err := apierr.Invalid("invalid GetJob request", jobKey(req.GetNamespace(), req.GetName())); err != nil {
		return nil, err
	}
	job, err := s.cfg.Jobs.Jobs(req.GetNamespace()).Get(req.GetName())
	if err != nil {
		return nil, s.fromKube(err)
	}
	if !s.manages(job) {
		return nil, s.notManaged(job)
	}
	out, err := s.cachedJobToProto(job)
	if err != nil {
		return nil, err
	}
	resp := &jobplanev1.GetJobResponse{Job: out}
	if req.GetIncludePods() {
		pods, err := s.cfg.PodsOf(job)
		if err != nil {
			return nil, s.fromKube(err)
		}
		pods = slices.Clone(pods)
		slices.SortFunc(pods, func(a, b *corev1.Pod) int { return cmp.Compare(a.Name, b.Name) })
		resp.Pods = make([]*jobplanev1.Pod, len(pods))
		for i, p := range pods {
			resp.Pods[i] = kubeconv.PodFromKube(p)
		}
	}
	return resp, nil
}

// ListJobs answers a page of jobplane's Jobs from the informer cache, by
// namespace and name.
func (s *ExecutorService) ListJobs(_ context.Context, req *jobplanev1.ListJobsRequest) (*jobplanev1.ListJobsResponse, error) {
	errs := apierr.Namespace(field.NewPath("namespace"), req.GetNamespace(), false)
	selector, selectorErrs := apierr.LabelSelector(field.NewPath("labelSelector"), req.GetLabelSelector())
	errs = append(errs, selectorErrs...)
	size := int(req.GetPageSize())
	switch {
	case size == 0:
		size = defaultPageSize
	case size < 0 || size > maxPageSize:
		errs = append(errs, field.Invalid(field.NewPath("pageSize"), size, fmt.Sprintf("must be between 1 and %d (0 means %d)", maxPageSize, defaultPageSize)))
	}
	after, err := decodePageToken(req.GetPageToken())
	if err != nil {
		errs = append(errs, field.Invalid(field.NewPath("pageToken"), req.GetPageToken(), "not a token of this API; leave it empty for the first page"))
	}
	if err := apierr.Invalid("invalid ListJobs request", errs); err != nil {
		return nil, err
	}

	var all []*batchv1.Job
	if ns := req.GetNamespace(); ns != "" {
		all, err = s.cfg.Jobs.Jobs(ns).List(selector)
	} else {
		all, err = s.cfg.Jobs.List(selector)
	}
	if err != nil {
		return nil, s.fromKube(err)
	}
	jobs := make([]*batchv1.Job, 0, len(all))
	for _, j := range all {
		if s.manages(j) && (after == nil || compareKeys(keyOf(j), *after) > 0) {
			jobs = append(jobs, j)
		}
	}
	slices.SortFunc(jobs, func(a, b *batchv1.Job) int { return compareKeys(keyOf(a), keyOf(b)) })

	resp := &jobplanev1.ListJobsResponse{}
	if len(jobs) > size {
		jobs = jobs[:size]
		resp.NextPageToken = encodePageToken(keyOf(jobs[size-1]))
	}
	resp.Jobs = make([]*jobplanev1.Job, len(jobs))
	for i, j := range jobs {
		if resp.Jobs[i], err = s.cachedJobToProto(j); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

func keyOf(job *batchv1.Job) types.NamespacedName {
	return types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
}

func compareKeys(a, b types.NamespacedName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// A page token is the last namespace/name of the previous page: opaque to
// clients, and stable while Jobs come and go between pages.
func encodePageToken(last types.NamespacedName) string {
	return base64.RawURLEncoding.EncodeToString([]byte(last.String()))
}

// decodePageToken returns the key the page starts after; nil for the first.
func decodePageToken(token string) (*types.NamespacedName, error) {
	if token == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return nil, err
	}
	ns, name, ok := strings.Cut(string(raw), "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("token %q names no namespace/name", raw)
	}
	return &types.NamespacedName{Namespace: ns, Name: name}, nil
}

// DeleteJob deletes one of jobplane's Jobs, read live first so that neither
// another controller's Job nor one recreated meanwhile is deleted.
func (s *ExecutorService) DeleteJob(ctx context.Context, req *jobplanev1.DeleteJobRequest) (*jobplanev1.DeleteJobResponse, error) {
	errs := jobKey(req.GetNamespace(), req.GetName())
	propagation, policyErr := apierr.PropagationPolicy(field.NewPath("propagationPolicy"), req.GetPropagationPolicy())
	if policyErr != nil {
		errs = append(errs, policyErr)
	}
	if err := apierr.Invalid("invalid DeleteJob request", errs); err != nil {
		return nil, err
	}
	if err := s.mustLead(); err != nil {
		return nil, err
	}
	// The Job's lane of the fair limiter, not the lane of unkeyed requests
	// (informers' lists) a flood of deletions would fill.
	ctx = fairlimit.WithLane(ctx, req.GetNamespace()+"/"+req.GetName())
	jobs := s.cfg.Client.BatchV1().Jobs(req.GetNamespace())
	job, err := jobs.Get(ctx, req.GetName(), metav1.GetOptions{})
	if err != nil {
		return nil, s.fromKube(err)
	}
	if uid := req.GetUid(); uid != "" && types.UID(uid) != job.UID {
		return nil, uidMismatch(job, uid)
	}
	if !s.manages(job) {
		return nil, s.notManaged(job)
	}
	// The precondition is the Job just read: the one whose managedBy and
	// UID were checked.
	err = jobs.Delete(ctx, job.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &job.UID},
		PropagationPolicy: &propagation,
	})
	if apierrors.IsConflict(err) {
		return nil, apierr.New(codes.FailedPrecondition, "UID_MISMATCH", map[string]string{"uid": string(job.UID)},
			"Job %s/%s was replaced while it was deleted: its UID is no longer %s", job.Namespace, job.Name, job.UID)
	}
	if err != nil {
		return nil, s.fromKube(err)
	}
	return &jobplanev1.DeleteJobResponse{}, nil
}

func uidMismatch(job *batchv1.Job, want string) error {
	return apierr.New(codes.FailedPrecondition, "UID_MISMATCH", map[string]string{"uid": string(job.UID)},
		"Job %s/%s has UID %s, not %s", job.Namespace, job.Name, job.UID, want)
}
