package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// notUTF8 is an annotation's value that is not UTF-8: the API server takes
// it from a client writing protobuf.
const notUTF8 = "caf\xc3\x28"

// A Job whose annotations are not UTF-8 runs to completion with its bytes
// as they are (its pods carry the template's), where the planner once
// refused its snapshot and with it the stream every Job's plans share; it
// is answered as the API server's JSON
// shows it, so that a client decoding with protobuf-go can read the
// answers that hold it.
func TestAJobWhoseStringsAreNotUTF8(t *testing.T) {
	e := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns = "bytes"
	namespace(t, e.client, ns)
	writer := protobufClient(t, e)
	job := newJob(ns, "odd", 1, 1)
	job.Annotations = map[string]string{"note": notUTF8}
	job.Spec.Template.Annotations = map[string]string{"note": notUTF8}
	if _, err := writer.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the Job as protobuf: %v", err)
	}
	stored, err := writer.BatchV1().Jobs(ns).Get(ctx, "odd", metav1.GetOptions{})
	if err != nil || stored.Annotations["note"] != notUTF8 {
		t.Fatalf("the API server did not keep the bytes (%q, %v): nothing to test", stored.Annotations["note"], err)
	}

	var pods []corev1.Pod
	waitFor(t, 30*time.Second, "the Job's pod", func() (bool, error) {
		list, err := writer.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		pods = list.Items
		return err == nil && len(pods) == 1, err
	})
	if got := pods[0].Annotations["note"]; got != notUTF8 {
		t.Errorf("the pod's annotation %q, want the template's bytes %q", got, notUTF8)
	}

	finishPods(t, e.client, ns)
	waitComplete(t, e.client, ns, "odd")

	shown := strings.ToValidUTF8(notUTF8, "\uFFFD")
	got, err := e.api.GetJob(ctx, &jobplanev1.GetJobRequest{Namespace: ns, Name: "odd", IncludePods: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := proto.Marshal(got); err != nil {
		t.Errorf("protobuf-go cannot encode GetJob's answer, nor decode it: %v", err)
	}
	if a := got.GetJob().GetMetadata().GetAnnotations()["note"]; a != shown {
		t.Errorf("GetJob's annotation %q, want %q", a, shown)
	}
	list, err := e.api.ListJobs(ctx, &jobplanev1.ListJobsRequest{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := proto.Marshal(list); err != nil {
		t.Errorf("protobuf-go cannot encode ListJobs' answer, nor decode it: %v", err)
	}
}

// protobufClient writes and reads as protobuf, as the executor does.
func protobufClient(t *testing.T, e *env) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(e.config)
	cfg.ContentType, cfg.AcceptContentTypes = protobufContentType, protobufContentType
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}
