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
	"k8s.io/apimachinery/pkg/util/validation/field"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/jobvalidation"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/planner/internal/engine"
	"github.com/jobplane/jobplane/services/planner/internal/validation"
)

// snapshotFromRequest checks a PlanSync request, whose pods are pods, and
// converts it for the engine, with the API server's defaults applied to the
// Job.
func snapshotFromRequest(req *jobplanev1.PlanSyncRequest, pods []*corev1.Pod) (*engine.Snapshot, error) {
	if err := apierr.Invalid("invalid PlanSync snapshot", validation.Snapshot(req, pods)); err != nil {
		return nil, err
	}
	job, err := jobFromProto(req.GetJob())
	if err != nil {
		return nil, invalidTemplateSpec("invalid PlanSync snapshot", field.NewPath("job"), err)
	}
	return engineSnapshot(job, pods, req), nil
}

// convertPods converts pods for the sync: together (one array, parts in
// chunks), or each alone.
func convertPods(pods []*jobplanev1.Pod, together bool) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	if !together {
		c := podConverter(1)
		for i, p := range pods {
			out[i] = &corev1.Pod{}
			c.IntoKube(p, out[i])
		}
		return out
	}
	slab, c := make([]corev1.Pod, len(pods)), podConverter(len(pods))
	for i, p := range pods {
		c.IntoKube(p, &slab[i])
		out[i] = &slab[i]
	}
	return out
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

// baseFromRequest checks a full snapshot of a stream, its pods converted,
// and makes it the base of later deltas.
// sent is the request's encoded size.
func baseFromRequest(id string, req *jobplanev1.PlanSyncRequest, pods []*corev1.Pod, annotations []engine.PodAnnotations, sent int64) (*baseSnapshot, error) {
	if err := apierr.Invalid("invalid PlanSync snapshot", validation.Snapshot(req, pods)); err != nil {
		return nil, err
	}
	job, err := jobFromProto(req.GetJob())
	if err != nil {
		return nil, invalidTemplateSpec("invalid PlanSync snapshot", field.NewPath("job"), err)
	}
	n := len(pods)
	b := &baseSnapshot{
		jobUID:    req.GetJob().GetMetadata().GetUid(),
		id:        id,
		sent:      sent,
		allocated: len(pods),
		jobSent:   int64(req.GetJob().SizeVT()),
		jobProto:  req.GetJob(),
		job:       job,
		order:     make([]*slot, n),
		index:     make(map[string]*slot, n),
		finalizer: cmp.Or(req.GetTrackingFinalizer(), engine.DefaultTrackingFinalizer),
	}
	slots := make([]slot, n)
	for i, p := range pods {
		slots[i] = newSlot(p, annotationsAt(annotations, i, p), b.finalizer)
		b.order[i] = &slots[i]
		b.index[string(p.UID)] = &slots[i]
	}
	b.reorder(false, nil, true)
	return b, nil
}

