// Package sim runs Job lifecycles in memory: it performs the planner's plans
// on a model of the API server, lets pods live by a script (start, succeed,
// fail with an exit code, get evicted, restart a container) and plans again,
// until the Job finishes. Tests use it to check that the semantics converge,
// and the API server test replays its status writes against a real server.
package sim

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/planner/internal/engine"
)

// World is a Job, its pods, and the executor's memory of them.
type World struct {
	Job  *batchv1.Job
	Now  time.Time
	pods map[types.UID]*simPod
	// order keeps pods in creation order for stable listing.
	order   []types.UID
	backoff *engine.BackoffRecord
	fates   FateFunc
	nextID  int
	// Ledger records how each pod's tracking finalizer went away.
	Ledger []FinalizerRemoval
	// Events are the events recorded on the Job, "Type Reason".
	Events []string
	// StatusWrites are the statuses written, in order.
	StatusWrites []batchv1.JobStatus
	// Plans counts the syncs planned.
	Plans int
	// nextSync is the earliest time a requeue asked for.
	nextSync time.Time
	// InformerLag hides created pods from snapshots until the next step,
	// as a lagging informer would; the executor's expectations cover them.
	InformerLag bool
	unseen      map[types.UID]bool
	expectedAt  time.Time
}

// simPod is a pod and what is left of its script.
type simPod struct {
	pod    *corev1.Pod
	script []Step
}

// Step is one scripted event in a pod's life, At after its creation.
type Step struct {
	At   time.Duration
	Kind StepKind
	// ExitCode for Fail; RestartCount for Restart.
	ExitCode int32
}

// StepKind is what happens to a pod.
type StepKind int

// Pod events.
const (
	Start StepKind = iota
	Succeed
	Fail
	Evict
	Restart
)

// FateFunc scripts the life of a new pod of the given completion index
// (-1 when none); n counts the pods created so far.
type FateFunc func(n int, index int) []Step

// FinalizerRemoval is how one pod lost the tracking finalizer.
type FinalizerRemoval struct {
	Pod   string
	Phase corev1.PodPhase
	// Deleted is true when the pod was being deleted at the time.
	Deleted bool
	// ByDeletion is true when the finalizer went with a DeletePods action
	// (excess or suspended pods, not counted), false for RemoveFinalizers.
	ByDeletion bool
	// Index is the pod's completion index, or -1.
	Index int
	// ExitCode is the pod's main container exit code when it failed.
	ExitCode int32
	// Evicted marks a pod with a DisruptionTarget condition.
	Evicted bool
}

// NewWorld starts a lifecycle of job at start.
func NewWorld(job *batchv1.Job, start time.Time, fates FateFunc) *World {
	return &World{Job: job.DeepCopy(), Now: start, pods: map[types.UID]*simPod{}, fates: fates, unseen: map[types.UID]bool{}}
}

// Snapshot is what the executor would send the planner now.
func (w *World) Snapshot() *engine.Snapshot {
	s := &engine.Snapshot{Job: w.Job.DeepCopy(), Now: w.Now, TrackingFinalizer: engine.DefaultTrackingFinalizer, Backoff: w.backoff}
	for _, uid := range w.order {
		if p, ok := w.pods[uid]; ok && !w.unseen[uid] {
			s.Pods = append(s.Pods, p.pod.DeepCopy())
		}
	}
	if len(w.unseen) > 0 {
		s.Expectations = engine.Expectations{PendingCreations: int32(len(w.unseen)), RecordedAt: w.expectedAt}
	}
	return s
}

// Pods lists the pods that exist, in creation order.
func (w *World) Pods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, uid := range w.order {
		if p, ok := w.pods[uid]; ok {
			out = append(out, p.pod)
		}
	}
	return out
}

