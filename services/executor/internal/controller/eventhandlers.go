package controller

import (
	"reflect"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// The enqueue rules are the reference's: Job additions, deletions and spec
// changes sync at once; pod events and status-only changes are batched by
// syncJobBatchPeriod; an activeDeadlineSeconds change syncs at the deadline.

func (c *Controller) addJob(obj any) {
	job, ok := obj.(*batchv1.Job)
	switch {
	case !ok:
	case c.managed(job):
		c.enqueue(job, 0)
	case job.Spec.ManagedBy != nil:
		c.metrics.recordExternalJob(*job.Spec.ManagedBy)
	}
}

func (c *Controller) updateJob(old, cur any) {
	oldJob, curJob := old.(*batchv1.Job), cur.(*batchv1.Job)
	if !c.managed(curJob) {
		return
	}
	if isFinished(curJob) {
		// The finalizers are removed before the Job finishes; this is a
		// backstop for pods that still hold one.
		c.state.FinishObserved(curJob.UID)
		c.enqueueSelector(curJob)
		return
	}
	if curJob.Generation == oldJob.Generation {
		c.enqueue(curJob, syncJobBatchPeriod)
	} else {
		c.enqueue(curJob, 0)
	}
	if start := curJob.Status.StartTime; start != nil {
		cur, old := curJob.Spec.ActiveDeadlineSeconds, oldJob.Spec.ActiveDeadlineSeconds
		if cur != nil && (old == nil || *old != *cur) {
			total := time.Duration(*cur) * time.Second
			c.queue.AddAfter(keyOf(curJob), total-c.cfg.Clock.Since(start.Time))
		}
	}
}

func (c *Controller) deleteJob(obj any) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if job, ok = tombstone.Obj.(*batchv1.Job); !ok {
			return
		}
	}
	if !c.managed(job) {
		return
	}
	c.enqueue(job, 0)
	c.state.FinishObserved(job.UID)
	// A Job created again with the same name at once is a new Job: it does
	// not wait out the old one's pod failure backoff.
	c.state.JobDeleted(keyOf(job))
	c.enqueueSelector(job)
}

func (c *Controller) enqueue(job *batchv1.Job, delay time.Duration) {
	c.queue.AddAfter(keyOf(job), delay)
}

func keyOf(job *batchv1.Job) string { return job.Namespace + "/" + job.Name }

// addPod observes a creation and syncs the pod's Job; an orphan with the
// finalizer is queued for cleanup, and Jobs whose selector matches it may
// adopt it.
func (c *Controller) addPod(obj any) {
	pod := obj.(*corev1.Pod)
	c.recordFinishedWithFinalizer(nil, pod)
	if pod.DeletionTimestamp != nil {
		// Seen for the first time while being deleted (after a restart):
		// not a creation to observe.
		c.deletePod(pod, false)
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		job := c.resolveControllerRef(pod.Namespace, ref)
		if job == nil {
			if c.hasFinalizer(pod) {
				// Its Job may be gone (deleted while the executor was
				// down): the orphan worker checks again.
				c.enqueueOrphan(pod)
			}
			return
		}
		c.state.CreationsObserved(keyOf(job), 1)
		c.enqueue(job, syncJobBatchPeriod)
		return
	}
	if c.hasFinalizer(pod) {
		c.enqueueOrphan(pod)
	}
	for _, job := range c.podJobs(pod) {
		c.enqueue(job, syncJobBatchPeriod)
	}
}

