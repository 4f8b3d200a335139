package engine

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Builders shared by the engine's tests: a Job and pods as the API server
// and the kubelet would present them, and a summary of a plan that reads
// like the reference's expectations (creations, deletions, final status).

// now is the time every test syncs at.
var now = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

const (
	testJobName = "job"
	testJobUID  = types.UID("job-uid")
	testNS      = "default"
)

// jobOpt changes a test Job.
type jobOpt func(*batchv1.Job)

// newJob returns a defaulted NonIndexed Job with the given parallelism and
// completions (-1 means unset), backoffLimit 6 and restartPolicy Never.
func newJob(parallelism, completions int32, opts ...jobOpt) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: testJobName, Namespace: testNS, UID: testJobUID},
		Spec: batchv1.JobSpec{
			Parallelism:          ptr.To(parallelism),
			BackoffLimit:         ptr.To[int32](6),
			CompletionMode:       ptr.To(batchv1.NonIndexedCompletion),
			Suspend:              ptr.To(false),
			PodReplacementPolicy: ptr.To(batchv1.TerminatingOrFailed),
			ManualSelector:       ptr.To(false),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "test"}},
				Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever},
			},
		},
	}
	if completions >= 0 {
		j.Spec.Completions = ptr.To(completions)
	}
	for _, o := range opts {
		o(j)
	}
	return j
}

func indexed() jobOpt {
	return func(j *batchv1.Job) { j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion) }
}

func backoffLimit(n int32) jobOpt { return func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To(n) } }

func backoffLimitPerIndex(n int32) jobOpt {
	return func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = ptr.To(n) }
}

func maxFailedIndexes(n int32) jobOpt {
	return func(j *batchv1.Job) { j.Spec.MaxFailedIndexes = ptr.To(n) }
}

func suspended() jobOpt { return func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) } }

func activeDeadline(seconds int64) jobOpt {
	return func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To(seconds) }
}

func restartPolicy(p corev1.RestartPolicy) jobOpt {
	return func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = p }
}

func replacementPolicy(p batchv1.PodReplacementPolicy) jobOpt {
	return func(j *batchv1.Job) { j.Spec.PodReplacementPolicy = ptr.To(p) }
}

func failurePolicy(rules ...batchv1.PodFailurePolicyRule) jobOpt {
	return func(j *batchv1.Job) {
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: rules}
		j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	}
}

func successPolicy(rules ...batchv1.SuccessPolicyRule) jobOpt {
	return func(j *batchv1.Job) { j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: rules} }
}

func deletingJob() jobOpt {
	return func(j *batchv1.Job) { j.DeletionTimestamp = timePtr(now.Add(-time.Second)) }
}

func startedAt(t time.Time) jobOpt { return func(j *batchv1.Job) { j.Status.StartTime = timePtr(t) } }

func withStatus(f func(*batchv1.JobStatus)) jobOpt { return func(j *batchv1.Job) { f(&j.Status) } }

func withCondition(t batchv1.JobConditionType, status corev1.ConditionStatus, reason string) jobOpt {
	return func(j *batchv1.Job) {
		j.Status.Conditions = append(j.Status.Conditions, *newCondition(t, status, reason, "", now.Add(-time.Minute)))
	}
}

// podOpt changes a test pod.
type podOpt func(*corev1.Pod)

// newPod returns a Running pod controlled by the test Job, carrying the
// tracking finalizer, scheduled, created a minute before now.
func newPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         testNS,
			UID:               types.UID(name + "-uid"),
			Finalizers:        []string{DefaultTrackingFinalizer},
			CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "Job", Name: testJobName, UID: testJobUID, Controller: ptr.To(true),
			}},
		},
		Spec:   corev1.PodSpec{NodeName: "node"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// pods returns n pods named prefix-0 ... prefix-(n-1).
func pods(prefix string, n int, opts ...podOpt) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = newPod(fmt.Sprintf("%s-%d", prefix, i), opts...)
	}
	return out
}

func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

var (
	pending   = phase(corev1.PodPending)
	running   = phase(corev1.PodRunning)
	succeeded = phase(corev1.PodSucceeded)
	failed    = phase(corev1.PodFailed)
)

func index(i int) podOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(i)
	}
}

func annotation(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

func failureCount(n int) podOpt {
	return annotation(batchv1.JobIndexFailureCountAnnotation, strconv.Itoa(n))
}

func ready(since time.Time) podOpt {
	return podConditionOpt(corev1.PodReady, corev1.ConditionTrue, since)
}

func podConditionOpt(t corev1.PodConditionType, s corev1.ConditionStatus, at time.Time) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: s, LastTransitionTime: metav1.NewTime(at)})
	}
}

