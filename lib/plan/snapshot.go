package plan

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/kubeconv"
)

// Snapshot is what one sync of a Job shows the planner, in Kubernetes
// types: sent in full (Request) or, on a StreamPlanSync stream, as a delta
// against the last snapshot of the Job the planner holds (Delta).
type Snapshot struct {
	Job       *batchv1.Job
	Pods      []*corev1.Pod
	State     State
	Now       time.Time
	Finalizer string
}

// Request is the snapshot in full.
func (s *Snapshot) Request() *jobplanev1.PlanSyncRequest {
	return NewRequest(s.Job, s.Pods, s.State, s.Now, s.Finalizer)
}

// Sent is what a client remembers of a snapshot of a Job the planner
// planned on a stream, to send the next one as a delta: the request's id,
// the Job's resourceVersion and each pod's by UID.
type Sent struct {
	// ID is the id of the request that carried the snapshot.
	ID string
	// JobResourceVersion is the Job's; empty: the Job is always resent.
	JobResourceVersion string
	pods               map[types.UID]sentPod
	mark               uint64
}

type sentPod struct {
	resourceVersion string
	mark            uint64
}

// Pods is the number of pods of the snapshot.
func (b *Sent) Pods() int { return len(b.pods) }

// Record is what a client remembers of s sent in full as request id.
func (s *Snapshot) Record(id string) *Sent {
	b := &Sent{ID: id, JobResourceVersion: s.Job.ResourceVersion, pods: make(map[types.UID]sentPod, len(s.Pods))}
	for _, p := range s.Pods {
		b.pods[p.UID] = sentPod{resourceVersion: p.ResourceVersion}
	}
	return b
}

// Delta is s as a delta against base, a snapshot of the same Job: the Job
// when its resourceVersion changed, the pods new or whose resourceVersion
// changed (a pod or Job without one counts as changed), the UIDs of the pods
// gone; only these are converted. Base is updated to describe s, but for its
// ID, which the caller sets to the delta's request id once the planner
// planned it; the caller forgets base if the planner did not.
func (s *Snapshot) Delta(base *Sent) *jobplanev1.PlanSyncDelta {
	d, upserted := s.delta(base)
	c := newPodConverter(len(upserted))
	for _, p := range upserted {
		d.UpsertedPods = append(d.UpsertedPods, c.FromKube(p))
	}
	return d
}

// delta is Delta without its upserted pods, and those pods.
func (s *Snapshot) delta(base *Sent) (*jobplanev1.PlanSyncDelta, []*corev1.Pod) {
	d := s.syncFields()
	d.BaseId, d.JobUid = base.ID, string(s.Job.UID)
	if rv := s.Job.ResourceVersion; rv == "" || rv != base.JobResourceVersion {
		d.Job = kubeconv.JobForSyncFromKube(s.Job)
		base.JobResourceVersion = rv
	}
	base.mark++
	mark := base.mark
	var upserted []*corev1.Pod
	for _, p := range s.Pods {
		old, ok := base.pods[p.UID]
		if !ok || p.ResourceVersion == "" || p.ResourceVersion != old.resourceVersion {
			upserted = append(upserted, p)
		}
		base.pods[p.UID] = sentPod{resourceVersion: p.ResourceVersion, mark: mark}
	}
	if len(base.pods) > len(s.Pods) {
		for uid, p := range base.pods {
			if p.mark != mark {
				d.RemovedPodUids = append(d.RemovedPodUids, string(uid))
				delete(base.pods, uid)
			}
		}
	}
	return d, upserted
}

// syncFields is a delta of s with only the fields of the sync set.
func (s *Snapshot) syncFields() *jobplanev1.PlanSyncDelta {
	d := &jobplanev1.PlanSyncDelta{Now: timestamppb.New(s.Now), TrackingFinalizer: s.Finalizer}
	d.Expectations, d.BackoffRecord, d.FinalizerRemovalsInFlight = stateToProto(s.State)
	return d
}

// stateToProto is the executor's state as the request carries it.
func stateToProto(state State) (*jobplanev1.Expectations, *jobplanev1.BackoffRecord, []string) {
	var e *jobplanev1.Expectations
	if x := state.Expectations; x.PendingCreations != 0 || x.PendingDeletions != 0 {
		e = &jobplanev1.Expectations{PendingCreations: x.PendingCreations, PendingDeletions: x.PendingDeletions}
		if !x.RecordedAt.IsZero() {
			e.RecordedAt = timestamppb.New(x.RecordedAt)
		}
	}
	var b *jobplanev1.BackoffRecord
	if state.Backoff != nil {
		b = BackoffRecordToProto(state.Backoff)
	}
	var uids []string
	for _, uid := range state.FinalizerRemovalsInFlight {
		uids = append(uids, string(uid))
	}
	return e, b, uids
}
