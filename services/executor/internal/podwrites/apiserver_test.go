package podwrites_test

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/kubetest"
	"github.com/jobplane/jobplane/services/executor/internal/podwrites"
)

// Against a real API server, talking protobuf as the executor does: a pod
// created or patched comes back with the metadata the API server stored
// (a Get of the whole pod has the same), and a refused write keeps its
// reason.
func TestWritesAnswerThePodsMetadata(t *testing.T) {
	api := kubetest.StartAPIServer(t)
	cfg := rest.CopyConfig(api.Config)
	cfg.ContentType, cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"
	pods, err := podwrites.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	owner := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "job", UID: "job-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "job-", Namespace: "default", Labels: map[string]string{"job-name": "job"},
			Annotations: map[string]string{"note": "kept by the server"}, OwnerReferences: []metav1.OwnerReference{owner}, Finalizers: []string{"batch.kubernetes.io/job-tracking"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}, RestartPolicy: corev1.RestartPolicyNever},
	}
	created, err := pods.Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := api.Client.CoreV1().Pods("default").Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkMetadata(t, "created", created, stored)
	if ref := metav1.GetControllerOf(created); ref == nil || ref.Name != "job" {
		t.Errorf("the created pod's controller: %v", ref)
	}

	patched, err := pods.Pods("default").Patch(ctx, created.Name, types.StrategicMergePatchType,
		[]byte(`{"metadata":{"$deleteFromPrimitiveList/finalizers":["batch.kubernetes.io/job-tracking"]}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err = api.Client.CoreV1().Pods("default").Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkMetadata(t, "patched", patched, stored)
	if patched.ResourceVersion == created.ResourceVersion {
		t.Errorf("the patched pod's resourceVersion is the created one's, %s", created.ResourceVersion)
	}

	pod.GenerateName, pod.Name = "", created.Name
	if _, err := pods.Pods("default").Create(ctx, pod, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("creating it again: %v, want AlreadyExists", err)
	}
}

// checkMetadata checks that the pod a write answered has the stored pod's
// name, namespace, uid, resourceVersion and owner references, and nothing
// else.
func checkMetadata(t *testing.T, what string, got, stored *corev1.Pod) {
	t.Helper()
	want := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: stored.Name, Namespace: stored.Namespace, UID: stored.UID,
		ResourceVersion: stored.ResourceVersion, OwnerReferences: stored.OwnerReferences}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the %s pod:\n%+v\nwant\n%+v", what, got, want)
	}
}
