package engine

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Tests of the success policy: the reference's success_policy_test.go
// (TestMatchSuccessPolicy) and the syncs of TestSyncJobWithJobSuccessPolicy
// (job_controller_test.go). Shared helpers live in indexed_test.go.

func ixIndexesRule(indexes string) batchv1.SuccessPolicyRule {
	return batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To(indexes)}
}

func ixIndexesCountRule(indexes string, count int32) batchv1.SuccessPolicyRule {
	return batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To(indexes), SucceededCount: ptr.To(count)}
}

func ixCountRule(count int32) batchv1.SuccessPolicyRule {
	return batchv1.SuccessPolicyRule{SucceededCount: ptr.To(count)}
}

func TestMatchSuccessPolicy(t *testing.T) {
	policy := func(rules ...batchv1.SuccessPolicyRule) *batchv1.SuccessPolicy {
		return &batchv1.SuccessPolicy{Rules: rules}
	}
	cases := map[string]struct {
		successPolicy    *batchv1.SuccessPolicy
		completions      int32
		succeededIndexes orderedIntervals
		wantMessage      string
		wantMet          bool
	}{
		"successPolicy is null": {
			completions: 10, succeededIndexes: orderedIntervals{{0, 0}},
		},
		"no rules": {
			completions: 10, succeededIndexes: orderedIntervals{{0, 0}},
			successPolicy: policy(),
		},
		"rules.succeededIndexes is invalid format": {
			completions: 10, succeededIndexes: orderedIntervals{{0, 0}},
			successPolicy: policy(ixIndexesRule("invalid-form")),
		},
		"rules.succeededIndexes beyond completions never match": {
			completions: 3, succeededIndexes: orderedIntervals{{0, 2}},
			successPolicy: policy(ixIndexesRule("5-7")),
		},
		"rules.succeededIndexes matched": {
			completions: 10, succeededIndexes: orderedIntervals{{0, 2}, {4, 7}},
			successPolicy: policy(ixIndexesRule("0-2")),
			wantMessage:   "Matched rules at index 0", wantMet: true,
		},
		"rules.succeededIndexes not matched": {
			completions: 10, succeededIndexes: orderedIntervals{{0, 2}},
			successPolicy: policy(ixIndexesRule("3")),
		},
		"rules.succeededCount matched": {
			completions: 10, succeededIndexes: orderedIntervals{{0, 2}},
			successPolicy: policy(ixCountRule(2)),
			wantMessage:   "Matched rules at index 0", wantMet: true,
		},
		"rules.succeededCount matched exactly": {
			completions: 10, succeededIndexes: orderedIntervals{{0, 1}, {5, 5}},
			successPolicy: policy(ixCountRule(3)),
			wantMessage:   "Matched rules at index 0", wantMet: true,
		},
		"rules.succeededCount not matched": {
			completions: 10, succeededIndexes: orderedIntervals{{0, 2}},
			successPolicy: policy(ixCountRule(4)),
		},
		"multiple rules; one of the rules met": {
			completions: 10, succeededIndexes: orderedIntervals{{0, 2}, {4, 7}},
			successPolicy: policy(ixIndexesRule("9"), ixIndexesRule("4,6")),
			wantMessage:   "Matched rules at index 1", wantMet: true,
		},
		"multiple rules; all rules met, the first is reported": {
			completions: 10, succeededIndexes: orderedIntervals{{0, 2}, {4, 7}},
			successPolicy: policy(ixIndexesRule("0,1"), ixIndexesRule("5")),
			wantMessage:   "Matched rules at index 0", wantMet: true,
		},
		"multiple rules; an invalid rule is skipped": {
			completions: 10, succeededIndexes: orderedIntervals{{0, 0}},
			successPolicy: policy(ixIndexesRule("foo"), ixCountRule(1)),
			wantMessage:   "Matched rules at index 1", wantMet: true,
		},
		"rules.succeededIndexes and rules.succeededCount; met": {
			completions: 10, succeededIndexes: orderedIntervals{{0, 2}, {4, 7}},
			successPolicy: policy(ixIndexesCountRule("3-6", 2)),
			wantMessage:   "Matched rules at index 0", wantMet: true,
		},
		"rules.succeededIndexes and rules.succeededCount; not met": {
			completions: 10, succeededIndexes: orderedIntervals{{0, 2}, {6, 7}},
			successPolicy: policy(ixIndexesCountRule("3-6", 2)),
		},
		"no succeeded indexes": {
			completions: 10, succeededIndexes: orderedIntervals{},
			successPolicy: policy(ixCountRule(4)),
		},
		"rules.succeededIndexes is a proper subset of succeededIndexes": {
			completions: 10, succeededIndexes: orderedIntervals{{1, 5}, {6, 9}},
			successPolicy: policy(ixIndexesRule("2-4,6-8")),
			wantMessage:   "Matched rules at index 0", wantMet: true,
		},
		"rules.succeededIndexes equals succeededIndexes": {
			completions: 10, succeededIndexes: orderedIntervals{{2, 4}, {6, 9}},
			successPolicy: policy(ixIndexesRule("2-4,6-9")),
			wantMessage:   "Matched rules at index 0", wantMet: true,
		},
		"rules.succeededIndexes is a subset of succeededIndexes beyond completions": {
			completions: 10, succeededIndexes: orderedIntervals{{2, 5}, {7, 15}},
			successPolicy: policy(ixIndexesRule("2-4,8-12")),
			wantMessage:   "Matched rules at index 0", wantMet: true,
		},
		"rules.succeededIndexes is an empty set": {
			completions: 10, succeededIndexes: orderedIntervals{{1, 3}},
			successPolicy: policy(ixIndexesRule("")),
		},
		"rules.succeededIndexes and succeededIndexes are empty sets": {
			completions: 10, succeededIndexes: orderedIntervals{},
			successPolicy: policy(ixIndexesRule("")),
		},
		"no element of rules.succeededIndexes in succeededIndexes": {
			completions: 10, succeededIndexes: orderedIntervals{{1, 3}, {5, 7}},
			successPolicy: policy(ixIndexesRule("10-12,14-16")),
		},
		"rules overlap succeededIndexes at first": {
			completions: 10, succeededIndexes: orderedIntervals{{2, 4}, {6, 8}},
			successPolicy: policy(ixIndexesRule("1-3,5-7")),
		},
		"rules overlap succeededIndexes at first; succeededCount met": {
			completions: 10, succeededIndexes: orderedIntervals{{2, 4}, {6, 8}},
			successPolicy: policy(ixIndexesCountRule("1-3,5-7", 4)),
			wantMessage:   "Matched rules at index 0", wantMet: true,
		},
		"rules overlap succeededIndexes at first; succeededCount not met": {
			completions: 10, succeededIndexes: orderedIntervals{{2, 4}, {6, 8}},
			successPolicy: policy(ixIndexesCountRule("1-3,5-7", 5)),
		},
		"rules overlap succeededIndexes at last": {
			completions: 10, succeededIndexes: orderedIntervals{{1, 3}, {5, 7}},
			successPolicy: policy(ixIndexesRule("2-4,6-9")),
		},
		"rules overlap succeededIndexes at last; succeededCount met": {
			completions: 10, succeededIndexes: orderedIntervals{{1, 3}, {5, 7}},
			successPolicy: policy(ixIndexesCountRule("2-4,6-9", 4)),
			wantMessage:   "Matched rules at index 0", wantMet: true,
		},
		"rules completely overlap succeededIndexes": {
			completions: 10, succeededIndexes: orderedIntervals{{1, 3}, {7, 8}},
			successPolicy: policy(ixIndexesRule("0-4,6-9")),
		},
		"rules completely overlap succeededIndexes; succeededCount met": {
			completions: 10, succeededIndexes: orderedIntervals{{1, 3}, {7, 8}},
			successPolicy: policy(ixIndexesCountRule("0-4,6-9", 5)),
			wantMessage:   "Matched rules at index 0", wantMet: true,
		},
		"rules overlap multiple succeededIndexes at last": {
			completions: 10, succeededIndexes: orderedIntervals{{1, 3}, {5, 9}},
			successPolicy: policy(ixIndexesRule("0-6,8-9")),
		},
		"rules overlap multiple succeededIndexes at last; succeededCount met": {
			completions: 10, succeededIndexes: orderedIntervals{{1, 3}, {5, 9}},
			successPolicy: policy(ixIndexesCountRule("0-6,8-9", 7)),
			wantMessage:   "Matched rules at index 0", wantMet: true,
		},
		"rules overlap succeededIndexes at first and equal at last": {
			completions: 10, succeededIndexes: orderedIntervals{{1, 5}, {7, 10}},
			successPolicy: policy(ixIndexesRule("0-5,7-9")),
		},
		"rules overlap succeededIndexes at first and equal at last; succeededCount met": {
			completions: 10, succeededIndexes: orderedIntervals{{1, 5}, {7, 10}},
			successPolicy: policy(ixIndexesCountRule("0-5,7-9", 8)),
			wantMessage:   "Matched rules at index 0", wantMet: true,
		},
		"the first rule interval overlaps succeededIndexes at first": {
			completions: 10, succeededIndexes: orderedIntervals{{1, 10}},
			successPolicy: policy(ixIndexesRule("0-3,6-9")),
		},
		"the first rule interval overlaps succeededIndexes at first; succeededCount met": {
			completions: 10, succeededIndexes: orderedIntervals{{1, 10}},
			successPolicy: policy(ixIndexesCountRule("0-3,6-9", 7)),
			wantMessage:   "Matched rules at index 0", wantMet: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			msg, met := matchSuccessPolicy(tc.successPolicy, tc.completions, tc.succeededIndexes)
			if met != tc.wantMet {
				t.Errorf("met = %v, want %v", met, tc.wantMet)
			}
			if msg != tc.wantMessage {
				t.Errorf("message %q, want %q", msg, tc.wantMessage)
			}
		})
	}
}

