package kubeconv

import (
	"google.golang.org/protobuf/types/known/timestamppb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/chunk"
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
	var c KubePodConverter
	c.IntoKube(p, out)
}

// KubePodConverter converts pods from the contract with their parts
// (owner references, conditions, container statuses, times) taken from
// chunks (NewKubePodConverter); the zero value allocates each part alone.
// Strings, maps and string slices are the messages' own, not copied.
type KubePodConverter struct {
	// SkipContainers leaves spec.containers out, for readers that look
	// at none (the Job sync reads init containers only).
	SkipContainers bool

	refs       chunk.Of[metav1.OwnerReference]
	conditions chunk.Of[corev1.PodCondition]
	containers chunk.Of[corev1.Container]
	statuses   chunk.Of[corev1.ContainerStatus]
	waiting    chunk.Of[corev1.ContainerStateWaiting]
	running    chunk.Of[corev1.ContainerStateRunning]
	terminated chunk.Of[corev1.ContainerStateTerminated]
	times      chunk.Of[metav1.Time]
}

// NewKubePodConverter is a converter for n pods, whose chunks hold the
// parts of up to chunk.MaxSize typical pods each.
func NewKubePodConverter(n int) *KubePodConverter {
	n = chunk.SizeFor(n)
	return &KubePodConverter{
		refs: chunk.Of[metav1.OwnerReference]{Size: n}, conditions: chunk.Of[corev1.PodCondition]{Size: n},
		containers: chunk.Of[corev1.Container]{Size: n}, statuses: chunk.Of[corev1.ContainerStatus]{Size: n},
		waiting: chunk.Of[corev1.ContainerStateWaiting]{Size: n}, running: chunk.Of[corev1.ContainerStateRunning]{Size: n},
		terminated: chunk.Of[corev1.ContainerStateTerminated]{Size: n}, times: chunk.Of[metav1.Time]{Size: 2 * n},
	}
}

// IntoKube converts a pod into out, overwriting it.
func (c *KubePodConverter) IntoKube(p *jobplanev1.Pod, out *corev1.Pod) {
	spec, status := p.GetSpec(), p.GetStatus()
	// Field by field into the zeroed pod: a composite literal of this size,
	// with calls in it, is built aside and then copied (a third of the
	// conversion's time at 10,000 pods).
	*out = corev1.Pod{}
	out.TypeMeta = typeMeta(p.GetApiVersion(), p.GetKind())
	c.objectMetaIntoKube(p.GetMetadata(), &out.ObjectMeta)
	out.Spec.NodeName = spec.GetNodeName()
	out.Spec.RestartPolicy = corev1.RestartPolicy(spec.GetRestartPolicy())
	if !c.SkipContainers {
		out.Spec.Containers = c.containersToKube(spec.GetContainers())
	}
	out.Spec.InitContainers = c.containersToKube(spec.GetInitContainers())
	out.Status.Phase = corev1.PodPhase(status.GetPhase())
	out.Status.Message = status.GetMessage()
	out.Status.Reason = status.GetReason()
	out.Status.StartTime = c.timeToKube(status.GetStartTime())
	out.Status.InitContainerStatuses = c.containerStatusesToKube(status.GetInitContainerStatuses())
	out.Status.ContainerStatuses = c.containerStatusesToKube(status.GetContainerStatuses())
	conds := status.GetConditions()
	out.Status.Conditions = c.conditions.Take(len(conds))
	for i, cond := range conds {
		out.Status.Conditions[i] = corev1.PodCondition{
			Type:               corev1.PodConditionType(cond.GetType()),
			Status:             corev1.ConditionStatus(cond.GetStatus()),
			LastProbeTime:      TimeValueToKube(cond.GetLastProbeTime()),
			LastTransitionTime: TimeValueToKube(cond.GetLastTransitionTime()),
			Reason:             cond.GetReason(),
			Message:            cond.GetMessage(),
		}
	}
}

