package grpcserver

import (
	"bytes"
	"fmt"
	"testing"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/kubeconv"
)

// codecMessage has maps (labels, annotations, a Struct), nested and
// repeated messages and a timestamp.
func codecMessage(t *testing.T) *jobplanev1.PlanSyncRequest {
	t.Helper()
	spec, err := structpb.NewStruct(map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{"name": "main", "image": "busybox"}}})
	if err != nil {
		t.Fatal(err)
	}
	meta := func(name string) *jobplanev1.ObjectMeta {
		return &jobplanev1.ObjectMeta{
			Name: name, Namespace: "ns", Uid: "uid-" + name,
			Labels:            map[string]string{"a": "1", "b": "2", "c": "3", "é": "4"},
			Annotations:       map[string]string{"x": "1", "y": "2", "z": "3"},
			CreationTimestamp: timestamppb.New(timestamppb.Now().AsTime()),
		}
	}
	req := &jobplanev1.PlanSyncRequest{Job: &jobplanev1.Job{Metadata: meta("job"), Spec: &jobplanev1.JobSpec{
		Template: &jobplanev1.PodTemplateSpec{Metadata: meta("template"), Spec: spec},
	}}}
	for _, n := range []string{"p0", "p1", "p2"} {
		req.Pods = append(req.Pods, &jobplanev1.Pod{Metadata: meta(n)})
	}
	return req
}

// The codec writes what protobuf-go's deterministic marshaling writes, on
// each of its paths: vtprotobuf alone (a pod, a plan), field by field
// (messages holding a Struct or a google.rpc.Status), unknown fields kept.
func TestCodecMarshalsAsDeterministicProto(t *testing.T) {
	req := codecMessage(t)
	withUnknown := codecMessage(t)
	withUnknown.Pods[0].ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 7))
	withUnknown.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 998, protowire.BytesType), "u"))
	labels := map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}
	idx := int32(3)
	plan := &jobplanev1.SyncPlan{Summary: "s", ReleaseJobState: true, Actions: []*jobplanev1.Action{
		{Kind: &jobplanev1.Action_CreatePods{CreatePods: &jobplanev1.CreatePodsAction{Pods: []*jobplanev1.PodToCreate{
			{CompletionIndex: &idx, GenerateName: "p-", Labels: labels, Annotations: labels, Finalizers: []string{"f"}},
			{GenerateName: "q-", Labels: labels},
		}}}},
	}}
	for name, m := range map[string]proto.Message{
		"request with a Struct":   req,
		"stream request":          &jobplanev1.StreamPlanSyncRequest{Id: "1", Request: req},
		"delta":                   &jobplanev1.StreamPlanSyncRequest{Id: "2", Delta: &jobplanev1.PlanSyncDelta{BaseId: "1", Job: req.Job, UpsertedPods: req.Pods, RemovedPodUids: []string{"x", "y"}, Now: timestamppb.Now()}},
		"unknown fields":          withUnknown,
		"pod":                     req.Pods[0],
		"plan":                    plan,
		"response":                &jobplanev1.StreamPlanSyncResponse{Id: "3", Response: &jobplanev1.PlanSyncResponse{Plan: plan}},
		"error response":          &jobplanev1.StreamPlanSyncResponse{Id: "4", Error: &spb.Status{Code: 3, Message: "bad"}},
		"empty":                   &jobplanev1.StreamPlanSyncRequest{},
		"struct alone":            req.Job.Spec.Template.Spec,
		"message without vtproto": &spb.Status{Code: 5, Message: "m"},
	} {
		t.Run(name, func(t *testing.T) {
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			for range 20 {
				got, err := Codec().Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Materialize(), want) {
					t.Fatal("not the bytes of protobuf-go's deterministic marshaling")
				}
			}
		})
	}
}

