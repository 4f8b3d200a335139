package kubeconv

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// TemplateDecoding says how much of a Job's pod template spec is decoded.
type TemplateDecoding int

const (
	// FullTemplate decodes the whole PodSpec (a JSON round trip).
	FullTemplate TemplateDecoding = iota
	// RestartPolicyOnly reads spec.restartPolicy and nothing else: all the
	// sync semantics need, at a fraction of the cost.
	RestartPolicyOnly
)

// JobToKube converts a Job. With RestartPolicyOnly the template's spec holds
// only its restartPolicy.
func JobToKube(j *jobplanev1.Job, decoding TemplateDecoding) (*batchv1.Job, error) {
	template, err := PodTemplateToKube(j.GetSpec().GetTemplate(), decoding)
	if err != nil {
		return nil, err
	}
	spec := j.GetSpec()
	if spec == nil {
		spec = &jobplanev1.JobSpec{} // its optional fields are read directly below
	}
	out := &batchv1.Job{
		TypeMeta:   typeMeta(j.GetApiVersion(), j.GetKind()),
		ObjectMeta: ObjectMetaToKube(j.GetMetadata()),
		Spec: batchv1.JobSpec{
			Parallelism:             spec.Parallelism,
			Completions:             spec.Completions,
			ActiveDeadlineSeconds:   spec.ActiveDeadlineSeconds,
			PodFailurePolicy:        podFailurePolicyToKube(spec.GetPodFailurePolicy()),
			SuccessPolicy:           successPolicyToKube(spec.GetSuccessPolicy()),
			BackoffLimit:            spec.BackoffLimit,
			BackoffLimitPerIndex:    spec.BackoffLimitPerIndex,
			MaxFailedIndexes:        spec.MaxFailedIndexes,
			Selector:                LabelSelectorToKube(spec.GetSelector()),
			ManualSelector:          spec.ManualSelector,
			Template:                template,
			TTLSecondsAfterFinished: spec.TtlSecondsAfterFinished,
			CompletionMode:          (*batchv1.CompletionMode)(spec.CompletionMode),
			Suspend:                 spec.Suspend,
			PodReplacementPolicy:    (*batchv1.PodReplacementPolicy)(spec.PodReplacementPolicy),
			ManagedBy:               spec.ManagedBy,
		},
		Status: JobStatusToKube(j.GetStatus()),
	}
	return out, nil
}

// JobFromKube converts a Job.
func JobFromKube(j *batchv1.Job) (*jobplanev1.Job, error) {
	template, err := PodTemplateFromKube(&j.Spec.Template)
	if err != nil {
		return nil, err
	}
	return jobFromKube(j, template), nil
}

// JobForSyncFromKube converts a Job keeping what a sync reads of it, for
// a request to the planner: of its template, the restartPolicy alone (all
// JobToKube reads with RestartPolicyOnly: no JSON round trip of the
// PodSpec; the spec's Struct has at most one field, so any encoder writes
// it in one order); of its metadata and its template's, no labels and no
// annotations (a tenant writes them, and kubectl apply copies the whole
// Job into one).
func JobForSyncFromKube(j *batchv1.Job) *jobplanev1.Job {
	fields := map[string]*structpb.Value{}
	if rp := j.Spec.Template.Spec.RestartPolicy; rp != "" {
		fields["restartPolicy"] = structpb.NewStringValue(string(rp))
	}
	template := &jobplanev1.PodTemplateSpec{
		Metadata: objectMetaForSync(&j.Spec.Template.ObjectMeta),
		Spec:     &structpb.Struct{Fields: fields},
	}
	out := jobFromKube(j, template)
	out.Metadata = objectMetaForSync(&j.ObjectMeta)
	return out
}

