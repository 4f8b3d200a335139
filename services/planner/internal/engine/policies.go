package engine

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// failurePolicyMatch is what the pod failure policy says of a failed pod.
type failurePolicyMatch struct {
	// failJobMessage is set when a FailJob rule matched.
	failJobMessage *string
	// countFailed is false when an Ignore rule matched.
	countFailed bool
	// action is the matched rule's action; nil when no rule matched.
	action *batchv1.PodFailurePolicyAction
}

// matchPodFailurePolicy applies the rules in order; the first that matches
// decides.
func matchPodFailurePolicy(policy *batchv1.PodFailurePolicy, pod *corev1.Pod) failurePolicyMatch {
	if policy == nil {
		return failurePolicyMatch{countFailed: true}
	}
	for i := range policy.Rules {
		rule := &policy.Rules[i]
		var matched bool
		var failJobMessage string
		if rule.OnExitCodes != nil {
			if cs := matchOnExitCodes(&pod.Status, rule.OnExitCodes); cs != nil {
				matched = true
				failJobMessage = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
					cs.Name, pod.Namespace, pod.Name, cs.State.Terminated.ExitCode, rule.Action, i)
			}
		} else if rule.OnPodConditions != nil {
			if c := matchOnPodConditions(&pod.Status, rule.OnPodConditions); c != nil {
				matched = true
				failJobMessage = fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d",
					pod.Namespace, pod.Name, c.Type, rule.Action, i)
			}
		}
		if !matched {
			continue
		}
		action := rule.Action
		switch action {
		case batchv1.PodFailurePolicyActionIgnore:
			return failurePolicyMatch{countFailed: false, action: &action}
		case batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyActionCount:
			return failurePolicyMatch{countFailed: true, action: &action}
		case batchv1.PodFailurePolicyActionFailJob:
			return failurePolicyMatch{failJobMessage: &failJobMessage, countFailed: true, action: &action}
		}
		// An unknown action matches nothing; the next rule is tried.
	}
	return failurePolicyMatch{countFailed: true}
}

// matchOnExitCodes returns the first terminated container (regular ones
// first, then init containers) whose non-zero exit code meets the requirement.
func matchOnExitCodes(status *corev1.PodStatus, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	if cs := matchingContainer(status.ContainerStatuses, req); cs != nil {
		return cs
	}
	return matchingContainer(status.InitContainerStatuses, req)
}

func matchingContainer(statuses []corev1.ContainerStatus, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	for i := range statuses {
		cs := &statuses[i]
		if cs.State.Terminated == nil {
			continue
		}
		if req.ContainerName != nil && *req.ContainerName != cs.Name {
			continue
		}
		code := cs.State.Terminated.ExitCode
		if code == 0 {
			continue
		}
		switch req.Operator {
		case batchv1.PodFailurePolicyOnExitCodesOpIn:
			if slices.Contains(req.Values, code) {
				return cs
			}
		case batchv1.PodFailurePolicyOnExitCodesOpNotIn:
			if !slices.Contains(req.Values, code) {
				return cs
			}
		}
	}
	return nil
}

// matchOnPodConditions returns the first pod condition matching a pattern.
func matchOnPodConditions(status *corev1.PodStatus, patterns []batchv1.PodFailurePolicyOnPodConditionsPattern) *corev1.PodCondition {
	for i := range status.Conditions {
		c := &status.Conditions[i]
		for _, p := range patterns {
			if c.Type == p.Type && c.Status == p.Status {
				return c
			}
		}
	}
	return nil
}

