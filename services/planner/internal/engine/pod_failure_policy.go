package engine

import (
	"fmt"
	"slices"

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
// decides. A FailIndex rule matches only when failIndex (the gate
// JobBackoffLimitPerIndex) is on; else the next rule is tried.
func matchPodFailurePolicy(policy *batchv1.PodFailurePolicy, pod *corev1.Pod, failIndex bool) failurePolicyMatch {
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
		case batchv1.PodFailurePolicyActionFailIndex:
			if failIndex {
				return failurePolicyMatch{countFailed: true, action: &action}
			}
		case batchv1.PodFailurePolicyActionCount:
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
