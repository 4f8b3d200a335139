package plan

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/kubeconv"
)

// NewRequest is the PlanSync request of one sync: the Job, the pods it
// controls, the executor's state and the time. Of the template's spec it
// carries restartPolicy alone, the only field the sync semantics read, which
// spares a JSON round trip of the whole PodSpec on every sync; of the pods it
// leaves out the labels, which the sync semantics do not read either.
func NewRequest(job *batchv1.Job, pods []*corev1.Pod, state State, now time.Time, finalizer string) *jobplanev1.PlanSyncRequest {
	req := newRequest(job, state, now, finalizer)
	req.Pods = make([]*jobplanev1.Pod, len(pods))
	c := newPodConverter(len(pods))
	for i, p := range pods {
		req.Pods[i] = c.FromKube(p)
	}
	return req
}

// newRequest is NewRequest without the pods.
func newRequest(job *batchv1.Job, state State, now time.Time, finalizer string) *jobplanev1.PlanSyncRequest {
	req := &jobplanev1.PlanSyncRequest{
		Job:               kubeconv.JobForSyncFromKube(job),
		Now:               timestamppb.New(now),
		TrackingFinalizer: finalizer,
	}
	req.Expectations, req.BackoffRecord, req.FinalizerRemovalsInFlight = stateToProto(state)
	return req
}

// newPodConverter converts n pods for a request, keeping what a sync reads
// (kubeconv.PodConverter.ForSync): not their labels (the executor matched
// the pods to the Job already; they are a quarter of a typical pod's bytes
// on the wire and most of its encoding time), nor the annotations and
// messages no decision reads, which a tenant could make larger than the
// planner takes. The request shares the pods' strings, maps and slices,
// and is dropped once sent.
func newPodConverter(n int) *kubeconv.PodConverter {
	return kubeconv.NewSyncPodConverter(n)
}
