package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// orphanKey names one pod, or every pod of a namespace matching a selector
// (the pods of a finished or deleted Job).
type orphanKey struct {
	namespace string
	name      string
	selector  string
}

func (c *Controller) enqueueOrphan(pod *corev1.Pod) {
	c.orphans.Add(orphanKey{namespace: pod.Namespace, name: pod.Name})
}

func (c *Controller) enqueueSelector(job *batchv1.Job) {
	selector, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		c.log.Warn("the Job's selector is invalid", "job", keyOf(job), "err", err)
		return
	}
	c.orphans.Add(orphanKey{namespace: job.Namespace, selector: selector.String()})
}

func (c *Controller) orphanWorker(ctx context.Context) {
	for c.processNextOrphan(ctx) {
	}
}

func (c *Controller) processNextOrphan(ctx context.Context) bool {
	key, quit := c.orphans.Get()
	if quit {
		return false
	}
	defer c.orphans.Done(key)
	if err := c.syncOrphan(ctx, key); err != nil {
		c.log.Warn("removing the finalizer of orphan pods failed; retrying", "namespace", key.namespace, "pod", key.name, "selector", key.selector, "err", err)
		c.orphans.AddRateLimited(key)
		return true
	}
	c.orphans.Forget(key)
	return true
}

func (c *Controller) syncOrphan(ctx context.Context, key orphanKey) error {
	if key.name != "" {
		pod, err := c.podStore.Pods(key.namespace).Get(key.name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return c.releaseOrphan(ctx, pod)
	}
	selector, err := labels.Parse(key.selector)
	if err != nil {
		return fmt.Errorf("invalid selector %q: %w", key.selector, err)
	}
	pods, err := c.podStore.Pods(key.namespace).List(selector)
	if err != nil {
		return err
	}
	var failed int
	for _, pod := range pods {
		if err := c.releaseOrphan(ctx, pod); err != nil {
			failed++
			c.log.Warn("removing an orphan pod's finalizer", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d pods kept the finalizer", failed, len(pods))
	}
	return nil
}

// releaseOrphan removes jobplane's finalizer from a pod no running Job of
// ours will count: no controller, a Job gone or finished.
func (c *Controller) releaseOrphan(ctx context.Context, pod *corev1.Pod) error {
	if !c.hasFinalizer(pod) {
		return nil
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if ref.Kind != "Job" || ref.APIVersion != batchv1.SchemeGroupVersion.String() {
			return nil // another kind of owner: not ours to touch
		}
		if job := c.resolveControllerRef(pod.Namespace, ref); job != nil && !isFinished(job) {
			return nil // adopted or still running: its syncs count the pod
		}
	}
	err := c.pods.removeFinalizer(ctx, pod.Namespace, pod.Name, pod.UID, c.cfg.Finalizer)
	if err != nil && !apierrors.IsNotFound(err) && !isUIDPreconditionFailure(err) {
		return err
	}
	c.metrics.finalizersRemoved.WithLabelValues("orphan").Inc()
	return nil
}
