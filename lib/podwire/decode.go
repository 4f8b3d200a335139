package podwire

import (
	"slices"
	"time"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/chunk"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/kubeconv"
)

// Decoder decodes pods, their parts taken from chunks (NewDecoder). A pod's
// strings are views of its bytes: of its own copy of them (Decode), or of
// the caller's (DecodeShared).
type Decoder struct {
	refs       chunk.Of[metav1.OwnerReference]
	conditions chunk.Of[corev1.PodCondition]
	containers chunk.Of[corev1.Container]
	statuses   chunk.Of[corev1.ContainerStatus]
	waiting    chunk.Of[corev1.ContainerStateWaiting]
	running    chunk.Of[corev1.ContainerStateRunning]
	terminated chunk.Of[corev1.ContainerStateTerminated]
	times      chunk.Of[metav1.Time]
	bools      chunk.Of[bool]
	int64s     chunk.Of[int64]
	strings    chunk.Of[string]
	converter  kubeconv.KubePodConverter
	// taken are the annotation keys kept out of the pods' maps (Take),
	// values their values in the pod decoded last.
	taken  []string
	values []string
}

// NewDecoder is a decoder for n pods, whose parts are taken from chunks of
// up to chunk.MaxSize parts.
func NewDecoder(n int) *Decoder {
	d := &Decoder{converter: kubeconv.KubePodConverter{SkipContainers: true}}
	size := chunk.SizeFor(n)
	d.refs.Size, d.conditions.Size, d.statuses.Size, d.strings.Size = size, size, size, size
	d.running.Size, d.terminated.Size, d.times.Size, d.bools.Size = size, size, 2*size, 2*size
	return d
}

// Decode decodes an encoded pod into out, which is zero (a new array's
// pods are: zeroing 1 KB each again costs a tenth of the decoding). The pod
// keeps its own copy of b: a pod kept for long pins its own bytes.
func (d *Decoder) Decode(b []byte, out *corev1.Pod) error {
	own := make([]byte, len(b))
	copy(own, b)
	return d.decode(own, out)
}

// DecodeShared is Decode with the pod's strings views of b, which the
// caller keeps unchanged as long as the pod: for the pods of one request
// kept together.
func (d *Decoder) DecodeShared(b []byte, out *corev1.Pod) error { return d.decode(b, out) }

// Take keeps the annotations of keys out of the pods' maps: Taken answers
// their values instead. A pod whose only annotations they are then has no
// map, which spares two allocations a pod (an Indexed Job's pods carry
// only their completion index).
func (d *Decoder) Take(keys ...string) {
	d.taken, d.values = keys, make([]string, len(keys))
}

// Taken are the values of the annotations taken (Take) of the pod decoded
// last, in the order of their keys ("" when absent); the next decoding
// overwrites them.
func (d *Decoder) Taken() []string { return d.values }

func (d *Decoder) decode(b []byte, out *corev1.Pod) error {
	clear(d.values)
	if d.pod(b, out) {
		return nil
	}
	clear(d.values)
	// The slow path: the codec's decoding (vtprotobuf's decoder and the
	// UTF-8 check), then the conversion.
	var m jobplanev1.Pod
	if err := grpcserver.Unmarshal(b, &m); err != nil {
		*out = corev1.Pod{}
		return err
	}
	d.converter.IntoKube(&m, out)
	for i, key := range d.taken {
		d.values[i] = out.Annotations[key]
		delete(out.Annotations, key)
	}
	if len(d.taken) > 0 && len(out.Annotations) == 0 {
		out.Annotations = nil // as the fast path leaves it
	}
	return nil
}

// field is one field of a message being read.
type field struct {
	num protowire.Number
	typ protowire.Type
	// bytes of a length-delimited field; varint of a varint field.
	bytes  []byte
	varint uint64
}

// fields calls f with each field of the encoded message b, until f returns
// false; false when b is not read through (malformed, or f refused).
func fields(b []byte, f func(field) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		fl := field{num: num, typ: typ}
		switch typ {
		case protowire.BytesType:
			fl.bytes, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			fl.varint, n = protowire.ConsumeVarint(b)
		default:
			return false
		}
		if n < 0 || !f(fl) {
			return false
		}
		b = b[n:]
	}
	return true
}

