package podwire

import "google.golang.org/protobuf/encoding/protowire"

// The field numbers of the requests' messages around their pods, as
// proto/jobplane/v1/planner_service.proto declares them, for the executor's
// encoder (lib/plan) and the planner's decoder; TestFieldNumbersAreTheContracts
// holds every number of this file to the descriptors.
const (
	StreamRequestID           protowire.Number = 1 // StreamPlanSyncRequest.id
	StreamRequestRequest      protowire.Number = 2 // StreamPlanSyncRequest.request
	StreamRequestDelta        protowire.Number = 3 // StreamPlanSyncRequest.delta
	StreamRequestPartial      protowire.Number = 4 // StreamPlanSyncRequest.partial
	StreamRequestWholeBytes   protowire.Number = 5 // StreamPlanSyncRequest.whole_bytes
	StreamRequestWholePods    protowire.Number = 6 // StreamPlanSyncRequest.whole_pods
	PlanSyncRequestPods       protowire.Number = 2 // PlanSyncRequest.pods
	PlanSyncDeltaUpsertedPods protowire.Number = 4 // PlanSyncDelta.upserted_pods

	// Where a request names its Job (the planner reads them before it
	// decodes the request).
	PlanSyncRequestJob  protowire.Number = 1 // PlanSyncRequest.job
	PlanSyncDeltaJobUID protowire.Number = 2 // PlanSyncDelta.job_uid
	JobMetadata         protowire.Number = 3 // Job.metadata
	ObjectMetaUID                        = metaUID
)

// The field numbers of jobplane.v1.Pod and the messages it holds
// (pod.proto, meta.proto), as the encoder and the decoder write and read
// them.
const (
	podAPIVersion protowire.Number = 1
	podKind       protowire.Number = 2
	podMetadata   protowire.Number = 3
	podSpec       protowire.Number = 4
	podStatus     protowire.Number = 5

	metaName                       protowire.Number = 1
	metaGenerateName               protowire.Number = 2
	metaNamespace                  protowire.Number = 3
	metaUID                        protowire.Number = 4
	metaGeneration                 protowire.Number = 5
	metaResourceVersion            protowire.Number = 6
	metaLabels                     protowire.Number = 7
	metaAnnotations                protowire.Number = 8
	metaOwnerReferences            protowire.Number = 9
	metaFinalizers                 protowire.Number = 10
	metaCreationTimestamp          protowire.Number = 11
	metaDeletionTimestamp          protowire.Number = 12
	metaDeletionGracePeriodSeconds protowire.Number = 13

	// A map<string, string> entry.
	mapKey   protowire.Number = 1
	mapValue protowire.Number = 2

	refAPIVersion         protowire.Number = 1
	refKind               protowire.Number = 2
	refName               protowire.Number = 3
	refUID                protowire.Number = 4
	refController         protowire.Number = 5
	refBlockOwnerDeletion protowire.Number = 6

	specNodeName       protowire.Number = 1
	specRestartPolicy  protowire.Number = 2
	specContainers     protowire.Number = 3
	specInitContainers protowire.Number = 4

	containerName          protowire.Number = 1
	containerRestartPolicy protowire.Number = 2

	statusPhase                 protowire.Number = 1
	statusConditions            protowire.Number = 2
	statusMessage               protowire.Number = 3
	statusReason                protowire.Number = 4
	statusStartTime             protowire.Number = 5
	statusInitContainerStatuses protowire.Number = 6
	statusContainerStatuses     protowire.Number = 7

	conditionType               protowire.Number = 1
	conditionStatus             protowire.Number = 2
	conditionLastProbeTime      protowire.Number = 3
	conditionLastTransitionTime protowire.Number = 4
	conditionReason             protowire.Number = 5
	conditionMessage            protowire.Number = 6

	containerStatusName         protowire.Number = 1
	containerStatusReady        protowire.Number = 2
	containerStatusRestartCount protowire.Number = 3
	containerStatusState        protowire.Number = 4

	stateWaiting    protowire.Number = 1
	stateRunning    protowire.Number = 2
	stateTerminated protowire.Number = 3

	waitingReason  protowire.Number = 1
	waitingMessage protowire.Number = 2

	runningStartedAt protowire.Number = 1

	terminatedExitCode    protowire.Number = 1
	terminatedSignal      protowire.Number = 2
	terminatedReason      protowire.Number = 3
	terminatedMessage     protowire.Number = 4
	terminatedStartedAt   protowire.Number = 5
	terminatedFinishedAt  protowire.Number = 6
	terminatedContainerID protowire.Number = 7

	// google.protobuf.Timestamp.
	timestampSeconds protowire.Number = 1
	timestampNanos   protowire.Number = 2
)
