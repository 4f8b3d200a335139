package kubeconv

import (
	"slices"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// A Kubernetes object read as protobuf (the executor's content type) may
// hold strings that are not UTF-8, which the API server accepts in an
// annotation's value or a condition's message. The contract's strings must
// be UTF-8: the codec refuses a message holding one, as protobuf-go does, so
// one tenant's Job would fail the executor's stream of plans, shared by
// every tenant's Jobs, and another caller's list or watch of every
// namespace. The conversions therefore give such strings as the API
// server's JSON shows them, each invalid sequence replaced by U+FFFD
// (podwire writes pods the same way). The pods the executor creates come
// from the Job's own template, its bytes as they are.

// replacementChar is what JSON encoding writes for an invalid sequence.
const replacementChar = "\uFFFD"

var structName = (&structpb.Struct{}).ProtoReflect().Descriptor().FullName()

// validUTF8 replaces, in m and the messages it holds, the strings that are
// not UTF-8, as JSON encoding does. Lists, maps and optional fields holding
// one are replaced, never changed in place: they may be an informer's.
// Structs are left alone: they come from JSON (PodTemplateFromKube), valid
// already, or hold the restartPolicy alone, which the API server validates
// (JobForSyncFromKube).
func validUTF8(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			validMapUTF8(m, fd, v.Map())
		case fd.IsList():
			validListUTF8(m, fd, v.List())
		case fd.Kind() == protoreflect.StringKind:
			if s := v.String(); !utf8.ValidString(s) {
				if fd.HasPresence() {
					// Set would write through the field's pointer, which
					// may be the Kubernetes object's.
					m.Clear(fd)
				}
				m.Set(fd, protoreflect.ValueOfString(strings.ToValidUTF8(s, replacementChar)))
			}
		case fd.Message() != nil && fd.Message().FullName() != structName:
			validUTF8(v.Message())
		}
		return true
	})
}

func validListUTF8(m protoreflect.Message, fd protoreflect.FieldDescriptor, list protoreflect.List) {
	switch {
	case fd.Kind() == protoreflect.StringKind:
		for i := range list.Len() {
			if !utf8.ValidString(list.Get(i).String()) {
				m.Set(fd, validStrings(m.NewField(fd).List(), list))
				return
			}
		}
	case fd.Message() != nil && fd.Message().FullName() != structName:
		for i := range list.Len() {
			validUTF8(list.Get(i).Message())
		}
	}
}

// validStrings is out holding list's strings, made UTF-8.
func validStrings(out, list protoreflect.List) protoreflect.Value {
	for i := range list.Len() {
		out.Append(protoreflect.ValueOfString(strings.ToValidUTF8(list.Get(i).String(), replacementChar)))
	}
	return protoreflect.ValueOfList(out)
}

// validMapUTF8 handles the contract's maps: string keys, string or message
// values. Keys that become one after their repair keep the value of the
// last in byte order, whatever the map's order.
func validMapUTF8(m protoreflect.Message, fd protoreflect.FieldDescriptor, mp protoreflect.Map) {
	value := fd.MapValue()
	messages := value.Message() != nil && value.Message().FullName() != structName
	stringValues := value.Kind() == protoreflect.StringKind
	var keys []string
	invalid := false
	mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		if messages {
			validUTF8(v.Message())
		}
		if fd.MapKey().Kind() == protoreflect.StringKind {
			keys = append(keys, k.String())
			invalid = invalid || !utf8.ValidString(k.String()) || stringValues && !utf8.ValidString(v.String())
		}
		return true
	})
	if !invalid {
		return
	}
	slices.Sort(keys)
	out := m.NewField(fd).Map()
	for _, k := range keys {
		v := mp.Get(protoreflect.ValueOfString(k).MapKey())
		if stringValues {
			v = protoreflect.ValueOfString(strings.ToValidUTF8(v.String(), replacementChar))
		}
		out.Set(protoreflect.ValueOfString(strings.ToValidUTF8(k, replacementChar)).MapKey(), v)
	}
	m.Set(fd, protoreflect.ValueOfMap(out))
}

