package svc

import (
	"slices"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/plan"
)

// Bounds of the events a caller's plan records: events.k8s.io's, which the
// recorder would otherwise keep (in its queue and its correlation cache,
// keyed by message) at any size.
const (
	maxEventReasonLength  = 128
	maxEventMessageLength = 1024
)

// otherFinishedReason counts a finished reason outside the reference's.
const otherFinishedReason = "Other"

// The label values of the reference's Job metrics a plan may name. The
// executor keeps every series it is given for its lifetime, so a caller's
// plan keeps to these.
var (
	metricCompletionModes = []string{"", string(batchv1.NonIndexedCompletion), string(batchv1.IndexedCompletion)}
	metricSyncActions     = []string{"", plan.SyncActionReconciling, plan.SyncActionTracking, plan.SyncActionPodsCreated, plan.SyncActionPodsDeleted}
	metricFinishedResults = []string{"", "succeeded", "failed"}
	metricFinishedReasons = []string{"", batchv1.JobReasonCompletionsReached, batchv1.JobReasonSuccessPolicy, batchv1.JobReasonBackoffLimitExceeded,
		batchv1.JobReasonDeadlineExceeded, batchv1.JobReasonPodFailurePolicy, batchv1.JobReasonFailedIndexes, batchv1.JobReasonMaxFailedIndexesExceeded}
	metricBackoffLimits = []string{"", "perIndex", "global"}
	metricPolicyActions = []string{string(batchv1.PodFailurePolicyActionFailJob), string(batchv1.PodFailurePolicyActionIgnore), string(batchv1.PodFailurePolicyActionCount), string(batchv1.PodFailurePolicyActionFailIndex)}
	podCreationReasons  = []string{"", plan.PodCreateNew, plan.PodRecreateTerminatingOrFailed, plan.PodRecreateFailed}
)

// callerPlanErrors checks what a plan from a caller (Execute) could use to
// make the executor keep or do more than the plan's Job warrants, beyond
// what plan.FromProto checks for every plan: a pod named twice in one
// action (a goroutine and a live read each), metric labels outside the
// reference's, negative counts, a backoff record the planner would refuse
// on every later sync of the Job. What a plan copies from the Job's
// conditions, which may hold anything, is cut to size instead
// (trimCallerPlan).
func callerPlanErrors(p *jobplanev1.SyncPlan, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, a := range p.GetActions() {
		actionPath := path.Child("actions").Index(i)
		switch k := a.GetKind().(type) {
		case *jobplanev1.Action_CreatePods:
			oneOf(&errs, actionPath.Child("createPods", "creationReason"), k.CreatePods.GetCreationReason(), podCreationReasons)
		case *jobplanev1.Action_DeletePods:
			distinctPods(&errs, actionPath.Child("deletePods", "pods"), k.DeletePods.GetPods())
		case *jobplanev1.Action_RemoveFinalizers:
			distinctPods(&errs, actionPath.Child("removeFinalizers", "pods"), k.RemoveFinalizers.GetPods())
		case *jobplanev1.Action_WriteStatus:
			backoffRecordErrors(&errs, actionPath.Child("writeStatus", "backoffRecord"), k.WriteStatus.GetBackoffRecord())
		}
	}
	m, metricsPath := p.GetMetrics(), path.Child("metrics")
	oneOf(&errs, metricsPath.Child("completionMode"), m.GetCompletionMode(), metricCompletionModes)
	oneOf(&errs, metricsPath.Child("syncAction"), m.GetSyncAction(), metricSyncActions)
	oneOf(&errs, metricsPath.Child("finishedResult"), m.GetFinishedResult(), metricFinishedResults)
	oneOf(&errs, metricsPath.Child("backoffLimit"), m.GetBackoffLimit(), metricBackoffLimits)
	for action, n := range m.GetPodFailuresByPolicyAction() {
		actionPath := metricsPath.Child("podFailuresByPolicyAction").Key(action)
		if !slices.Contains(metricPolicyActions, action) {
			errs = append(errs, field.NotSupported(actionPath, action, metricPolicyActions))
		}
		nonNegative(&errs, actionPath, n)
	}
	nonNegative(&errs, metricsPath.Child("podsSucceeded"), m.GetPodsSucceeded())
	nonNegative(&errs, metricsPath.Child("podsFailed"), m.GetPodsFailed())
	nonNegative(&errs, metricsPath.Child("indexesSucceeded"), m.GetIndexesSucceeded())
	nonNegative(&errs, metricsPath.Child("indexesFailed"), m.GetIndexesFailed())
	return errs
}

// trimCallerPlan cuts what a caller's plan copies from the Job's
// conditions (a failure's reason and message, which the API server does not
// bound) to what the executor keeps: its events to events.k8s.io's sizes,
// its finished reason to the reference's or Other.
func trimCallerPlan(p *plan.Plan) {
	for i, a := range p.Actions {
		if e, ok := a.(plan.RecordEvent); ok {
			e.Reason, e.Message = truncated(e.Reason, maxEventReasonLength), truncated(e.Message, maxEventMessageLength)
			p.Actions[i] = e
		}
	}
	if !slices.Contains(metricFinishedReasons, p.Metrics.FinishedReason) {
		p.Metrics.FinishedReason = otherFinishedReason
	}
}

// truncated is s cut to at most n bytes, on a character's boundary.
func truncated(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func oneOf(errs *field.ErrorList, path *field.Path, value string, supported []string) {
	if !slices.Contains(supported, value) {
		*errs = append(*errs, field.NotSupported(path, value, supported))
	}
}

func nonNegative(errs *field.ErrorList, path *field.Path, n int32) {
	if n < 0 {
		*errs = append(*errs, field.Invalid(path, n, "must be greater than or equal to 0"))
	}
}

// distinctPods refuses a pod named twice in one action.
func distinctPods(errs *field.ErrorList, path *field.Path, refs []*jobplanev1.PodRef) {
	seen := make(map[string]bool, len(refs))
	for j, r := range refs {
		if seen[r.GetName()] {
			*errs = append(*errs, field.Duplicate(path.Index(j).Child("name"), r.GetName()))
		}
		seen[r.GetName()] = true
	}
}

// backoffRecordErrors refuses a record the planner would refuse in every
// snapshot of the Job after it: failures counted without a valid time.
func backoffRecordErrors(errs *field.ErrorList, path *field.Path, b *jobplanev1.BackoffRecord) {
	if b == nil {
		return
	}
	nonNegative(errs, path.Child("failuresAfterLastSuccess"), b.GetFailuresAfterLastSuccess())
	switch t := b.GetLastFailureTime(); {
	case t == nil && b.GetFailuresAfterLastSuccess() > 0:
		*errs = append(*errs, field.Required(path.Child("lastFailureTime"), "when failures are counted"))
	case t != nil && t.CheckValid() != nil:
		*errs = append(*errs, field.Invalid(path.Child("lastFailureTime"), field.OmitValueType{}, t.CheckValid().Error()))
	}
}
