package svc_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/services/planner/internal/svc"
)

func client(t testing.TB) jobplanev1.PlannerServiceClient {
	srv := grpctest.Start(t, func(s *grpcserver.Server) {
		s.RegisterService(&svc.ServiceDesc, svc.NewPlannerService())
	})
	return jobplanev1.NewPlannerServiceClient(srv.Conn)
}

// loadRequest reads a PlanSync request written as grpcurl users write it.
func loadRequest(t testing.TB, name string) *jobplanev1.PlanSyncRequest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	req := &jobplanev1.PlanSyncRequest{}
	if err := protojson.Unmarshal(data, req); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestPlanSyncPlansTheIndexedJob(t *testing.T) {
	resp, err := client(t).PlanSync(context.Background(), loadRequest(t, "plansync-indexed-job.json"))
	if err != nil {
		t.Fatal(err)
	}
	plan := resp.GetPlan()
	var kinds []string
	for _, a := range plan.GetActions() {
		switch {
		case a.GetCreatePods() != nil:
			kinds = append(kinds, "create")
			if got := a.GetCreatePods().GetPods(); len(got) != 1 || got[0].GetCompletionIndex() != 2 || got[0].GetGenerateName() != "render-2-" ||
				got[0].GetHostname() != "render-2" || got[0].GetAnnotations()["batch.kubernetes.io/job-completion-index"] != "2" {
				t.Errorf("pods to create %v", got)
			}
		case a.GetWriteStatus() != nil:
			kinds = append(kinds, "status")
		case a.GetRemoveFinalizers() != nil:
			kinds = append(kinds, "finalizers")
			if pods := a.GetRemoveFinalizers().GetPods(); len(pods) != 1 || pods[0].GetUid() != "pod-0" {
				t.Errorf("finalizers removed from %v", pods)
			}
		}
		if a.GetReason() == "" || a.GetExplanation() == "" {
			t.Errorf("action without reason or explanation: %v", a)
		}
	}
	if strings.Join(kinds, ",") != "create,status,finalizers" {
		t.Errorf("actions %v", kinds)
	}
	last := plan.GetActions()[1].GetWriteStatus().GetStatus()
	if last.GetCompletedIndexes() != "0" || last.GetSucceeded() != 1 || last.GetActive() != 2 {
		t.Errorf("status %v", last)
	}
	if plan.GetMetrics().GetSyncAction() != "pods_created" || plan.GetMetrics().GetCompletionMode() != "Indexed" {
		t.Errorf("metrics %v", plan.GetMetrics())
	}
	if plan.GetSummary() == "" {
		t.Error("no summary")
	}
}

