package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// controllerUIDIndex indexes pods by their namespace and the UID of their
// controller (controllerIndexKey); orphans under orphanIndexKey of their
// namespace. Owner references are namespace-local: a pod naming the UID of a
// Job in another namespace has no controller there, as for the garbage
// collector, so it can neither be seen through nor disturb that Job.
const controllerUIDIndex = "jobplane.dev/controller-uid"

func controllerIndexKey(namespace string, uid types.UID) string {
	return "controller/" + namespace + "/" + string(uid)
}

func orphanIndexKey(namespace string) string { return "orphan/" + namespace }

func indexByController(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		return []string{controllerIndexKey(pod.Namespace, ref.UID)}, nil
	}
	return []string{orphanIndexKey(pod.Namespace)}, nil
}

// claimPods returns the pods the Job controls, as the reference's
// getPodsForJob: it adopts orphans its selector matches (after a live check
// that the Job is still there and not being deleted) and releases the pods it
// controls whose labels no longer match. Pods come from the cache: callers
// must not modify them.
func (c *Controller) claimPods(ctx context.Context, job *batchv1.Job) ([]*corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("the Job's selector: %w", err)
	}
	owned, err := c.podIndex.ByIndex(controllerUIDIndex, controllerIndexKey(job.Namespace, job.UID))
	if err != nil {
		return nil, err
	}
	orphans, err := c.podIndex.ByIndex(controllerUIDIndex, orphanIndexKey(job.Namespace))
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(owned))
	var errs []error
	for _, obj := range owned {
		pod := obj.(*corev1.Pod)
		if selector.Matches(labels.Set(pod.Labels)) {
			pods = append(pods, pod)
			continue
		}
		if job.DeletionTimestamp != nil {
			continue // a Job being deleted releases nothing, as the reference
		}
		if err := c.pods.release(ctx, pod, job, c.cfg.Finalizer); err != nil && !gone(err) {
			errs = append(errs, fmt.Errorf("releasing pod %s: %w", pod.Name, err))
		}
	}
	canAdopt := c.adoptionCheck(job)
	for _, obj := range orphans {
		pod := obj.(*corev1.Pod)
		if job.DeletionTimestamp != nil || pod.DeletionTimestamp != nil || selector.Empty() || !selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if err := canAdopt(ctx); err != nil {
			errs = append(errs, err)
			break
		}
		if err := c.pods.adopt(ctx, pod, job, c.cfg.Finalizer); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("adopting pod %s: %w", pod.Name, err))
			}
			continue
		}
		// The rest of this sync sees it as adopted, with the finalizer.
		adopted := pod.DeepCopy()
		adopted.OwnerReferences = append(adopted.OwnerReferences, *metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job")))
		if !c.hasFinalizer(adopted) {
			adopted.Finalizers = append(adopted.Finalizers, c.cfg.Finalizer)
		}
		pods = append(pods, adopted)
	}
	if len(errs) > 0 {
		return pods, fmt.Errorf("claiming pods: %v", errs)
	}
	return pods, nil
}

// adoptionCheck re-reads the Job from the API server once, the first time an
// adoption is attempted: a Job deleted or recreated since the cache saw it
// adopts nothing.
func (c *Controller) adoptionCheck(job *batchv1.Job) func(context.Context) error {
	var checked bool
	var result error
	return func(ctx context.Context) error {
		if checked {
			return result
		}
		checked = true
		fresh, err := c.cfg.Client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		switch {
		case err != nil:
			result = fmt.Errorf("checking the Job before adopting: %w", err)
		case fresh.UID != job.UID:
			result = fmt.Errorf("original Job %s/%s is gone: got uid %s, wanted %s", job.Namespace, job.Name, fresh.UID, job.UID)
		case fresh.DeletionTimestamp != nil:
			result = fmt.Errorf("the Job %s/%s is being deleted; not adopting", job.Namespace, job.Name)
		}
		return result
	}
}

// PodsOf lists the pods the Job controls, from the cache: those of its
// namespace whose controller reference names its UID.
func (c *Controller) PodsOf(job *batchv1.Job) ([]*corev1.Pod, error) {
	objs, err := c.podIndex.ByIndex(controllerUIDIndex, controllerIndexKey(job.Namespace, job.UID))
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, len(objs))
	for i, obj := range objs {
		pods[i] = obj.(*corev1.Pod)
	}
	return pods, nil
}
