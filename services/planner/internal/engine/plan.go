package engine

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
)

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