// applyDelta takes the stream's snapshot the delta is based on, checks the
// delta (its upserted pods converted) against it and applies it. The base
// is out of the store until planned: any error drops it (dispose). sizes
// are the upserted pods' encoded sizes. together: the pods were decoded
// together, views of the request's sent bytes, and stay with the base
// (the caller hands it their array), not each alone.
func applyDelta(bases *streamSnapshots, id string, d *jobplanev1.PlanSyncDelta, upserted []*corev1.Pod, annotations []engine.PodAnnotations, sizes []int64, together bool, sent int64) (*baseSnapshot, error) {
	b := bases.take(d.GetJobUid())
	if b == nil || b.id != d.GetBaseId() || d.GetBaseId() == "" {
		b.dispose()
		return nil, apierr.New(codes.FailedPrecondition, "SNAPSHOT_BASE_UNKNOWN",
			map[string]string{"jobUid": d.GetJobUid(), "baseId": d.GetBaseId()},
			"the planner holds no snapshot %q of Job %q on this stream: send the snapshot in full", d.GetBaseId(), d.GetJobUid())
	}
	base := validation.Base{Job: b.jobProto, Pods: len(b.order), Holds: func(uid string) bool { _, ok := b.index[uid]; return ok }}
	if err := apierr.Invalid("invalid PlanSync delta", validation.Delta(d, upserted, base)); err != nil {
		b.dispose()
		return nil, err
	}
	if d.GetJob() != nil {
		job, err := jobFromProto(d.GetJob())
		if err != nil {
			b.dispose()
			return nil, invalidTemplateSpec("invalid PlanSync delta", field.NewPath("delta", "job"), err)
		}
		b.job, b.jobProto, b.jobSent = job, d.GetJob(), int64(d.GetJob().SizeVT())
	}
	for _, uid := range d.GetRemovedPodUids() {
		s := b.index[uid]
		*s.pod = corev1.Pod{} // a pod of an array lives as long as the array
		s.removed = true
		b.forget(s)
		delete(b.index, uid)
	}
	b.setFinalizer(d.GetTrackingFinalizer())
	var added []*slot
	renamed := false
	for i, pod := range upserted {
		upsert := newSlot(pod, annotationsAt(annotations, i, pod), b.finalizer)
		if !together {
			upsert.alone, upsert.sent = true, sizes[i]
			b.sent += upsert.sent
			b.allocated++
		}
		if s, ok := b.index[string(pod.UID)]; ok {
			renamed = renamed || s.pod.Name != pod.Name
			b.forget(s)
			*s.pod = corev1.Pod{}
			*s = upsert
			continue
		}
		s := &upsert
		b.index[string(pod.UID)] = s
		added = append(added, s)
	}
	if together {
		b.sent += sent
		b.allocated += len(upserted)
	}
	b.reorder(len(d.GetRemovedPodUids()) > 0, added, renamed)
	b.id = id
	return b, nil
}

// forget takes what s's pod weighs off b, its pod gone: a pod decoded
// alone is freed, one of the full request's array stays with the array.
func (b *baseSnapshot) forget(s *slot) {
	if s.alone {
		b.sent -= s.sent
		b.allocated--
	}
}

// annotationsAt are the annotations a sync reads of pods[i], p: from
// annotations when the pods were decoded without them, else from p's map.
func annotationsAt(annotations []engine.PodAnnotations, i int, p *corev1.Pod) engine.PodAnnotations {
	if annotations == nil {
		return engine.AnnotationsOf(p)
	}
	return annotations[i]
}

// views are the engine's views of pods, decoded without their annotations.
func views(pods []*corev1.Pod, annotations []engine.PodAnnotations, finalizer string) []engine.PodView {
	out := make([]engine.PodView, len(pods))
	for i, p := range pods {
		out[i] = engine.ViewWith(p, finalizer, annotations[i])
	}
	return out
}

// podConverter converts the pods of a request, n at a time in chunks,
// for the sync: it reads no pod's spec.containers.
func podConverter(n int) *kubeconv.KubePodConverter {
	c := kubeconv.NewKubePodConverter(n)
	c.SkipContainers = true
	return c
}

// slabs recycles the arrays of pods of snapshots: a corev1.Pod is large
// (1.2 KB), a new array of thousands is paged in and zeroed, and a plan
// keeps no reference to the pods it was computed from.
var slabs sync.Pool

// podSlab returns room for n pods, from the pool when an array there fits
// (large enough, and at most twice as large: a stream's base keeps its
// array as long as it lives), and the function that gives it back.
func podSlab(n int) ([]corev1.Pod, func()) {
	if n == 0 {
		return nil, func() {}
	}
	slab, ok := slabs.Get().(*[]corev1.Pod)
	if ok && (cap(*slab) < n || cap(*slab) > 2*n) {
		slabs.Put(slab)
		ok = false
	}
	if !ok {
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

// invalidTemplateSpec answers a Job at jobPath whose pod template spec does
// not convert to a pod spec.
func invalidTemplateSpec(summary string, jobPath *field.Path, err error) error {
	return apierr.Invalid(summary, field.ErrorList{field.Invalid(jobPath.Child("spec", "template", "spec"), field.OmitValueType{}, err.Error())})
}