// The bulk of the planner's messages takes vtprotobuf's path.
func TestCodecEncodesWithVTProtobufWhereDeterministic(t *testing.T) {
	for m, want := range map[proto.Message]bool{
		&jobplanev1.Pod{}:                    true,
		&jobplanev1.SyncPlan{}:               true,
		&jobplanev1.PlanSyncResponse{}:       true,
		&jobplanev1.ObjectMeta{}:             true,
		&jobplanev1.PlanSyncRequest{}:        false, // its Job's template holds a Struct
		&jobplanev1.Job{}:                    false,
		&jobplanev1.StreamPlanSyncResponse{}: false, // google.rpc.Status has no vtprotobuf code
	} {
		if got := marshalPlanOf(m.ProtoReflect().Descriptor()).stable; got != want {
			t.Errorf("%T: vtprotobuf's encoder whole %v, want %v", m, got, want)
		}
	}
	// A message of a type that is not stable is written whole when the
	// fields that make it so are unset: a streamed plan, a request whose
	// Job is left out.
	for name, c := range map[string]struct {
		m    proto.Message
		want bool
	}{
		"streamed plan":          {&jobplanev1.StreamPlanSyncResponse{Id: "1", Response: &jobplanev1.PlanSyncResponse{}}, true},
		"streamed error":         {&jobplanev1.StreamPlanSyncResponse{Id: "1", Error: &spb.Status{Code: 3}}, false},
		"request without a Job":  {&jobplanev1.PlanSyncRequest{TrackingFinalizer: "f"}, true},
		"request with a Job":     {&jobplanev1.PlanSyncRequest{Job: &jobplanev1.Job{}}, false},
		"a type without vtproto": {&spb.Status{Code: 3}, false},
	} {
		m := c.m.ProtoReflect()
		if got := marshalPlanOf(m.Descriptor()).whole(m); got != c.want {
			t.Errorf("%s: written whole %v, want %v", name, got, c.want)
		}
	}
}

func TestCodecUnmarshalsAsProto(t *testing.T) {
	m := codecMessage(t)
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	// Unknown fields are kept, as proto.Unmarshal keeps them.
	b = protowire.AppendTag(b, 999, protowire.BytesType)
	b = protowire.AppendString(b, "unknown")
	want := &jobplanev1.PlanSyncRequest{}
	if err := proto.Unmarshal(b, want); err != nil {
		t.Fatal(err)
	}
	got := &jobplanev1.PlanSyncRequest{Pods: []*jobplanev1.Pod{{}}} // replaced, not merged into
	if err := Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("decoded %v, want %v", got, want)
	}
}

