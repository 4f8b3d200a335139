package controller

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	batchv1listers "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/services/cron/internal/batchcron"
)

// cronJobKind reads and writes one kind of CronJob as the decision sees it:
// jobplane's custom resource, or batch/v1's in drop-in mode.
type cronJobKind interface {
	// list is every CronJob of the informer's cache.
	list() []metav1.Object
	// uid is the UID of the cached CronJob namespace/name, read without
	// converting it (every Job event asks).
	uid(namespace, name string) (types.UID, error)
	// cached reads the informer's cache.
	cached(namespace, name string) (*cronapi.CronJob, error)
	// live reads the API server.
	live(ctx context.Context, namespace, name string) (*cronapi.CronJob, error)
	// stored is st as this kind stores it: a status equal to the
	// CronJob's in that form needs no write.
	stored(cronJob *cronapi.CronJob, st cronapi.CronJobStatus) cronapi.CronJobStatus
	// writeStatus writes st at cronJob's resourceVersion, answering what
	// was stored.
	writeStatus(ctx context.Context, cronJob *cronapi.CronJob, st cronapi.CronJobStatus) (*cronapi.CronJob, error)
}

// cronJobKey is the work queue's key of a CronJob: namespace/name for
// jobplane's, namespace/name:batch/v1 for batch/v1's (both kinds may have a
// CronJob of the same name; a name has no colon). The namespace leads, for
// the queue and the API budget take turns by what is before the first slash.
func cronJobKey(apiVersion, namespace, name string) string {
	if apiVersion == batchcron.APIVersion {
		return namespace + "/" + name + batchKeySuffix
	}
	return namespace + "/" + name
}

var batchKeySuffix = ":" + batchcron.APIVersion

// splitCronJobKey is cronJobKey's inverse.
func splitCronJobKey(key string) (apiVersion, namespace, name string, err error) {
	apiVersion = cronapi.APIVersion
	if rest, ok := strings.CutSuffix(key, batchKeySuffix); ok {
		apiVersion, key = batchcron.APIVersion, rest
	}
	namespace, name, err = cache.SplitMetaNamespaceKey(key)
	return apiVersion, namespace, name, err
}

// invalidCronJob: a batch/v1 CronJob whose jobplane annotations are not
// valid; it is not run until they are.
type invalidCronJob struct {
	cronJob *cronapi.CronJob
	errs    field.ErrorList
}

func (e *invalidCronJob) Error() string {
	return fmt.Sprintf("CronJob %s/%s: %v", e.cronJob.Namespace, e.cronJob.Name, e.errs.ToAggregate())
}

// customCronJobs are jobplane's CronJobs (cronjobs.jobplane.dev).
type customCronJobs struct {
	lister cache.GenericLister
	client dynamic.NamespaceableResourceInterface
}

func (k customCronJobs) list() []metav1.Object {
	objs, _ := k.lister.List(labels.Everything()) // a cache's list cannot fail
	out := make([]metav1.Object, 0, len(objs))
	for _, obj := range objs {
		if m, err := meta.Accessor(obj); err == nil {
			out = append(out, m)
		}
	}
	return out
}

func (k customCronJobs) uid(namespace, name string) (types.UID, error) {
	obj, err := k.lister.ByNamespace(namespace).Get(name)
	if err != nil {
		return "", err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", err
	}
	return m.GetUID(), nil
}

func (k customCronJobs) cached(namespace, name string) (*cronapi.CronJob, error) {
	obj, err := k.lister.ByNamespace(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unexpected %T in the CronJob cache", obj)
	}
	return cronapi.FromUnstructured(u)
}

func (k customCronJobs) live(ctx context.Context, namespace, name string) (*cronapi.CronJob, error) {
	u, err := k.client.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return cronapi.FromUnstructured(u)
}

func (k customCronJobs) stored(_ *cronapi.CronJob, st cronapi.CronJobStatus) cronapi.CronJobStatus {
	return st
}

// writeStatus replaces the status, at the resourceVersion it was read at.
func (k customCronJobs) writeStatus(ctx context.Context, cronJob *cronapi.CronJob, st cronapi.CronJobStatus) (*cronapi.CronJob, error) {
	next := cronJob.DeepCopy()
	next.Status = st
	u, err := cronapi.ToUnstructured(next)
	if err != nil {
		return nil, err
	}
	stored, err := k.client.Namespace(cronJob.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return cronapi.FromUnstructured(stored)
}

// batchCronJobs are batch/v1 CronJobs, run in place of the built-in
// CronJob controller.
type batchCronJobs struct {
	lister batchv1listers.CronJobLister
	kube   kubernetes.Interface
}

func (k batchCronJobs) list() []metav1.Object {
	cronJobs, _ := k.lister.List(labels.Everything()) // a cache's list cannot fail
	out := make([]metav1.Object, 0, len(cronJobs))
	for _, cj := range cronJobs {
		out = append(out, cj)
	}
	return out
}

func (k batchCronJobs) uid(namespace, name string) (types.UID, error) {
	cj, err := k.lister.CronJobs(namespace).Get(name)
	if err != nil {
		return "", err
	}
	return cj.UID, nil
}

func (k batchCronJobs) cached(namespace, name string) (*cronapi.CronJob, error) {
	cj, err := k.lister.CronJobs(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	return fromBatch(cj)
}

func (k batchCronJobs) live(ctx context.Context, namespace, name string) (*cronapi.CronJob, error) {
	cj, err := k.kube.BatchV1().CronJobs(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromBatch(cj)
}

func (k batchCronJobs) stored(cronJob *cronapi.CronJob, st cronapi.CronJobStatus) cronapi.CronJobStatus {
	return batchcron.Stored(cronJob, st)
}

// writeStatus writes the batch/v1 status and the state annotation in one
// status update (the status strategy keeps metadata changes and resets only
// the spec); should an API server drop the annotation from a status update,
// the annotation follows in an update of the CronJob itself.
func (k batchCronJobs) writeStatus(ctx context.Context, cronJob *cronapi.CronJob, st cronapi.CronJobStatus) (*cronapi.CronJob, error) {
	want := batchcron.ToBatch(cronJob, st)
	cronJobs := k.kube.BatchV1().CronJobs(cronJob.Namespace)
	stored, err := cronJobs.UpdateStatus(ctx, want, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	if stored.Annotations[batchcron.StateAnnotation] != want.Annotations[batchcron.StateAnnotation] {
		stored.Annotations = want.Annotations
		if stored, err = cronJobs.Update(ctx, stored, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
	}
	return fromBatch(stored)
}

func fromBatch(cj *batchv1.CronJob) (*cronapi.CronJob, error) {
	c, errs := batchcron.FromBatch(cj)
	if len(errs) > 0 {
		return nil, &invalidCronJob{cronJob: c, errs: errs}
	}
	return c, nil
}