// Finished says whether the Job has a terminal condition.
func (w *World) Finished() bool {
	for _, c := range w.Job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// Sync plans one sync and performs it, every action succeeding.
func (w *World) Sync() *engine.Plan {
	plan := engine.Sync(w.Snapshot())
	w.Plans++
	for _, a := range plan.Actions {
		w.perform(a)
	}
	if plan.ReleaseJobState {
		w.backoff = nil
	}
	return plan
}

func (w *World) perform(a engine.Action) {
	switch a := a.(type) {
	case engine.CreatePods:
		for _, spec := range a.Pods {
			w.createPod(spec)
		}
	case engine.DeletePods:
		for _, ref := range a.Pods {
			w.deletePod(ref.UID, a.RemoveTrackingFinalizer)
		}
	case engine.RemoveFinalizers:
		for _, ref := range a.Pods {
			w.removeFinalizer(ref.UID, false)
		}
	case engine.WriteStatus:
		w.Job.Status = *a.Status.DeepCopy()
		w.StatusWrites = append(w.StatusWrites, *a.Status.DeepCopy())
		if a.BackoffRecord != nil {
			rec := *a.BackoffRecord
			w.backoff = &rec
		}
	case engine.RecordEvent:
		w.Events = append(w.Events, a.Type+" "+a.Because.Reason)
	case engine.Requeue:
		if t := w.Now.Add(a.After); w.nextSync.IsZero() || t.Before(w.nextSync) {
			w.nextSync = t
		}
	}
}

func (w *World) createPod(spec engine.PodToCreate) {
	w.nextID++
	name := fmt.Sprintf("%s%05d", spec.GenerateName, w.nextID)
	pod := plan.NewPod(w.Job, spec)
	pod.Name = name
	pod.UID = types.UID(fmt.Sprintf("pod-uid-%05d", w.nextID))
	pod.CreationTimestamp = metav1.NewTime(w.Now)
	pod.Status.Phase = corev1.PodPending
	index := -1
	if spec.CompletionIndex != nil {
		index = int(*spec.CompletionIndex)
	}
	w.pods[pod.UID] = &simPod{pod: pod, script: w.fates(w.nextID, index)}
	w.order = append(w.order, pod.UID)
	if w.InformerLag {
		w.unseen[pod.UID] = true
		w.expectedAt = w.Now
	}
}

// deletePod sets the deletion timestamp; the pod goes once it is terminal
// and holds no finalizer.
func (w *World) deletePod(uid types.UID, removeFinalizer bool) {
	p, ok := w.pods[uid]
	if !ok {
		return
	}
	if removeFinalizer {
		w.removeFinalizer(uid, true)
		if p, ok = w.pods[uid]; !ok {
			return
		}
	}
	if p.pod.DeletionTimestamp == nil {
		p.pod.DeletionTimestamp = ptr.To(metav1.NewTime(w.Now))
		p.pod.DeletionGracePeriodSeconds = ptr.To[int64](0)
	}
	w.collect(uid)
}

func (w *World) removeFinalizer(uid types.UID, byDeletion bool) {
	p, ok := w.pods[uid]
	if !ok || !slices.Contains(p.pod.Finalizers, engine.DefaultTrackingFinalizer) {
		return
	}
	p.pod.Finalizers = slices.DeleteFunc(p.pod.Finalizers, func(f string) bool { return f == engine.DefaultTrackingFinalizer })
	index := -1
	if v, ok := p.pod.Annotations[batchv1.JobCompletionIndexAnnotation]; ok {
		index, _ = strconv.Atoi(v)
	}
	w.Ledger = append(w.Ledger, FinalizerRemoval{
		Pod: p.pod.Name, Phase: p.pod.Status.Phase, Deleted: p.pod.DeletionTimestamp != nil,
		ByDeletion: byDeletion, Index: index, ExitCode: mainExitCode(p.pod), Evicted: hasCondition(p.pod, corev1.DisruptionTarget),
	})
	w.collect(uid)
}

// collect removes a deleted pod from the API once it is terminal and has
// no finalizer left.
func (w *World) collect(uid types.UID) {
	p := w.pods[uid]
	if p.pod.DeletionTimestamp != nil && len(p.pod.Finalizers) == 0 && terminal(p.pod) {
		delete(w.pods, uid)
	}
}

// Advance moves the clock by tick and plays the pods' scripts: a pod being
// deleted terminates (Failed unless it had succeeded).
func (w *World) Advance(tick time.Duration) {
	w.Now = w.Now.Add(tick)
	clear(w.unseen)
	if !w.nextSync.IsZero() && !w.nextSync.After(w.Now) {
		w.nextSync = time.Time{}
	}
	for _, uid := range slices.Clone(w.order) {
		p, ok := w.pods[uid]
		if !ok {
			continue
		}
		if p.pod.DeletionTimestamp != nil {
			if !terminal(p.pod) {
				p.pod.Status.Phase = corev1.PodFailed
				setCondition(p.pod, corev1.PodReady, corev1.ConditionFalse, w.Now)
			}
			w.collect(uid)
			continue
		}
		for len(p.script) > 0 && !p.pod.CreationTimestamp.Add(p.script[0].At).After(w.Now) && !terminal(p.pod) {
			w.play(p.pod, p.script[0])
			p.script = p.script[1:]
		}
	}
}

func (w *World) play(pod *corev1.Pod, s Step) {
	switch s.Kind {
	case Start:
		pod.Spec.NodeName = "node-0"
		pod.Status.Phase = corev1.PodRunning
		pod.Status.StartTime = ptr.To(metav1.NewTime(w.Now))
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(w.Now)}}}}
		setCondition(pod, corev1.PodReady, corev1.ConditionTrue, w.Now)
	case Succeed, Fail:
		pod.Status.Phase = corev1.PodSucceeded
		if s.Kind == Fail {
			pod.Status.Phase = corev1.PodFailed
		}
		terminate(pod, s.ExitCode, w.Now)
	case Evict:
		setCondition(pod, corev1.DisruptionTarget, corev1.ConditionTrue, w.Now)
		pod.Status.Phase = corev1.PodFailed
		pod.Status.Reason = "Evicted"
		terminate(pod, 137, w.Now)
	case Restart:
		if len(pod.Status.ContainerStatuses) > 0 {
			pod.Status.ContainerStatuses[0].RestartCount++
		}
	}
}

// terminate stops the main container with code at now.
func terminate(pod *corev1.Pod, code int32, now time.Time) {
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(now)}}}}
	setCondition(pod, corev1.PodReady, corev1.ConditionFalse, now)
}

func setCondition(pod *corev1.Pod, t corev1.PodConditionType, s corev1.ConditionStatus, now time.Time) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			if pod.Status.Conditions[i].Status != s {
				pod.Status.Conditions[i].Status = s
				pod.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now)
			}
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: s, LastTransitionTime: metav1.NewTime(now)})
}

func hasCondition(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func mainExitCode(pod *corev1.Pod) int32 {
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Terminated != nil {
			return c.State.Terminated.ExitCode
		}
	}
	return 0
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
