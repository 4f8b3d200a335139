package podwrites

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// recordedPod is a pod of a real cluster as the API server answers it,
// managedFields and all.
func recordedPod(tb testing.TB) *corev1.Pod {
	b, err := os.ReadFile("../../../../lib/kubeconv/testdata/kubectl-pod-succeeded.json")
	if err != nil {
		tb.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(b, pod); err != nil {
		tb.Fatal(err)
	}
	pod.APIVersion, pod.Kind = "v1", "Pod"
	return pod
}

// serializers are the protobuf serializer of client-go's scheme and the
// one of this package's negotiated serializer.
func serializers(tb testing.TB) (whole, metadataOnly runtime.Serializer) {
	for _, info := range scheme.Codecs.WithoutConversion().SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeProtobuf {
			whole = info.Serializer
		}
	}
	for _, info := range newMetadataOfPods(scheme.Codecs.WithoutConversion()).SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeProtobuf {
			metadataOnly = info.Serializer
		}
	}
	if whole == nil || metadataOnly == nil {
		tb.Fatal("no protobuf serializer")
	}
	return whole, metadataOnly
}

func encode(tb testing.TB, s runtime.Serializer, obj runtime.Object) []byte {
	b, err := runtime.Encode(s, obj)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// A pod answered in protobuf decodes to its name, namespace, uid,
// resourceVersion and owner references, what the executor reads of a
// written pod, and nothing else.
func TestAWrittenPodDecodesToItsMetadata(t *testing.T) {
	whole, metadataOnly := serializers(t)
	pod := recordedPod(t)
	pod.ResourceVersion = "4711"
	got := &corev1.Pod{}
	if _, _, err := metadataOnly.Decode(encode(t, whole, pod), nil, got); err != nil {
		t.Fatal(err)
	}
	want := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: "4711", OwnerReferences: pod.OwnerReferences}}
	if len(pod.OwnerReferences) == 0 || pod.UID == "" || len(pod.ManagedFields) == 0 {
		t.Fatalf("the recorded pod lacks what the test needs: %+v", pod.ObjectMeta)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
	}
	if ref := metav1.GetControllerOf(got); ref == nil || ref.Name == "" {
		t.Errorf("the decoded pod has no controller: %+v", got.OwnerReferences)
	}
}

// Anything but a pod in protobuf is decoded as the stock decoder does: a
// Status (the answer of a refused write), a Status decoded into a pod, a
// Job, a pod whose envelope says it is encoded, a pod in JSON.
func TestAnythingElseDecodesWhole(t *testing.T) {
	whole, metadataOnly := serializers(t)
	status := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Reason: metav1.StatusReasonConflict, Code: 409, Message: "the object has been modified"}
	job := &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}, ObjectMeta: metav1.ObjectMeta{Name: "job", Labels: map[string]string{"a": "b"}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](3)}}
	pod := recordedPod(t)
	encodedPod := encode(t, whole, pod)
	envelope := runtime.Unknown{}
	if err := envelope.Unmarshal(encodedPod[len(protobufMagic):]); err != nil {
		t.Fatal(err)
	}
	envelope.ContentEncoding = "gzip"
	gzipped, err := envelope.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		body []byte
		into func() runtime.Object
	}{
		{"a Status", encode(t, whole, status), func() runtime.Object { return &metav1.Status{} }},
		{"a Status into a pod", encode(t, whole, status), func() runtime.Object { return &corev1.Pod{} }},
		{"a Job", encode(t, whole, job), func() runtime.Object { return &batchv1.Job{} }},
		{"a pod said to be encoded", append(slices.Clone(protobufMagic), gzipped...), func() runtime.Object { return &corev1.Pod{} }},
	} {
		want, _, wantErr := whole.Decode(c.body, nil, c.into())
		got, _, err := metadataOnly.Decode(c.body, nil, c.into())
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s decoded to %+v, %v; the stock decoder's: %+v, %v", c.name, got, err, want, wantErr)
		}
	}

	jsonBody, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range newMetadataOfPods(scheme.Codecs.WithoutConversion()).SupportedMediaTypes() {
		if info.MediaType != runtime.ContentTypeJSON {
			continue
		}
		got := &corev1.Pod{}
		if _, _, err := info.Serializer.Decode(jsonBody, nil, got); err != nil || !reflect.DeepEqual(got.Spec, pod.Spec) {
			t.Errorf("a pod in JSON lost its spec: %v", err)
		}
	}
}

// What decoding a written pod costs: whole, and its metadata only. Run
// with:
//
//	go test -run '^$' -bench WrittenPod -benchmem ./services/executor/internal/podwrites/
func BenchmarkDecodeAWrittenPod(b *testing.B) {
	whole, metadataOnly := serializers(b)
	body := encode(b, whole, recordedPod(b))
	for name, s := range map[string]runtime.Serializer{"whole": whole, "metadata": metadataOnly} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := s.Decode(body, nil, &corev1.Pod{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Options encode to the parameters client-go's codec gives them: none when
// unset, and all of them when any is set.
func TestOptionsEncodeAsClientGosCodecEncodesThem(t *testing.T) {
	codec := unsetOptions{scheme.ParameterCodec}
	for _, opts := range []runtime.Object{
		&metav1.CreateOptions{}, &metav1.PatchOptions{}, &metav1.UpdateOptions{}, &metav1.GetOptions{}, &metav1.ListOptions{},
		&metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "m"},
		&metav1.PatchOptions{Force: ptr.To(true), FieldValidation: "Strict"},
		&metav1.ListOptions{LabelSelector: "a=b", Limit: 5},
	} {
		want, wantErr := scheme.ParameterCodec.EncodeParameters(opts, corev1.SchemeGroupVersion)
		got, err := codec.EncodeParameters(opts, corev1.SchemeGroupVersion)
		if (err == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%T %+v: %v (%v), client-go's codec: %v (%v)", opts, opts, got, err, want, wantErr)
		}
	}
}
