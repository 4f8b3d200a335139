package podwire_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/lib/podwire"
)

// checkAppendPod checks that AppendPod writes the deterministic encoding of
// the pod's converted message, whole and for a sync.
func checkAppendPod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	for _, forSync := range []bool{false, true} {
		m := kubeconv.PodFromKube(p)
		if forSync {
			m = kubeconv.PodFromKubeForSync(p)
		}
		body, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		want := protowire.AppendBytes(protowire.AppendTag([]byte("x"), 7, protowire.BytesType), body)
		if got := podwire.AppendPod([]byte("x"), 7, p, forSync); !bytes.Equal(got, want) {
			t.Fatalf("for a sync %v: AppendPod wrote\n%q\nthe message encodes as\n%q", forSync, got, want)
		}
	}
}

func TestAppendPodIsTheMessagesEncoding(t *testing.T) {
	for _, p := range kubectlPods(t) {
		checkAppendPod(t, p)
	}
	long := make([]byte, 20_000) // lengths of one, two and three bytes
	for i := range long {
		long[i] = 'a'
	}
	odd := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", GenerateName: "g-", Generation: -3, Finalizers: []string{"", "f"},
			Labels: map[string]string{"": "", "b": string(long[:200]), "a": "1"}, Annotations: map[string]string{"k": "", batchv1.JobIndexIgnoredFailureCountAnnotation: "", batchv1.JobCompletionIndexAnnotation: "3"},
			OwnerReferences:   []metav1.OwnerReference{{Controller: ptr.To(false)}, {UID: "u", BlockOwnerDeletion: ptr.To(true)}},
			DeletionTimestamp: &metav1.Time{}, DeletionGracePeriodSeconds: ptr.To(int64(0)),
		},
		Spec: corev1.PodSpec{
			Containers:     []corev1.Container{{}, {Name: "c"}},
			InitContainers: []corev1.Container{{Name: "s", RestartPolicy: ptr.To(corev1.ContainerRestartPolicy(""))}},
		},
		Status: corev1.PodStatus{
			Message:    string(long),
			Conditions: []corev1.PodCondition{{}, {Type: "Ready", LastProbeTime: metav1.Unix(-5, 7)}},
			ContainerStatuses: []corev1.ContainerStatus{{}, {RestartCount: -1, State: corev1.ContainerState{
				Waiting:    &corev1.ContainerStateWaiting{Message: "pulling"},
				Running:    &corev1.ContainerStateRunning{},
				Terminated: &corev1.ContainerStateTerminated{ExitCode: -2, Signal: 9, Message: string(long), FinishedAt: metav1.Unix(1, 999_999_999)},
			}}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "s", Ready: true}},
		},
	}
	checkAppendPod(t, odd)
	checkAppendPod(t, &corev1.Pod{})
	checkAppendPod(t, notUTF8Pod("\xff", "caf\xc3\x28"))
}

// notUTF8Pod is a pod whose strings are bad or worse, neither UTF-8 (the
// API server keeps such an annotation's bytes from a protobuf client): they
// are written as the converted message holds them, U+FFFD for each invalid
// sequence, map keys in the order of what is written.
func notUTF8Pod(bad, worse string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: bad, Kind: worse},
		ObjectMeta: metav1.ObjectMeta{
			Name: bad, GenerateName: worse, Namespace: bad, UID: "u" + ktypes.UID(worse), ResourceVersion: bad, Finalizers: []string{bad, "f", worse},
			Labels: map[string]string{"a" + bad: worse, "a\u00e9": bad, "b": "ok"},
			// Keys that become one: the last in byte order wins.
			Annotations:     map[string]string{bad: bad, "a\xfe": "2", "a\ufffd": "3", "a\xff": "1", "a\xc3": "4"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: bad, Kind: worse, Name: bad, UID: "x" + ktypes.UID(bad)}},
		},
		Spec: corev1.PodSpec{NodeName: bad, RestartPolicy: corev1.RestartPolicy(worse),
			Containers: []corev1.Container{{Name: bad, RestartPolicy: ptr.To(corev1.ContainerRestartPolicy(worse))}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodPhase(bad), Message: worse, Reason: bad,
			Conditions: []corev1.PodCondition{{Type: corev1.PodConditionType(bad), Status: corev1.ConditionStatus(worse), Reason: bad, Message: worse}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: worse, State: corev1.ContainerState{
				Waiting:    &corev1.ContainerStateWaiting{Reason: bad, Message: worse},
				Terminated: &corev1.ContainerStateTerminated{Reason: worse, Message: bad, ContainerID: worse},
			}}},
		},
	}
}

// FuzzAppendPod: every pod the contract can carry (decoded from arbitrary
// bytes, converted) is written as its message encodes.
func FuzzAppendPod(f *testing.F) {
	for _, p := range kubectlPods(f) {
		b, _ := proto.Marshal(kubeconv.PodFromKube(p))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m jobplanev1.Pod
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		checkAppendPod(t, kubeconv.PodToKube(&m))
	})
}

// kubectlPods are pods as kubectl shows them (lib/kubeconv's testdata).
func kubectlPods(t testing.TB) []*corev1.Pod {
	var pods []*corev1.Pod
	for _, name := range []string{"kubectl-pod-succeeded.json", "kubectl-pod-failed.json"} {
		data, err := os.ReadFile(filepath.Join("..", "kubeconv", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		var p corev1.Pod
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, &p)
	}
	return pods
}
