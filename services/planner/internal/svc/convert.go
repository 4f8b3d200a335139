package svc

import (
	"cmp"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/jobvalidation"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/planner/internal/engine"
	"github.com/jobplane/jobplane/services/planner/internal/validation"
)

// snapshotFromRequest converts a checked PlanSync request for the engine,
// with the API server's defaults applied to the Job; release recycles the
// snapshot's pods once the plan is converted.
func snapshotFromRequest(req *jobplanev1.PlanSyncRequest) (s *engine.Snapshot, release func(), err error) {
	job, err := jobFromProto(req.GetJob())
	if err != nil {
		return nil, nil, err
	}
	pods := make([]*corev1.Pod, len(req.GetPods()))
	slab, release := podSlab(len(req.GetPods()))
	c := podConverter(len(pods))
	for i, p := range req.GetPods() {
		c.IntoKube(p, &slab[i])
		pods[i] = &slab[i]
	}
	return engineSnapshot(job, pods, req), release, nil
}

// jobFromProto converts a checked Job for the engine, with the API server's
// defaults applied.
func jobFromProto(j *jobplanev1.Job) (*batchv1.Job, error) {
	// The sync semantics read nothing of the pod spec but restartPolicy.
	job, err := kubeconv.JobToKube(j, kubeconv.RestartPolicyOnly)
	if err != nil {
		return nil, err
	}
	jobvalidation.DefaultJob(job)
	return job, nil
}

// engineSnapshot is the engine's snapshot of the Job, its pods and the
// checked fields of the sync.
func engineSnapshot(job *batchv1.Job, pods []*corev1.Pod, req validation.SyncFields) *engine.Snapshot {
	s := &engine.Snapshot{
		Job:               job,
		Pods:              pods,
		Now:               req.GetNow().AsTime(),
		TrackingFinalizer: req.GetTrackingFinalizer(),
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
	return s
}

// baseFromRequest checks and converts a full snapshot of a stream into the
// base of later deltas; its pods are its own, not recycled.
func baseFromRequest(id string, req *jobplanev1.PlanSyncRequest) (*baseSnapshot, error) {
	if err := validation.Snapshot(req).Err("invalid PlanSync snapshot"); err != nil {
		return nil, err
	}
	job, err := jobFromProto(req.GetJob())
	if err != nil {
		return nil, apierr.InvalidArgument("invalid PlanSync snapshot", apierr.Violation{Field: "job.spec.template.spec", Description: err.Error()})
	}
	n := len(req.GetPods())
	b := &baseSnapshot{
		jobUID:    req.GetJob().GetMetadata().GetUid(),
		id:        id,
		jobProto:  req.GetJob(),
		job:       job,
		order:     make([]*slot, n),
		index:     make(map[string]*slot, n),
		finalizer: cmp.Or(req.GetTrackingFinalizer(), engine.DefaultTrackingFinalizer),
	}
	pods, slots := make([]corev1.Pod, n), make([]slot, n)
	c := podConverter(n)
	for i, p := range req.GetPods() {
		c.IntoKube(p, &pods[i])
		slots[i] = slot{pod: &pods[i], view: engine.View(&pods[i], b.finalizer)}
		b.order[i] = &slots[i]
		b.index[p.GetMetadata().GetUid()] = &slots[i]
	}
	b.reorder(false, nil, true)
	return b, nil
}

// applyDelta takes the stream's snapshot the delta is based on, checks the
// delta against it and applies it, converting only the Job (when given) and
// the upserted pods. The base is out of the store until planned: any error
// drops it.
func applyDelta(bases *streamSnapshots, id string, d *jobplanev1.PlanSyncDelta) (*baseSnapshot, error) {
	b := bases.take(d.GetJobUid())
	if b == nil || b.id != d.GetBaseId() || d.GetBaseId() == "" {
		return nil, apierr.New(codes.FailedPrecondition, "SNAPSHOT_BASE_UNKNOWN",
			map[string]string{"jobUid": d.GetJobUid(), "baseId": d.GetBaseId()},
			"the planner holds no snapshot %q of Job %q on this stream: send the snapshot in full", d.GetBaseId(), d.GetJobUid())
	}
	base := validation.Base{Job: b.jobProto, Pods: len(b.order), Holds: func(uid string) bool { _, ok := b.index[uid]; return ok }}
	if err := validation.Delta(d, base).Err("invalid PlanSync delta"); err != nil {
		return nil, err
	}
	if d.GetJob() != nil {
		job, err := jobFromProto(d.GetJob())
		if err != nil {
			return nil, apierr.InvalidArgument("invalid PlanSync delta", apierr.Violation{Field: "delta.job.spec.template.spec", Description: err.Error()})
		}
		b.job, b.jobProto = job, d.GetJob()
	}
	for _, uid := range d.GetRemovedPodUids() {
		s := b.index[uid]
		*s.pod = corev1.Pod{} // a pod of a slab lives as long as the slab
		s.removed = true
		delete(b.index, uid)
	}
	b.setFinalizer(d.GetTrackingFinalizer())
	var added []*slot
	renamed := false
	// A delta's pods are kept alone: parts in chunks would keep each
	// other alive in the base as long as any of them is.
	c := podConverter(1)
	for _, p := range d.GetUpsertedPods() {
		uid := p.GetMetadata().GetUid()
		if s, ok := b.index[uid]; ok {
			renamed = renamed || s.pod.Name != p.GetMetadata().GetName()
			c.IntoKube(p, s.pod)
			s.view = engine.View(s.pod, b.finalizer)
			continue
		}
		pod := &corev1.Pod{}
		c.IntoKube(p, pod)
		s := &slot{pod: pod, view: engine.View(pod, b.finalizer)}
		b.index[uid] = s
		added = append(added, s)
	}
	b.reorder(len(d.GetRemovedPodUids()) > 0, added, renamed)
	b.id = id
	return b, nil
}

// podConverter converts the pods of a request, n at a time in chunks,
// for the sync: it reads no pod's spec.containers.
func podConverter(n int) *kubeconv.KubePodConverter {
	c := kubeconv.NewKubePodConverter(n)
	c.SkipContainers = true
	return c
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
