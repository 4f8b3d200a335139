// Package dropin is what the executor needs to run batch/v1 Jobs in place
// of kube-controller-manager's Job controller: knowing that controller is
// not running too.
package dropin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// ProbeLabel marks the probe Jobs, so that one left behind by an executor
// that stopped mid-probe is deleted by the next.
const ProbeLabel = "executor.jobplane.dev/drop-in-probe"

// ErrBuiltinActive says the built-in Job controller answered the probe.
var ErrBuiltinActive = errors.New("the built-in Job controller is running")

// Probe is how the executor finds out, before it runs the built-in Job
// controller's Jobs, whether that controller still runs: it creates a
// suspended Job of the built-in's (spec.managedBy unset) and watches its
// status for Wait. The built-in controller marks every suspended Job it
// syncs with the condition Suspended at once; nobody else does while the
// executor has not started. The probe is deleted after.
type Probe struct {
	Client    kubernetes.Interface
	Namespace string
	Wait      time.Duration
	// Poll is how often the status is read; 0 is 200 ms.
	Poll time.Duration
}

// Check returns ErrBuiltinActive (wrapped, with what was seen) when the
// built-in Job controller marked the probe within Wait, nil when it did
// not, or the error of a request that failed.
func (p Probe) Check(ctx context.Context) error {
	jobs := p.Client.BatchV1().Jobs(p.Namespace)
	background := metav1.DeletePropagationBackground
	deleteOpts := metav1.DeleteOptions{PropagationPolicy: &background}
	earlier, err := jobs.List(ctx, metav1.ListOptions{LabelSelector: ProbeLabel})
	if err != nil {
		return fmt.Errorf("listing earlier probe Jobs: %w", err)
	}
	for _, j := range earlier.Items {
		if err := jobs.Delete(ctx, j.Name, deleteOpts); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the earlier probe Job %s: %w", j.Name, err)
		}
	}
	probe, err := jobs.Create(ctx, probeJob(p.Namespace), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the probe Job: %w", err)
	}
	defer func() {
		// Deleted even when ctx ended: a probe left behind would be run.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = jobs.Delete(ctx, probe.Name, metav1.DeleteOptions{PropagationPolicy: &background, Preconditions: &metav1.Preconditions{UID: &probe.UID}})
	}()
	var marked *batchv1.JobCondition
	err = wait.PollUntilContextTimeout(ctx, cmp.Or(p.Poll, 200*time.Millisecond), p.Wait, true, func(ctx context.Context) (bool, error) {
		j, err := jobs.Get(ctx, probe.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for i, c := range j.Status.Conditions {
			if c.Type == batchv1.JobSuspended {
				marked = &j.Status.Conditions[i]
				return true, nil
			}
		}
		return false, nil
	})
	switch {
	case marked != nil:
		return fmt.Errorf("%w: it marked the suspended probe Job %s/%s %s=%s (reason %s) %s after its creation; start kube-controller-manager with --controllers=*,-job-controller,-cronjob-controller",
			ErrBuiltinActive, p.Namespace, probe.Name, marked.Type, marked.Status, marked.Reason, marked.LastTransitionTime.Sub(probe.CreationTimestamp.Time).Round(time.Second))
	case wait.Interrupted(err) && ctx.Err() == nil:
		return nil
	default:
		return fmt.Errorf("watching the probe Job: %w", err)
	}
}

// probeJob is a suspended Job of the built-in controller's that never runs
// a pod: it is deleted before it could be resumed.
func probeJob(namespace string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "jobplane-drop-in-probe-", Namespace: namespace, Labels: map[string]string{ProbeLabel: "true"}},
		Spec: batchv1.JobSpec{
			Suspend:      ptr.To(true),
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10"}},
			}},
		},
	}
}
