// Package featuregates holds the reference Job controller's feature gates
// that jobplane follows, as kube-controller-manager's --feature-gates names
// them: the planner plans with them, the executor in drop-in mode runs the
// Jobs they say.
package featuregates

import (
	"fmt"
	"strconv"
	"strings"
)

// Features are the reference's feature gates the Job controller reads. The
// Job controller of v1.36 has them all on (GA, locked to their default); a
// cluster emulating an older version (kube-controller-manager's
// --emulated-version, as the reference's integration tests do) may have
// some off, and jobplane follows (-feature-gates).
// MutableSchedulingDirectivesForSuspendedJobs (beta, on by default in
// v1.36, off before) clears a Job's start time when it is suspended.
// WorkloadWithJob (alpha, off by default) gives gang-schedulable Jobs their
// Workload and PodGroup. The zero value is v1.36's defaults.
type Features struct {
	JobBackoffLimitPerIndexOff                     bool
	JobManagedByOff                                bool
	JobPodReplacementPolicyOff                     bool
	JobSuccessPolicyOff                            bool
	MutableSchedulingDirectivesForSuspendedJobsOff bool
	WorkloadWithJob                                bool
}

// featureGates names the gates Features holds, as --feature-gates does.
var featureGates = []string{"JobBackoffLimitPerIndex", "JobManagedBy", "JobPodReplacementPolicy", "JobSuccessPolicy",
	"MutableSchedulingDirectivesForSuspendedJobs", "WorkloadWithJob"}

// ParseFeatureGates reads kube-controller-manager's --feature-gates syntax
// ("JobSuccessPolicy=false,JobManagedBy=true") for the gates the Job
// controller reads; another gate is an error naming those.
func Parse(s string) (Features, error) {
	var f Features
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, value, ok := strings.Cut(part, "=")
		if !ok {
			return Features{}, fmt.Errorf("feature gate %q: want Name=true or Name=false", part)
		}
		on, err := strconv.ParseBool(strings.TrimSpace(value))
		if err != nil {
			return Features{}, fmt.Errorf("feature gate %q: %q is not a boolean", name, value)
		}
		switch name = strings.TrimSpace(name); name {
		case "JobBackoffLimitPerIndex":
			f.JobBackoffLimitPerIndexOff = !on
		case "JobManagedBy":
			f.JobManagedByOff = !on
		case "JobPodReplacementPolicy":
			f.JobPodReplacementPolicyOff = !on
		case "JobSuccessPolicy":
			f.JobSuccessPolicyOff = !on
		case "MutableSchedulingDirectivesForSuspendedJobs":
			f.MutableSchedulingDirectivesForSuspendedJobsOff = !on
		case "WorkloadWithJob":
			f.WorkloadWithJob = on
		default:
			return Features{}, fmt.Errorf("feature gate %q: the Job controller reads only %s", name, strings.Join(featureGates, ", "))
		}
	}
	return f, nil
}
