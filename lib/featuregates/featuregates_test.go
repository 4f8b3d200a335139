package featuregates

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	f, err := Parse("JobSuccessPolicy=false, JobManagedBy=true,JobPodReplacementPolicy=false")
	if err != nil || f != (Features{JobSuccessPolicyOff: true, JobPodReplacementPolicyOff: true}) {
		t.Errorf("%+v, %v", f, err)
	}
	if f, err := Parse("MutableSchedulingDirectivesForSuspendedJobs=false"); err != nil || f != (Features{MutableSchedulingDirectivesForSuspendedJobsOff: true}) {
		t.Errorf("%+v, %v", f, err)
	}
	if f, err := Parse(""); err != nil || f != (Features{}) {
		t.Errorf("empty: %+v, %v", f, err)
	}
	for _, bad := range []string{"JobSuccessPolicy", "JobSuccessPolicy=maybe", "SidecarContainers=false"} {
		if _, err := Parse(bad); err == nil || !strings.Contains(err.Error(), strings.SplitN(bad, "=", 2)[0]) {
			t.Errorf("%q: %v, want an error naming it", bad, err)
		}
	}
}
