package svc

import (
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/jobvalidation"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/planner/internal/engine"
)

// snapshotFromRequest converts a checked PlanSync request for the engine,
// with the API server's defaults applied to the Job; release recycles the
// snapshot's pods once the plan is converted.
func snapshotFromRequest(req *jobplanev1.PlanSyncRequest) (s *engine.Snapshot, release func(), err error) {
	// The sync semantics read nothing of the pod spec but restartPolicy.
	job, err := kubeconv.JobToKube(req.GetJob(), kubeconv.RestartPolicyOnly)
	if err != nil {
		return nil, nil, err
	}
	jobvalidation.DefaultJob(job)
	s = &engine.Snapshot{
		Job:               job,
		Pods:              make([]*corev1.Pod, len(req.GetPods())),
		Now:               req.GetNow().AsTime(),
		TrackingFinalizer: req.GetTrackingFinalizer(),
	}
	slab, release := podSlab(len(req.GetPods()))
	for i, p := range req.GetPods() {
		kubeconv.PodIntoKube(p, &slab[i])
		s.Pods[i] = &slab[i]
	}
	if e := req.GetExpectations(); e != nil {
		s.Expectations = engine.Expectations{
			PendingCreations: e.GetPendingCreations(),
			PendingDeletions: e.GetPendingDeletions(),
			RecordedAt:       timeOrZero(e.GetRecordedAt()),
		}
	}
	for _, uid := range req.GetFinalizerRemovalsInFlight() {
		s.FinalizerRemovalsInFlight = append(s.FinalizerRemovalsInFlight, types.UID(uid))
	}
	s.Backoff = plan.BackoffRecordFromProto(req.GetBackoffRecord())
	return s, release, nil
}

// slabs recycles the pods of snapshots: a corev1.Pod is large, and a plan
// keeps no reference to the pods it was computed from.
var slabs sync.Pool

// podSlab returns room for n pods, from the pool when one is large enough,
// and the function that gives it back.
func podSlab(n int) ([]corev1.Pod, func()) {
	slab, ok := slabs.Get().(*[]corev1.Pod)
	if !ok || cap(*slab) < n {
		s := make([]corev1.Pod, n)
		slab = &s
	}
	pods := (*slab)[:n]
	return pods, func() {
		clear(pods) // the pool keeps no request alive
		slabs.Put(slab)
	}
}

func timeOrZero(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}