func TestPlanSyncRejectsMalformedSnapshotsWithFieldPaths(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*jobplanev1.PlanSyncRequest)
		field string
	}{
		{"missing job", func(r *jobplanev1.PlanSyncRequest) { r.Job = nil }, "job"},
		{"missing template", func(r *jobplanev1.PlanSyncRequest) { r.Job.Spec.Template = nil }, "job.spec.template"},
		{"missing spec", func(r *jobplanev1.PlanSyncRequest) { r.Job.Spec = nil }, "job.spec"},
		{"missing job uid", func(r *jobplanev1.PlanSyncRequest) { r.Job.Metadata.Uid = "" }, "job.metadata.uid"},
		{"missing now", func(r *jobplanev1.PlanSyncRequest) { r.Now = nil }, "now"},
		{"invalid now", func(r *jobplanev1.PlanSyncRequest) { r.Now = &timestamppb.Timestamp{Seconds: -1 << 62} }, "now"},
		{"pod not owned by the job", func(r *jobplanev1.PlanSyncRequest) { r.Pods[1].Metadata.OwnerReferences[0].Uid = "other" }, "pods[1].metadata.ownerReferences"},
		{"pod without owner", func(r *jobplanev1.PlanSyncRequest) { r.Pods[0].Metadata.OwnerReferences = nil }, "pods[0].metadata.ownerReferences"},
		{"duplicate pod uids", func(r *jobplanev1.PlanSyncRequest) { r.Pods[1].Metadata.Uid = "pod-0" }, "pods[1].metadata.uid"},
		{"pod without uid", func(r *jobplanev1.PlanSyncRequest) { r.Pods[0].Metadata.Uid = "" }, "pods[0].metadata.uid"},
		{"pod in another namespace", func(r *jobplanev1.PlanSyncRequest) { r.Pods[0].Metadata.Namespace = "other" }, "pods[0].metadata.namespace"},
		{"negative active", func(r *jobplanev1.PlanSyncRequest) { r.Job.Status.Active = -1 }, "job.status.active"},
		{"negative failed", func(r *jobplanev1.PlanSyncRequest) { r.Job.Status.Failed = -3 }, "job.status.failed"},
		{"negative parallelism", func(r *jobplanev1.PlanSyncRequest) { r.Job.Spec.Parallelism = proto.Int32(-1) }, "job.spec.parallelism"},
		{"indexed without completions", func(r *jobplanev1.PlanSyncRequest) { r.Job.Spec.Completions = nil }, "job.spec.completions"},
		{"absurd indexed parallelism", func(r *jobplanev1.PlanSyncRequest) { r.Job.Spec.Parallelism = proto.Int32(1 << 30) }, "job.spec.parallelism"},
		{"backoffLimitPerIndex without Indexed", func(r *jobplanev1.PlanSyncRequest) {
			r.Job.Spec.CompletionMode = proto.String("NonIndexed")
			r.Job.Spec.BackoffLimitPerIndex = proto.Int32(1)
		}, "job.spec.backoffLimitPerIndex"},
		{"duplicate uncounted uid", func(r *jobplanev1.PlanSyncRequest) {
			r.Job.Status.UncountedTerminatedPods = &jobplanev1.UncountedTerminatedPods{Succeeded: []string{"a"}, Failed: []string{"a"}}
		}, "job.status.uncountedTerminatedPods.failed[0]"},
		{"empty finalizer removal uid", func(r *jobplanev1.PlanSyncRequest) { r.FinalizerRemovalsInFlight = []string{""} }, "finalizerRemovalsInFlight[0]"},
		{"backoff record without failure time", func(r *jobplanev1.PlanSyncRequest) {
			r.BackoffRecord = &jobplanev1.BackoffRecord{FailuresAfterLastSuccess: 2}
		}, "backoffRecord.lastFailureTime"},
		{"bad tracking finalizer", func(r *jobplanev1.PlanSyncRequest) { r.TrackingFinalizer = "not a finalizer!" }, "trackingFinalizer"},
		// Beyond the API server's bounds a policy costs seconds to match:
		// each case below was a request of a few hundred kilobytes.
		{"too many pod failure policy rules", func(r *jobplanev1.PlanSyncRequest) {
			r.Job.Spec.PodFailurePolicy = &jobplanev1.PodFailurePolicy{Rules: repeated(21, failJobOnExitCode)}
		}, "job.spec.podFailurePolicy.rules"},
		{"too many pod condition patterns", func(r *jobplanev1.PlanSyncRequest) {
			rule := failJobOnExitCode()
			rule.OnExitCodes, rule.OnPodConditions = nil, repeated(30_000, func() *jobplanev1.PodFailurePolicyOnPodConditionsPattern {
				return &jobplanev1.PodFailurePolicyOnPodConditionsPattern{Type: "A", Status: "False"}
			})
			r.Job.Spec.PodFailurePolicy = &jobplanev1.PodFailurePolicy{Rules: []*jobplanev1.PodFailurePolicyRule{rule}}
		}, "job.spec.podFailurePolicy.rules[0].onPodConditions"},
		{"too many exit codes", func(r *jobplanev1.PlanSyncRequest) {
			rule := failJobOnExitCode()
			rule.OnExitCodes.Values = repeated(40_000, func() int32 { return 2 })
			r.Job.Spec.PodFailurePolicy = &jobplanev1.PodFailurePolicy{Rules: []*jobplanev1.PodFailurePolicyRule{rule}}
		}, "job.spec.podFailurePolicy.rules[0].onExitCodes.values"},
		{"too many success policy rules", func(r *jobplanev1.PlanSyncRequest) {
			r.Job.Spec.SuccessPolicy = &jobplanev1.SuccessPolicy{Rules: repeated(30_000, func() *jobplanev1.SuccessPolicyRule {
				return &jobplanev1.SuccessPolicyRule{SucceededIndexes: proto.String("1")}
			})}
		}, "job.spec.successPolicy.rules"},
		{"succeeded indexes too long", func(r *jobplanev1.PlanSyncRequest) {
			r.Job.Spec.SuccessPolicy = &jobplanev1.SuccessPolicy{Rules: []*jobplanev1.SuccessPolicyRule{
				{SucceededIndexes: proto.String(strings.Repeat("0,", 40_000))},
			}}
		}, "job.spec.successPolicy.rules[0].succeededIndexes"},
	}
	c := client(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := loadRequest(t, "plansync-indexed-job.json")
			tc.edit(req)
			_, err := c.PlanSync(context.Background(), req)
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", err)
			}
			found := false
			for _, v := range apierr.FieldViolations(err) {
				found = found || v.Field == tc.field
			}
			if !found {
				t.Errorf("violations %v lack %s", apierr.FieldViolations(err), tc.field)
			}
		})
	}
}