// jobFromKube converts a Job with its template converted already, its
// strings made UTF-8 (utf8.go).
func jobFromKube(j *batchv1.Job, template *jobplanev1.PodTemplateSpec) *jobplanev1.Job {
	spec := &j.Spec
	out := &jobplanev1.Job{
		ApiVersion: j.APIVersion,
		Kind:       j.Kind,
		Metadata:   ObjectMetaFromKube(&j.ObjectMeta),
		Spec: &jobplanev1.JobSpec{
			Parallelism:             spec.Parallelism,
			Completions:             spec.Completions,
			ActiveDeadlineSeconds:   spec.ActiveDeadlineSeconds,
			PodFailurePolicy:        podFailurePolicyFromKube(spec.PodFailurePolicy),
			SuccessPolicy:           successPolicyFromKube(spec.SuccessPolicy),
			BackoffLimit:            spec.BackoffLimit,
			BackoffLimitPerIndex:    spec.BackoffLimitPerIndex,
			MaxFailedIndexes:        spec.MaxFailedIndexes,
			Selector:                LabelSelectorFromKube(spec.Selector),
			ManualSelector:          spec.ManualSelector,
			Template:                template,
			TtlSecondsAfterFinished: spec.TTLSecondsAfterFinished,
			CompletionMode:          (*string)(spec.CompletionMode),
			Suspend:                 spec.Suspend,
			PodReplacementPolicy:    (*string)(spec.PodReplacementPolicy),
			ManagedBy:               spec.ManagedBy,
		},
		Status: JobStatusFromKube(&j.Status),
	}
	if !jobUTF8(out) {
		validUTF8(out.ProtoReflect())
	}
	return out
}

// PodTemplateToKube converts a pod template.
func PodTemplateToKube(t *jobplanev1.PodTemplateSpec, decoding TemplateDecoding) (corev1.PodTemplateSpec, error) {
	out := corev1.PodTemplateSpec{ObjectMeta: ObjectMetaToKube(t.GetMetadata())}
	spec := t.GetSpec()
	if spec == nil {
		return out, nil
	}
	if decoding == RestartPolicyOnly {
		out.Spec.RestartPolicy = corev1.RestartPolicy(spec.GetFields()["restartPolicy"].GetStringValue())
		return out, nil
	}
	data, err := protojson.Marshal(spec)
	if err != nil {
		return out, fmt.Errorf("encoding the pod template spec: %w", err)
	}
	if err := json.Unmarshal(data, &out.Spec); err != nil {
		return out, fmt.Errorf("the pod template spec is not a core/v1 PodSpec: %w", err)
	}
	return out, nil
}

// PodTemplateFromKube converts a pod template.
func PodTemplateFromKube(t *corev1.PodTemplateSpec) (*jobplanev1.PodTemplateSpec, error) {
	data, err := json.Marshal(&t.Spec)
	if err != nil {
		return nil, fmt.Errorf("encoding the pod template spec: %w", err)
	}
	spec := &structpb.Struct{}
	if err := protojson.Unmarshal(data, spec); err != nil {
		return nil, fmt.Errorf("decoding the pod template spec: %w", err)
	}
	return &jobplanev1.PodTemplateSpec{Metadata: ObjectMetaFromKube(&t.ObjectMeta), Spec: spec}, nil
}

// JobStatusToKube converts a Job status; nil is the empty status.
func JobStatusToKube(s *jobplanev1.JobStatus) batchv1.JobStatus {
	if s == nil {
		return batchv1.JobStatus{}
	}
	out := batchv1.JobStatus{
		StartTime:        TimeToKube(s.GetStartTime()),
		CompletionTime:   TimeToKube(s.GetCompletionTime()),
		Active:           s.GetActive(),
		Succeeded:        s.GetSucceeded(),
		Failed:           s.GetFailed(),
		Terminating:      s.Terminating,
		CompletedIndexes: s.GetCompletedIndexes(),
		FailedIndexes:    s.FailedIndexes,
		Ready:            s.Ready,
	}
	if conds := s.GetConditions(); len(conds) > 0 {
		out.Conditions = make([]batchv1.JobCondition, len(conds))
		for i, c := range conds {
			out.Conditions[i] = batchv1.JobCondition{
				Type:               batchv1.JobConditionType(c.GetType()),
				Status:             corev1.ConditionStatus(c.GetStatus()),
				LastProbeTime:      TimeValueToKube(c.GetLastProbeTime()),
				LastTransitionTime: TimeValueToKube(c.GetLastTransitionTime()),
				Reason:             c.GetReason(),
				Message:            c.GetMessage(),
			}
		}
	}
	if u := s.GetUncountedTerminatedPods(); u != nil {
		out.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{
			Succeeded: uidsToKube(u.GetSucceeded()),
			Failed:    uidsToKube(u.GetFailed()),
		}
	}
	return out
}

