package podwire

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/jobplane/jobplane/gen/jobplane/v1" // the descriptors
)

// fieldNumbers are this package's field numbers by the contract's full
// names of their fields.
var fieldNumbers = map[protoreflect.FullName]protowire.Number{
	"jobplane.v1.StreamPlanSyncRequest.id":          StreamRequestID,
	"jobplane.v1.StreamPlanSyncRequest.request":     StreamRequestRequest,
	"jobplane.v1.StreamPlanSyncRequest.delta":       StreamRequestDelta,
	"jobplane.v1.StreamPlanSyncRequest.partial":     StreamRequestPartial,
	"jobplane.v1.StreamPlanSyncRequest.whole_bytes": StreamRequestWholeBytes,
	"jobplane.v1.StreamPlanSyncRequest.whole_pods":  StreamRequestWholePods,
	"jobplane.v1.PlanSyncRequest.pods":              PlanSyncRequestPods,
	"jobplane.v1.PlanSyncDelta.upserted_pods":       PlanSyncDeltaUpsertedPods,
	"jobplane.v1.PlanSyncRequest.job":               PlanSyncRequestJob,
	"jobplane.v1.PlanSyncDelta.job_uid":             PlanSyncDeltaJobUID,
	"jobplane.v1.Job.metadata":                      JobMetadata,

	"jobplane.v1.Pod.api_version": podAPIVersion,
	"jobplane.v1.Pod.kind":        podKind,
	"jobplane.v1.Pod.metadata":    podMetadata,
	"jobplane.v1.Pod.spec":        podSpec,
	"jobplane.v1.Pod.status":      podStatus,

	"jobplane.v1.ObjectMeta.name":                          metaName,
	"jobplane.v1.ObjectMeta.generate_name":                 metaGenerateName,
	"jobplane.v1.ObjectMeta.namespace":                     metaNamespace,
	"jobplane.v1.ObjectMeta.uid":                           metaUID,
	"jobplane.v1.ObjectMeta.generation":                    metaGeneration,
	"jobplane.v1.ObjectMeta.resource_version":              metaResourceVersion,
	"jobplane.v1.ObjectMeta.labels":                        metaLabels,
	"jobplane.v1.ObjectMeta.annotations":                   metaAnnotations,
	"jobplane.v1.ObjectMeta.owner_references":              metaOwnerReferences,
	"jobplane.v1.ObjectMeta.finalizers":                    metaFinalizers,
	"jobplane.v1.ObjectMeta.creation_timestamp":            metaCreationTimestamp,
	"jobplane.v1.ObjectMeta.deletion_timestamp":            metaDeletionTimestamp,
	"jobplane.v1.ObjectMeta.deletion_grace_period_seconds": metaDeletionGracePeriodSeconds,
	"jobplane.v1.ObjectMeta.LabelsEntry.key":               mapKey,
	"jobplane.v1.ObjectMeta.LabelsEntry.value":             mapValue,
	"jobplane.v1.ObjectMeta.AnnotationsEntry.key":          mapKey,
	"jobplane.v1.ObjectMeta.AnnotationsEntry.value":        mapValue,

	"jobplane.v1.OwnerReference.api_version":          refAPIVersion,
	"jobplane.v1.OwnerReference.kind":                 refKind,
	"jobplane.v1.OwnerReference.name":                 refName,
	"jobplane.v1.OwnerReference.uid":                  refUID,
	"jobplane.v1.OwnerReference.controller":           refController,
	"jobplane.v1.OwnerReference.block_owner_deletion": refBlockOwnerDeletion,

	"jobplane.v1.PodSpec.node_name":       specNodeName,
	"jobplane.v1.PodSpec.restart_policy":  specRestartPolicy,
	"jobplane.v1.PodSpec.containers":      specContainers,
	"jobplane.v1.PodSpec.init_containers": specInitContainers,

	"jobplane.v1.Container.name":           containerName,
	"jobplane.v1.Container.restart_policy": containerRestartPolicy,

	"jobplane.v1.PodStatus.phase":                   statusPhase,
	"jobplane.v1.PodStatus.conditions":              statusConditions,
	"jobplane.v1.PodStatus.message":                 statusMessage,
	"jobplane.v1.PodStatus.reason":                  statusReason,
	"jobplane.v1.PodStatus.start_time":              statusStartTime,
	"jobplane.v1.PodStatus.init_container_statuses": statusInitContainerStatuses,
	"jobplane.v1.PodStatus.container_statuses":      statusContainerStatuses,

	"jobplane.v1.PodCondition.type":                 conditionType,
	"jobplane.v1.PodCondition.status":               conditionStatus,
	"jobplane.v1.PodCondition.last_probe_time":      conditionLastProbeTime,
	"jobplane.v1.PodCondition.last_transition_time": conditionLastTransitionTime,
	"jobplane.v1.PodCondition.reason":               conditionReason,
	"jobplane.v1.PodCondition.message":              conditionMessage,

	"jobplane.v1.ContainerStatus.name":          containerStatusName,
	"jobplane.v1.ContainerStatus.ready":         containerStatusReady,
	"jobplane.v1.ContainerStatus.restart_count": containerStatusRestartCount,
	"jobplane.v1.ContainerStatus.state":         containerStatusState,

	"jobplane.v1.ContainerState.waiting":    stateWaiting,
	"jobplane.v1.ContainerState.running":    stateRunning,
	"jobplane.v1.ContainerState.terminated": stateTerminated,

	"jobplane.v1.ContainerStateWaiting.reason":  waitingReason,
	"jobplane.v1.ContainerStateWaiting.message": waitingMessage,

	"jobplane.v1.ContainerStateRunning.started_at": runningStartedAt,

	"jobplane.v1.ContainerStateTerminated.exit_code":    terminatedExitCode,
	"jobplane.v1.ContainerStateTerminated.signal":       terminatedSignal,
	"jobplane.v1.ContainerStateTerminated.reason":       terminatedReason,
	"jobplane.v1.ContainerStateTerminated.message":      terminatedMessage,
	"jobplane.v1.ContainerStateTerminated.started_at":   terminatedStartedAt,
	"jobplane.v1.ContainerStateTerminated.finished_at":  terminatedFinishedAt,
	"jobplane.v1.ContainerStateTerminated.container_id": terminatedContainerID,

	"google.protobuf.Timestamp.seconds": timestampSeconds,
	"google.protobuf.Timestamp.nanos":   timestampNanos,
}

// Every field number is its field's in the contract, and every field a pod
// can hold has one: a field added to the contract's pod fails here until
// the encoder and the decoder know it.
func TestFieldNumbersAreTheContracts(t *testing.T) {
	for name, num := range fieldNumbers {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := d.(protoreflect.FieldDescriptor).Number(); got != num {
			t.Errorf("%s is field %d in the contract, %d here", name, got, num)
		}
	}
	pod, err := protoregistry.GlobalFiles.FindDescriptorByName("jobplane.v1.Pod")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[protoreflect.FullName]bool{}
	var walk func(md protoreflect.MessageDescriptor)
	walk = func(md protoreflect.MessageDescriptor) {
		if seen[md.FullName()] {
			return
		}
		seen[md.FullName()] = true
		for i := range md.Fields().Len() {
			fd := md.Fields().Get(i)
			if _, ok := fieldNumbers[fd.FullName()]; !ok {
				t.Errorf("%s has no field number here", fd.FullName())
			}
			if fd.Message() != nil {
				walk(fd.Message())
			}
		}
	}
	walk(pod.(protoreflect.MessageDescriptor))
}
