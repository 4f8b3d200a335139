package svc

import (
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/services/planner/internal/engine"
	"github.com/jobplane/jobplane/services/planner/internal/validation"
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
	validation.DefaultJob(job)
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
	if b := req.GetBackoffRecord(); b != nil {
		s.Backoff = &engine.BackoffRecord{FailuresAfterLastSuccess: b.GetFailuresAfterLastSuccess()}
		if b.GetLastFailureTime() != nil {
			t := b.GetLastFailureTime().AsTime()
			s.Backoff.LastFailureTime = &t
		}
	}
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

// planToProto converts the engine's plan to the contract.
func planToProto(p *engine.Plan) *jobplanev1.SyncPlan {
	out := &jobplanev1.SyncPlan{
		Summary:         p.Summary,
		ReleaseJobState: p.ReleaseJobState,
		Metrics: &jobplanev1.SyncMetrics{
			CompletionMode:            p.Metrics.CompletionMode,
			SyncAction:                p.Metrics.SyncAction,
			PodFailuresByPolicyAction: p.Metrics.PodFailuresByPolicyAction,
			FinishedResult:            p.Metrics.FinishedResult,
			FinishedReason:            p.Metrics.FinishedReason,
			PodsSucceeded:             p.Metrics.PodsSucceeded,
			PodsFailed:                p.Metrics.PodsFailed,
			IndexesSucceeded:          p.Metrics.IndexesSucceeded,
			IndexesFailed:             p.Metrics.IndexesFailed,
			BackoffLimit:              p.Metrics.BackoffLimit,
		},
		Actions: make([]*jobplanev1.Action, len(p.Actions)),
	}
	for i, a := range p.Actions {
		out.Actions[i] = actionToProto(a)
	}
	return out
}

func actionToProto(a engine.Action) *jobplanev1.Action {
	reason, explanation := a.Why()
	out := &jobplanev1.Action{Reason: reason, Explanation: explanation}
	switch a := a.(type) {
	case engine.CreatePods:
		pods := make([]*jobplanev1.PodToCreate, len(a.Pods))
		for i, p := range a.Pods {
			pods[i] = &jobplanev1.PodToCreate{
				CompletionIndex: p.CompletionIndex,
				GenerateName:    p.GenerateName,
				Hostname:        p.Hostname,
				Labels:          p.Labels,
				Annotations:     p.Annotations,
				Finalizers:      p.Finalizers,
			}
			for _, e := range p.Env {
				pods[i].Env = append(pods[i].Env, &jobplanev1.EnvVarFromField{Name: e.Name, FieldPath: e.FieldPath})
			}
		}
		out.Kind = &jobplanev1.Action_CreatePods{CreatePods: &jobplanev1.CreatePodsAction{Pods: pods, CreationReason: a.CreationReason}}
	case engine.DeletePods:
		out.Kind = &jobplanev1.Action_DeletePods{DeletePods: &jobplanev1.DeletePodsAction{
			Pods:                    podRefsToProto(a.Pods),
			RemoveTrackingFinalizer: a.RemoveTrackingFinalizer,
			ExpectDeletions:         a.ExpectDeletions,
		}}
	case engine.RemoveFinalizers:
		out.Kind = &jobplanev1.Action_RemoveFinalizers{RemoveFinalizers: &jobplanev1.RemoveFinalizersAction{Pods: podRefsToProto(a.Pods)}}
	case engine.WriteStatus:
		ws := &jobplanev1.WriteStatusAction{Status: kubeconv.JobStatusFromKube(&a.Status)}
		if b := a.BackoffRecord; b != nil {
			ws.BackoffRecord = &jobplanev1.BackoffRecord{FailuresAfterLastSuccess: b.FailuresAfterLastSuccess}
			if b.LastFailureTime != nil {
				ws.BackoffRecord.LastFailureTime = timestamppb.New(*b.LastFailureTime)
			}
		}
		out.Kind = &jobplanev1.Action_WriteStatus{WriteStatus: ws}
	case engine.RecordEvent:
		out.Kind = &jobplanev1.Action_RecordEvent{RecordEvent: &jobplanev1.RecordEventAction{Type: a.Type, Reason: reason, Message: a.Message}}
	case engine.Requeue:
		out.Kind = &jobplanev1.Action_Requeue{Requeue: &jobplanev1.RequeueAction{After: durationpb.New(a.After)}}
	}
	return out
}

func podRefsToProto(refs []engine.PodRef) []*jobplanev1.PodRef {
	out := make([]*jobplanev1.PodRef, len(refs))
	for i, r := range refs {
		out[i] = &jobplanev1.PodRef{Name: r.Name, Uid: string(r.UID), CompletionIndex: r.CompletionIndex}
	}
	return out
}
