// Package scalestate builds the large Job of the planner's scale benchmarks,
// in Kubernetes types, so that the planner's benchmarks and the reference's
// harness (hack/refbench, which imports k8s.io/kubernetes) sync the same
// state: an Indexed Job of n pods in mixed states, steady (no pod to create
// or delete), and the same Job after a fraction of its running pods
// succeeded.
package scalestate

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Finalizer is the pod tracking finalizer of the state (the reference's).
const Finalizer = batchv1.JobTrackingFinalizer

// Start is when the Job started; Now is when it is synced.
var (
	Start = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	Now   = Start.Add(10 * time.Minute)
)

// JobUID is the Job's UID.
const JobUID = types.UID("5c0b1e2a-0000-4000-8000-000000000001")

// State is a Job and its pods.
type State struct {
	Job  *batchv1.Job
	Pods []*corev1.Pod
}

// kind of pod i: 60% running and ready, 10% pending, 20% succeeded and
// counted, 10% failed and counted (the last pod of a failed index, waiting
// for room under parallelism).
func kind(i int) string {
	switch i % 10 {
	case 6, 7:
		return "succeeded"
	case 8:
		return "pending"
	case 9:
		return "failed"
	default:
		return "running"
	}
}

// New is the Job of n pods, one per index, steady: its status counts every
// terminated pod and the active ones fill parallelism.
func New(n int) State {
	var active, ready, succeeded, failed int32
	var completed []string
	for i := range n {
		switch kind(i) {
		case "running":
			active++
			ready++
		case "pending":
			active++
		case "succeeded":
			succeeded++
			if i%10 == 6 {
				completed = append(completed, fmt.Sprintf("%d-%d", i, min(i+1, n-1)))
			}
		case "failed":
			failed++
		}
	}
	job := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "scale", Namespace: "default", UID: JobUID, ResourceVersion: "1000",
			Generation: 1, CreationTimestamp: metav1.NewTime(Start),
			Labels: map[string]string{"app": "scale"},
		},
		Spec: batchv1.JobSpec{
			Parallelism:    ptr.To(active),
			Completions:    ptr.To(int32(n)),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			BackoffLimit:   ptr.To(int32(1 << 30)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{
				batchv1.ControllerUidLabel: string(JobUID),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
					"app": "scale", batchv1.ControllerUidLabel: string(JobUID), batchv1.JobNameLabel: "scale",
				}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
				},
			},
		},
		Status: batchv1.JobStatus{
			StartTime:               ptr.To(metav1.NewTime(Start)),
			Active:                  active,
			Ready:                   ptr.To(ready),
			Succeeded:               succeeded,
			Failed:                  failed,
			Terminating:             ptr.To(int32(0)),
			CompletedIndexes:        strings.Join(completed, ","),
			UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{},
		},
	}
	// The defaults the API server would apply.
	job.Spec.Suspend = ptr.To(false)
	job.Spec.ManualSelector = nil
	job.Spec.PodReplacementPolicy = ptr.To(batchv1.TerminatingOrFailed)
	s := State{Job: job, Pods: make([]*corev1.Pod, n)}
	for i := range n {
		s.Pods[i] = pod(i)
	}
	return s
}

func pod(i int) *corev1.Pod {
	created := metav1.NewTime(Start.Add(time.Duration(i%600) * time.Second))
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              fmt.Sprintf("scale-%d-x%05d", i, i%99991),
			Namespace:         "default",
			UID:               types.UID(fmt.Sprintf("5c0b1e2a-%04x-4000-8000-%012x", i>>16, i)),
			ResourceVersion:   strconv.Itoa(2000 + i),
			CreationTimestamp: created,
			Labels: map[string]string{
				"app": "scale", batchv1.ControllerUidLabel: string(JobUID), batchv1.JobNameLabel: "scale",
				batchv1.JobCompletionIndexAnnotation: strconv.Itoa(i),
			},
			Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: strconv.Itoa(i)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "Job", Name: "scale", UID: JobUID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:      fmt.Sprintf("node-%04d", i%1000),
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
		},
		Status: corev1.PodStatus{StartTime: &created},
	}
	switch kind(i) {
	case "running":
		p.Finalizers = []string{Finalizer}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(5 * time.Second))}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}}}}
	case "pending":
		p.Finalizers = []string{Finalizer}
		p.Spec.NodeName = ""
		p.Status.Phase = corev1.PodPending
		p.Status.StartTime = nil
	case "succeeded":
		p.Status.Phase = corev1.PodSucceeded
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: metav1.NewTime(created.Add(time.Minute))}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.NewTime(created.Add(time.Minute))}}}}
	case "failed":
		p.Status.Phase = corev1.PodFailed
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: metav1.NewTime(created.Add(time.Minute))}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: metav1.NewTime(created.Add(time.Minute))}}}}
	}
	return p
}

// Changed is s after changes of its running pods succeeded (still carrying
// the tracking finalizer, with a new resourceVersion), spread evenly over
// the pods: the pods are copied only where they changed. It returns the new
// state and the indexes of the changed pods.
func Changed(s State, changes int) (State, []int) {
	n := len(s.Pods)
	out := State{Job: s.Job, Pods: append([]*corev1.Pod(nil), s.Pods...)}
	if changes <= 0 {
		return out, nil
	}
	stride := max(n/changes, 1)
	var changed []int
	for i := 0; i < n && len(changed) < changes; i += stride {
		j := i
		for j < n && kind(j) != "running" {
			j++
		}
		if j == n {
			break
		}
		p := s.Pods[j].DeepCopy()
		p.ResourceVersion = strconv.Itoa(1_000_000 + j)
		p.Status.Phase = corev1.PodSucceeded
		finished := metav1.NewTime(Now.Add(-time.Second))
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: finished}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: finished}}}}
		out.Pods[j] = p
		changed = append(changed, j)
	}
	return out, changed
}
