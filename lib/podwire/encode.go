package podwire

import (
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobplane/jobplane/lib/kubeconv"
)

// AppendPod appends field num holding the pod, encoded straight from the
// Kubernetes pod: the bytes of kubeconv.PodFromKube's message (of
// PodFromKubeForSync's when forSync) under protobuf-go's deterministic
// marshaling, without building the message. A request of thousands of pods
// is mostly its pods.
func AppendPod(b []byte, num protowire.Number, p *corev1.Pod, forSync bool) []byte {
	e := encoder{forSync: forSync}
	return appendMessage(b, num, func(b []byte) []byte {
		b = appendString(b, podAPIVersion, p.APIVersion)
		b = appendString(b, podKind, p.Kind)
		b = appendMessage(b, podMetadata, func(b []byte) []byte { return e.appendObjectMeta(b, &p.ObjectMeta) })
		b = appendMessage(b, podSpec, func(b []byte) []byte {
			b = appendString(b, specNodeName, p.Spec.NodeName)
			b = appendString(b, specRestartPolicy, string(p.Spec.RestartPolicy))
			b = appendContainers(b, specContainers, p.Spec.Containers)
			return appendContainers(b, specInitContainers, p.Spec.InitContainers)
		})
		return appendMessage(b, podStatus, func(b []byte) []byte { return e.appendPodStatus(b, &p.Status) })
	})
}

// encoder writes a pod whole, or what a sync reads of it (forSync, as
// kubeconv.PodConverter.ForSync).
type encoder struct{ forSync bool }

// appendMessage appends field num holding the message body writes. The
// length goes before the body, which is written first in the room of a
// one-byte length and moved when the length takes more.
func appendMessage(b []byte, num protowire.Number, body func([]byte) []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	at := len(b)
	b = body(append(b, 0))
	n := len(b) - at - 1
	if n < 1<<7 {
		b[at] = byte(n)
		return b
	}
	k := protowire.SizeVarint(uint64(n))
	b = append(b, make([]byte, k-1)...)
	copy(b[at+k:], b[at+1:at+1+n])
	protowire.AppendVarint(b[:at], uint64(n))
	return b
}

// appendString appends a proto3 string field, left out when empty.
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return appendUTF8(protowire.AppendTag(b, num, protowire.BytesType), s)
}

// appendUTF8 appends s, length first, as UTF-8: an invalid sequence (the
// API server keeps an annotation's bytes as a protobuf client sent them)
// is written as JSON writes it, U+FFFD, as kubeconv converts it.
func appendUTF8(b []byte, s string) []byte {
	return protowire.AppendString(b, validUTF8(s))
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// appendVarint appends a proto3 integer or bool field, left out when 0.
func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendBool(b []byte, num protowire.Number, v bool) []byte {
	return appendVarint(b, num, protowire.EncodeBool(v))
}

// appendOptionalBool appends an optional bool field, present when set.
func appendOptionalBool(b []byte, num protowire.Number, v *bool) []byte {
	if v == nil {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), protowire.EncodeBool(*v))
}

// appendTime appends a timestamp field as TimeFromKube converts it: left
// out when nil or zero.
func appendTime(b []byte, num protowire.Number, t *metav1.Time) []byte {
	if t == nil || t.IsZero() {
		return b
	}
	return appendMessage(b, num, func(b []byte) []byte {
		b = appendVarint(b, timestampSeconds, uint64(t.Unix()))
		return appendVarint(b, timestampNanos, uint64(int64(int32(t.Nanosecond()))))
	})
}

func (e encoder) appendObjectMeta(b []byte, m *metav1.ObjectMeta) []byte {
	b = appendString(b, metaName, m.Name)
	b = appendString(b, metaGenerateName, m.GenerateName)
	b = appendString(b, metaNamespace, m.Namespace)
	b = appendString(b, metaUID, string(m.UID))
	b = appendVarint(b, metaGeneration, uint64(m.Generation))
	b = appendString(b, metaResourceVersion, m.ResourceVersion)
	if !e.forSync {
		b = appendMap(b, metaLabels, m.Labels)
		b = appendMap(b, metaAnnotations, m.Annotations)
	} else {
		b = appendSyncAnnotations(b, m.Annotations)
	}
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		b = appendMessage(b, metaOwnerReferences, func(b []byte) []byte {
			b = appendString(b, refAPIVersion, r.APIVersion)
			b = appendString(b, refKind, r.Kind)
			b = appendString(b, refName, r.Name)
			b = appendString(b, refUID, string(r.UID))
			b = appendOptionalBool(b, refController, r.Controller)
			return appendOptionalBool(b, refBlockOwnerDeletion, r.BlockOwnerDeletion)
		})
	}
	for _, f := range m.Finalizers { // a list's empty strings are written
		b = appendUTF8(protowire.AppendTag(b, metaFinalizers, protowire.BytesType), f)
	}
	b = appendTime(b, metaCreationTimestamp, &m.CreationTimestamp)
	b = appendTime(b, metaDeletionTimestamp, m.DeletionTimestamp)
	if s := m.DeletionGracePeriodSeconds; s != nil {
		b = protowire.AppendVarint(protowire.AppendTag(b, metaDeletionGracePeriodSeconds, protowire.VarintType), uint64(*s))
	}
	return b
}