// podUTF8 says whether every string of p is UTF-8: the check a pod's
// conversion pays, without reflection (validUTF8 costs three conversions).
// TestPodUTF8SeesEveryString holds it to the contract's Pod.
func podUTF8(p *jobplanev1.Pod) bool {
	spec, status := p.GetSpec(), p.GetStatus()
	if !allUTF8(p.GetApiVersion(), p.GetKind(), spec.GetNodeName(), spec.GetRestartPolicy(),
		status.GetPhase(), status.GetMessage(), status.GetReason()) || !metaUTF8(p.GetMetadata()) {
		return false
	}
	if !containersUTF8(spec.GetContainers()) || !containersUTF8(spec.GetInitContainers()) {
		return false
	}
	for _, c := range status.GetConditions() {
		if !allUTF8(c.GetType(), c.GetStatus(), c.GetReason(), c.GetMessage()) {
			return false
		}
	}
	return containerStatusesUTF8(status.GetContainerStatuses()) && containerStatusesUTF8(status.GetInitContainerStatuses())
}

func containersUTF8(containers []*jobplanev1.Container) bool {
	for _, c := range containers {
		if !allUTF8(c.GetName(), c.GetRestartPolicy()) {
			return false
		}
	}
	return true
}

func containerStatusesUTF8(statuses []*jobplanev1.ContainerStatus) bool {
	for _, s := range statuses {
		state := s.GetState()
		if !allUTF8(s.GetName(), state.GetWaiting().GetReason(), state.GetWaiting().GetMessage(),
			state.GetTerminated().GetReason(), state.GetTerminated().GetMessage(), state.GetTerminated().GetContainerId()) {
			return false
		}
	}
	return true
}

// jobUTF8 says whether every string of j, its template's spec aside (a
// Struct), is UTF-8: podUTF8's check for a Job.
func jobUTF8(j *jobplanev1.Job) bool {
	spec, status := j.GetSpec(), j.GetStatus()
	if !allUTF8(j.GetApiVersion(), j.GetKind(), spec.GetCompletionMode(), spec.GetPodReplacementPolicy(), spec.GetManagedBy(),
		status.GetCompletedIndexes(), status.GetFailedIndexes()) ||
		!metaUTF8(j.GetMetadata()) || !metaUTF8(spec.GetTemplate().GetMetadata()) ||
		!allUTF8(status.GetUncountedTerminatedPods().GetSucceeded()...) || !allUTF8(status.GetUncountedTerminatedPods().GetFailed()...) {
		return false
	}
	for _, r := range spec.GetPodFailurePolicy().GetRules() {
		if !allUTF8(r.GetAction(), r.GetOnExitCodes().GetContainerName(), r.GetOnExitCodes().GetOperator()) {
			return false
		}
		for _, c := range r.GetOnPodConditions() {
			if !allUTF8(c.GetType(), c.GetStatus()) {
				return false
			}
		}
	}
	for _, r := range spec.GetSuccessPolicy().GetRules() {
		if !allUTF8(r.GetSucceededIndexes()) {
			return false
		}
	}
	selector := spec.GetSelector()
	if !mapUTF8(selector.GetMatchLabels()) {
		return false
	}
	for _, e := range selector.GetMatchExpressions() {
		if !allUTF8(e.GetKey(), e.GetOperator()) || !allUTF8(e.GetValues()...) {
			return false
		}
	}
	for _, c := range status.GetConditions() {
		if !allUTF8(c.GetType(), c.GetStatus(), c.GetReason(), c.GetMessage()) {
			return false
		}
	}
	return true
}

func metaUTF8(m *jobplanev1.ObjectMeta) bool {
	if !allUTF8(m.GetName(), m.GetGenerateName(), m.GetNamespace(), m.GetUid(), m.GetResourceVersion()) ||
		!mapUTF8(m.GetLabels()) || !mapUTF8(m.GetAnnotations()) || !allUTF8(m.GetFinalizers()...) {
		return false
	}
	for _, r := range m.GetOwnerReferences() {
		if !allUTF8(r.GetApiVersion(), r.GetKind(), r.GetName(), r.GetUid()) {
			return false
		}
	}
	return true
}

func mapUTF8(m map[string]string) bool {
	for k, v := range m {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return false
		}
	}
	return true
}

func allUTF8(s ...string) bool {
	for _, x := range s {
		if !utf8.ValidString(x) {
			return false
		}
	}
	return true
}
