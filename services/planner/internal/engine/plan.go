package engine

import "github.com/jobplane/jobplane/lib/plan"

// The plan's vocabulary is the shared contract's (lib/plan); the engine
// builds plans of it.
type (
	Plan             = plan.Plan
	Action           = plan.Action
	Because          = plan.Because
	CreatePods       = plan.CreatePods
	PodToCreate      = plan.PodToCreate
	EnvVarFromField  = plan.EnvVarFromField
	DeletePods       = plan.DeletePods
	PodRef           = plan.PodRef
	RemoveFinalizers = plan.RemoveFinalizers
	WriteStatus      = plan.WriteStatus
	RecordEvent      = plan.RecordEvent
	Requeue          = plan.Requeue
	Metrics          = plan.Metrics
	Expectations     = plan.Expectations
	BackoffRecord    = plan.BackoffRecord
)

// Names and bounds of the contract.
const (
	DefaultTrackingFinalizer = plan.DefaultTrackingFinalizer
	ExpectationsTimeout      = plan.ExpectationsTimeout

	SyncActionReconciling = plan.SyncActionReconciling
	SyncActionTracking    = plan.SyncActionTracking
	SyncActionPodsCreated = plan.SyncActionPodsCreated
	SyncActionPodsDeleted = plan.SyncActionPodsDeleted

	PodCreateNew                   = plan.PodCreateNew
	PodRecreateTerminatingOrFailed = plan.PodRecreateTerminatingOrFailed
	PodRecreateFailed              = plan.PodRecreateFailed
)

func because(reason, explanation string) Because {
	return Because{Reason: reason, Explanation: explanation}
}
