package engine

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func newCondition(t batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) *batchv1.JobCondition {
	return &batchv1.JobCondition{
		Type:               t,
		Status:             status,
		LastProbeTime:      metav1.NewTime(now),
		LastTransitionTime: metav1.NewTime(now),
		Reason:             reason,
		Message:            message,
	}
}

func findCondition(list []batchv1.JobCondition, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range list {
		if list[i].Type == t {
			return &list[i]
		}
	}
	return nil
}

// trueCondition returns the condition of type t when its status is True.
func trueCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	if c := findCondition(j.Status.Conditions, t); c != nil && c.Status == corev1.ConditionTrue {
		return c
	}
	return nil
}

func isSuccessCriteriaMet(c *batchv1.JobCondition) bool {
	return c != nil && c.Type == batchv1.JobSuccessCriteriaMet && c.Status == corev1.ConditionTrue
}

// ensureJobConditionStatus sets the condition of type t, replacing it when
// status, reason or message differ; a condition absent and False is not
// added. It reports whether the list changed.
func ensureJobConditionStatus(list []batchv1.JobCondition, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string, now time.Time) ([]batchv1.JobCondition, bool) {
	if c := findCondition(list, t); c != nil {
		if c.Status != status || c.Reason != reason || c.Message != message {
			*c = *newCondition(t, status, reason, message, now)
			return list, true
		}
		return list, false
	}
	if status != corev1.ConditionFalse {
		return append(list, *newCondition(t, status, reason, message, now)), true
	}
	return list, false
}
