package plan

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/kubeconv"
)

// ToProto converts a plan to the contract.
func ToProto(p *Plan) *jobplanev1.SyncPlan {
	out := &jobplanev1.SyncPlan{
		Summary:         p.Summary,
		ReleaseJobState: p.ReleaseJobState,
		Metrics: &jobplanev1.SyncMetrics{
			CompletionMode:            p.Metrics.CompletionMode,
			SyncAction:                p.Metrics.SyncAction,
			PodFailuresByPolicyAction: p.Metrics.PodFailuresByPolicyAction,
			FinishedResult:            p.Metrics.FinishedResult,
			FinishedReason:            p.Metrics.FinishedReason,
			PodsSucceeded:             p.Metrics.PodsSucceeded,
			PodsFailed:                p.Metrics.PodsFailed,
			IndexesSucceeded:          p.Metrics.IndexesSucceeded,
			IndexesFailed:             p.Metrics.IndexesFailed,
			BackoffLimit:              p.Metrics.BackoffLimit,
		},
		Actions: make([]*jobplanev1.Action, len(p.Actions)),
	}
	for i, a := range p.Actions {
		out.Actions[i] = actionToProto(a)
	}
	return out
}

func actionToProto(a Action) *jobplanev1.Action {
	reason, explanation := a.Why()
	out := &jobplanev1.Action{Reason: reason, Explanation: explanation}
	switch a := a.(type) {
	case CreatePods:
		pods := make([]*jobplanev1.PodToCreate, len(a.Pods))
		for i, p := range a.Pods {
			pods[i] = &jobplanev1.PodToCreate{
				CompletionIndex: p.CompletionIndex,
				GenerateName:    p.GenerateName,
				Hostname:        p.Hostname,
				Labels:          p.Labels,
				Annotations:     p.Annotations,
				Finalizers:      p.Finalizers,
			}
			for _, e := range p.Env {
				pods[i].Env = append(pods[i].Env, &jobplanev1.EnvVarFromField{Name: e.Name, FieldPath: e.FieldPath})
			}
		}
		out.Kind = &jobplanev1.Action_CreatePods{CreatePods: &jobplanev1.CreatePodsAction{Pods: pods, CreationReason: a.CreationReason}}
	case DeletePods:
		out.Kind = &jobplanev1.Action_DeletePods{DeletePods: &jobplanev1.DeletePodsAction{
			Pods:                    podRefsToProto(a.Pods),
			RemoveTrackingFinalizer: a.RemoveTrackingFinalizer,
			ExpectDeletions:         a.ExpectDeletions,
		}}
	case RemoveFinalizers:
		out.Kind = &jobplanev1.Action_RemoveFinalizers{RemoveFinalizers: &jobplanev1.RemoveFinalizersAction{Pods: podRefsToProto(a.Pods)}}
	case WriteStatus:
		ws := &jobplanev1.WriteStatusAction{Status: kubeconv.JobStatusFromKube(&a.Status)}
		if b := a.BackoffRecord; b != nil {
			ws.BackoffRecord = BackoffRecordToProto(b)
		}
		out.Kind = &jobplanev1.Action_WriteStatus{WriteStatus: ws}
	case RecordEvent:
		out.Kind = &jobplanev1.Action_RecordEvent{RecordEvent: &jobplanev1.RecordEventAction{Type: a.Type, Reason: reason, Message: a.Message}}
	case Requeue:
		out.Kind = &jobplanev1.Action_Requeue{Requeue: &jobplanev1.RequeueAction{After: durationpb.New(a.After)}}
	}
	return out
}

func podRefsToProto(refs []PodRef) []*jobplanev1.PodRef {
	out := make([]*jobplanev1.PodRef, len(refs))
	for i, r := range refs {
		out[i] = &jobplanev1.PodRef{Name: r.Name, Uid: string(r.UID), CompletionIndex: r.CompletionIndex}
	}
	return out
}

// BackoffRecordToProto converts a backoff record.
func BackoffRecordToProto(b *BackoffRecord) *jobplanev1.BackoffRecord {
	out := &jobplanev1.BackoffRecord{FailuresAfterLastSuccess: b.FailuresAfterLastSuccess}
	if b.LastFailureTime != nil {
		out.LastFailureTime = kubeconv.Timestamp(*b.LastFailureTime)
	}
	return out
}

// BackoffRecordFromProto converts a backoff record; nil stays nil.
func BackoffRecordFromProto(b *jobplanev1.BackoffRecord) *BackoffRecord {
	if b == nil {
		return nil
	}
	out := &BackoffRecord{FailuresAfterLastSuccess: b.GetFailuresAfterLastSuccess()}
	if t := b.GetLastFailureTime(); t != nil {
		v := t.AsTime()
		out.LastFailureTime = &v
	}
	return out
}

