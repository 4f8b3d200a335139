package engine

import "github.com/jobplane/jobplane/lib/featuregates"

// Features are the reference's feature gates a sync follows; the zero value
// is v1.36's (all on).
type Features = featuregates.Features

// delayTerminalCondition: the Job's Failed or Complete condition waits for
// its pods to terminate, behind FailureTarget or SuccessCriteriaMet (the
// reference's delayTerminalCondition).
func delayTerminalCondition(f Features) bool {
	return !f.JobManagedByOff || !f.JobPodReplacementPolicyOff
}

// successCriteriaMetRead: the SuccessCriteriaMet condition is read and
// written (the gates of the reference's hasSuccessCriteriaMetCondition).
func successCriteriaMetRead(f Features) bool {
	return !f.JobSuccessPolicyOff || delayTerminalCondition(f)
}
