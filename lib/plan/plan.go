// Package plan is the plan contract as Go values, shared by the planner that
// computes plans, the executor that performs them and the tests that check
// both: the actions of one sync, the executor's state that travels with a
// snapshot, their conversions to and from the protobuf contract, the
// PlanSyncRequest built from a Job and its pods, and the pod built from a
// Job's template and a PodToCreate.
package plan

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultTrackingFinalizer is jobplane's pod tracking finalizer; the built-in
// controller's batch.kubernetes.io/job-tracking is not ours to remove.
const DefaultTrackingFinalizer = "jobplane.dev/job-tracking"

// ExpectationsTimeout: expectations older than this count as satisfied, as in
// the reference, so that a lost event cannot stall a Job forever.
const ExpectationsTimeout = 5 * time.Minute

// Expectations are pod creations and deletions issued and not yet observed.
type Expectations struct {
	PendingCreations int32
	PendingDeletions int32
	// RecordedAt is when they were set; zero means now.
	RecordedAt time.Time
}

// Satisfied says whether nothing is pending at now (or what is pending has
// expired).
func (e Expectations) Satisfied(now time.Time) bool {
	if e.PendingCreations <= 0 && e.PendingDeletions <= 0 {
		return true
	}
	return !e.RecordedAt.IsZero() && now.Sub(e.RecordedAt) > ExpectationsTimeout
}

// BackoffRecord is the executor's memory of recent pod failures of a Job.
type BackoffRecord struct {
	// FailuresAfterLastSuccess counts pod failures since the last success.
	FailuresAfterLastSuccess int32
	// LastFailureTime is when the latest of them happened.
	LastFailureTime *time.Time
}

// State is what the executor knows of a Job that the cluster does not show,
// sent with every snapshot.
type State struct {
	Expectations Expectations
	// FinalizerRemovalsInFlight are pods whose finalizer removal was issued
	// and not yet observed.
	FinalizerRemovalsInFlight []types.UID
	// Backoff is the Job's pod failure backoff record; nil when none.
	Backoff *BackoffRecord
}

// Plan is what one sync decided: actions to perform in order, each assuming
// the ones before it succeeded.
type Plan struct {
	Actions []Action
	// Summary says in a sentence what the sync decided.
	Summary string
	// ReleaseJobState: the Job is finished (or this plan finishes it); the
	// executor forgets its expectations and backoff record once done.
	ReleaseJobState bool
	Metrics         Metrics
}

// Add appends an action.
func (p *Plan) Add(a Action) { p.Actions = append(p.Actions, a) }

// Action is one step of a plan: one of the types below.
type Action interface {
	// Why returns the machine-readable reason and the sentence explaining it.
	Why() (reason, explanation string)
}

// Because carries the reason of an action.
type Because struct {
	Reason      string
	Explanation string
}

// Why implements Action.
func (b Because) Why() (string, string) { return b.Reason, b.Explanation }

// CreatePods creates one pod per entry from the Job's template, in slow-start
// batches, after expecting len(Pods) creations.
type CreatePods struct {
	Because
	Pods []PodToCreate
	// CreationReason labels the job_pods_creation_total metric.
	CreationReason string
}

// PodToCreate is what distinguishes a new pod from the template.
type PodToCreate struct {
	// CompletionIndex is set for Indexed Jobs.
	CompletionIndex *int32
	GenerateName    string
	Hostname        string
	Labels          map[string]string
	Annotations     map[string]string
	Finalizers      []string
	Env             []EnvVarFromField
}

// EnvVarFromField is a downward-API environment variable.
type EnvVarFromField struct {
	Name      string
	FieldPath string
}

// DeletePods deletes pods.
type DeletePods struct {
	Because
	Pods []PodRef
	// RemoveTrackingFinalizer first, so the pod is not counted.
	RemoveTrackingFinalizer bool
	// ExpectDeletions: expect len(Pods) deletions before deleting.
	ExpectDeletions bool
}

// PodRef names a pod.
type PodRef struct {
	Name            string
	UID             types.UID
	CompletionIndex *int32
}

// RemoveFinalizers removes the tracking finalizer from pods.
type RemoveFinalizers struct {
	Because
	Pods []PodRef
}

// WriteStatus replaces the Job's status.
type WriteStatus struct {
	Because
	Status batchv1.JobStatus
	// BackoffRecord, when set, is stored once the write succeeded.
	BackoffRecord *BackoffRecord
}

// RecordEvent records an event on the Job.
type RecordEvent struct {
	Because
	Type    string
	Message string
}

// Requeue syncs the Job again after a delay.
type Requeue struct {
	Because
	After time.Duration
}

// Metrics are the labels and increments of the upstream Job metrics.
type Metrics struct {
	CompletionMode string
	// SyncAction is reconciling, tracking, pods_created or pods_deleted.
	SyncAction                string
	PodFailuresByPolicyAction map[string]int32
	// FinishedResult is succeeded or failed when the plan finishes the Job.
	FinishedResult string
	FinishedReason string
	PodsSucceeded  int32
	PodsFailed     int32
	// IndexesSucceeded and IndexesFailed are the increments of
	// job_finished_indexes_total for Indexed Jobs, labelled BackoffLimit
	// ("perIndex" or "global").
	IndexesSucceeded int32
	IndexesFailed    int32
	BackoffLimit     string
}

// Sync action labels of the job_syncs_total metric.
const (
	SyncActionReconciling = "reconciling"
	SyncActionTracking    = "tracking"
	SyncActionPodsCreated = "pods_created"
	SyncActionPodsDeleted = "pods_deleted"
)

// Creation reasons of the job_pods_creation_total metric.
const (
	PodCreateNew                   = "new"
	PodRecreateTerminatingOrFailed = "recreate_terminating_or_failed"
	PodRecreateFailed              = "recreate_failed"
)
