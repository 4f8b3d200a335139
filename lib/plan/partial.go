package plan

import (
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PartialCount is the status the reference writes when only some of a
// RemoveFinalizers action's removals succeeded: current (the status last
// written, or observed) with the uncounted pods whose finalizer is gone moved
// to the counters, and nothing else changed. counted is the status of the
// plan's next write, whose uncountedTerminatedPods are the pods the planner
// knew would keep their finalizer; failed are the removals that failed. A
// count is thereby never lost (a failed pod stays uncounted) and never doubled
// (a counted pod leaves the uncounted lists in the same write). ok is false
// when nothing would change.
func PartialCount(current batchv1.JobStatus, counted *batchv1.JobStatus, failed []types.UID) (status batchv1.JobStatus, ok bool) {
	u := current.UncountedTerminatedPods
	if u == nil || len(u.Succeeded)+len(u.Failed) == 0 {
		return current, false
	}
	keep := make(map[types.UID]bool, len(failed))
	for _, uid := range failed {
		keep[uid] = true
	}
	if c := counted.UncountedTerminatedPods; c != nil {
		for _, uid := range c.Succeeded {
			keep[uid] = true
		}
		for _, uid := range c.Failed {
			keep[uid] = true
		}
	}
	out := *current.DeepCopy()
	kept := func(uids []types.UID) []types.UID {
		return slices.DeleteFunc(uids, func(uid types.UID) bool { return !keep[uid] })
	}
	succeeded, failedUIDs := kept(out.UncountedTerminatedPods.Succeeded), kept(out.UncountedTerminatedPods.Failed)
	out.Succeeded += int32(len(u.Succeeded) - len(succeeded))
	out.Failed += int32(len(u.Failed) - len(failedUIDs))
	out.UncountedTerminatedPods.Succeeded, out.UncountedTerminatedPods.Failed = succeeded, failedUIDs
	return out, len(succeeded)+len(failedUIDs) != len(u.Succeeded)+len(u.Failed)
}
