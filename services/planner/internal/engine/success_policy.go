package engine

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
)

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