func deleting() podOpt {
	return func(p *corev1.Pod) { p.DeletionTimestamp = timePtr(now.Add(-time.Second)) }
}

func noFinalizer() podOpt { return func(p *corev1.Pod) { p.Finalizers = nil } }

func unscheduled() podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = "" } }

func createdAt(t time.Time) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}

// exitCode makes a container terminate with code at finishedAt.
func exitCode(container string, code int32, finishedAt time.Time) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name:  container,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(finishedAt)}},
		})
	}
}

func restarts(container string, n int32) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: container, RestartCount: n,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		})
	}
}

// syncOpt changes a snapshot.
type syncOpt func(*Snapshot)

func unsatisfiedExpectations() syncOpt {
	return func(s *Snapshot) {
		s.Expectations = Expectations{PendingCreations: 1, RecordedAt: now.Add(-time.Second)}
	}
}

func withBackoff(failures int32, last time.Time) syncOpt {
	return func(s *Snapshot) {
		s.Backoff = &BackoffRecord{FailuresAfterLastSuccess: failures, LastFailureTime: &last}
	}
}

func finalizerRemovalsInFlight(uids ...types.UID) syncOpt {
	return func(s *Snapshot) { s.FinalizerRemovalsInFlight = uids }
}

// runSync plans a sync of job with pods at now.
func runSync(t *testing.T, job *batchv1.Job, pods []*corev1.Pod, opts ...syncOpt) *Plan {
	t.Helper()
	s := &Snapshot{Job: job, Pods: pods, Now: now, TrackingFinalizer: DefaultTrackingFinalizer}
	for _, o := range opts {
		o(s)
	}
	return Sync(s)
}

// outcome summarizes a plan the way the reference's tests state their
// expectations.
type outcome struct {
	Created          int
	CreatedIndexes   []int
	Deleted          int
	DeletedNames     []string
	FinalizersGone   []string
	StatusWrites     int
	Status           *batchv1.JobStatus // the last status written
	Events           []string           // "Type Reason"
	Requeues         []time.Duration
	SyncAction       string
	ReleaseJobState  bool
	CreationReason   string
	DeletesFinalizer bool
}

func summarize(p *Plan) outcome {
	o := outcome{SyncAction: p.Metrics.SyncAction, ReleaseJobState: p.ReleaseJobState}
	for _, a := range p.Actions {
		switch a := a.(type) {
		case CreatePods:
			o.Created += len(a.Pods)
			o.CreationReason = a.CreationReason
			for _, pod := range a.Pods {
				if pod.CompletionIndex != nil {
					o.CreatedIndexes = append(o.CreatedIndexes, int(*pod.CompletionIndex))
				}
			}
		case DeletePods:
			o.Deleted += len(a.Pods)
			o.DeletesFinalizer = a.RemoveTrackingFinalizer
			for _, ref := range a.Pods {
				o.DeletedNames = append(o.DeletedNames, ref.Name)
			}
		case RemoveFinalizers:
			for _, ref := range a.Pods {
				o.FinalizersGone = append(o.FinalizersGone, ref.Name)
			}
		case WriteStatus:
			o.StatusWrites++
			s := a.Status
			o.Status = &s
		case RecordEvent:
			o.Events = append(o.Events, a.Type+" "+a.Reason)
		case Requeue:
			o.Requeues = append(o.Requeues, a.After)
		}
	}
	return o
}

// conditionOf returns the condition of type t in the last status written.
func (o outcome) conditionOf(t batchv1.JobConditionType) *batchv1.JobCondition {
	if o.Status == nil {
		return nil
	}
	return findCondition(o.Status.Conditions, t)
}

// wrapPods gives pods the engine's per-pod view, as newSyncCtx does.
func wrapPods(ps []*corev1.Pod) []*pod {
	out := make([]*pod, len(ps))
	for i, p := range ps {
		out[i] = wrapPod(p)
	}
	return out
}

func wrapPod(p *corev1.Pod) *pod {
	if p == nil {
		return nil
	}
	v := viewOf(p, DefaultTrackingFinalizer)
	return &v
}

func unwrapPods(ps []*pod) []*corev1.Pod {
	out := make([]*corev1.Pod, len(ps))
	for i, p := range ps {
		out[i] = p.Pod
	}
	return out
}

// lessActive compares two pods as sortActive does.
func lessActive(a, b *corev1.Pod) bool {
	ka, kb := newActiveKey(a), newActiveKey(b)
	return ka.less(&kb)
}