// repeated is n values made by f.
func repeated[T any](n int, f func() T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = f()
	}
	return out
}

func failJobOnExitCode() *jobplanev1.PodFailurePolicyRule {
	return &jobplanev1.PodFailurePolicyRule{Action: "FailJob",
		OnExitCodes: &jobplanev1.PodFailurePolicyOnExitCodesRequirement{Operator: "In", Values: []int32{1}}}
}

func TestStreamPlanSyncAnswersEachSnapshotInOrder(t *testing.T) {
	stream, err := client(t).StreamPlanSync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	good := loadRequest(t, "plansync-indexed-job.json")
	bad := loadRequest(t, "plansync-indexed-job.json")
	bad.Job.Spec.Template = nil
	ids := []string{"a", "b", "c"}
	for i, req := range []*jobplanev1.PlanSyncRequest{good, bad, good} {
		if err := stream.Send(&jobplanev1.StreamPlanSyncRequest{Id: ids[i], Request: req}); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetId() != id {
			t.Errorf("response %d has id %q, want %q", i, resp.GetId(), id)
		}
		if i == 1 {
			st := status.FromProto(resp.GetError())
			if st.Code() != codes.InvalidArgument || len(apierr.FieldViolations(st.Err())) == 0 || resp.GetResponse() != nil {
				t.Errorf("bad snapshot answered %v / %v", resp.GetError(), resp.GetResponse())
			}
		} else if resp.GetError() != nil || len(resp.GetResponse().GetPlan().GetActions()) == 0 {
			t.Errorf("good snapshot answered %v", resp)
		}
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Errorf("stream end: %v", err)
	}
}

// recordingCodec keeps the bytes of the last message received.
type recordingCodec struct {
	encoding.CodecV2
	last []byte
}

func (c *recordingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	c.last = data.Materialize()
	return c.CodecV2.Unmarshal(data, v)
}

func planBytes(t *testing.T, c jobplanev1.PlannerServiceClient, req *jobplanev1.PlanSyncRequest) []byte {
	t.Helper()
	rec := &recordingCodec{CodecV2: encoding.GetCodecV2("proto")}
	if _, err := c.PlanSync(context.Background(), req, grpc.ForceCodecV2(rec)); err != nil {
		t.Fatal(err)
	}
	return rec.last
}

// richRequest plans pod creations with label and annotation maps, failed
// pods to count and finalizers to remove, so that map order and pod order
// would show in the bytes if they leaked.
func richRequest(t *testing.T) *jobplanev1.PlanSyncRequest {
	req := loadRequest(t, "plansync-indexed-job.json")
	req.Job.Spec.Parallelism = proto.Int32(10)
	req.Job.Spec.Completions = proto.Int32(40)
	req.Job.Spec.BackoffLimitPerIndex = proto.Int32(2)
	req.Job.Spec.BackoffLimit = nil
	req.Job.Spec.Template.Metadata.Annotations = map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}
	template := req.Pods[1]
	for i := 10; i < 22; i++ {
		p := proto.Clone(template).(*jobplanev1.Pod)
		p.Metadata.Name = fmt.Sprintf("render-%d-x", i)
		p.Metadata.Uid = fmt.Sprintf("pod-%d", i)
		p.Metadata.Annotations = map[string]string{"batch.kubernetes.io/job-completion-index": fmt.Sprint(i), "batch.kubernetes.io/job-index-failure-count": "0"}
		p.Status.Phase = "Failed"
		if i%2 == 0 {
			p.Status.Phase = "Succeeded"
		}
		req.Pods = append(req.Pods, p)
	}
	spec, _ := structpb.NewStruct(map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{"name": "main"}}})
	req.Job.Spec.Template.Spec = spec
	return req
}

func TestPlanSyncIsByteForByteDeterministic(t *testing.T) {
	c := client(t)
	req := richRequest(t)
	first := planBytes(t, c, req)
	for range 20 {
		if got := planBytes(t, c, req); !bytes.Equal(got, first) {
			t.Fatal("the same request gave different bytes")
		}
	}
}

func TestPlanSyncDoesNotDependOnPodOrder(t *testing.T) {
	c := client(t)
	req := richRequest(t)
	want := planBytes(t, c, req)
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := proto.Clone(req).(*jobplanev1.PlanSyncRequest)
		r.Shuffle(len(shuffled.Pods), func(i, j int) { shuffled.Pods[i], shuffled.Pods[j] = shuffled.Pods[j], shuffled.Pods[i] })
		if got := planBytes(t, c, shuffled); !bytes.Equal(got, want) {
			t.Fatal("shuffling the pods changed the plan")
		}
	}
}

