// Package svc is the gRPC face of the executor: it checks requests, reads
// Jobs from the informer cache, writes them through the Kubernetes API, hands
// plans and syncs to the controller, and answers with status errors only.
// Reads are served by every replica; writes only by the Lease holder.
package svc

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/grpc/codes"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
	batchv1listers "k8s.io/client-go/listers/batch/v1"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/auth"
	"github.com/jobplane/jobplane/lib/featuregates"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/executor/internal/dropin"
)

// DefaultManagedBy is the spec.managedBy of the Jobs jobplane runs.
const DefaultManagedBy = "jobplane.dev/executor"

// Runner performs plans on the cluster; the controller implements it.
type Runner interface {
	// Execute performs p on the Job namespace/name whose UID must be uid; one outcome per action, and the Job after.
	Execute(ctx context.Context, namespace, name string, uid types.UID, p *plan.Plan) ([]*jobplanev1.ActionOutcome, *batchv1.Job, error)
	// SyncJob syncs the Job now: snapshot, plan, perform.
	SyncJob(ctx context.Context, namespace, name string) (*plan.Plan, []*jobplanev1.ActionOutcome, *batchv1.Job, error)
	// Leader says whether this replica holds the lease and, when not, who does ("" if unknown).
	Leader() (isLeader bool, holder string)
}

// Config is what the service reads, writes and calls.
type Config struct {
	// Client deletes Jobs (DeleteJob) and watches them (WatchJobs), as the
	// executor.
	Client kubernetes.Interface
	// Impersonate returns a client acting as the caller, for SubmitJob
	// (Impersonating builds it from the executor's rest.Config).
	Impersonate func(caller *auth.Identity) (typedbatchv1.BatchV1Interface, error)
	// Jobs reads Jobs from the informer cache (GetJob, ListJobs), so that a
	// standby replica serves reads too.
	Jobs batchv1listers.JobLister
	// PodsOf returns a Job's pods (GetJob with include_pods).
	PodsOf func(job *batchv1.Job) ([]*corev1.Pod, error)
	// Runner performs plans and syncs and says who leads.
	Runner Runner
	// ManagedBy is the spec.managedBy of jobplane's Jobs; DefaultManagedBy
	// when empty.
	ManagedBy string
	// DropIn: the executor runs the built-in Job controller's Jobs too
	// (spec.managedBy unset or kubernetes.io/job-controller), and a Job
	// submitted without spec.managedBy is created as it is, a plain
	// batch/v1 Job (the cron service's runs of batch/v1 CronJobs are).
	DropIn bool
	// FeatureGates are the reference's gates followed (JobManagedBy off:
	// in drop-in mode every Job is the executor's).
	FeatureGates featuregates.Features
	// Log receives the causes of Internal errors; slog.Default() when nil.
	Log *slog.Logger
	// Done closes when the server starts shutting down (the Setup context's
	// Done of grpcserver.Command): open WatchJobs streams then end with OK,
	// so that the graceful stop does not wait for them. Nil: streams end only
	// when their clients leave.
	Done <-chan struct{}
}

// Validate reports every dependency missing for the service to answer.
func (c Config) Validate() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("svc.Config.Client is required"))
	}
	if c.Impersonate == nil {
		errs = append(errs, errors.New("svc.Config.Impersonate is required"))
	}
	if c.Jobs == nil {
		errs = append(errs, errors.New("svc.Config.Jobs is required"))
	}
	if c.PodsOf == nil {
		errs = append(errs, errors.New("svc.Config.PodsOf is required"))
	}
	if c.Runner == nil {
		errs = append(errs, errors.New("svc.Config.Runner is required"))
	}
	return errors.Join(errs...)
}

// ExecutorService implements jobplane.v1.ExecutorService.
type ExecutorService struct {
	jobplanev1.UnimplementedExecutorServiceServer
	cfg Config
	log *slog.Logger
	// cached are the answers of the informer cache's Jobs.
	cached answerCache
}

var _ jobplanev1.ExecutorServiceServer = (*ExecutorService)(nil)

// NewExecutorService returns the service; cfg is used as given, with the
// defaults of ManagedBy and Log applied (see Config.Validate for what it
// needs to answer).
func NewExecutorService(cfg Config) *ExecutorService {
	if cfg.ManagedBy == "" {
		cfg.ManagedBy = DefaultManagedBy
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &ExecutorService{cfg: cfg, log: cfg.Log}
}

// mustLead answers UNAVAILABLE, naming the leader, on a replica that does not
// hold the Lease: only the leader writes.
func (s *ExecutorService) mustLead() error {
	isLeader, holder := s.cfg.Runner.Leader()
	if isLeader {
		return nil
	}
	if holder == "" {
		return apierr.New(codes.Unavailable, "NOT_LEADER", nil, "not the leader; the leader is unknown")
	}
	return apierr.New(codes.Unavailable, "NOT_LEADER", map[string]string{"leader": holder}, "not the leader; the leader is %s", holder)
}

// manages says whether job is one of jobplane's.
func (s *ExecutorService) manages(job *batchv1.Job) bool {
	return dropin.Runs(job, s.cfg.ManagedBy, s.cfg.DropIn, s.cfg.FeatureGates)
}

func (s *ExecutorService) notManaged(job *batchv1.Job) error {
	managedBy := ptr.Deref(job.Spec.ManagedBy, "")
	return apierr.New(codes.FailedPrecondition, "NOT_MANAGED", map[string]string{"managedBy": managedBy},
		"Job %s/%s is not managed by %s (spec.managedBy is %q)", job.Namespace, job.Name, s.cfg.ManagedBy, managedBy)
}

// jobToProto converts a Job for an answer; nil stays nil. Objects read back
// from the API carry no apiVersion and kind; answers always do, as kubectl's
// JSON does.
func (s *ExecutorService) jobToProto(job *batchv1.Job) (*jobplanev1.Job, error) {
	if job == nil {
		return nil, nil
	}
	out, err := kubeconv.JobFromKube(job)
	if err != nil {
		s.log.Error("converting a stored Job", "namespace", job.Namespace, "name", job.Name, "err", err)
		return nil, apierr.New(codes.Internal, "UNCONVERTIBLE_JOB", nil, "Job %s/%s cannot be converted to the contract", job.Namespace, job.Name)
	}
	if out.ApiVersion == "" {
		out.ApiVersion = batchv1.SchemeGroupVersion.String()
	}
	if out.Kind == "" {
		out.Kind = "Job"
	}
	return out, nil
}

// cachedJobToProto is jobToProto of a Job of the informer cache.
func (s *ExecutorService) cachedJobToProto(job *batchv1.Job) (*jobplanev1.Job, error) {
	return s.cached.job(job, s.jobToProto)
}

// jobKey checks the namespace and name a request names a Job by.
func jobKey(namespace, name string) field.ErrorList {
	return apierr.ObjectKey(field.NewPath("namespace"), field.NewPath("name"), namespace, name)
}
