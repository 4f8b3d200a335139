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
	*out = corev1.Pod{
		TypeMeta:   typeMeta(p.GetApiVersion(), p.GetKind()),
		ObjectMeta: ObjectMetaToKube(p.GetMetadata()),
		Spec: corev1.PodSpec{
			NodeName:       spec.GetNodeName(),
			RestartPolicy:  corev1.RestartPolicy(spec.GetRestartPolicy()),
			Containers:     containersToKube(spec.GetContainers()),
			InitContainers: containersToKube(spec.GetInitContainers()),
		},
		Status: corev1.PodStatus{
			Phase:                 corev1.PodPhase(status.GetPhase()),
			Message:               status.GetMessage(),
			Reason:                status.GetReason(),
			StartTime:             TimeToKube(status.GetStartTime()),
			InitContainerStatuses: containerStatusesToKube(status.GetInitContainerStatuses()),
			ContainerStatuses:     containerStatusesToKube(status.GetContainerStatuses()),
		},
	}
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

// PodFromKube converts a pod to the contract, keeping what it models.
func PodFromKube(p *corev1.Pod) *jobplanev1.Pod {
	out := &jobplanev1.Pod{
		ApiVersion: p.APIVersion,
		Kind:       p.Kind,
		Metadata:   ObjectMetaFromKube(&p.ObjectMeta),
		Spec: &jobplanev1.PodSpec{
			NodeName:       p.Spec.NodeName,
			RestartPolicy:  string(p.Spec.RestartPolicy),
			Containers:     containersFromKube(p.Spec.Containers),
			InitContainers: containersFromKube(p.Spec.InitContainers),
		},
		Status: &jobplanev1.PodStatus{
			Phase:                 string(p.Status.Phase),
			Message:               p.Status.Message,
			Reason:                p.Status.Reason,
			StartTime:             TimeFromKube(p.Status.StartTime),
			InitContainerStatuses: containerStatusesFromKube(p.Status.InitContainerStatuses),
			ContainerStatuses:     containerStatusesFromKube(p.Status.ContainerStatuses),
		},
	}
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
