// Package kubeconv converts between jobplane's protobuf contracts and the
// Kubernetes API types of k8s.io/api, field by field. The contracts mirror
// batch/v1 and core/v1, so every conversion is a copy; nothing is defaulted
// or validated here. Conversions to Kubernetes types share the message's
// maps and string slices (labels, annotations, finalizers) instead of
// copying them: the planner converts every pod of every snapshot and only
// reads them. Copy before changing them.
package kubeconv

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// TimeToKube converts a timestamp; nil stays nil.
func TimeToKube(t *timestamppb.Timestamp) *metav1.Time {
	if t == nil {
		return nil
	}
	mt := metav1.NewTime(t.AsTime())
	return &mt
}

// TimeValueToKube converts a timestamp to a metav1.Time value; nil is zero.
func TimeValueToKube(t *timestamppb.Timestamp) metav1.Time {
	if t == nil {
		return metav1.Time{}
	}
	return metav1.NewTime(t.AsTime())
}

// TimeFromKube converts a time; nil and the zero time become nil.
func TimeFromKube(t *metav1.Time) *timestamppb.Timestamp {
	if t == nil || t.IsZero() {
		return nil
	}
	return Timestamp(t.Time)
}

// The range a Timestamp holds: years 1 to 9999.
var (
	firstTimestamp = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	lastTimestamp  = time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)
)

// Timestamp is t as a Timestamp, held within the range one holds: a time
// derived from a caller's (a deletion time less its grace period) may fall
// outside, and such a Timestamp cannot be written as JSON.
func Timestamp(t time.Time) *timestamppb.Timestamp {
	switch {
	case t.Before(firstTimestamp):
		t = firstTimestamp
	case t.After(lastTimestamp):
		t = lastTimestamp
	}
	return timestamppb.New(t)
}

// ObjectMetaToKube converts object metadata.
func ObjectMetaToKube(m *jobplanev1.ObjectMeta) metav1.ObjectMeta {
	var out metav1.ObjectMeta
	objectMetaIntoKube(m, &out)
	return out
}

// objectMetaIntoKube converts object metadata into out, which is zero.
func objectMetaIntoKube(m *jobplanev1.ObjectMeta, out *metav1.ObjectMeta) {
	var c KubePodConverter
	c.objectMetaIntoKube(m, out)
}

// objectMetaFieldsIntoKube converts the metadata's fields that take no
// allocation into out, which is zero.
func objectMetaFieldsIntoKube(m *jobplanev1.ObjectMeta, out *metav1.ObjectMeta) {
	if m == nil {
		return
	}
	out.Name = m.GetName()
	out.GenerateName = m.GetGenerateName()
	out.Namespace = m.GetNamespace()
	out.UID = types.UID(m.GetUid())
	out.Generation = m.GetGeneration()
	out.ResourceVersion = m.GetResourceVersion()
	out.Labels = m.GetLabels()
	out.Annotations = m.GetAnnotations()
	out.Finalizers = m.GetFinalizers()
	out.CreationTimestamp = TimeValueToKube(m.GetCreationTimestamp())
	out.DeletionGracePeriodSeconds = m.DeletionGracePeriodSeconds
}

func ownerReferenceToKube(r *jobplanev1.OwnerReference) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         r.GetApiVersion(),
		Kind:               r.GetKind(),
		Name:               r.GetName(),
		UID:                types.UID(r.GetUid()),
		Controller:         r.Controller,
		BlockOwnerDeletion: r.BlockOwnerDeletion,
	}
}

// ObjectMetaFromKube converts object metadata.
func ObjectMetaFromKube(m *metav1.ObjectMeta) *jobplanev1.ObjectMeta {
	out := &jobplanev1.ObjectMeta{}
	objectMetaFromKube(m, out)
	return out
}

// objectMetaForSync converts object metadata without its labels and
// annotations.
func objectMetaForSync(m *metav1.ObjectMeta) *jobplanev1.ObjectMeta {
	bare := *m
	bare.Labels, bare.Annotations = nil, nil
	return ObjectMetaFromKube(&bare)
}

// objectMetaFromKube converts object metadata into out, which is empty.
func objectMetaFromKube(m *metav1.ObjectMeta, out *jobplanev1.ObjectMeta) {
	c := PodConverter{copyShared: true}
	c.objectMetaFromKube(m, out)
}

// LabelSelectorToKube converts a label selector; nil stays nil.
func LabelSelectorToKube(s *jobplanev1.LabelSelector) *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{MatchLabels: s.GetMatchLabels()}
	for _, e := range s.GetMatchExpressions() {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{
			Key:      e.GetKey(),
			Operator: metav1.LabelSelectorOperator(e.GetOperator()),
			Values:   e.GetValues(),
		})
	}
	return out
}

// LabelSelectorFromKube converts a label selector; nil stays nil.
func LabelSelectorFromKube(s *metav1.LabelSelector) *jobplanev1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &jobplanev1.LabelSelector{MatchLabels: copyMap(s.MatchLabels)}
	for _, e := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, &jobplanev1.LabelSelectorRequirement{
			Key:      e.Key,
			Operator: string(e.Operator),
			Values:   copyStrings(e.Values),
		})
	}
	return out
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func copyStrings(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return append([]string(nil), s...)
}
