package kubeconv_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/google/go-cmp/cmp"

	"github.com/jobplane/jobplane/lib/kubeconv"
)

// invalid is a string that is not UTF-8, as the API server accepts in an
// annotation's value or a condition's message sent as protobuf.
const invalid = "caf\xc3\x28 \xff"

// jobWith is a Job holding s where the contract has strings of every
// shape: a field, a map's key and value, a list, a message in a list.
func jobWith(s string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", Annotations: map[string]string{"note": s, s: "key"},
			Finalizers: []string{"ok", s}},
		Spec: batchv1.JobSpec{
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "In", Values: []string{s}}}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"t": s}}},
		},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Message: s}}},
	}
}

// A Job's and a pod's strings that are not UTF-8 reach the contract as the
// API server's JSON shows them; the Kubernetes objects (an informer's) are
// left as they are.
func TestStringsThatAreNotUTF8AreShownAsJSONShowsThem(t *testing.T) {
	shown := strings.ToValidUTF8(invalid, "\uFFFD")
	job := jobWith(invalid)
	got, err := kubeconv.JobFromKube(job)
	if err != nil {
		t.Fatal(err)
	}
	want, err := kubeconv.JobFromKube(jobWith(shown))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("the Job (-as JSON shows it +got):\n%s", diff)
	}
	if _, err := proto.Marshal(got); err != nil {
		t.Errorf("protobuf-go refuses the Job: %v", err)
	}
	if job.Annotations["note"] != invalid || job.Finalizers[1] != invalid || job.Spec.Selector.MatchExpressions[0].Values[0] != invalid {
		t.Error("the Kubernetes Job was changed")
	}

	if a := got.GetMetadata().GetAnnotations(); len(a) != 2 {
		t.Errorf("annotations %q", a)
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"l": invalid}},
		Status: corev1.PodStatus{Message: invalid, ContainerStatuses: []corev1.ContainerStatus{{Name: "c",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: invalid}}}}},
	}
	gotPod := kubeconv.PodFromKube(pod)
	if _, err := proto.Marshal(gotPod); err != nil {
		t.Errorf("protobuf-go refuses the pod: %v", err)
	}
	if m := gotPod.GetStatus().GetContainerStatuses()[0].GetState().GetTerminated().GetMessage(); m != shown {
		t.Errorf("a container's message %q, want %q", m, shown)
	}
	if pod.Labels["l"] != invalid {
		t.Error("the Kubernetes pod was changed")
	}
}

// What a pod's conversion costs, its check of UTF-8 included: a running
// pod of an Indexed Job.
func BenchmarkPodFromKube(b *testing.B) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job-7-abcde", Namespace: "team-a", UID: "0b6c6b5e-8f6a-4c1e-9d2f-6f1c2d3e4f50", ResourceVersion: "123456",
			Labels: map[string]string{"batch.kubernetes.io/controller-uid": "4f6a", "batch.kubernetes.io/job-name": "job", "controller-uid": "4f6a",
				"job-name": "job", "batch.kubernetes.io/job-completion-index": "7"},
			Annotations:     map[string]string{"batch.kubernetes.io/job-completion-index": "7"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "job", UID: "4f6a"}},
			Finalizers:      []string{"batch.kubernetes.io/job-tracking"}},
		Spec: corev1.PodSpec{NodeName: "node-1", RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
	b.ReportAllocs()
	for b.Loop() {
		kubeconv.PodFromKube(pod)
	}
}

// Keys that become one once repaired keep the value of the last in byte
// order, whatever the map's order; a Kubernetes object's optional string
// (a pointer the message shares) is not written through.
func TestRepairsAreDeterministicAndLeaveTheObjectAlone(t *testing.T) {
	for range 20 {
		job := jobWith("ok")
		job.Annotations = map[string]string{"a\xfe": "2", "a\ufffd": "3", "a\xff": "1", "a\xc3": "4"}
		job.Spec.CompletionMode = ptr.To(batchv1.CompletionMode(invalid))
		got, err := kubeconv.JobFromKube(job)
		if err != nil {
			t.Fatal(err)
		}
		if a := got.GetMetadata().GetAnnotations()["a\ufffd"]; a != "1" {
			t.Fatalf("the repaired key holds %q, want the last in byte order's (1)", a)
		}
		if string(*job.Spec.CompletionMode) != invalid {
			t.Fatalf("the Job's completionMode was written through: %q", *job.Spec.CompletionMode)
		}
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "s", RestartPolicy: ptr.To(corev1.ContainerRestartPolicy(invalid))}}}}
	kubeconv.NewSyncPodConverter(1).FromKube(pod)
	if string(*pod.Spec.InitContainers[0].RestartPolicy) != invalid {
		t.Errorf("the pod's restartPolicy was written through: %q", *pod.Spec.InitContainers[0].RestartPolicy)
	}
}