// JobStatusFromKube converts a Job status.
func JobStatusFromKube(s *batchv1.JobStatus) *jobplanev1.JobStatus {
	out := &jobplanev1.JobStatus{
		StartTime:        TimeFromKube(s.StartTime),
		CompletionTime:   TimeFromKube(s.CompletionTime),
		Active:           s.Active,
		Succeeded:        s.Succeeded,
		Failed:           s.Failed,
		Terminating:      s.Terminating,
		CompletedIndexes: s.CompletedIndexes,
		FailedIndexes:    s.FailedIndexes,
		Ready:            s.Ready,
	}
	if len(s.Conditions) > 0 {
		out.Conditions = make([]*jobplanev1.JobCondition, len(s.Conditions))
		for i, c := range s.Conditions {
			out.Conditions[i] = &jobplanev1.JobCondition{
				Type:               string(c.Type),
				Status:             string(c.Status),
				LastProbeTime:      TimeFromKube(&c.LastProbeTime),
				LastTransitionTime: TimeFromKube(&c.LastTransitionTime),
				Reason:             c.Reason,
				Message:            c.Message,
			}
		}
	}
	if u := s.UncountedTerminatedPods; u != nil {
		out.UncountedTerminatedPods = &jobplanev1.UncountedTerminatedPods{
			Succeeded: uidsFromKube(u.Succeeded),
			Failed:    uidsFromKube(u.Failed),
		}
	}
	return out
}

func podFailurePolicyToKube(p *jobplanev1.PodFailurePolicy) *batchv1.PodFailurePolicy {
	if p == nil {
		return nil
	}
	out := &batchv1.PodFailurePolicy{Rules: make([]batchv1.PodFailurePolicyRule, len(p.GetRules()))}
	for i, r := range p.GetRules() {
		rule := batchv1.PodFailurePolicyRule{Action: batchv1.PodFailurePolicyAction(r.GetAction())}
		if e := r.GetOnExitCodes(); e != nil {
			rule.OnExitCodes = &batchv1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: e.ContainerName,
				Operator:      batchv1.PodFailurePolicyOnExitCodesOperator(e.GetOperator()),
				Values:        append([]int32(nil), e.GetValues()...),
			}
		}
		for _, c := range r.GetOnPodConditions() {
			rule.OnPodConditions = append(rule.OnPodConditions, batchv1.PodFailurePolicyOnPodConditionsPattern{
				Type:   corev1.PodConditionType(c.GetType()),
				Status: corev1.ConditionStatus(c.GetStatus()),
			})
		}
		out.Rules[i] = rule
	}
	return out
}

func podFailurePolicyFromKube(p *batchv1.PodFailurePolicy) *jobplanev1.PodFailurePolicy {
	if p == nil {
		return nil
	}
	out := &jobplanev1.PodFailurePolicy{Rules: make([]*jobplanev1.PodFailurePolicyRule, len(p.Rules))}
	for i, r := range p.Rules {
		rule := &jobplanev1.PodFailurePolicyRule{Action: string(r.Action)}
		if e := r.OnExitCodes; e != nil {
			rule.OnExitCodes = &jobplanev1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: e.ContainerName,
				Operator:      string(e.Operator),
				Values:        append([]int32(nil), e.Values...),
			}
		}
		for _, c := range r.OnPodConditions {
			rule.OnPodConditions = append(rule.OnPodConditions, &jobplanev1.PodFailurePolicyOnPodConditionsPattern{
				Type:   string(c.Type),
				Status: string(c.Status),
			})
		}
		out.Rules[i] = rule
	}
	return out
}

func successPolicyToKube(p *jobplanev1.SuccessPolicy) *batchv1.SuccessPolicy {
	if p == nil {
		return nil
	}
	out := &batchv1.SuccessPolicy{Rules: make([]batchv1.SuccessPolicyRule, len(p.GetRules()))}
	for i, r := range p.GetRules() {
		out.Rules[i] = batchv1.SuccessPolicyRule{SucceededIndexes: r.SucceededIndexes, SucceededCount: r.SucceededCount}
	}
	return out
}

func successPolicyFromKube(p *batchv1.SuccessPolicy) *jobplanev1.SuccessPolicy {
	if p == nil {
		return nil
	}
	out := &jobplanev1.SuccessPolicy{Rules: make([]*jobplanev1.SuccessPolicyRule, len(p.Rules))}
	for i, r := range p.Rules {
		out.Rules[i] = &jobplanev1.SuccessPolicyRule{SucceededIndexes: r.SucceededIndexes, SucceededCount: r.SucceededCount}
	}
	return out
}

func uidsToKube(s []string) []types.UID {
	if s == nil {
		return nil
	}
	out := make([]types.UID, len(s))
	for i, u := range s {
		out[i] = types.UID(u)
	}
	return out
}

func uidsFromKube(s []types.UID) []string {
	if s == nil {
		return nil
	}
	out := make([]string, len(s))
	for i, u := range s {
		out[i] = string(u)
	}
	return out
}