func TestMatchSucceededIndexesRule(t *testing.T) {
	cases := map[string]struct {
		required, succeeded orderedIntervals
		count               *int32
		want                bool
	}{
		"all required succeeded":              {required: orderedIntervals{{0, 1}}, succeeded: orderedIntervals{{0, 3}}, want: true},
		"one required missing":                {required: orderedIntervals{{0, 1}, {5, 5}}, succeeded: orderedIntervals{{0, 3}}},
		"count reached within required":       {required: orderedIntervals{{0, 1}, {5, 5}}, succeeded: orderedIntervals{{0, 0}, {5, 5}}, count: ptr.To[int32](2), want: true},
		"successes outside required not used": {required: orderedIntervals{{0, 1}}, succeeded: orderedIntervals{{1, 1}, {3, 9}}, count: ptr.To[int32](2)},
		"required spans succeeded intervals":  {required: orderedIntervals{{0, 9}}, succeeded: orderedIntervals{{0, 3}, {5, 9}}, count: ptr.To[int32](9), want: true},
		"nothing succeeded":                   {required: orderedIntervals{{0, 1}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := matchSucceededIndexesRule(tc.required, tc.succeeded, tc.count); got != tc.want {
				t.Errorf("matchSucceededIndexesRule = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSyncWithSuccessPolicy(t *testing.T) {
	longAgo := now.Add(-time.Hour)
	rule01count1 := successPolicy(ixIndexesCountRule("0,1", 1))
	failJobOnDisruption := failurePolicy(ixDisruptionRule(batchv1.PodFailurePolicyActionFailJob))
	metAt0 := ixCond(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonSuccessPolicy, "Matched rules at index 0")
	completeAt0 := ixCond(batchv1.JobComplete, batchv1.JobReasonSuccessPolicy, "Matched rules at index 0")
	priorMet := withStatus(func(s *batchv1.JobStatus) { s.Conditions = append(s.Conditions, metAt0) })
	cases := map[string]ixSyncCase{
		"success policy met while some indexes failed: remaining pods deleted keeping finalizers": {
			job: ixJob(3, 3, rule01count1),
			pods: []*corev1.Pod{
				ixPod("a1", 0, failed),
				ixPod("a2", 0, running),
				ixPod("b", 1, succeeded),
				ixPod("c", 2, running),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 1, Succeeded: 1, Terminating: ptr.To[int32](2), CompletedIndexes: "1",
				Conditions: []batchv1.JobCondition{metAt0},
			},
			wantDeleted:        []string{"a2", "c"},
			wantFinalizersGone: []string{"a1", "a2", "b", "c"},
		},
		"success policy met and pod failure policy not matched": {
			job: ixJob(2, 2, rule01count1, failJobOnDisruption),
			pods: []*corev1.Pod{
				ixPod("a1", 0, failed),
				ixPod("a2", 0, running),
				ixPod("b", 1, succeeded),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 1, Succeeded: 1, Terminating: ptr.To[int32](1), CompletedIndexes: "1",
				Conditions: []batchv1.JobCondition{metAt0},
			},
			wantDeleted:        []string{"a2"},
			wantFinalizersGone: []string{"a1", "a2", "b"},
		},
		"success policy met and backoffLimitPerIndex not exceeded": {
			job: ixJob(2, 2, rule01count1, backoffLimitPerIndex(2)),
			pods: []*corev1.Pod{
				ixPod("a1", 0, failed),
				ixPod("a2", 0, running),
				ixPod("b", 1, succeeded),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 1, Succeeded: 1, Terminating: ptr.To[int32](1), CompletedIndexes: "1", FailedIndexes: ptr.To(""),
				Conditions: []batchv1.JobCondition{metAt0},
			},
			wantDeleted:        []string{"a2"},
			wantFinalizersGone: []string{"a1", "a2", "b"},
		},
		"success policy met with nothing running completes in one sync": {
			job:  ixJob(2, 3, successPolicy(ixIndexesRule("0"))),
			pods: []*corev1.Pod{ixPod("a", 0, succeeded), ixPod("b", 1, failed)},
			wantStatus: batchv1.JobStatus{
				Failed: 1, Succeeded: 1, Terminating: ptr.To[int32](0), CompletedIndexes: "0",
				Conditions: []batchv1.JobCondition{metAt0, completeAt0},
			},
			wantFinalizersGone: []string{"a", "b"},
			wantEvents:         []string{"Normal Completed"},
		},
		"job with SuccessCriteriaMet completes once all pods are removed": {
			job: ixJob(2, 2, rule01count1, backoffLimitPerIndex(2), priorMet),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed),
				ixPod("b", 1, succeeded),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 1, Succeeded: 1, Terminating: ptr.To[int32](0), CompletedIndexes: "1", FailedIndexes: ptr.To(""),
				Conditions: []batchv1.JobCondition{metAt0, completeAt0},
			},
			wantFinalizersGone: []string{"a", "b"},
			wantEvents:         []string{"Normal Completed"},
		},
		"job with SuccessCriteriaMet deletes pods still running and waits for them": {
			job: ixJob(3, 3, rule01count1, backoffLimitPerIndex(3), priorMet),
			pods: []*corev1.Pod{
				ixPod("a1", 0, failed),
				ixPod("a2", 1, running),
				ixPod("b", 1, succeeded),
				ixPod("c", 2, running),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 1, Succeeded: 1, Terminating: ptr.To[int32](2), CompletedIndexes: "1", FailedIndexes: ptr.To(""),
				Conditions: []batchv1.JobCondition{metAt0},
			},
			wantDeleted:        []string{"a2", "c"},
			wantFinalizersGone: []string{"a1", "a2", "b", "c"},
		},
		"job with SuccessCriteriaMet waits for terminating pods": {
			job: ixJob(3, 3, rule01count1, priorMet, withStatus(func(s *batchv1.JobStatus) {
				s.Succeeded, s.CompletedIndexes, s.Terminating = 1, "1", ptr.To[int32](1)
			})),
			pods: []*corev1.Pod{ixPod("c", 2, running, deleting(), noFinalizer())},
			wantStatus: batchv1.JobStatus{
				Succeeded: 1, Terminating: ptr.To[int32](1), CompletedIndexes: "1",
				Conditions: []batchv1.JobCondition{metAt0},
			},
		},
		"success policy and pod failure policy both met: the job fails": {
			job: ixJob(2, 2, rule01count1, failJobOnDisruption),
			pods: []*corev1.Pod{
				ixPod("a1", 0, failed, ixDisrupted()),
				ixPod("a2", 0, running),
				ixPod("b", 1, succeeded),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 2, Succeeded: 1, Terminating: ptr.To[int32](1), CompletedIndexes: "1",
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, "Pod default/a1 has condition DisruptionTarget matching FailJob rule at index 0"),
				},
			},
			wantDeleted:        []string{"a2"},
			wantFinalizersGone: []string{"a1", "a2", "b"},
		},
		"success policy and backoffLimitPerIndex both met: the job fails": {
			job: ixJob(2, 2, rule01count1, backoffLimitPerIndex(1)),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, failureCount(1)),
				ixPod("b", 1, succeeded),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 1, Succeeded: 1, Terminating: ptr.To[int32](0), CompletedIndexes: "1", FailedIndexes: ptr.To("0"),
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobFailureTarget, batchv1.JobReasonFailedIndexes, "Job has failed indexes"),
					ixCond(batchv1.JobFailed, batchv1.JobReasonFailedIndexes, "Job has failed indexes"),
				},
			},
			wantFinalizersGone: []string{"a", "b"},
			wantEvents:         []string{"Warning FailedIndexes"},
		},
		"success policy and maxFailedIndexes both met: the job fails": {
			job: ixJob(3, 3, successPolicy(ixIndexesRule("1")), backoffLimitPerIndex(0), maxFailedIndexes(0)),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, failureCount(0)),
				ixPod("b", 1, succeeded),
				ixPod("c", 2, running),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 2, Succeeded: 1, Terminating: ptr.To[int32](1), CompletedIndexes: "1", FailedIndexes: ptr.To("0"),
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobFailureTarget, batchv1.JobReasonMaxFailedIndexesExceeded, "Job has exceeded the specified maximal number of failed indexes"),
				},
			},
			wantDeleted:        []string{"c"},
			wantFinalizersGone: []string{"a", "b", "c"},
		},
		"success policy and backoffLimit both met: the job fails": {
			job: ixJob(2, 2, rule01count1, backoffLimit(1)),
			pods: []*corev1.Pod{
				ixPod("a1", 0, failed),
				ixPod("a2", 0, failed),
				ixPod("b", 1, succeeded),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 2, Succeeded: 1, Terminating: ptr.To[int32](0), CompletedIndexes: "1",
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"),
					ixCond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"),
				},
			},
			wantFinalizersGone: []string{"a1", "a2", "b"},
			wantEvents:         []string{"Warning BackoffLimitExceeded"},
		},
		"success policy and active deadline both met: the job fails": {
			job: ixJob(2, 2, rule01count1, activeDeadline(10), startedAt(longAgo)),
			pods: []*corev1.Pod{
				ixPod("a", 0, running),
				ixPod("b", 1, succeeded),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 1, Succeeded: 1, Terminating: ptr.To[int32](1), CompletedIndexes: "1",
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline"),
				},
			},
			wantDeleted:        []string{"a"},
			wantFinalizersGone: []string{"a", "b"},
		},
		"job with SuccessCriteriaMet never fails by pod failure policy": {
			job: ixJob(2, 2, successPolicy(ixCountRule(1)), failJobOnDisruption, priorMet, withStatus(func(s *batchv1.JobStatus) {
				s.Succeeded, s.CompletedIndexes, s.Terminating = 1, "1", ptr.To[int32](0)
			})),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, ixDisrupted()),
				ixPod("b", 1, succeeded),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 1, Succeeded: 1, Terminating: ptr.To[int32](0), CompletedIndexes: "1",
				Conditions: []batchv1.JobCondition{metAt0, completeAt0},
			},
			wantFinalizersGone: []string{"a", "b"},
			wantEvents:         []string{"Normal Completed"},
		},
		"job with SuccessCriteriaMet never fails by backoffLimitPerIndex": {
			job: ixJob(2, 2, successPolicy(ixIndexesRule("1")), backoffLimitPerIndex(1), priorMet, withStatus(func(s *batchv1.JobStatus) {
				s.Succeeded, s.CompletedIndexes, s.Terminating = 1, "1", ptr.To[int32](0)
			})),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, failureCount(1)),
				ixPod("b", 1, succeeded),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 1, Succeeded: 1, Terminating: ptr.To[int32](0), CompletedIndexes: "1", FailedIndexes: ptr.To("0"),
				Conditions: []batchv1.JobCondition{metAt0, completeAt0},
			},
			wantFinalizersGone: []string{"a", "b"},
			wantEvents:         []string{"Normal Completed"},
		},
		"job with SuccessCriteriaMet never fails by backoffLimit": {
			job: ixJob(2, 2, rule01count1, backoffLimit(1), priorMet, withStatus(func(s *batchv1.JobStatus) {
				s.Succeeded, s.CompletedIndexes, s.Terminating = 1, "1", ptr.To[int32](0)
			})),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed),
				ixPod("b", 1, succeeded),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 1, Succeeded: 1, Terminating: ptr.To[int32](0), CompletedIndexes: "1",
				Conditions: []batchv1.JobCondition{metAt0, completeAt0},
			},
			wantFinalizersGone: []string{"a", "b"},
			wantEvents:         []string{"Normal Completed"},
		},
		"job with FailureTarget never gets SuccessCriteriaMet": {
			job: ixJob(2, 2, rule01count1, failJobOnDisruption, withStatus(func(s *batchv1.JobStatus) {
				s.Failed, s.CompletedIndexes, s.Terminating = 1, "1", ptr.To[int32](0)
				s.Conditions = []batchv1.JobCondition{
					ixCond(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, "Pod default/a has condition DisruptionTarget matching FailJob rule at index 0"),
				}
			})),
			pods: []*corev1.Pod{
				ixPod("a", 0, failed, ixDisrupted(), noFinalizer()),
				ixPod("b", 1, succeeded),
			},
			wantStatus: batchv1.JobStatus{
				Failed: 1, Succeeded: 1, Terminating: ptr.To[int32](0), CompletedIndexes: "1",
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, "Pod default/a has condition DisruptionTarget matching FailJob rule at index 0"),
					ixCond(batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy, "Pod default/a has condition DisruptionTarget matching FailJob rule at index 0"),
				},
			},
			wantFinalizersGone: []string{"b"},
			wantEvents:         []string{"Warning PodFailurePolicy"},
		},
		"job without success policy completes with CompletionsReached": {
			job:  ixJob(1, 1),
			pods: []*corev1.Pod{ixPod("a1", 0, succeeded)},
			wantStatus: batchv1.JobStatus{
				Succeeded: 1, Terminating: ptr.To[int32](0), CompletedIndexes: "0",
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
					ixCond(batchv1.JobComplete, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
				},
			},
			wantFinalizersGone: []string{"a1"},
			wantEvents:         []string{"Normal Completed"},
		},
		"success policy not yet met: the job goes on": {
			job: ixJob(3, 3, successPolicy(ixIndexesRule("0,1"))),
			pods: []*corev1.Pod{
				ixPod("a", 0, running),
				ixPod("b", 1, succeeded),
			},
			wantStatus: batchv1.JobStatus{
				Active: 2, Succeeded: 1, Terminating: ptr.To[int32](0), CompletedIndexes: "1",
			},
			wantCreated:        []int{2},
			wantFinalizersGone: []string{"b"},
		},
		"succeededCount rule met": {
			job: ixJob(4, 4, successPolicy(ixCountRule(2))),
			pods: []*corev1.Pod{
				ixPod("a", 0, succeeded),
				ixPod("b", 1, running),
				ixPod("c", 2, succeeded),
				ixPod("d", 3, running),
			},
			wantStatus: batchv1.JobStatus{
				Succeeded: 2, Terminating: ptr.To[int32](2), CompletedIndexes: "0,2",
				Conditions: []batchv1.JobCondition{metAt0},
			},
			wantDeleted:        []string{"b", "d"},
			wantFinalizersGone: []string{"a", "b", "c", "d"},
		},
		"succeededCount rule not met: the job goes on": {
			job: ixJob(4, 4, successPolicy(ixCountRule(3))),
			pods: []*corev1.Pod{
				ixPod("a", 0, succeeded),
				ixPod("b", 1, running),
				ixPod("c", 2, succeeded),
			},
			wantStatus: batchv1.JobStatus{
				Active: 2, Succeeded: 2, Terminating: ptr.To[int32](0), CompletedIndexes: "0,2",
			},
			wantCreated:        []int{3},
			wantFinalizersGone: []string{"a", "c"},
		},
		"the first rule met is reported": {
			job: ixJob(3, 3, successPolicy(ixIndexesRule("2"), ixCountRule(1))),
			pods: []*corev1.Pod{
				ixPod("a", 0, succeeded),
				ixPod("b", 1, running),
			},
			wantStatus: batchv1.JobStatus{
				Succeeded: 1, Terminating: ptr.To[int32](1), CompletedIndexes: "0",
				Conditions: []batchv1.JobCondition{
					ixCond(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonSuccessPolicy, "Matched rules at index 1"),
				},
			},
			wantDeleted:        []string{"b"},
			wantFinalizersGone: []string{"a", "b"},
		},
		"indexes succeeded in earlier syncs count toward the success policy": {
			job: ixJob(3, 3, successPolicy(ixIndexesRule("0-1")), withStatus(func(s *batchv1.JobStatus) {
				s.Succeeded, s.CompletedIndexes = 2, "0,1"
			})),
			pods: []*corev1.Pod{ixPod("c", 2, running)},
			wantStatus: batchv1.JobStatus{
				Succeeded: 2, Terminating: ptr.To[int32](1), CompletedIndexes: "0,1",
				Conditions: []batchv1.JobCondition{metAt0},
			},
			wantDeleted:        []string{"c"},
			wantFinalizersGone: []string{"c"},
		},
		"rule with indexes beyond completions never matches": {
			job:  ixJob(2, 3, successPolicy(ixIndexesRule("5-7"))),
			pods: []*corev1.Pod{ixPod("a", 0, succeeded), ixPod("b", 1, running)},
			wantStatus: batchv1.JobStatus{
				Active: 2, Succeeded: 1, Terminating: ptr.To[int32](0), CompletedIndexes: "0",
			},
			wantCreated:        []int{2},
			wantFinalizersGone: []string{"a"},
		},
		"success policy waits for expectations before SuccessCriteriaMet": {
			job: ixJob(3, 3, rule01count1),
			pods: []*corev1.Pod{
				ixPod("b", 1, succeeded),
				ixPod("c", 2, running),
			},
			opts: []syncOpt{unsatisfiedExpectations()},
			wantStatus: batchv1.JobStatus{
				Succeeded: 1, Terminating: ptr.To[int32](1), CompletedIndexes: "1",
			},
			wantDeleted:        []string{"c"},
			wantFinalizersGone: []string{"b"},
		},
		"success policy stops ready pods": {
			job: ixJob(2, 2, rule01count1),
			pods: []*corev1.Pod{
				ixPod("a", 0, running, ready(longAgo)),
				ixPod("b", 1, succeeded),
			},
			wantStatus: batchv1.JobStatus{
				Succeeded: 1, Terminating: ptr.To[int32](1), CompletedIndexes: "1",
				Conditions: []batchv1.JobCondition{metAt0},
			},
			wantDeleted:        []string{"a"},
			wantFinalizersGone: []string{"a", "b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { ixRunSyncCase(t, tc) })
	}

	t.Run("success policy stops ready pods: ready drops to zero", func(t *testing.T) {
		o := summarize(runSync(t, ixJob(2, 2, rule01count1), []*corev1.Pod{
			ixPod("a", 0, running, ready(longAgo)),
			ixPod("b", 1, succeeded),
		}))
		if o.Status == nil || o.Status.Ready == nil || *o.Status.Ready != 0 || o.Status.Active != 0 {
			t.Fatalf("status %+v", o.Status)
		}
	})
}
