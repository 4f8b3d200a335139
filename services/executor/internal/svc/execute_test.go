package svc_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/apierr"
	"github.com/jobplane/jobplane/lib/plan"
)

func requeuePlan(after time.Duration) *jobplanev1.SyncPlan {
	return &jobplanev1.SyncPlan{Summary: "wait", Actions: []*jobplanev1.Action{{
		Reason: "Backoff",
		Kind:   &jobplanev1.Action_Requeue{Requeue: &jobplanev1.RequeueAction{After: durationpb.New(after)}},
	}}}
}

// What a plan copies from the Job's conditions, which the API server does
// not bound, is cut to size rather than refused: a Job failed by another
// controller's reason still finishes through Execute.
func TestExecuteCutsWhatAPlanCopiesFromTheJobToSize(t *testing.T) {
	f := newFixture(t)
	f.runner.job = job("default", "work")
	req := &jobplanev1.ExecuteRequest{Namespace: "default", Name: "work", Uid: "uid-work", Plan: &jobplanev1.SyncPlan{
		Actions: []*jobplanev1.Action{{Kind: &jobplanev1.Action_RecordEvent{RecordEvent: &jobplanev1.RecordEventAction{
			Type: "Warning", Reason: strings.Repeat("R", 200), Message: strings.Repeat("é", 600)}}}},
		Metrics: &jobplanev1.SyncMetrics{FinishedResult: "failed", FinishedReason: "ByAnotherController"},
	}}
	if _, err := f.api.Execute(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	e, ok := f.runner.got.Actions[0].(plan.RecordEvent)
	if !ok || len(e.Reason) != 128 || len(e.Message) != 1024 || !utf8.ValidString(e.Message) {
		t.Errorf("event %d bytes of reason, %d of message (valid UTF-8 %v), want 128 and 1,024", len(e.Reason), len(e.Message), utf8.ValidString(e.Message))
	}
	if got := f.runner.got.Metrics.FinishedReason; got != "Other" {
		t.Errorf("finished reason %q, want Other", got)
	}
}

func TestExecute(t *testing.T) {
	jobNotFound := apierr.New(codes.NotFound, "JOB_NOT_FOUND", nil, "Job default/work not found")
	cases := []struct {
		name    string
		req     *jobplanev1.ExecuteRequest
		runErr  error
		code    codes.Code
		fields  []string
		calls   []string
		message []string
	}{
		{name: "hands the plan to the controller",
			req:   &jobplanev1.ExecuteRequest{Namespace: "default", Name: "work", Uid: "uid-work", Plan: requeuePlan(time.Second)},
			calls: []string{"Execute default/work"}},
		{name: "an empty plan is a plan",
			req:   &jobplanev1.ExecuteRequest{Namespace: "default", Name: "work", Uid: "uid-work", Plan: &jobplanev1.SyncPlan{}},
			calls: []string{"Execute default/work"}},
		{name: "namespace, name, uid and plan are required",
			req:  &jobplanev1.ExecuteRequest{},
			code: codes.InvalidArgument, fields: []string{"name", "namespace", "plan", "uid"}},
		{name: "a malformed plan is reported with the other violations",
			req: &jobplanev1.ExecuteRequest{Namespace: "default", Uid: "uid-work", Plan: &jobplanev1.SyncPlan{Actions: []*jobplanev1.Action{
				{Kind: &jobplanev1.Action_DeletePods{DeletePods: &jobplanev1.DeletePodsAction{Pods: []*jobplanev1.PodRef{{Name: "work-a"}}}}},
				{},
			}}},
			code: codes.InvalidArgument, fields: []string{"name", "plan.actions[0].deletePods.pods[0].uid", "plan.actions[1].kind"}},
		{name: "a caller's plan keeps to what the executor keeps",
			req: &jobplanev1.ExecuteRequest{Namespace: "default", Name: "work", Uid: "uid-work", Plan: &jobplanev1.SyncPlan{
				Actions: []*jobplanev1.Action{
					{Kind: &jobplanev1.Action_DeletePods{DeletePods: &jobplanev1.DeletePodsAction{Pods: []*jobplanev1.PodRef{{Name: "work-a", Uid: "a"}, {Name: "work-a", Uid: "a"}}}}},
					{Kind: &jobplanev1.Action_WriteStatus{WriteStatus: &jobplanev1.WriteStatusAction{Status: &jobplanev1.JobStatus{},
						BackoffRecord: &jobplanev1.BackoffRecord{FailuresAfterLastSuccess: -1}}}},
					{Kind: &jobplanev1.Action_CreatePods{CreatePods: &jobplanev1.CreatePodsAction{CreationReason: "because"}}},
				},
				Metrics: &jobplanev1.SyncMetrics{CompletionMode: "Sideways", PodsFailed: -1,
					PodFailuresByPolicyAction: map[string]int32{"FailJob": -1, "k1": 1}},
			}},
			code: codes.InvalidArgument, fields: []string{
				"plan.actions[0].deletePods.pods[1].name",
				"plan.actions[1].writeStatus.backoffRecord.failuresAfterLastSuccess", "plan.actions[2].createPods.creationReason",
				"plan.metrics.completionMode",
				"plan.metrics.podFailuresByPolicyAction[FailJob]", "plan.metrics.podFailuresByPolicyAction[k1]", "plan.metrics.podsFailed"}},
		{name: "the controller's errors are answered as they are",
			req:    &jobplanev1.ExecuteRequest{Namespace: "default", Name: "work", Uid: "uid-work", Plan: requeuePlan(time.Second)},
			runErr: jobNotFound, code: codes.NotFound, message: []string{"Job default/work not found"},
			calls: []string{"Execute default/work"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.runner.outcomes = []*jobplanev1.ActionOutcome{{Result: "Done", Succeeded: 1}}
			f.runner.job = job("default", "work")
			f.runner.err = tc.runErr
			resp, err := f.api.Execute(context.Background(), tc.req)
			wantStatus(t, err, tc.code, tc.message...)
			equal(t, "field violations", fields(err), tc.fields)
			equal(t, "controller calls", f.runner.calls, tc.calls)
			equal(t, "API actions", f.actions(), nil)
			if err != nil {
				return
			}
			if f.runner.uid != "uid-work" || f.runner.got == nil || len(f.runner.got.Actions) != len(tc.req.GetPlan().GetActions()) {
				t.Errorf("controller got uid %q and plan %+v", f.runner.uid, f.runner.got)
			}
			if len(resp.GetOutcomes()) != 1 || resp.GetOutcomes()[0].GetResult() != "Done" || resp.GetJob().GetMetadata().GetUid() != "uid-work" {
				t.Errorf("answer: %v", resp)
			}
		})
	}
}

func TestSyncJob(t *testing.T) {
	syncPlan, errs := plan.FromProto(requeuePlan(5*time.Second), field.NewPath("plan"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	cases := []struct {
		name   string
		req    *jobplanev1.SyncJobRequest
		plan   *plan.Plan
		job    *batchv1.Job
		runErr error
		code   codes.Code
		fields []string
		calls  []string
	}{
		{name: "answers the plan performed", req: &jobplanev1.SyncJobRequest{Namespace: "default", Name: "work"},
			plan: syncPlan, job: job("default", "work"), calls: []string{"SyncJob default/work"}},
		{name: "a sync that planned nothing", req: &jobplanev1.SyncJobRequest{Namespace: "default", Name: "work"},
			job: job("default", "work"), calls: []string{"SyncJob default/work"}},
		{name: "namespace and name are required", req: &jobplanev1.SyncJobRequest{Name: "work"},
			code: codes.InvalidArgument, fields: []string{"namespace"}},
		{name: "the controller's errors are answered as they are", req: &jobplanev1.SyncJobRequest{Namespace: "default", Name: "work"},
			runErr: apierr.New(codes.Unavailable, "PLANNER_UNAVAILABLE", nil, "planner down"), code: codes.Unavailable,
			calls: []string{"SyncJob default/work"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.runner.plan, f.runner.job, f.runner.err = tc.plan, tc.job, tc.runErr
			f.runner.outcomes = []*jobplanev1.ActionOutcome{{Result: "Done"}}
			resp, err := f.api.SyncJob(context.Background(), tc.req)
			wantStatus(t, err, tc.code)
			equal(t, "field violations", fields(err), tc.fields)
			equal(t, "controller calls", f.runner.calls, tc.calls)
			if err != nil {
				return
			}
			var want *jobplanev1.SyncPlan
			if tc.plan != nil {
				want = plan.ToProto(tc.plan)
			}
			if !proto.Equal(resp.GetPlan(), want) {
				t.Errorf("plan %v, want %v", resp.GetPlan(), want)
			}
			if resp.GetJob().GetKind() != "Job" || len(resp.GetOutcomes()) != 1 {
				t.Errorf("answer: %v", resp)
			}
		})
	}
}