// str is a string field's value, a view of the pod's own bytes; false
// unless length-delimited and valid UTF-8.
func (f field) str() (string, bool) {
	if f.typ != protowire.BytesType || !utf8.Valid(f.bytes) {
		return "", false
	}
	if len(f.bytes) == 0 {
		return "", true
	}
	return unsafe.String(unsafe.SliceData(f.bytes), len(f.bytes)), true
}

// msg is a message field's bytes; false unless length-delimited.
func (f field) msg() ([]byte, bool) { return f.bytes, f.typ == protowire.BytesType }

// num64 is a varint field's value; false unless a varint.
func (f field) num64() (uint64, bool) { return f.varint, f.typ == protowire.VarintType }

// once marks a singular message field as met; false the second time (a
// repeated singular message merges: the slow path's business).
func once(seen *uint32, num protowire.Number) bool {
	bit := uint32(1) << num
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// setStr stores a string field into dst.
func setStr(f field, dst *string) bool {
	s, ok := f.str()
	*dst = s
	return ok
}

func (d *Decoder) pod(b []byte, out *corev1.Pod) bool {
	var seen uint32
	return fields(b, func(f field) bool {
		switch f.num {
		case podAPIVersion:
			return setStr(f, &out.APIVersion)
		case podKind:
			return setStr(f, &out.Kind)
		case podMetadata, podSpec, podStatus:
			v, ok := f.msg()
			if !ok || !once(&seen, f.num) {
				return false
			}
			switch f.num {
			case podMetadata:
				return d.meta(v, &out.ObjectMeta)
			case podSpec:
				return d.spec(v, &out.Spec)
			}
			return d.status(v, &out.Status)
		}
		return false
	})
}

func (d *Decoder) meta(b []byte, out *metav1.ObjectMeta) bool {
	var seen uint32
	return fields(b, func(f field) bool {
		switch f.num {
		case metaName:
			return setStr(f, &out.Name)
		case metaGenerateName:
			return setStr(f, &out.GenerateName)
		case metaNamespace:
			return setStr(f, &out.Namespace)
		case metaUID:
			s, ok := f.str()
			out.UID = types.UID(s)
			return ok
		case metaGeneration:
			v, ok := f.num64()
			out.Generation = int64(v)
			return ok
		case metaResourceVersion:
			return setStr(f, &out.ResourceVersion)
		case metaLabels:
			return mapEntry(f, &out.Labels)
		case metaAnnotations:
			return d.annotation(f, &out.Annotations)
		case metaOwnerReferences:
			v, ok := f.msg()
			if !ok {
				return false
			}
			out.OwnerReferences = d.refs.Append(out.OwnerReferences)
			return d.ownerReference(v, &out.OwnerReferences[len(out.OwnerReferences)-1])
		case metaFinalizers:
			s, ok := f.str()
			out.Finalizers = d.strings.Append(out.Finalizers)
			out.Finalizers[len(out.Finalizers)-1] = s
			return ok
		case metaCreationTimestamp, metaDeletionTimestamp:
			v, ok := f.msg()
			if !ok || !once(&seen, f.num) {
				return false
			}
			if f.num == metaCreationTimestamp {
				return timestamp(v, &out.CreationTimestamp)
			}
			out.DeletionTimestamp = d.times.One()
			return timestamp(v, out.DeletionTimestamp)
		case metaDeletionGracePeriodSeconds:
			v, ok := f.num64()
			if out.DeletionGracePeriodSeconds == nil {
				out.DeletionGracePeriodSeconds = d.int64s.One()
			}
			*out.DeletionGracePeriodSeconds = int64(v)
			return ok
		}
		return false
	})
}

// mapEntry adds a map<string, string> entry to m, made on the first.
func mapEntry(f field, m *map[string]string) bool {
	key, value, ok := entry(f)
	put(m, key, value)
	return ok
}

// annotation adds an annotation to m, made on the first, unless its key is
// taken: its value then goes to the values of the pod being decoded.
func (d *Decoder) annotation(f field, m *map[string]string) bool {
	key, value, ok := entry(f)
	if i := slices.Index(d.taken, key); i >= 0 {
		d.values[i] = value
		return ok
	}
	put(m, key, value)
	return ok
}

// entry is a map<string, string> entry's key and value.
func entry(f field) (key, value string, ok bool) {
	v, ok := f.msg()
	if !ok {
		return "", "", false
	}
	ok = fields(v, func(f field) bool {
		switch f.num {
		case mapKey:
			return setStr(f, &key)
		case mapValue:
			return setStr(f, &value)
		}
		return false
	})
	return key, value, ok
}

func put(m *map[string]string, key, value string) {
	if *m == nil {
		*m = make(map[string]string, 1)
	}
	(*m)[key] = value
}

func (d *Decoder) ownerReference(b []byte, out *metav1.OwnerReference) bool {
	return fields(b, func(f field) bool {
		switch f.num {
		case refAPIVersion:
			return setStr(f, &out.APIVersion)
		case refKind:
			return setStr(f, &out.Kind)
		case refName:
			return setStr(f, &out.Name)
		case refUID:
			s, ok := f.str()
			out.UID = types.UID(s)
			return ok
		case refController, refBlockOwnerDeletion:
			v, ok := f.num64()
			p := &out.Controller
			if f.num == refBlockOwnerDeletion {
				p = &out.BlockOwnerDeletion
			}
			if *p == nil {
				*p = d.bools.One()
			}
			**p = v != 0
			return ok
		}
		return false
	})
}

func (d *Decoder) spec(b []byte, out *corev1.PodSpec) bool {
	return fields(b, func(f field) bool {
		switch f.num {
		case specNodeName:
			return setStr(f, &out.NodeName)
		case specRestartPolicy:
			s, ok := f.str()
			out.RestartPolicy = corev1.RestartPolicy(s)
			return ok
		case specContainers: // the sync reads no container: checked, left out
			v, ok := f.msg()
			var skipped corev1.Container
			return ok && d.container(v, &skipped)
		case specInitContainers:
			v, ok := f.msg()
			if !ok {
				return false
			}
			out.InitContainers = d.containers.Append(out.InitContainers)
			return d.container(v, &out.InitContainers[len(out.InitContainers)-1])
		}
		return false
	})
}

func (d *Decoder) container(b []byte, out *corev1.Container) bool {
	return fields(b, func(f field) bool {
		switch f.num {
		case containerName:
			return setStr(f, &out.Name)
		case containerRestartPolicy:
			s, ok := f.str()
			if out.RestartPolicy == nil {
				out.RestartPolicy = (*corev1.ContainerRestartPolicy)(d.strings.One())
			}
			*out.RestartPolicy = corev1.ContainerRestartPolicy(s)
			return ok
		}
		return false
	})
}

func (d *Decoder) status(b []byte, out *corev1.PodStatus) bool {
	var seen uint32
	return fields(b, func(f field) bool {
		switch f.num {
		case statusPhase:
			s, ok := f.str()
			out.Phase = corev1.PodPhase(s)
			return ok
		case statusConditions:
			v, ok := f.msg()
			if !ok {
				return false
			}
			out.Conditions = d.conditions.Append(out.Conditions)
			return condition(v, &out.Conditions[len(out.Conditions)-1])
		case statusMessage:
			return setStr(f, &out.Message)
		case statusReason:
			return setStr(f, &out.Reason)
		case statusStartTime:
			v, ok := f.msg()
			if !ok || !once(&seen, f.num) {
				return false
			}
			out.StartTime = d.times.One()
			return timestamp(v, out.StartTime)
		case statusInitContainerStatuses, statusContainerStatuses:
			v, ok := f.msg()
			if !ok {
				return false
			}
			list := &out.ContainerStatuses
			if f.num == statusInitContainerStatuses {
				list = &out.InitContainerStatuses
			}
			*list = d.statuses.Append(*list)
			return d.containerStatus(v, &(*list)[len(*list)-1])
		}
		return false
	})
}

func condition(b []byte, out *corev1.PodCondition) bool {
	var seen uint32
	return fields(b, func(f field) bool {
		switch f.num {
		case conditionType:
			s, ok := f.str()
			out.Type = corev1.PodConditionType(s)
			return ok
		case conditionStatus:
			s, ok := f.str()
			out.Status = corev1.ConditionStatus(s)
			return ok
		case conditionLastProbeTime, conditionLastTransitionTime:
			v, ok := f.msg()
			if !ok || !once(&seen, f.num) {
				return false
			}
			if f.num == conditionLastProbeTime {
				return timestamp(v, &out.LastProbeTime)
			}
			return timestamp(v, &out.LastTransitionTime)
		case conditionReason:
			return setStr(f, &out.Reason)
		case conditionMessage:
			return setStr(f, &out.Message)
		}
		return false
	})
}

func (d *Decoder) containerStatus(b []byte, out *corev1.ContainerStatus) bool {
	var seen uint32
	return fields(b, func(f field) bool {
		switch f.num {
		case containerStatusName:
			return setStr(f, &out.Name)
		case containerStatusReady:
			v, ok := f.num64()
			out.Ready = v != 0
			return ok
		case containerStatusRestartCount:
			v, ok := f.num64()
			out.RestartCount = int32(v)
			return ok
		case containerStatusState:
			v, ok := f.msg()
			return ok && once(&seen, f.num) && d.containerState(v, &out.State)
		}
		return false
	})
}

func (d *Decoder) containerState(b []byte, out *corev1.ContainerState) bool {
	var seen uint32
	return fields(b, func(f field) bool {
		v, ok := f.msg()
		if !ok || !once(&seen, f.num) {
			return false
		}
		switch f.num {
		case stateWaiting:
			out.Waiting = d.waiting.One()
			return waiting(v, out.Waiting)
		case stateRunning:
			out.Running = d.running.One()
			return running(v, out.Running)
		case stateTerminated:
			out.Terminated = d.terminated.One()
			return terminated(v, out.Terminated)
		}
		return false
	})
}

func waiting(b []byte, out *corev1.ContainerStateWaiting) bool {
	return fields(b, func(f field) bool {
		switch f.num {
		case waitingReason:
			return setStr(f, &out.Reason)
		case waitingMessage:
			return setStr(f, &out.Message)
		}
		return false
	})
}

func running(b []byte, out *corev1.ContainerStateRunning) bool {
	var seen uint32
	return fields(b, func(f field) bool {
		v, ok := f.msg()
		return f.num == runningStartedAt && ok && once(&seen, f.num) && timestamp(v, &out.StartedAt)
	})
}

func terminated(b []byte, out *corev1.ContainerStateTerminated) bool {
	var seen uint32
	return fields(b, func(f field) bool {
		switch f.num {
		case terminatedExitCode, terminatedSignal:
			v, ok := f.num64()
			if f.num == terminatedExitCode {
				out.ExitCode = int32(v)
			} else {
				out.Signal = int32(v)
			}
			return ok
		case terminatedReason:
			return setStr(f, &out.Reason)
		case terminatedMessage:
			return setStr(f, &out.Message)
		case terminatedStartedAt, terminatedFinishedAt:
			v, ok := f.msg()
			if !ok || !once(&seen, f.num) {
				return false
			}
			if f.num == terminatedStartedAt {
				return timestamp(v, &out.StartedAt)
			}
			return timestamp(v, &out.FinishedAt)
		case terminatedContainerID:
			return setStr(f, &out.ContainerID)
		}
		return false
	})
}

// timestamp decodes a google.protobuf.Timestamp as kubeconv converts it.
func timestamp(b []byte, out *metav1.Time) bool {
	var seconds, nanos uint64
	ok := fields(b, func(f field) bool {
		v, ok := f.num64()
		switch f.num {
		case timestampSeconds:
			seconds = v
		case timestampNanos:
			nanos = v
		default:
			return false
		}
		return ok
	})
	*out = metav1.NewTime(time.Unix(int64(seconds), int64(int32(nanos))).UTC())
	return ok
}