// vtprotobuf's decoder does not check UTF-8: the codec refuses what
// proto.Unmarshal refuses, in any string of any nested message or map.
func TestCodecRefusesInvalidUTF8(t *testing.T) {
	// proto.Marshal refuses invalid UTF-8: each case writes marker, which
	// the encoded bytes then have replaced by an invalid sequence as long.
	const marker = "@@"
	for name, set := range map[string]func(*jobplanev1.PlanSyncRequest){
		"string":    func(r *jobplanev1.PlanSyncRequest) { r.Pods[1].Metadata.Name = marker },
		"map key":   func(r *jobplanev1.PlanSyncRequest) { r.Pods[2].Metadata.Labels[marker] = "v" },
		"map value": func(r *jobplanev1.PlanSyncRequest) { r.Job.Metadata.Annotations["k"] = marker },
		"struct value": func(r *jobplanev1.PlanSyncRequest) {
			r.Job.Spec.Template.Spec.Fields["mode"] = structpb.NewStringValue(marker)
		},
		"struct key": func(r *jobplanev1.PlanSyncRequest) {
			r.Job.Spec.Template.Spec.Fields[marker] = structpb.NewBoolValue(true)
		},
		"repeated message": func(r *jobplanev1.PlanSyncRequest) {
			r.Pods = append(r.Pods, &jobplanev1.Pod{Metadata: &jobplanev1.ObjectMeta{Uid: marker}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			m := codecMessage(t)
			set(m)
			b, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Count(b, []byte(marker)) != 1 {
				t.Fatal("the marker is not in the encoding once")
			}
			b = bytes.Replace(b, []byte(marker), []byte("\xc3\x28"), 1)
			if err := proto.Unmarshal(b, &jobplanev1.PlanSyncRequest{}); err == nil {
				t.Fatal("proto.Unmarshal accepted invalid UTF-8")
			}
			if err := Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &jobplanev1.PlanSyncRequest{}); err == nil {
				t.Fatal("the codec accepted invalid UTF-8")
			}
			// The same bytes, valid, decode.
			b = bytes.Replace(b, []byte("\xc3\x28"), []byte("\xc3\xa9"), 1)
			if err := Codec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &jobplanev1.PlanSyncRequest{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// onePodPlan is the plan that starts a one-pod Job: create its pod, write
// its status, record the event.
func onePodPlan() *jobplanev1.SyncPlan {
	labels := map[string]string{"batch.kubernetes.io/job-name": "pi", "batch.kubernetes.io/controller-uid": "uid", "controller-uid": "uid", "job-name": "pi"}
	return &jobplanev1.SyncPlan{Summary: "Created 1 pod", Actions: []*jobplanev1.Action{
		{Reason: "TooFewActivePods", Kind: &jobplanev1.Action_CreatePods{CreatePods: &jobplanev1.CreatePodsAction{CreationReason: "new",
			Pods: []*jobplanev1.PodToCreate{{GenerateName: "pi-", Labels: labels, Finalizers: []string{"batch.kubernetes.io/job-tracking"}}}}}},
		{Reason: "StatusChanged", Kind: &jobplanev1.Action_WriteStatus{WriteStatus: &jobplanev1.WriteStatusAction{
			Status: &jobplanev1.JobStatus{Active: 1, StartTime: timestamppb.Now()}}}},
	}}
}

// listOfJobs is the executor's answer to ListJobs of n Jobs as the API
// server defaults them: a pod template spec is a Struct.
func listOfJobs(b *testing.B, n int) *jobplanev1.ListJobsResponse {
	uid := types.UID("0c6ad0a8-8b9a-4b43-a07a-5d4f27a0a2d1")
	labels := map[string]string{"batch.kubernetes.io/controller-uid": string(uid), "batch.kubernetes.io/job-name": "x", "controller-uid": string(uid), "job-name": "x"}
	resp := &jobplanev1.ListJobsResponse{}
	for i := range n {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("job-", i), Namespace: "tenant", UID: uid, ResourceVersion: "12345", Generation: 1, CreationTimestamp: metav1.Now(), Labels: labels},
			Spec: batchv1.JobSpec{
				Completions: ptr.To[int32](1), Parallelism: ptr.To[int32](1), BackoffLimit: ptr.To[int32](6), Suspend: ptr.To(true), ManagedBy: ptr.To("jobplane.dev/executor"),
				CompletionMode: ptr.To(batchv1.NonIndexedCompletion), PodReplacementPolicy: ptr.To(batchv1.TerminatingOrFailed),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": string(uid)}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: "default-scheduler",
					TerminationGracePeriodSeconds: ptr.To[int64](30), SecurityContext: &corev1.PodSecurityContext{},
					Containers: []corev1.Container{{Name: "main", Image: "busybox", ImagePullPolicy: corev1.PullAlways,
						TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
				}},
			},
		}
		j, err := kubeconv.JobFromKube(job)
		if err != nil {
			b.Fatal(err)
		}
		resp.Jobs = append(resp.Jobs, j)
	}
	return resp
}

// BenchmarkCodecMarshal compares the codec's encoder with protobuf-go's
// deterministic marshaling on each of its paths: vtprotobuf whole (a plan of
// 1,000 pods to create), field by field (a request of 10,000 pods whose Job
// holds a Struct, as a client other than the executor sends it), streamed
// responses (their type holds a google.rpc.Status, unset: whole), and the
// executor's answers (field by field: Structs and scalars written by the
// codec itself).
func BenchmarkCodecMarshal(b *testing.B) {
	req := codecMessage(&testing.T{})
	pod := req.Pods[0]
	req.Pods = nil
	for i := range 10_000 {
		p := proto.Clone(pod).(*jobplanev1.Pod)
		p.Metadata.Name = fmt.Sprintf("pod-%d", i)
		req.Pods = append(req.Pods, p)
	}
	labels := map[string]string{"batch.kubernetes.io/job-name": "job", "batch.kubernetes.io/controller-uid": "uid", "app": "x"}
	plan := &jobplanev1.SyncPlan{Summary: "create"}
	create := &jobplanev1.CreatePodsAction{}
	for i := range int32(1000) {
		create.Pods = append(create.Pods, &jobplanev1.PodToCreate{CompletionIndex: &i, GenerateName: "job-", Labels: labels, Annotations: labels, Finalizers: []string{"f"}})
	}
	plan.Actions = []*jobplanev1.Action{{Kind: &jobplanev1.Action_CreatePods{CreatePods: create}}}
	for _, m := range []struct {
		name string
		msg  proto.Message
	}{
		{"plan", plan},
		{"request", req},
		{"stream-response", &jobplanev1.StreamPlanSyncResponse{Id: "1", Response: &jobplanev1.PlanSyncResponse{Plan: plan}}},
		{"one-pod-stream-response", &jobplanev1.StreamPlanSyncResponse{Id: "1", Response: &jobplanev1.PlanSyncResponse{Plan: onePodPlan()}}},
		{"list-of-100-jobs", listOfJobs(b, 100)},
	} {
		b.Run("message="+m.name+"/encoder=codec", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Codec().Marshal(m.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("message="+m.name+"/encoder=protobuf-go", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := deterministic.Marshal(m.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