// appendMap appends a map<string, string> field in key order, each entry
// with its key and value even when empty, as protobuf-go writes them.
func appendMap(b []byte, num protowire.Number, m map[string]string) []byte {
	if len(m) == 0 {
		return b
	}
	var inline [8]string
	keys := inline[:0]
	for k := range m {
		if !utf8.ValidString(k) {
			return appendMap(b, num, validKeys(m))
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendMapEntry(b, num, k, validUTF8(m[k]))
	}
	return b
}

// appendMapEntry appends the entry k: v of the map in field num.
func appendMapEntry(b []byte, num protowire.Number, k, v string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	n := protowire.SizeTag(mapKey) + protowire.SizeBytes(len(k)) + protowire.SizeTag(mapValue) + protowire.SizeBytes(len(v))
	b = protowire.AppendVarint(b, uint64(n))
	b = protowire.AppendString(protowire.AppendTag(b, mapKey, protowire.BytesType), k)
	return protowire.AppendString(protowire.AppendTag(b, mapValue, protowire.BytesType), v)
}

// appendSyncAnnotations appends the annotations of m a sync reads
// (kubeconv.SyncAnnotations, in key order), as appendMap does.
func appendSyncAnnotations(b []byte, m map[string]string) []byte {
	if len(m) == 0 {
		return b
	}
	for _, k := range kubeconv.SyncAnnotations {
		if v, ok := m[k]; ok {
			b = appendMapEntry(b, metaAnnotations, k, validUTF8(v))
		}
	}
	return b
}

// validKeys is m with its keys made UTF-8, so that they sort as the
// converted message's do; keys that become one keep the value of the last
// in byte order, as kubeconv's conversion does.
func validKeys(m map[string]string) map[string]string {
	keys := slices.Sorted(maps.Keys(m))
	out := make(map[string]string, len(m))
	for _, k := range keys {
		out[validUTF8(k)] = m[k]
	}
	return out
}

func appendContainers(b []byte, num protowire.Number, cs []corev1.Container) []byte {
	for i := range cs {
		c := &cs[i]
		b = appendMessage(b, num, func(b []byte) []byte {
			b = appendString(b, containerName, c.Name)
			if c.RestartPolicy != nil {
				b = appendUTF8(protowire.AppendTag(b, containerRestartPolicy, protowire.BytesType), string(*c.RestartPolicy))
			}
			return b
		})
	}
	return b
}

func (e encoder) appendPodStatus(b []byte, s *corev1.PodStatus) []byte {
	b = appendString(b, statusPhase, string(s.Phase))
	for i := range s.Conditions {
		c := &s.Conditions[i]
		b = appendMessage(b, statusConditions, func(b []byte) []byte {
			b = appendString(b, conditionType, string(c.Type))
			b = appendString(b, conditionStatus, string(c.Status))
			b = appendTime(b, conditionLastProbeTime, &c.LastProbeTime)
			b = appendTime(b, conditionLastTransitionTime, &c.LastTransitionTime)
			b = appendString(b, conditionReason, c.Reason)
			return appendString(b, conditionMessage, c.Message)
		})
	}
	b = appendString(b, statusMessage, s.Message)
	b = appendString(b, statusReason, s.Reason)
	b = appendTime(b, statusStartTime, s.StartTime)
	b = e.appendContainerStatuses(b, statusInitContainerStatuses, s.InitContainerStatuses)
	return e.appendContainerStatuses(b, statusContainerStatuses, s.ContainerStatuses)
}

func (e encoder) appendContainerStatuses(b []byte, num protowire.Number, cs []corev1.ContainerStatus) []byte {
	for i := range cs {
		c := &cs[i]
		b = appendMessage(b, num, func(b []byte) []byte {
			b = appendString(b, containerStatusName, c.Name)
			b = appendBool(b, containerStatusReady, c.Ready)
			b = appendVarint(b, containerStatusRestartCount, uint64(int64(c.RestartCount)))
			return appendMessage(b, containerStatusState, func(b []byte) []byte { return e.appendContainerState(b, &c.State) })
		})
	}
	return b
}

func (e encoder) appendContainerState(b []byte, s *corev1.ContainerState) []byte {
	if w := s.Waiting; w != nil {
		b = appendMessage(b, stateWaiting, func(b []byte) []byte {
			b = appendString(b, waitingReason, w.Reason)
			if e.forSync {
				return b
			}
			return appendString(b, waitingMessage, w.Message)
		})
	}
	if r := s.Running; r != nil {
		b = appendMessage(b, stateRunning, func(b []byte) []byte { return appendTime(b, runningStartedAt, &r.StartedAt) })
	}
	if t := s.Terminated; t != nil {
		b = appendMessage(b, stateTerminated, func(b []byte) []byte {
			b = appendVarint(b, terminatedExitCode, uint64(int64(t.ExitCode)))
			b = appendVarint(b, terminatedSignal, uint64(int64(t.Signal)))
			b = appendString(b, terminatedReason, t.Reason)
			if !e.forSync {
				b = appendString(b, terminatedMessage, t.Message)
			}
			b = appendTime(b, terminatedStartedAt, &t.StartedAt)
			b = appendTime(b, terminatedFinishedAt, &t.FinishedAt)
			return appendString(b, terminatedContainerID, t.ContainerID)
		})
	}
	return b
}
