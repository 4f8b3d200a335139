package kubeconv

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// PodToKube converts a pod (the parts the contract models).
func PodToKube(p *jobplanev1.Pod) *corev1.Pod {
	out := &corev1.Pod{}
	PodIntoKube(p, out)
	return out
}

// PodIntoKube converts a pod into out, overwriting it: callers converting
// many pods use one slice of corev1.Pod instead of one allocation each.
func PodIntoKube(p *jobplanev1.Pod, out *corev1.Pod) {
	spec, status := p.GetSpec(), p.GetStatus()
	// Field by field into the zeroed pod: a composite literal of this size,
	// with calls in it, is built aside and then copied (a third of the
	// conversion's time at 10,000 pods).
	*out = corev1.Pod{}
	out.TypeMeta = typeMeta(p.GetApiVersion(), p.GetKind())
	objectMetaIntoKube(p.GetMetadata(), &out.ObjectMeta)
	out.Spec.NodeName = spec.GetNodeName()
	out.Spec.RestartPolicy = corev1.RestartPolicy(spec.GetRestartPolicy())
	out.Spec.Containers = containersToKube(spec.GetContainers())
	out.Spec.InitContainers = containersToKube(spec.GetInitContainers())
	out.Status.Phase = corev1.PodPhase(status.GetPhase())
	out.Status.Message = status.GetMessage()
	out.Status.Reason = status.GetReason()
	out.Status.StartTime = TimeToKube(status.GetStartTime())
	out.Status.InitContainerStatuses = containerStatusesToKube(status.GetInitContainerStatuses())
	out.Status.ContainerStatuses = containerStatusesToKube(status.GetContainerStatuses())
	if conds := status.GetConditions(); len(conds) > 0 {
		out.Status.Conditions = make([]corev1.PodCondition, len(conds))
		for i, c := range conds {
			out.Status.Conditions[i] = corev1.PodCondition{
				Type:               corev1.PodConditionType(c.GetType()),
				Status:             corev1.ConditionStatus(c.GetStatus()),
				LastProbeTime:      TimeValueToKube(c.GetLastProbeTime()),
				LastTransitionTime: TimeValueToKube(c.GetLastTransitionTime()),
				Reason:             c.GetReason(),
				Message:            c.GetMessage(),
			}
		}
	}
}

// podParts are a converted pod's messages, allocated together.
type podParts struct {
	pod    jobplanev1.Pod
	meta   jobplanev1.ObjectMeta
	spec   jobplanev1.PodSpec
	status jobplanev1.PodStatus
}

// PodFromKube converts a pod to the contract, keeping what it models.
func PodFromKube(p *corev1.Pod) *jobplanev1.Pod { return podFromKube(p, true) }

// PodFromKubeWithoutLabels is PodFromKube leaving the pod's labels out.
func PodFromKubeWithoutLabels(p *corev1.Pod) *jobplanev1.Pod { return podFromKube(p, false) }

func podFromKube(p *corev1.Pod, labels bool) *jobplanev1.Pod {
	parts := &podParts{}
	out := &parts.pod
	out.ApiVersion, out.Kind = p.APIVersion, p.Kind
	out.Metadata = &parts.meta
	objectMetaFromKube(&p.ObjectMeta, out.Metadata, labels)
	out.Spec = &parts.spec
	out.Spec.NodeName = p.Spec.NodeName
	out.Spec.RestartPolicy = string(p.Spec.RestartPolicy)
	out.Spec.Containers = containersFromKube(p.Spec.Containers)
	out.Spec.InitContainers = containersFromKube(p.Spec.InitContainers)
	out.Status = &parts.status
	out.Status.Phase = string(p.Status.Phase)
	out.Status.Message = p.Status.Message
	out.Status.Reason = p.Status.Reason
	out.Status.StartTime = TimeFromKube(p.Status.StartTime)
	out.Status.InitContainerStatuses = containerStatusesFromKube(p.Status.InitContainerStatuses)
	out.Status.ContainerStatuses = containerStatusesFromKube(p.Status.ContainerStatuses)
	if len(p.Status.Conditions) > 0 {
		out.Status.Conditions = make([]*jobplanev1.PodCondition, len(p.Status.Conditions))
		for i, c := range p.Status.Conditions {
			out.Status.Conditions[i] = &jobplanev1.PodCondition{
				Type:               string(c.Type),
				Status:             string(c.Status),
				LastProbeTime:      TimeFromKube(&c.LastProbeTime),
				LastTransitionTime: TimeFromKube(&c.LastTransitionTime),
				Reason:             c.Reason,
				Message:            c.Message,
			}
		}
	}
	return out
}

func containersToKube(cs []*jobplanev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.GetName(), RestartPolicy: (*corev1.ContainerRestartPolicy)(c.RestartPolicy)}
	}
	return out
}

func containersFromKube(cs []corev1.Container) []*jobplanev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]*jobplanev1.Container, len(cs))
	for i, c := range cs {
		out[i] = &jobplanev1.Container{Name: c.Name, RestartPolicy: (*string)(c.RestartPolicy)}
	}
	return out
}

func containerStatusesToKube(cs []*jobplanev1.ContainerStatus) []corev1.ContainerStatus {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(cs))
	for i, c := range cs {
		st := c.GetState()
		out[i] = corev1.ContainerStatus{
			Name:         c.GetName(),
			Ready:        c.GetReady(),
			RestartCount: c.GetRestartCount(),
		}
		if w := st.GetWaiting(); w != nil {
			out[i].State.Waiting = &corev1.ContainerStateWaiting{Reason: w.GetReason(), Message: w.GetMessage()}
		}
		if r := st.GetRunning(); r != nil {
			out[i].State.Running = &corev1.ContainerStateRunning{StartedAt: TimeValueToKube(r.GetStartedAt())}
		}
		if t := st.GetTerminated(); t != nil {
			out[i].State.Terminated = &corev1.ContainerStateTerminated{
				ExitCode:    t.GetExitCode(),
				Signal:      t.GetSignal(),
				Reason:      t.GetReason(),
				Message:     t.GetMessage(),
				StartedAt:   TimeValueToKube(t.GetStartedAt()),
				FinishedAt:  TimeValueToKube(t.GetFinishedAt()),
				ContainerID: t.GetContainerId(),
			}
		}
	}
	return out
}

func containerStatusesFromKube(cs []corev1.ContainerStatus) []*jobplanev1.ContainerStatus {
	if len(cs) == 0 {
		return nil
	}
	out := make([]*jobplanev1.ContainerStatus, len(cs))
	for i, c := range cs {
		st := &jobplanev1.ContainerState{}
		if w := c.State.Waiting; w != nil {
			st.Waiting = &jobplanev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		}
		if r := c.State.Running; r != nil {
			st.Running = &jobplanev1.ContainerStateRunning{StartedAt: TimeFromKube(&r.StartedAt)}
		}
		if t := c.State.Terminated; t != nil {
			st.Terminated = &jobplanev1.ContainerStateTerminated{
				ExitCode:    t.ExitCode,
				Signal:      t.Signal,
				Reason:      t.Reason,
				Message:     t.Message,
				StartedAt:   TimeFromKube(&t.StartedAt),
				FinishedAt:  TimeFromKube(&t.FinishedAt),
				ContainerId: t.ContainerID,
			}
		}
		out[i] = &jobplanev1.ContainerStatus{Name: c.Name, Ready: c.Ready, RestartCount: c.RestartCount, State: st}
	}
	return out
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}
