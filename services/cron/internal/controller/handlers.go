package controller

import (
	"fmt"
	"reflect"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/services/cron/internal/batchcron"
)

// The reference's enqueue rules: a CronJob is synced when it appears or
// changes and when a Job it controls does; a schedule or zone change re-plans
// at once (the decision then never fires a run retroactively).

// keyOf is the queue key of a CronJob of either kind (jobplane's come
// unstructured, batch/v1's typed), or of its tombstone.
func keyOf(obj any) (string, bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	apiVersion := cronapi.APIVersion
	if _, ok := obj.(*batchv1.CronJob); ok {
		apiVersion = batchcron.APIVersion
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", false
	}
	return cronJobKey(apiVersion, m.GetNamespace(), m.GetName()), true
}

func (c *Controller) enqueue(obj any) {
	key, ok := keyOf(obj)
	if !ok {
		c.log.Error("no key for object", "object", fmt.Sprintf("%T", obj))
		return
	}
	c.queue.Add(key)
}

func (c *Controller) addCronJob(obj any) { c.enqueue(obj) }

func (c *Controller) updateCronJob(old, cur any) {
	oldMeta, errOld := meta.Accessor(old)
	curMeta, errCur := meta.Accessor(cur)
	if errOld == nil && errCur == nil && oldMeta.GetResourceVersion() == curMeta.GetResourceVersion() {
		return // a resync
	}
	c.enqueue(cur)
}

func (c *Controller) deleteCronJob(obj any) {
	key, ok := keyOf(obj)
	if !ok {
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

// enqueueController enqueues the CronJob controlling job, if it is of a
// kind run here and still the same CronJob (by UID). A CronJob with invalid
// annotations is enqueued too: its sync says why it does not run.
func (c *Controller) enqueueController(job *batchv1.Job) {
	ref := metav1.GetControllerOf(job)
	if ref == nil || ref.Kind != cronapi.Kind {
		return
	}
	kind, ok := c.kinds[ref.APIVersion]
	if !ok {
		return
	}
	if uid, err := kind.uid(job.Namespace, ref.Name); err != nil || uid != ref.UID {
		return
	}
	c.queue.Add(cronJobKey(ref.APIVersion, job.Namespace, ref.Name))
}