// matchSuccessPolicy returns the message of the first rule the succeeded
// indexes meet.
func matchSuccessPolicy(policy *batchv1.SuccessPolicy, completions int32, succeeded orderedIntervals) (string, bool) {
	if policy == nil || len(succeeded) == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		if rule.SucceededIndexes != nil {
			required := parseIndexes(*rule.SucceededIndexes, int(completions))
			if len(required) == 0 {
				continue
			}
			if matchSucceededIndexesRule(required, succeeded, rule.SucceededCount) {
				return fmt.Sprintf("Matched rules at index %d", i), true
			}
		} else if rule.SucceededCount != nil && succeeded.total() >= int(*rule.SucceededCount) {
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}

// matchSucceededIndexesRule: all required indexes succeeded, or at least
// succeededCount of them.
func matchSucceededIndexesRule(required, succeeded orderedIntervals, succeededCount *int32) bool {
	var contains, s, r int
	for r < len(required) && s < len(succeeded) {
		if overlap := min(required[r].Last, succeeded[s].Last) - max(required[r].First, succeeded[s].First) + 1; overlap > 0 {
			contains += overlap
		}
		switch {
		case succeeded[s].Last < required[r].Last:
			s++
		case succeeded[s].Last > required[r].Last:
			r++
		default:
			s++
			r++
		}
	}
	return contains == required.total() || (succeededCount != nil && contains >= int(*succeededCount))
}

// Pod failure backoff bounds of the reference.
const (
	DefaultPodFailureBackoff = 10 * time.Second
	MaxPodFailureBackoff     = 10 * time.Minute
)

// PodFailureBackoff is the delay before pods replace failed ones: Initial
// after the first failure, doubled with each further one up to Max. Zero
// fields are the reference's (DefaultPodFailureBackoff,
// MaxPodFailureBackoff); its integration tests shorten them, as a planner
// flag does here.
type PodFailureBackoff struct {
	Initial, Max time.Duration
}

// nextBackoffRecord folds the newly finished pods into the record.
func nextBackoffRecord(old BackoffRecord, newSucceeded, newFailed []*pod) BackoffRecord {
	rec := old
	sortByFinishedTime(newSucceeded)
	sortByFinishedTime(newFailed)
	if len(newSucceeded) == 0 {
		if len(newFailed) == 0 {
			return rec
		}
		rec.FailuresAfterLastSuccess += int32(len(newFailed))
		t := finishedTime(newFailed[len(newFailed)-1].Pod)
		rec.LastFailureTime = &t
		return rec
	}
	rec.FailuresAfterLastSuccess = 0
	rec.LastFailureTime = nil
	lastSuccess := finishedTime(newSucceeded[len(newSucceeded)-1].Pod)
	for i := len(newFailed) - 1; i >= 0; i-- {
		failed := finishedTime(newFailed[i].Pod)
		if !failed.After(lastSuccess) {
			break
		}
		if rec.LastFailureTime == nil {
			rec.LastFailureTime = &failed
		}
		rec.FailuresAfterLastSuccess++
	}
	return rec
}

// remaining is how long to wait before creating pods after failuresCount
// failures, the last at lastFailure: min(initial*2^(n-1), max) since the
// last failure (10 s and 10 min by default).
func (b PodFailureBackoff) remaining(now time.Time, failuresCount int32, lastFailure *time.Time) time.Duration {
	if failuresCount == 0 || lastFailure == nil {
		return 0
	}
	limit := cmp.Or(b.Max, MaxPodFailureBackoff)
	backoff := min(cmp.Or(b.Initial, DefaultPodFailureBackoff), limit)
	for i := 1; i < int(failuresCount); i++ {
		backoff *= 2
		if backoff >= limit {
			backoff = limit
			break
		}
	}
	elapsed := now.Sub(*lastFailure)
	if backoff < elapsed {
		return 0
	}
	return backoff - elapsed
}

// remainingForIndex is the wait before replacing lastFailedPod in its
// index, counting every failure of the index so far.
func (b PodFailureBackoff) remainingForIndex(now time.Time, lastFailedPod *corev1.Pod) time.Duration {
	if lastFailedPod == nil {
		return 0
	}
	t := finishedTime(lastFailedPod)
	return b.remaining(now, indexAbsoluteFailureCount(lastFailedPod)+1, &t)
}
