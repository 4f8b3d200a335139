package controller

import (
	"reflect"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/jobplane/jobplane/lib/cronapi"
)

// The reference's enqueue rules: a CronJob is synced when it appears or
// changes and when a Job it controls does; a schedule or zone change re-plans
// at once (the decision then never fires a run retroactively).

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		c.log.Error("no key for object", "err", err)
		return
	}
	c.queue.Add(key)
}

func (c *Controller) addCronJob(obj any) { c.enqueue(obj) }

func (c *Controller) updateCronJob(old, cur any) {
	oldU, okOld := old.(*unstructured.Unstructured)
	curU, okCur := cur.(*unstructured.Unstructured)
	if okOld && okCur && oldU.GetResourceVersion() == curU.GetResourceVersion() {
		return // a resync
	}
	c.enqueue(cur)
}

func (c *Controller) deleteCronJob(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.missed.forget(key)
	c.queue.Forget(key)
}

func (c *Controller) addJob(obj any) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	c.enqueueController(job)
}

func (c *Controller) updateJob(old, cur any) {
	oldJob, okOld := old.(*batchv1.Job)
	curJob, okCur := cur.(*batchv1.Job)
	if !okOld || !okCur || oldJob.ResourceVersion == curJob.ResourceVersion {
		return
	}
	if oldRef, curRef := metav1.GetControllerOf(oldJob), metav1.GetControllerOf(curJob); oldRef != nil && !reflect.DeepEqual(oldRef, curRef) {
		c.enqueueController(oldJob)
	}
	c.enqueueController(curJob)
}

func (c *Controller) deleteJob(obj any) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		tombstone, isTombstone := obj.(cache.DeletedFinalStateUnknown)
		if !isTombstone {
			return
		}
		if job, ok = tombstone.Obj.(*batchv1.Job); !ok {
			return
		}
	}
	c.enqueueController(job)
}

// enqueueController enqueues the CronJob controlling job, if it is one of
// ours and still the same CronJob (by UID).
func (c *Controller) enqueueController(job *batchv1.Job) {
	ref := metav1.GetControllerOf(job)
	if ref == nil || ref.APIVersion != cronapi.APIVersion || ref.Kind != cronapi.Kind {
		return
	}
	obj, err := c.cronJobs.ByNamespace(job.Namespace).Get(ref.Name)
	if err != nil {
		return
	}
	if u, ok := obj.(*unstructured.Unstructured); !ok || u.GetUID() != ref.UID {
		return
	}
	c.queue.Add(job.Namespace + "/" + ref.Name)
}
