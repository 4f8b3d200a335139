package svc

import (
	"testing"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/planner/scalestate"
)

// scaledRequest is the PlanSync request of scalestate's Job of n pods after
// changes of them succeeded.
func scaledRequest(_ testing.TB, n, changes int) *jobplanev1.PlanSyncRequest {
	s, _ := scalestate.Changed(scalestate.New(n), changes)
	return plan.NewRequest(s.Job, s.Pods, plan.State{}, scalestate.Now, scalestate.Finalizer)
}