// objectMetaIntoKube converts object metadata into out, which is zero.
func (c *KubePodConverter) objectMetaIntoKube(m *jobplanev1.ObjectMeta, out *metav1.ObjectMeta) {
	objectMetaFieldsIntoKube(m, out)
	out.DeletionTimestamp = c.timeToKube(m.GetDeletionTimestamp())
	refs := m.GetOwnerReferences()
	out.OwnerReferences = c.refs.Take(len(refs))
	for i, r := range refs {
		out.OwnerReferences[i] = ownerReferenceToKube(r)
	}
}

func (c *KubePodConverter) timeToKube(t *timestamppb.Timestamp) *metav1.Time {
	if t == nil {
		return nil
	}
	out := c.times.One()
	*out = metav1.NewTime(t.AsTime())
	return out
}

func (c *KubePodConverter) containersToKube(cs []*jobplanev1.Container) []corev1.Container {
	out := c.containers.Take(len(cs))
	for i, ct := range cs {
		out[i].Name = ct.GetName()
		out[i].RestartPolicy = (*corev1.ContainerRestartPolicy)(ct.RestartPolicy)
	}
	return out
}

func (c *KubePodConverter) containerStatusesToKube(cs []*jobplanev1.ContainerStatus) []corev1.ContainerStatus {
	out := c.statuses.Take(len(cs))
	for i, s := range cs {
		st := s.GetState()
		out[i].Name = s.GetName()
		out[i].Ready = s.GetReady()
		out[i].RestartCount = s.GetRestartCount()
		if w := st.GetWaiting(); w != nil {
			out[i].State.Waiting = c.waiting.One()
			*out[i].State.Waiting = corev1.ContainerStateWaiting{Reason: w.GetReason(), Message: w.GetMessage()}
		}
		if r := st.GetRunning(); r != nil {
			out[i].State.Running = c.running.One()
			out[i].State.Running.StartedAt = TimeValueToKube(r.GetStartedAt())
		}
		if t := st.GetTerminated(); t != nil {
			out[i].State.Terminated = c.terminated.One()
			*out[i].State.Terminated = corev1.ContainerStateTerminated{
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

// PodFromKube converts a pod to the contract, keeping what it models.
func PodFromKube(p *corev1.Pod) *jobplanev1.Pod {
	c := PodConverter{copyShared: true}
	return c.FromKube(p)
}

// PodFromKubeForSync is PodFromKube keeping only what a sync reads
// (PodConverter.ForSync).
func PodFromKubeForSync(p *corev1.Pod) *jobplanev1.Pod {
	c := PodConverter{ForSync: true, copyShared: true}
	return c.FromKube(p)
}

// SyncAnnotations are the annotations of a pod a sync reads, in key order.
var SyncAnnotations = [...]string{batchv1.JobCompletionIndexAnnotation, batchv1.JobIndexFailureCountAnnotation, batchv1.JobIndexIgnoredFailureCountAnnotation}

// PodConverter converts pods to the contract for a request built, encoded
// and dropped while its pods stay as they are (an informer's pods are
// never modified): the messages share the pods' strings, maps and string
// slices rather than copying them, and are taken from chunks
// (NewSyncPodConverter).
type PodConverter struct {
	// ForSync keeps only what a sync reads of the pods, for a request to
	// the planner: no labels, no annotations but SyncAnnotations, no
	// containers' messages (a tenant writes those: annotations up to 256
	// KiB a pod, termination messages up to 12 KiB), so that a Job's
	// snapshot is the size of what decides its sync.
	ForSync bool
	// copyShared copies maps and string slices (PodFromKube).
	copyShared bool

	pods       chunk.Of[podParts]
	refs       chunk.Of[jobplanev1.OwnerReference]
	refPtrs    chunk.Of[*jobplanev1.OwnerReference]
	conditions chunk.Of[jobplanev1.PodCondition]
	condPtrs   chunk.Of[*jobplanev1.PodCondition]
	containers chunk.Of[jobplanev1.Container]
	ctrPtrs    chunk.Of[*jobplanev1.Container]
	statuses   chunk.Of[statusParts]
	statusPtrs chunk.Of[*jobplanev1.ContainerStatus]
	waiting    chunk.Of[jobplanev1.ContainerStateWaiting]
	running    chunk.Of[jobplanev1.ContainerStateRunning]
	terminated chunk.Of[jobplanev1.ContainerStateTerminated]
	times      chunk.Of[timestamppb.Timestamp]
}

// NewSyncPodConverter is a converter of n pods for a request to the
// planner (ForSync), whose chunks hold the messages of up to
// chunk.MaxSize typical pods each.
func NewSyncPodConverter(n int) *PodConverter {
	n = chunk.SizeFor(n)
	return &PodConverter{
		ForSync: true,
		pods:    chunk.Of[podParts]{Size: n},
		refs:    chunk.Of[jobplanev1.OwnerReference]{Size: n}, refPtrs: chunk.Of[*jobplanev1.OwnerReference]{Size: n},
		conditions: chunk.Of[jobplanev1.PodCondition]{Size: n}, condPtrs: chunk.Of[*jobplanev1.PodCondition]{Size: n},
		containers: chunk.Of[jobplanev1.Container]{Size: n}, ctrPtrs: chunk.Of[*jobplanev1.Container]{Size: n},
		statuses: chunk.Of[statusParts]{Size: n}, statusPtrs: chunk.Of[*jobplanev1.ContainerStatus]{Size: n},
		waiting: chunk.Of[jobplanev1.ContainerStateWaiting]{Size: n}, running: chunk.Of[jobplanev1.ContainerStateRunning]{Size: n},
		terminated: chunk.Of[jobplanev1.ContainerStateTerminated]{Size: n}, times: chunk.Of[timestamppb.Timestamp]{Size: 4 * n},
	}
}

// podParts are a converted pod's messages, allocated together.
type podParts struct {
	pod    jobplanev1.Pod
	meta   jobplanev1.ObjectMeta
	spec   jobplanev1.PodSpec
	status jobplanev1.PodStatus
}

// statusParts are a converted container status's messages.
type statusParts struct {
	status jobplanev1.ContainerStatus
	state  jobplanev1.ContainerState
}

// FromKube converts a pod to the contract.
func (c *PodConverter) FromKube(p *corev1.Pod) *jobplanev1.Pod {
	parts := c.pods.One()
	out := &parts.pod
	out.ApiVersion, out.Kind = p.APIVersion, p.Kind
	out.Metadata = &parts.meta
	c.objectMetaFromKube(&p.ObjectMeta, out.Metadata)
	out.Spec = &parts.spec
	out.Spec.NodeName = p.Spec.NodeName
	out.Spec.RestartPolicy = string(p.Spec.RestartPolicy)
	out.Spec.Containers = c.containersFromKube(p.Spec.Containers)
	out.Spec.InitContainers = c.containersFromKube(p.Spec.InitContainers)
	out.Status = &parts.status
	out.Status.Phase = string(p.Status.Phase)
	out.Status.Message = p.Status.Message
	out.Status.Reason = p.Status.Reason
	out.Status.StartTime = c.timeFromKube(p.Status.StartTime)
	out.Status.InitContainerStatuses = c.containerStatusesFromKube(p.Status.InitContainerStatuses)
	out.Status.ContainerStatuses = c.containerStatusesFromKube(p.Status.ContainerStatuses)
	out.Status.Conditions = c.condPtrs.Take(len(p.Status.Conditions))
	for i := range p.Status.Conditions {
		in, cond := &p.Status.Conditions[i], c.conditions.One()
		cond.Type, cond.Status = string(in.Type), string(in.Status)
		cond.LastProbeTime = c.timeFromKube(&in.LastProbeTime)
		cond.LastTransitionTime = c.timeFromKube(&in.LastTransitionTime)
		cond.Reason, cond.Message = in.Reason, in.Message
		out.Status.Conditions[i] = cond
	}
	if !podUTF8(out) {
		validUTF8(out.ProtoReflect())
	}
	return out
}

// objectMetaFromKube converts object metadata into out, which is zero.
func (c *PodConverter) objectMetaFromKube(m *metav1.ObjectMeta, out *jobplanev1.ObjectMeta) {
	out.Name = m.Name
	out.GenerateName = m.GenerateName
	out.Namespace = m.Namespace
	out.Uid = string(m.UID)
	out.Generation = m.Generation
	out.ResourceVersion = m.ResourceVersion
	switch {
	case c.copyShared:
		if !c.ForSync {
			out.Labels = copyMap(m.Labels)
		}
		out.Annotations = copyMap(c.annotations(m.Annotations))
		out.Finalizers = copyStrings(m.Finalizers)
	default: // as copyMap and copyStrings leave empty ones
		if !c.ForSync && len(m.Labels) > 0 {
			out.Labels = m.Labels
		}
		if a := c.annotations(m.Annotations); len(a) > 0 {
			out.Annotations = a
		}
		if len(m.Finalizers) > 0 {
			out.Finalizers = m.Finalizers
		}
	}
	out.CreationTimestamp = c.timeFromKube(&m.CreationTimestamp)
	out.DeletionTimestamp = c.timeFromKube(m.DeletionTimestamp)
	out.DeletionGracePeriodSeconds = m.DeletionGracePeriodSeconds
	out.OwnerReferences = c.refPtrs.Take(len(m.OwnerReferences))
	for i := range m.OwnerReferences {
		r, ref := &m.OwnerReferences[i], c.refs.One()
		ref.ApiVersion, ref.Kind, ref.Name, ref.Uid = r.APIVersion, r.Kind, r.Name, string(r.UID)
		ref.Controller, ref.BlockOwnerDeletion = r.Controller, r.BlockOwnerDeletion
		out.OwnerReferences[i] = ref
	}
}

// annotations are those of a the converter keeps: all, or for a sync
// SyncAnnotations (a's own map when it has no others).
func (c *PodConverter) annotations(a map[string]string) map[string]string {
	if !c.ForSync {
		return a
	}
	kept := 0
	for _, k := range SyncAnnotations {
		if _, ok := a[k]; ok {
			kept++
		}
	}
	if kept == len(a) {
		return a
	}
	if kept == 0 {
		return nil
	}
	out := make(map[string]string, kept)
	for _, k := range SyncAnnotations {
		if v, ok := a[k]; ok {
			out[k] = v
		}
	}
	return out
}

// timeFromKube is TimeFromKube with the timestamp from a chunk.
func (c *PodConverter) timeFromKube(t *metav1.Time) *timestamppb.Timestamp {
	if t == nil || t.IsZero() {
		return nil
	}
	ts := c.times.One()
	ts.Seconds, ts.Nanos = t.Unix(), int32(t.Nanosecond())
	return ts
}

func (c *PodConverter) containersFromKube(cs []corev1.Container) []*jobplanev1.Container {
	out := c.ctrPtrs.Take(len(cs))
	for i := range cs {
		ct := c.containers.One()
		ct.Name, ct.RestartPolicy = cs[i].Name, (*string)(cs[i].RestartPolicy)
		out[i] = ct
	}
	return out
}

func (c *PodConverter) containerStatusesFromKube(cs []corev1.ContainerStatus) []*jobplanev1.ContainerStatus {
	out := c.statusPtrs.Take(len(cs))
	for i := range cs {
		in, parts := &cs[i], c.statuses.One()
		st := &parts.state
		if w := in.State.Waiting; w != nil {
			st.Waiting = c.waiting.One()
			st.Waiting.Reason = w.Reason
			if !c.ForSync {
				st.Waiting.Message = w.Message
			}
		}
		if r := in.State.Running; r != nil {
			st.Running = c.running.One()
			st.Running.StartedAt = c.timeFromKube(&r.StartedAt)
		}
		if t := in.State.Terminated; t != nil {
			st.Terminated = c.terminated.One()
			*st.Terminated = jobplanev1.ContainerStateTerminated{
				ExitCode:    t.ExitCode,
				Signal:      t.Signal,
				Reason:      t.Reason,
				StartedAt:   c.timeFromKube(&t.StartedAt),
				FinishedAt:  c.timeFromKube(&t.FinishedAt),
				ContainerId: t.ContainerID,
			}
			if !c.ForSync {
				st.Terminated.Message = t.Message
			}
		}
		s := &parts.status
		s.Name, s.Ready, s.RestartCount, s.State = in.Name, in.Ready, in.RestartCount, st
		out[i] = s
	}
	return out
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}
