package controller

import (
	"context"
	"encoding/json"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// podControl is the executor's writes of pods, as the reference's
// RealPodControl; tests replace the clientset under it.
type podControl struct {
	client typedcorev1.PodsGetter
	// wrote is told of every pod a create or patch returned (the
	// reference's OnWrite), so a sync can wait for its cache to see it.
	wrote func(pod *corev1.Pod)
}

func (c podControl) create(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	created, err := c.client.Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err == nil && c.wrote != nil {
		c.wrote(created)
	}
	return created, err
}

func (c podControl) patch(ctx context.Context, namespace, name string, patch []byte) error {
	patched, err := c.client.Pods(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err == nil && c.wrote != nil {
		c.wrote(patched)
	}
	return err
}

// delete deletes the pod only if it still has uid, so a pod of the same
// name created since is never touched.
func (c podControl) delete(ctx context.Context, namespace, name string, uid types.UID) error {
	return c.client.Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(uid))})
}

// removeFinalizer takes finalizer off the pod with a strategic merge patch
// whose metadata.uid is a precondition, as the reference's adoption patches.
func (c podControl) removeFinalizer(ctx context.Context, namespace, name string, uid types.UID, finalizer string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":                                 uid,
		"$deleteFromPrimitiveList/finalizers": []string{finalizer},
	}})
	return c.patch(ctx, namespace, name, patch)
}

// adopt sets job as the pod's controller and adds the tracking finalizer.
func (c podControl) adopt(ctx context.Context, pod *corev1.Pod, job *batchv1.Job, finalizer string) error {
	ref := metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":             pod.UID,
		"ownerReferences": []metav1.OwnerReference{*ref},
		"finalizers":      []string{finalizer},
	}})
	return c.patch(ctx, pod.Namespace, pod.Name, patch)
}

// release removes job's owner reference and the tracking finalizer.
func (c podControl) release(ctx context.Context, pod *corev1.Pod, job *batchv1.Job, finalizer string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":                                 pod.UID,
		"ownerReferences":                     []map[string]any{{"$patch": "delete", "uid": job.UID}},
		"$deleteFromPrimitiveList/finalizers": []string{finalizer},
	}})
	return c.patch(ctx, pod.Namespace, pod.Name, patch)
}

func updateStatus(ctx context.Context, client kubernetes.Interface, job *batchv1.Job) (*batchv1.Job, error) {
	return client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
}