func TestValidateJobReturnsTheDefaultedJob(t *testing.T) {
	req := loadRequest(t, "plansync-indexed-job.json")
	job := req.Job
	job.Spec.BackoffLimit = nil
	job.Status = nil
	resp, err := client(t).ValidateJob(context.Background(), &jobplanev1.ValidateJobRequest{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	spec := resp.GetJob().GetSpec()
	if spec.GetBackoffLimit() != 6 || spec.GetSuspend() || spec.GetPodReplacementPolicy() != "TerminatingOrFailed" || spec.GetManualSelector() {
		t.Errorf("defaults not applied: %v", spec)
	}
	if got := spec.GetTemplate().GetSpec().GetFields()["containers"].GetListValue().GetValues(); len(got) != 1 {
		t.Errorf("template spec lost: %v", spec.GetTemplate().GetSpec())
	}
}

func TestValidateJobAnswersFieldViolationsInKubernetesPaths(t *testing.T) {
	job := loadRequest(t, "plansync-indexed-job.json").Job
	job.Spec.Parallelism = proto.Int32(-2)
	job.Spec.PodFailurePolicy = &jobplanev1.PodFailurePolicy{Rules: []*jobplanev1.PodFailurePolicyRule{{
		Action: "FailJob", OnExitCodes: &jobplanev1.PodFailurePolicyOnExitCodesRequirement{Operator: "In", Values: []int32{5, 0}},
	}}}
	_, err := client(t).ValidateJob(context.Background(), &jobplanev1.ValidateJobRequest{Job: job})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v", err)
	}
	want := map[string]bool{
		"job.spec.parallelism":                                     false,
		"job.spec.podFailurePolicy.rules[0].onExitCodes.values":    false,
		"job.spec.podFailurePolicy.rules[0].onExitCodes.values[1]": false,
	}
	for _, v := range apierr.FieldViolations(err) {
		if _, ok := want[v.Field]; ok {
			want[v.Field] = true
		}
	}
	for field, seen := range want {
		if !seen {
			t.Errorf("no violation of %s in %v", field, apierr.FieldViolations(err))
		}
	}
}

func TestValidateJobWithoutJobIsInvalid(t *testing.T) {
	_, err := client(t).ValidateJob(context.Background(), &jobplanev1.ValidateJobRequest{})
	if v := apierr.FieldViolations(err); status.Code(err) != codes.InvalidArgument || len(v) != 1 || v[0].Field != "job" {
		t.Fatalf("got %v", err)
	}
}

// rawRequest is a request sent as its bytes, as written.
type rawRequest []byte

func (r rawRequest) MarshalWire() ([][]byte, error) { return [][]byte{r}, nil }

// A request that cannot be decoded (here a Job's name that is not UTF-8)
// fails its own answer, with its id, not the stream.
func TestStreamPlanSyncAnswersARequestItCannotDecodeAlone(t *testing.T) {
	stream, err := client(t).StreamPlanSync(context.Background(), grpcserver.CallCodec())
	if err != nil {
		t.Fatal(err)
	}
	good := loadRequest(t, "plansync-indexed-job.json")
	bad := loadRequest(t, "plansync-indexed-job.json")
	bad.Job.Metadata.Name = "NOT-UTF8"
	b, err := proto.Marshal(&jobplanev1.StreamPlanSyncRequest{Id: "b", Request: bad})
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("NOT-UTF8"), []byte("\xff\xfe-UTF8\xff"), 1)
	badID, err := proto.Marshal(&jobplanev1.StreamPlanSyncRequest{Id: "IDxx", Request: good})
	if err != nil {
		t.Fatal(err)
	}
	badID = bytes.Replace(badID, []byte("IDxx"), []byte("ID\xff\xfe"), 1) // answered without its id
	for _, m := range []any{&jobplanev1.StreamPlanSyncRequest{Id: "a", Request: good}, rawRequest(b), rawRequest(badID), &jobplanev1.StreamPlanSyncRequest{Id: "c", Request: good}} {
		if err := stream.SendMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "", "c"} {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("answer %s: %v", id, err)
		}
		if resp.GetId() != id {
			t.Fatalf("answer %q, want %q", resp.GetId(), id)
		}
		if st := status.FromProto(resp.GetError()); (id == "b" || id == "") != (st.Code() == codes.InvalidArgument) {
			t.Errorf("answer %s: %v", id, st.Err())
		}
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Errorf("stream end: %v", err)
	}
}