func (c *Controller) updatePod(old, cur any) {
	oldPod, curPod := old.(*corev1.Pod), cur.(*corev1.Pod)
	c.recordFinishedWithFinalizer(oldPod, curPod)
	if curPod.ResourceVersion == oldPod.ResourceVersion {
		return // a periodic resync
	}
	if curPod.DeletionTimestamp != nil {
		// Replacements need not wait for the pod to be gone.
		c.deletePod(curPod, false)
		return
	}
	// The current finalizers are what counts: an ownership transfer may
	// add and remove them again within one event.
	finalizerRemoved := !c.hasFinalizer(curPod)
	curRef, oldRef := metav1.GetControllerOf(curPod), metav1.GetControllerOf(oldPod)
	refChanged := !reflect.DeepEqual(curRef, oldRef)
	if refChanged && oldRef != nil {
		// Released, the pod is no longer its Job's to delete.
		c.state.ForgetDeletion(oldPod.Namespace+"/"+oldRef.Name, curPod.UID)
		if job := c.resolveControllerRef(oldPod.Namespace, oldRef); job != nil {
			if finalizerRemoved {
				c.state.FinalizerRemovalObserved(keyOf(job), curPod.UID)
			}
			c.enqueue(job, syncJobBatchPeriod)
		}
	}
	if curRef != nil {
		job := c.resolveControllerRef(curPod.Namespace, curRef)
		if job == nil {
			return
		}
		if finalizerRemoved {
			c.state.FinalizerRemovalObserved(keyOf(job), curPod.UID)
		}
		c.enqueue(job, syncJobBatchPeriod)
		return
	}
	if c.hasFinalizer(curPod) {
		c.enqueueOrphan(curPod)
	}
	if refChanged || !reflect.DeepEqual(curPod.Labels, oldPod.Labels) {
		for _, job := range c.podJobs(curPod) {
			c.enqueue(job, syncJobBatchPeriod)
		}
	}
}

// deletePod observes a deletion (final) or a deletion timestamp.
func (c *Controller) deletePod(obj any, final bool) {
	pod, ok := obj.(*corev1.Pod)
	if ok && final {
		c.recordFinishedWithFinalizer(pod, nil)
	}
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if pod, ok = tombstone.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		if c.hasFinalizer(pod) {
			c.enqueueOrphan(pod)
		}
		return
	}
	// Whatever became of its Job, the pod's deletion is no longer in flight.
	c.state.ForgetDeletion(pod.Namespace+"/"+ref.Name, pod.UID)
	job := c.resolveControllerRef(pod.Namespace, ref)
	if job == nil || isFinished(job) {
		// No sync of the Job will remove this finalizer.
		if c.hasFinalizer(pod) {
			c.enqueueOrphan(pod)
		}
		return
	}
	key := keyOf(job)
	c.state.DeletionsObserved(key, 1)
	if final || !c.hasFinalizer(pod) {
		c.state.FinalizerRemovalObserved(key, pod.UID)
	}
	c.enqueue(job, syncJobBatchPeriod)
}

// recordFinishedWithFinalizer counts, as the reference does, a pod that
// became finished with the tracking finalizer, or stopped being so (nil is
// no pod).
func (c *Controller) recordFinishedWithFinalizer(old, cur *corev1.Pod) {
	if was, is := c.finishedWithFinalizer(old), c.finishedWithFinalizer(cur); was != is {
		c.metrics.recordTrackedTermination(is)
	}
}

func (c *Controller) finishedWithFinalizer(pod *corev1.Pod) bool {
	return pod != nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) && c.hasFinalizer(pod)
}

// resolveControllerRef returns the jobplane Job a controller reference
// names, or nil.
func (c *Controller) resolveControllerRef(namespace string, ref *metav1.OwnerReference) *batchv1.Job {
	if job := c.controllerJob(namespace, ref); job != nil && c.managed(job) {
		return job
	}
	return nil
}

// controllerJob is the Job of namespace that ref names, whoever manages it;
// nil when there is none (a reference to a Job of another namespace names
// none: owner references are namespace-local).
func (c *Controller) controllerJob(namespace string, ref *metav1.OwnerReference) *batchv1.Job {
	if ref.Kind != "Job" || ref.APIVersion != batchv1.SchemeGroupVersion.String() {
		return nil
	}
	job, err := c.jobs.Jobs(namespace).Get(ref.Name)
	if err != nil || job.UID != ref.UID {
		return nil
	}
	return job
}

// podJobs are the jobplane Jobs whose selector matches an orphan pod.
func (c *Controller) podJobs(pod *corev1.Pod) []*batchv1.Job {
	if len(pod.Labels) == 0 {
		return nil
	}
	jobs, err := c.jobs.Jobs(pod.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	return slices.DeleteFunc(jobs, func(job *batchv1.Job) bool {
		if !c.managed(job) || job.Spec.Selector == nil {
			return true
		}
		selector, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
		return err != nil || selector.Empty() || !selector.Matches(labels.Set(pod.Labels))
	})
}

func (c *Controller) hasFinalizer(pod *corev1.Pod) bool {
	return slices.Contains(pod.Finalizers, c.cfg.Finalizer)
}