// FromProto converts a plan from the contract, checking what performing it
// relies on; errors have their paths under path (for example
// "plan.actions[2].deletePods.pods[0].uid").
func FromProto(p *jobplanev1.SyncPlan, path *field.Path) (*Plan, field.ErrorList) {
	var errs field.ErrorList
	out := &Plan{Summary: p.GetSummary(), ReleaseJobState: p.GetReleaseJobState(), Actions: make([]Action, 0, len(p.GetActions()))}
	if m := p.GetMetrics(); m != nil {
		out.Metrics = Metrics{
			CompletionMode:            m.GetCompletionMode(),
			SyncAction:                m.GetSyncAction(),
			PodFailuresByPolicyAction: m.GetPodFailuresByPolicyAction(),
			FinishedResult:            m.GetFinishedResult(),
			FinishedReason:            m.GetFinishedReason(),
			PodsSucceeded:             m.GetPodsSucceeded(),
			PodsFailed:                m.GetPodsFailed(),
			IndexesSucceeded:          m.GetIndexesSucceeded(),
			IndexesFailed:             m.GetIndexesFailed(),
			BackoffLimit:              m.GetBackoffLimit(),
		}
	}
	for i, a := range p.GetActions() {
		if act := actionFromProto(a, path.Child("actions").Index(i), &errs); act != nil {
			out.Actions = append(out.Actions, act)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

func actionFromProto(a *jobplanev1.Action, path *field.Path, errs *field.ErrorList) Action {
	because := Because{Reason: a.GetReason(), Explanation: a.GetExplanation()}
	switch k := a.GetKind().(type) {
	case *jobplanev1.Action_CreatePods:
		out := CreatePods{Because: because, CreationReason: k.CreatePods.GetCreationReason()}
		for i, p := range k.CreatePods.GetPods() {
			if p.GetGenerateName() == "" {
				*errs = append(*errs, field.Required(path.Child("createPods", "pods").Index(i).Child("generateName"), ""))
			}
			pod := PodToCreate{
				CompletionIndex: p.CompletionIndex,
				GenerateName:    p.GetGenerateName(),
				Hostname:        p.GetHostname(),
				Labels:          p.GetLabels(),
				Annotations:     p.GetAnnotations(),
				Finalizers:      p.GetFinalizers(),
			}
			for _, e := range p.GetEnv() {
				pod.Env = append(pod.Env, EnvVarFromField{Name: e.GetName(), FieldPath: e.GetFieldPath()})
			}
			out.Pods = append(out.Pods, pod)
		}
		return out
	case *jobplanev1.Action_DeletePods:
		return DeletePods{
			Because:                 because,
			Pods:                    podRefsFromProto(k.DeletePods.GetPods(), path.Child("deletePods"), errs),
			RemoveTrackingFinalizer: k.DeletePods.GetRemoveTrackingFinalizer(),
			ExpectDeletions:         k.DeletePods.GetExpectDeletions(),
		}
	case *jobplanev1.Action_RemoveFinalizers:
		return RemoveFinalizers{Because: because, Pods: podRefsFromProto(k.RemoveFinalizers.GetPods(), path.Child("removeFinalizers"), errs)}
	case *jobplanev1.Action_WriteStatus:
		if k.WriteStatus.GetStatus() == nil {
			*errs = append(*errs, field.Required(path.Child("writeStatus", "status"), ""))
		}
		return WriteStatus{
			Because:       because,
			Status:        kubeconv.JobStatusToKube(k.WriteStatus.GetStatus()),
			BackoffRecord: BackoffRecordFromProto(k.WriteStatus.GetBackoffRecord()),
		}
	case *jobplanev1.Action_RecordEvent:
		e := k.RecordEvent
		if t := e.GetType(); t != corev1.EventTypeNormal && t != corev1.EventTypeWarning {
			*errs = append(*errs, field.NotSupported(path.Child("recordEvent", "type"), t, []string{corev1.EventTypeNormal, corev1.EventTypeWarning}))
		}
		if e.GetReason() == "" {
			*errs = append(*errs, field.Required(path.Child("recordEvent", "reason"), ""))
		}
		because.Reason = e.GetReason()
		return RecordEvent{Because: because, Type: e.GetType(), Message: e.GetMessage()}
	case *jobplanev1.Action_Requeue:
		after := k.Requeue.GetAfter()
		switch {
		case after == nil:
			*errs = append(*errs, field.Required(path.Child("requeue", "after"), "a non-negative duration"))
		case after.CheckValid() != nil || after.AsDuration() < 0:
			*errs = append(*errs, field.Invalid(path.Child("requeue", "after"), after.String(), "must be a non-negative duration"))
		}
		return Requeue{Because: because, After: max(after.AsDuration(), time.Duration(0))}
	default:
		*errs = append(*errs, field.Required(path.Child("kind"), "one of createPods, deletePods, removeFinalizers, writeStatus, recordEvent, requeue"))
		return nil
	}
}

func podRefsFromProto(refs []*jobplanev1.PodRef, path *field.Path, errs *field.ErrorList) []PodRef {
	out := make([]PodRef, len(refs))
	for i, r := range refs {
		if r.GetName() == "" {
			*errs = append(*errs, field.Required(path.Child("pods").Index(i).Child("name"), ""))
		}
		if r.GetUid() == "" {
			*errs = append(*errs, field.Required(path.Child("pods").Index(i).Child("uid"), ""))
		}
		out[i] = PodRef{Name: r.GetName(), UID: types.UID(r.GetUid()), CompletionIndex: r.CompletionIndex}
	}
	return out
}
