package engine

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Tests of the pod failure policy: the matching of one failed pod against
// the rules (the reference's TestMatchPodFailurePolicy) and its effect on a
// sync (the reference's TestSyncJobWithJobPodFailurePolicy), with the
// v1.36 defaults: every Job feature gate on, so terminal conditions are
// delayed behind FailureTarget/SuccessCriteriaMet until no pod terminates.

// pfpLongAgo is a finish time whose pod failure backoff is long over.
var pfpLongAgo = now.Add(-time.Hour)

const (
	pfpIgnore    = batchv1.PodFailurePolicyActionIgnore
	pfpFailJob   = batchv1.PodFailurePolicyActionFailJob
	pfpFailIndex = batchv1.PodFailurePolicyActionFailIndex
	pfpCount     = batchv1.PodFailurePolicyActionCount
	pfpIn        = batchv1.PodFailurePolicyOnExitCodesOpIn
	pfpNotIn     = batchv1.PodFailurePolicyOnExitCodesOpNotIn
)

func pfpExitRule(action batchv1.PodFailurePolicyAction, op batchv1.PodFailurePolicyOnExitCodesOperator, values ...int32) batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{
		Action:      action,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: values},
	}
}

func pfpExitRuleFor(container string, action batchv1.PodFailurePolicyAction, op batchv1.PodFailurePolicyOnExitCodesOperator, values ...int32) batchv1.PodFailurePolicyRule {
	r := pfpExitRule(action, op, values...)
	r.OnExitCodes.ContainerName = ptr.To(container)
	return r
}

func pfpPattern(t corev1.PodConditionType, s corev1.ConditionStatus) batchv1.PodFailurePolicyOnPodConditionsPattern {
	return batchv1.PodFailurePolicyOnPodConditionsPattern{Type: t, Status: s}
}

func pfpCondRule(action batchv1.PodFailurePolicyAction, patterns ...batchv1.PodFailurePolicyOnPodConditionsPattern) batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{Action: action, OnPodConditions: patterns}
}

func pfpPolicy(rules ...batchv1.PodFailurePolicyRule) *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: rules}
}

// pfpOnExitCodeRules are the reference test's rules: Ignore 1,2,3 then
// FailJob 5,6,7.
func pfpOnExitCodeRules() []batchv1.PodFailurePolicyRule {
	return []batchv1.PodFailurePolicyRule{
		pfpExitRule(pfpIgnore, pfpIn, 1, 2, 3),
		pfpExitRule(pfpFailJob, pfpIn, 5, 6, 7),
	}
}

// pfpInitExitCode makes an init container terminate with code.
func pfpInitExitCode(container string, code int32, finishedAt time.Time) podOpt {
	return func(p *corev1.Pod) {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{
			Name:  container,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(finishedAt)}},
		})
	}
}

// pfpRunningContainer, pfpWaitingContainer and pfpNoStateContainer add a
// container that has not terminated.
func pfpRunningContainer(container string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: container, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		})
	}
}

func pfpWaitingContainer(container string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: container, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
		})
	}
}

func pfpNoStateContainer(container string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: container})
	}
}

func pfpDisruption(s corev1.ConditionStatus) podOpt {
	return podConditionOpt(corev1.DisruptionTarget, s, now.Add(-time.Minute))
}

func pfpPodCondition(t corev1.PodConditionType) podOpt {
	return podConditionOpt(t, corev1.ConditionTrue, now.Add(-time.Minute))
}

func TestMatchPodFailurePolicy(t *testing.T) {
	resourceLimitExceeded := corev1.PodConditionType("ResourceLimitExceeded")
	cases := map[string]struct {
		policy      *batchv1.PodFailurePolicy
		pod         *corev1.Pod
		wantMessage *string
		wantCount   bool
		wantAction  *batchv1.PodFailurePolicyAction
	}{
		"no policy: the failure counts and no action": {
			policy:    nil,
			pod:       newPod("mypod", failed, exitCode("", 2, now)),
			wantCount: true,
		},
		"policy without rules: the failure counts and no action": {
			policy:    pfpPolicy(),
			pod:       newPod("mypod", failed, exitCode("main-container", 2, now)),
			wantCount: true,
		},
		"Ignore rule matched by exit code In": {
			policy:     pfpPolicy(pfpExitRule(pfpIgnore, pfpIn, 1, 2, 3)),
			pod:        newPod("mypod", failed, exitCode("", 2, now)),
			wantCount:  false,
			wantAction: ptr.To(pfpIgnore),
		},
		"Ignore rule matched by negative exit codes (Windows)": {
			policy:     pfpPolicy(pfpExitRule(pfpIgnore, pfpIn, -1073741676, -1073741510)),
			pod:        newPod("mypod", failed, exitCode("", -1073741510, now)),
			wantCount:  false,
			wantAction: ptr.To(pfpIgnore),
		},
		"FailJob rule matched by exit code In names container, pod, code and rule index": {
			policy:      pfpPolicy(pfpExitRule(pfpFailJob, pfpIn, 1, 2, 3)),
			pod:         newPod("mypod", failed, exitCode("main-container", 2, now)),
			wantMessage: ptr.To("Container main-container for pod default/mypod failed with exit code 2 matching FailJob rule at index 0"),
			wantCount:   true,
			wantAction:  ptr.To(pfpFailJob),
		},
		"NotIn with value 0 matches the failing container, not the succeeded one": {
			policy:      pfpPolicy(pfpExitRule(pfpFailJob, pfpNotIn, 0)),
			pod:         newPod("mypod", failed, exitCode("main-container", 1, now), exitCode("suppport-container", 0, now)),
			wantMessage: ptr.To("Container main-container for pod default/mypod failed with exit code 1 matching FailJob rule at index 0"),
			wantCount:   true,
			wantAction:  ptr.To(pfpFailJob),
		},
		"successful containers are skipped by NotIn rules": {
			policy: pfpPolicy(pfpExitRule(pfpFailJob, pfpNotIn, 111)),
			pod: newPod("mypod", failed, pfpInitExitCode("init-container", 0, now),
				exitCode("main-container", 111, now), exitCode("suppport-container", 0, now)),
			wantCount: true,
		},
		"exit code 0 never matches, even NotIn": {
			policy:    pfpPolicy(pfpExitRule(pfpFailJob, pfpNotIn, 1)),
			pod:       newPod("mypod", failed, exitCode("main-container", 0, now), pfpInitExitCode("init", 0, now)),
			wantCount: true,
		},
		"exit code 0 listed In never matches": {
			policy:    pfpPolicy(pfpExitRule(pfpIgnore, pfpIn, 0, 1)),
			pod:       newPod("mypod", failed, exitCode("main-container", 0, now)),
			wantCount: true,
		},
		"second rule FailJob matches when the first does not": {
			policy: pfpPolicy(
				pfpExitRule(pfpCount, pfpIn, 1, 2, 3),
				pfpExitRule(pfpFailJob, pfpIn, 4, 5, 6)),
			pod:         newPod("mypod", failed, exitCode("main-container", 6, now)),
			wantMessage: ptr.To("Container main-container for pod default/mypod failed with exit code 6 matching FailJob rule at index 1"),
			wantCount:   true,
			wantAction:  ptr.To(pfpFailJob),
		},
		"Count rule matched by exit code; a container without state is skipped": {
			policy:     pfpPolicy(pfpExitRule(pfpCount, pfpIn, 1, 2, 3)),
			pod:        newPod("mypod", failed, pfpNoStateContainer("foo"), exitCode("bar", 2, now)),
			wantCount:  true,
			wantAction: ptr.To(pfpCount),
		},
		"FailIndex rule matched by exit code": {
			policy:     pfpPolicy(pfpExitRule(pfpFailIndex, pfpIn, 1, 2, 3)),
			pod:        newPod("mypod", failed, exitCode("", 2, now)),
			wantCount:  true,
			wantAction: ptr.To(pfpFailIndex),
		},
		"FailIndex rule matched by pod condition": {
			policy:     pfpPolicy(pfpCondRule(pfpFailIndex, pfpPattern(corev1.DisruptionTarget, corev1.ConditionTrue))),
			pod:        newPod("mypod", failed, pfpDisruption(corev1.ConditionTrue)),
			wantCount:  true,
			wantAction: ptr.To(pfpFailIndex),
		},
		"unknown action of a matching exit-code rule: the next rule applies": {
			policy: pfpPolicy(
				pfpExitRule("UnknownAction", pfpIn, 1, 2),
				pfpExitRule(pfpFailJob, pfpIn, 2, 3)),
			pod:         newPod("mypod", failed, exitCode("main-container", 2, now)),
			wantMessage: ptr.To("Container main-container for pod default/mypod failed with exit code 2 matching FailJob rule at index 1"),
			wantCount:   true,
			wantAction:  ptr.To(pfpFailJob),
		},
		"unknown action of a matching pod-condition rule: the next rule applies": {
			policy: pfpPolicy(
				pfpCondRule("UnkonwnAction", pfpPattern(corev1.DisruptionTarget, corev1.ConditionTrue)),
				pfpCondRule(pfpIgnore, pfpPattern(corev1.DisruptionTarget, corev1.ConditionTrue))),
			pod:        newPod("mypod", failed, pfpDisruption(corev1.ConditionTrue)),
			wantCount:  false,
			wantAction: ptr.To(pfpIgnore),
		},
		"unknown operator never matches: the next rule applies": {
			policy: pfpPolicy(
				pfpExitRule(pfpIgnore, "UnknownOperator", 1, 2),
				pfpExitRule(pfpFailJob, pfpIn, 2, 3)),
			pod:         newPod("mypod", failed, exitCode("main-container", 2, now)),
			wantMessage: ptr.To("Container main-container for pod default/mypod failed with exit code 2 matching FailJob rule at index 1"),
			wantCount:   true,
			wantAction:  ptr.To(pfpFailJob),
		},
		"unknown action of the only matching rule: default handling": {
			policy:    pfpPolicy(pfpExitRule("UnknownAction", pfpIn, 2)),
			pod:       newPod("mypod", failed, exitCode("main-container", 2, now)),
			wantCount: true,
		},
		"containerName excludes other containers' exit codes": {
			policy: pfpPolicy(
				pfpExitRuleFor("main-container", pfpIgnore, pfpIn, 1, 2, 3),
				pfpExitRuleFor("main-container", pfpFailJob, pfpIn, 5, 6, 7)),
			pod:       newPod("mypod", failed, exitCode("monitoring-container", 5, now), exitCode("main-container", 42, now)),
			wantCount: true,
		},
		"containerName matches the named container only": {
			policy:      pfpPolicy(pfpExitRuleFor("main-container", pfpFailJob, pfpIn, 5, 42)),
			pod:         newPod("mypod", failed, exitCode("monitoring-container", 5, now), exitCode("main-container", 42, now)),
			wantMessage: ptr.To("Container main-container for pod default/mypod failed with exit code 42 matching FailJob rule at index 0"),
			wantCount:   true,
			wantAction:  ptr.To(pfpFailJob),
		},
		"containerName matches an init container": {
			policy:      pfpPolicy(pfpExitRuleFor("init-container", pfpFailJob, pfpIn, 5)),
			pod:         newPod("mypod", failed, pfpInitExitCode("init-container", 5, now), exitCode("main-container", 5, now)),
			wantMessage: ptr.To("Container init-container for pod default/mypod failed with exit code 5 matching FailJob rule at index 0"),
			wantCount:   true,
			wantAction:  ptr.To(pfpFailJob),
		},
		"init container exit code matches when no regular container does": {
			policy:      pfpPolicy(pfpOnExitCodeRules()...),
			pod:         newPod("mypod", failed, pfpInitExitCode("init-container", 5, now), exitCode("main-container", 143, now)),
			wantMessage: ptr.To("Container init-container for pod default/mypod failed with exit code 5 matching FailJob rule at index 1"),
			wantCount:   true,
			wantAction:  ptr.To(pfpFailJob),
		},
		"regular containers are checked before init containers": {
			policy:      pfpPolicy(pfpExitRule(pfpFailJob, pfpIn, 5, 6)),
			pod:         newPod("mypod", failed, pfpInitExitCode("init-container", 5, now), exitCode("main-container", 6, now)),
			wantMessage: ptr.To("Container main-container for pod default/mypod failed with exit code 6 matching FailJob rule at index 0"),
			wantCount:   true,
			wantAction:  ptr.To(pfpFailJob),
		},
		"the first matching container in status order is reported": {
			policy:      pfpPolicy(pfpExitRule(pfpFailJob, pfpIn, 5, 6)),
			pod:         newPod("mypod", failed, exitCode("c1", 6, now), exitCode("c2", 5, now)),
			wantMessage: ptr.To("Container c1 for pod default/mypod failed with exit code 6 matching FailJob rule at index 0"),
			wantCount:   true,
			wantAction:  ptr.To(pfpFailJob),
		},
		"running and waiting containers are skipped": {
			policy:      pfpPolicy(pfpExitRule(pfpFailJob, pfpNotIn, 0)),
			pod:         newPod("mypod", failed, pfpRunningContainer("c1"), pfpWaitingContainer("c2"), exitCode("c3", 7, now)),
			wantMessage: ptr.To("Container c3 for pod default/mypod failed with exit code 7 matching FailJob rule at index 0"),
			wantCount:   true,
			wantAction:  ptr.To(pfpFailJob),
		},
		"only non-terminated containers: no exit code matches": {
			policy:    pfpPolicy(pfpExitRule(pfpFailJob, pfpNotIn, 0)),
			pod:       newPod("mypod", failed, pfpRunningContainer("c1"), pfpWaitingContainer("c2"), pfpNoStateContainer("c3")),
			wantCount: true,
		},
		"Ignore rule matched by pod condition True": {
			policy:     pfpPolicy(pfpCondRule(pfpIgnore, pfpPattern(corev1.DisruptionTarget, corev1.ConditionTrue))),
			pod:        newPod("mypod", failed, pfpDisruption(corev1.ConditionTrue)),
			wantCount:  false,
			wantAction: ptr.To(pfpIgnore),
		},
		"Ignore rule matches a pattern with status False": {
			policy:     pfpPolicy(pfpCondRule(pfpIgnore, pfpPattern(corev1.DisruptionTarget, corev1.ConditionFalse))),
			pod:        newPod("mypod", failed, pfpDisruption(corev1.ConditionFalse)),
			wantCount:  false,
			wantAction: ptr.To(pfpIgnore),
		},
		"Ignore rule matches a pattern with status Unknown": {
			policy:     pfpPolicy(pfpCondRule(pfpIgnore, pfpPattern(corev1.DisruptionTarget, corev1.ConditionUnknown))),
			pod:        newPod("mypod", failed, pfpDisruption(corev1.ConditionUnknown)),
			wantCount:  false,
			wantAction: ptr.To(pfpIgnore),
		},
		"pattern status False does not match actual True": {
			policy:    pfpPolicy(pfpCondRule(pfpIgnore, pfpPattern(corev1.DisruptionTarget, corev1.ConditionFalse))),
			pod:       newPod("mypod", failed, pfpDisruption(corev1.ConditionTrue)),
			wantCount: true,
		},
		"pattern status True does not match actual False": {
			policy:    pfpPolicy(pfpCondRule(pfpIgnore, pfpPattern(corev1.DisruptionTarget, corev1.ConditionTrue))),
			pod:       newPod("mypod", failed, pfpDisruption(corev1.ConditionFalse)),
			wantCount: true,
		},
		"FailJob rule matched by pod condition names the condition type": {
			policy:      pfpPolicy(pfpCondRule(pfpFailJob, pfpPattern(corev1.DisruptionTarget, corev1.ConditionTrue))),
			pod:         newPod("mypod", failed, pfpDisruption(corev1.ConditionTrue)),
			wantMessage: ptr.To("Pod default/mypod has condition DisruptionTarget matching FailJob rule at index 0"),
			wantCount:   true,
			wantAction:  ptr.To(pfpFailJob),
		},
		"FailJob rule on a custom condition type at rule index 1": {
			policy: pfpPolicy(
				pfpCondRule(pfpIgnore, pfpPattern(corev1.DisruptionTarget, corev1.ConditionTrue)),
				pfpCondRule(pfpFailJob, pfpPattern(resourceLimitExceeded, corev1.ConditionTrue))),
			pod:         newPod("mypod", failed, pfpPodCondition(resourceLimitExceeded)),
			wantMessage: ptr.To("Pod default/mypod has condition ResourceLimitExceeded matching FailJob rule at index 1"),
			wantCount:   true,
			wantAction:  ptr.To(pfpFailJob),
		},
		"Count rule matched by pod condition": {
			policy:     pfpPolicy(pfpCondRule(pfpCount, pfpPattern(corev1.DisruptionTarget, corev1.ConditionTrue))),
			pod:        newPod("mypod", failed, pfpDisruption(corev1.ConditionTrue)),
			wantCount:  true,
			wantAction: ptr.To(pfpCount),
		},
		"any of several patterns matches": {
			policy: pfpPolicy(pfpCondRule(pfpIgnore,
				pfpPattern(resourceLimitExceeded, corev1.ConditionTrue),
				pfpPattern(corev1.DisruptionTarget, corev1.ConditionTrue))),
			pod:        newPod("mypod", failed, pfpPodCondition(corev1.PodReady), pfpDisruption(corev1.ConditionTrue)),
			wantCount:  false,
			wantAction: ptr.To(pfpIgnore),
		},
		"the first matching rule decides among many": {
			policy: pfpPolicy(
				pfpExitRule(pfpCount, pfpNotIn, 8),
				pfpExitRule(pfpIgnore, pfpIn, 1, 2, 3),
				pfpExitRule(pfpFailJob, pfpNotIn, 5, 6, 7),
				pfpCondRule(pfpCount, pfpPattern(resourceLimitExceeded, corev1.ConditionTrue)),
				pfpCondRule(pfpIgnore, pfpPattern(corev1.DisruptionTarget, corev1.ConditionTrue))),
			pod:        newPod("mypod", failed, exitCode("", 32, now)),
			wantCount:  true,
			wantAction: ptr.To(pfpCount),
		},
		"the first pod condition matching any pattern is reported": {
			policy: pfpPolicy(pfpCondRule(pfpFailJob,
				pfpPattern(corev1.DisruptionTarget, corev1.ConditionTrue),
				pfpPattern(resourceLimitExceeded, corev1.ConditionTrue))),
			pod:         newPod("mypod", failed, pfpPodCondition(resourceLimitExceeded), pfpDisruption(corev1.ConditionTrue)),
			wantMessage: ptr.To("Pod default/mypod has condition ResourceLimitExceeded matching FailJob rule at index 0"),
			wantCount:   true,
			wantAction:  ptr.To(pfpFailJob),
		},
		"a rule without requirements never matches": {
			policy:    pfpPolicy(batchv1.PodFailurePolicyRule{Action: pfpFailJob}),
			pod:       newPod("mypod", failed, exitCode("main-container", 5, now), pfpDisruption(corev1.ConditionTrue)),
			wantCount: true,
		},
		"an exit-code rule ignores pod conditions": {
			policy:    pfpPolicy(pfpExitRule(pfpFailJob, pfpIn, 5)),
			pod:       newPod("mypod", failed, pfpDisruption(corev1.ConditionTrue)),
			wantCount: true,
		},
		"a pod-condition rule ignores exit codes": {
			policy:    pfpPolicy(pfpCondRule(pfpFailJob, pfpPattern(corev1.DisruptionTarget, corev1.ConditionTrue))),
			pod:       newPod("mypod", failed, exitCode("main-container", 5, now)),
			wantCount: true,
		},
		"a rule with both requirements is judged by its exit codes only": {
			policy: pfpPolicy(batchv1.PodFailurePolicyRule{
				Action:          pfpFailJob,
				OnExitCodes:     &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: pfpIn, Values: []int32{1}},
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{pfpPattern(corev1.DisruptionTarget, corev1.ConditionTrue)},
			}),
			pod:       newPod("mypod", failed, exitCode("main-container", 5, now), pfpDisruption(corev1.ConditionTrue)),
			wantCount: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := matchPodFailurePolicy(tc.policy, tc.pod, true)
			if diff := cmp.Diff(tc.wantMessage, got.failJobMessage); diff != "" {
				t.Errorf("failJobMessage (-want,+got):\n%s", diff)
			}
			if got.countFailed != tc.wantCount {
				t.Errorf("countFailed = %v, want %v", got.countFailed, tc.wantCount)
			}
			if diff := cmp.Diff(tc.wantAction, got.action); diff != "" {
				t.Errorf("action (-want,+got):\n%s", diff)
			}
		})
	}
}

// pfpCondition is a Job condition without its times.
type pfpCondition struct {
	Type    batchv1.JobConditionType
	Status  corev1.ConditionStatus
	Reason  string
	Message string
}

func pfpTrue(t batchv1.JobConditionType, reason, message string) pfpCondition {
	return pfpCondition{t, corev1.ConditionTrue, reason, message}
}

func pfpWithConditions(conds ...pfpCondition) jobOpt {
	return func(j *batchv1.Job) {
		for _, c := range conds {
			j.Status.Conditions = append(j.Status.Conditions, *newCondition(c.Type, c.Status, c.Reason, c.Message, now.Add(-time.Minute)))
		}
	}
}

// pfpSyncCase states what the reference's syncJob would leave in the Job's
// status and do to pods; unset fields mean zero, none or empty.
type pfpSyncCase struct {
	job  *batchv1.Job
	pods []*corev1.Pod
	opts []syncOpt

	wantConditions      []pfpCondition
	wantActive          int32
	wantFailed          int32
	wantSucceeded       int32
	wantTerminating     int32
	wantReady           *int32   // checked when set
	wantFailedIndexes   *string  // checked when set
	wantFinalizersGone  []string // checked when set
	wantCreated         int
	wantCreatedIndexes  []int
	wantCreationReason  string // checked when set
	wantDeletedNames    []string
	wantDeletesFinalizr bool
	wantEvents          []string
	wantEventMessages   []string // checked when set
	wantMetrics         map[string]int32
	wantRequeues        []time.Duration
	wantFinished        bool
	check               func(t *testing.T, p *Plan)
}

func TestSyncWithPodFailurePolicy(t *testing.T) {
	disruption := pfpPattern(corev1.DisruptionTarget, corev1.ConditionTrue)
	resourceLimitExceeded := corev1.PodConditionType("ResourceLimitExceeded")
	const (
		failJobMsg0     = "Container main-container for pod default/mypod-0 failed with exit code 5 matching FailJob rule at index 1"
		failJobMsg1     = "Container main-container for pod default/mypod-1 failed with exit code 5 matching FailJob rule at index 1"
		disruptionMsg0  = "Pod default/mypod-0 has condition DisruptionTarget matching FailJob rule at index 0"
		backoffLimitMsg = "Job has reached the specified backoff limit"
		reasonPFP       = batchv1.JobReasonPodFailurePolicy
		reasonBackoff   = batchv1.JobReasonBackoffLimitExceeded
	)
	ft := batchv1.JobFailureTarget
	fl := batchv1.JobFailed

	cases := map[string]pfpSyncCase{
		"containerName restriction excludes the matching container: default handling, pod replaced": {
			job: newJob(1, 1, failurePolicy(
				pfpExitRuleFor("main-container", pfpIgnore, pfpIn, 1, 2, 3),
				pfpExitRuleFor("main-container", pfpFailJob, pfpIn, 5, 6, 7))),
			pods: []*corev1.Pod{newPod("mypod-0", failed,
				exitCode("monitoring-container", 5, pfpLongAgo), exitCode("main-container", 42, pfpLongAgo))},
			wantActive: 1, wantFailed: 1, wantCreated: 1,
			wantCreationReason: PodRecreateFailed,
			wantFinalizersGone: []string{"mypod-0"},
		},
		"running pod with a terminated container does not fail the job": {
			job:        newJob(1, 1, failurePolicy(pfpOnExitCodeRules()...)),
			pods:       []*corev1.Pod{newPod("mypod-0", running, exitCode("main-container", 5, pfpLongAgo))},
			wantActive: 1,
		},
		"FailJob by exit code: FailureTarget then Failed in one sync, with a Warning event": {
			job:  newJob(1, 1, failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 5, pfpLongAgo))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, failJobMsg0),
				pfpTrue(fl, reasonPFP, failJobMsg0),
			},
			wantFailed:         1,
			wantFinalizersGone: []string{"mypod-0"},
			wantEvents:         []string{"Warning PodFailurePolicy"},
			wantEventMessages:  []string{failJobMsg0},
			wantMetrics:        map[string]int32{"FailJob": 1},
			wantFinished:       true,
		},
		"FailJob writes FailureTarget before removing finalizers": {
			job:  newJob(1, 1, failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 5, pfpLongAgo))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, failJobMsg0),
				pfpTrue(fl, reasonPFP, failJobMsg0),
			},
			wantFailed: 1, wantFinished: true,
			wantEvents:  []string{"Warning PodFailurePolicy"},
			wantMetrics: map[string]int32{"FailJob": 1},
			check: func(t *testing.T, p *Plan) {
				var kinds []string
				for _, a := range p.Actions {
					switch a := a.(type) {
					case WriteStatus:
						kind := "write"
						if findCondition(a.Status.Conditions, batchv1.JobFailureTarget) != nil {
							kind += "+FailureTarget"
						}
						if findCondition(a.Status.Conditions, batchv1.JobFailed) != nil {
							kind += "+Failed"
						}
						kinds = append(kinds, kind)
					case RemoveFinalizers:
						kinds = append(kinds, "removeFinalizers")
					}
				}
				want := []string{"write+FailureTarget", "removeFinalizers", "write+FailureTarget+Failed"}
				if diff := cmp.Diff(want, kinds); diff != "" {
					t.Errorf("action order (-want,+got):\n%s", diff)
				}
			},
		},
		"job already with FailureTarget and a failed pod becomes Failed": {
			job: newJob(1, 1, failurePolicy(pfpOnExitCodeRules()...),
				pfpWithConditions(pfpTrue(ft, reasonPFP, failJobMsg0))),
			pods: []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 5, pfpLongAgo))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, failJobMsg0),
				pfpTrue(fl, reasonPFP, failJobMsg0),
			},
			wantFailed:        1,
			wantEvents:        []string{"Warning PodFailurePolicy"},
			wantEventMessages: []string{failJobMsg0},
			wantMetrics:       map[string]int32{"FailJob": 1},
			wantFinished:      true,
		},
		"existing FailureTarget message about an already deleted pod is kept": {
			job: newJob(1, 1, failurePolicy(pfpOnExitCodeRules()...),
				pfpWithConditions(pfpTrue(ft, reasonPFP, "Container main-container for pod default/already-deleted-pod failed with exit code 5 matching FailJob rule at index 1"))),
			pods: []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 5, pfpLongAgo))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, "Container main-container for pod default/already-deleted-pod failed with exit code 5 matching FailJob rule at index 1"),
				pfpTrue(fl, reasonPFP, "Container main-container for pod default/already-deleted-pod failed with exit code 5 matching FailJob rule at index 1"),
			},
			wantFailed:        1,
			wantEvents:        []string{"Warning PodFailurePolicy"},
			wantEventMessages: []string{"Container main-container for pod default/already-deleted-pod failed with exit code 5 matching FailJob rule at index 1"},
			wantMetrics:       map[string]int32{"FailJob": 1},
			wantFinished:      true,
		},
		"existing FailureTarget with BackoffLimitExceeded reason: Failed copies it": {
			job:  newJob(1, 1, failurePolicy(pfpOnExitCodeRules()...), pfpWithConditions(pfpTrue(ft, reasonBackoff, backoffLimitMsg))),
			pods: []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 10, pfpLongAgo))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonBackoff, backoffLimitMsg),
				pfpTrue(fl, reasonBackoff, backoffLimitMsg),
			},
			wantFailed:   1,
			wantEvents:   []string{"Warning BackoffLimitExceeded"},
			wantFinished: true,
		},
		"FailJob with another pod running: it is deleted keeping its finalizer and Failed waits": {
			job: newJob(2, 2, failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{
				newPod("mypod-0", running),
				newPod("mypod-1", failed, exitCode("main-container", 5, pfpLongAgo)),
			},
			wantConditions:      []pfpCondition{pfpTrue(ft, reasonPFP, failJobMsg1)},
			wantFailed:          2,
			wantTerminating:     1,
			wantDeletedNames:    []string{"mypod-0"},
			wantDeletesFinalizr: false,
			wantFinalizersGone:  []string{"mypod-0", "mypod-1"},
			wantMetrics:         map[string]int32{"FailJob": 1},
		},
		"FailJob deleting a ready pod: it no longer counts as ready": {
			job: newJob(2, 2, failurePolicy(pfpOnExitCodeRules()...), withStatus(func(s *batchv1.JobStatus) {
				s.Active, s.Ready = 2, ptr.To[int32](1)
			})),
			pods: []*corev1.Pod{
				newPod("mypod-0", running, ready(now.Add(-time.Minute))),
				newPod("mypod-1", failed, exitCode("main-container", 5, pfpLongAgo)),
			},
			wantConditions:   []pfpCondition{pfpTrue(ft, reasonPFP, failJobMsg1)},
			wantFailed:       2,
			wantTerminating:  1,
			wantReady:        ptr.To[int32](0),
			wantDeletedNames: []string{"mypod-0"},
			wantMetrics:      map[string]int32{"FailJob": 1},
		},
		"FailureTarget with a pod still terminating: counted as failed, Failed delayed": {
			job: newJob(2, 2, failurePolicy(pfpOnExitCodeRules()...),
				pfpWithConditions(pfpTrue(ft, reasonPFP, failJobMsg1)),
				withStatus(func(s *batchv1.JobStatus) { s.Failed = 1 })),
			pods: []*corev1.Pod{
				newPod("mypod-0", running, deleting()),
				newPod("mypod-1", failed, noFinalizer(), exitCode("main-container", 5, pfpLongAgo)),
			},
			wantConditions:     []pfpCondition{pfpTrue(ft, reasonPFP, failJobMsg1)},
			wantFailed:         2,
			wantTerminating:    1,
			wantFinalizersGone: []string{"mypod-0"},
		},
		"FailureTarget once every pod is terminal: Failed is added": {
			job: newJob(2, 2, failurePolicy(pfpOnExitCodeRules()...),
				pfpWithConditions(pfpTrue(ft, reasonPFP, failJobMsg1)),
				withStatus(func(s *batchv1.JobStatus) { s.Failed = 2; s.Terminating = ptr.To[int32](1) })),
			pods: []*corev1.Pod{
				newPod("mypod-0", failed, deleting(), noFinalizer()),
				newPod("mypod-1", failed, noFinalizer(), exitCode("main-container", 5, pfpLongAgo)),
			},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, failJobMsg1),
				pfpTrue(fl, reasonPFP, failJobMsg1),
			},
			wantFailed:        2,
			wantEvents:        []string{"Warning PodFailurePolicy"},
			wantEventMessages: []string{failJobMsg1},
			wantFinished:      true,
		},
		"FailJob on an Indexed job": {
			job:  newJob(1, 1, indexed(), failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{newPod("mypod-0", failed, index(0), exitCode("main-container", 5, pfpLongAgo))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, failJobMsg0),
				pfpTrue(fl, reasonPFP, failJobMsg0),
			},
			wantFailed:   1,
			wantEvents:   []string{"Warning PodFailurePolicy"},
			wantMetrics:  map[string]int32{"FailJob": 1},
			wantFinished: true,
		},
		"FailJob by NotIn operator": {
			job:  newJob(1, 1, failurePolicy(pfpExitRule(pfpFailJob, pfpNotIn, 5, 6, 7))),
			pods: []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 42, pfpLongAgo))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, "Container main-container for pod default/mypod-0 failed with exit code 42 matching FailJob rule at index 0"),
				pfpTrue(fl, reasonPFP, "Container main-container for pod default/mypod-0 failed with exit code 42 matching FailJob rule at index 0"),
			},
			wantFailed:   1,
			wantEvents:   []string{"Warning PodFailurePolicy"},
			wantMetrics:  map[string]int32{"FailJob": 1},
			wantFinished: true,
		},
		"NotIn operator not matching: default handling, pod replaced": {
			job:                newJob(1, 1, failurePolicy(pfpExitRule(pfpFailJob, pfpNotIn, 5, 6, 7))),
			pods:               []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 5, pfpLongAgo))},
			wantActive:         1,
			wantFailed:         1,
			wantCreated:        1,
			wantCreationReason: PodRecreateFailed,
		},
		"FailJob by an init container's exit code": {
			job: newJob(1, 1, failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{newPod("mypod-0", failed,
				pfpInitExitCode("init-container", 5, pfpLongAgo), exitCode("main-container", 143, pfpLongAgo))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, "Container init-container for pod default/mypod-0 failed with exit code 5 matching FailJob rule at index 1"),
				pfpTrue(fl, reasonPFP, "Container init-container for pod default/mypod-0 failed with exit code 5 matching FailJob rule at index 1"),
			},
			wantFailed:   1,
			wantEvents:   []string{"Warning PodFailurePolicy"},
			wantMetrics:  map[string]int32{"FailJob": 1},
			wantFinished: true,
		},
		"Ignore before FailJob: the first matching rule wins": {
			job: newJob(1, 1, backoffLimit(0), failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{newPod("mypod-0", failed,
				exitCode("container1", 2, pfpLongAgo), exitCode("container2", 6, pfpLongAgo))},
			wantActive:         1,
			wantCreated:        1,
			wantFinalizersGone: []string{"mypod-0"},
			wantMetrics:        map[string]int32{"Ignore": 1},
		},
		"Ignore by exit code: not counted against backoffLimit 0, pod replaced as new": {
			job:                newJob(1, 1, backoffLimit(0), failurePolicy(pfpOnExitCodeRules()...)),
			pods:               []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 1, pfpLongAgo))},
			wantActive:         1,
			wantCreated:        1,
			wantCreationReason: PodCreateNew,
			wantFinalizersGone: []string{"mypod-0"},
			wantMetrics:        map[string]int32{"Ignore": 1},
		},
		"Ignore: several ignored failures never fail the job": {
			job: newJob(3, 3, backoffLimit(0), failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{
				newPod("mypod-0", failed, exitCode("main-container", 1, pfpLongAgo)),
				newPod("mypod-1", failed, exitCode("main-container", 2, pfpLongAgo)),
				newPod("mypod-2", failed, exitCode("main-container", 3, pfpLongAgo)),
			},
			wantActive:  3,
			wantCreated: 3,
			wantMetrics: map[string]int32{"Ignore": 3},
		},
		"Ignore: already counted failures stay, ignored ones add nothing": {
			job: newJob(1, 1, backoffLimit(2), failurePolicy(pfpOnExitCodeRules()...),
				withStatus(func(s *batchv1.JobStatus) { s.Failed = 2 })),
			pods:               []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 3, pfpLongAgo))},
			wantActive:         1,
			wantFailed:         2,
			wantCreated:        1,
			wantCreationReason: PodRecreateFailed,
			wantMetrics:        map[string]int32{"Ignore": 1},
		},
		"no rule matched with backoffLimit 0: BackoffLimitExceeded through FailureTarget": {
			job:  newJob(1, 1, backoffLimit(0), failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 10, pfpLongAgo))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonBackoff, backoffLimitMsg),
				pfpTrue(fl, reasonBackoff, backoffLimitMsg),
			},
			wantFailed:        1,
			wantEvents:        []string{"Warning BackoffLimitExceeded"},
			wantEventMessages: []string{backoffLimitMsg},
			wantFinished:      true,
		},
		"Count before Ignore by exit code: the first matching rule wins": {
			job: newJob(1, 1, failurePolicy(
				pfpExitRule(pfpCount, pfpIn, 1, 2),
				pfpExitRule(pfpIgnore, pfpIn, 2, 3))),
			pods:               []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 2, pfpLongAgo))},
			wantActive:         1,
			wantFailed:         1,
			wantCreated:        1,
			wantCreationReason: PodRecreateFailed,
			wantMetrics:        map[string]int32{"Count": 1},
		},
		"Count before Ignore by pod conditions: the first matching rule wins": {
			job: newJob(1, 1, failurePolicy(
				pfpCondRule(pfpCount, pfpPattern(resourceLimitExceeded, corev1.ConditionTrue)),
				pfpCondRule(pfpIgnore, disruption))),
			pods: []*corev1.Pod{newPod("mypod-0", failed, pfpPodCondition(resourceLimitExceeded),
				pfpDisruption(corev1.ConditionTrue), exitCode("main-container", 0, pfpLongAgo))},
			wantActive:  1,
			wantFailed:  1,
			wantCreated: 1,
			wantMetrics: map[string]int32{"Count": 1},
		},
		"Count failures past backoffLimit fail the job": {
			job: newJob(2, 2, backoffLimit(1), failurePolicy(pfpExitRule(pfpCount, pfpIn, 1))),
			pods: []*corev1.Pod{
				newPod("mypod-0", failed, exitCode("main-container", 1, pfpLongAgo)),
				newPod("mypod-1", failed, exitCode("main-container", 1, pfpLongAgo)),
			},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonBackoff, backoffLimitMsg),
				pfpTrue(fl, reasonBackoff, backoffLimitMsg),
			},
			wantFailed:   2,
			wantEvents:   []string{"Warning BackoffLimitExceeded"},
			wantMetrics:  map[string]int32{"Count": 2},
			wantFinished: true,
		},
		"Ignore by DisruptionTarget: not counted against backoffLimit 0, pod replaced": {
			job:         newJob(1, 1, backoffLimit(0), failurePolicy(pfpCondRule(pfpIgnore, disruption))),
			pods:        []*corev1.Pod{newPod("mypod-0", failed, pfpDisruption(corev1.ConditionTrue))},
			wantActive:  1,
			wantCreated: 1,
			wantMetrics: map[string]int32{"Ignore": 1},
		},
		"DisruptionTarget False does not match an Ignore rule for True: counted": {
			job: newJob(1, 1, backoffLimit(0), failurePolicy(pfpCondRule(pfpIgnore, disruption))),
			pods: []*corev1.Pod{newPod("mypod-0", failed, pfpDisruption(corev1.ConditionFalse),
				exitCode("main-container", 1, pfpLongAgo))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonBackoff, backoffLimitMsg),
				pfpTrue(fl, reasonBackoff, backoffLimitMsg),
			},
			wantFailed:   1,
			wantEvents:   []string{"Warning BackoffLimitExceeded"},
			wantFinished: true,
		},
		"ignored failure of a pod being deleted still delays its replacement": {
			job: newJob(1, 1, backoffLimit(0), failurePolicy(pfpCondRule(pfpIgnore, disruption))),
			pods: []*corev1.Pod{newPod("mypod-0", failed, deleting(),
				pfpDisruption(corev1.ConditionTrue))},
			wantRequeues:       []time.Duration{9 * time.Second},
			wantFinalizersGone: []string{"mypod-0"},
			wantMetrics:        map[string]int32{"Ignore": 1},
		},
		"FailJob by DisruptionTarget condition": {
			job:  newJob(1, 1, failurePolicy(pfpCondRule(pfpFailJob, disruption))),
			pods: []*corev1.Pod{newPod("mypod-0", failed, pfpDisruption(corev1.ConditionTrue))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, disruptionMsg0),
				pfpTrue(fl, reasonPFP, disruptionMsg0),
			},
			wantFailed:        1,
			wantEvents:        []string{"Warning PodFailurePolicy"},
			wantEventMessages: []string{disruptionMsg0},
			wantMetrics:       map[string]int32{"FailJob": 1},
			wantFinished:      true,
		},
		"terminating pod is neither counted as failed nor replaced": {
			job:                newJob(1, -1, backoffLimit(0), failurePolicy(pfpCondRule(pfpCount, disruption))),
			pods:               []*corev1.Pod{newPod("mypod-0", running, deleting())},
			wantTerminating:    1,
			wantFinalizersGone: []string{},
		},
		"pod being deleted with DisruptionTarget does not trigger FailJob before phase Failed": {
			job:                newJob(1, 1, failurePolicy(pfpCondRule(pfpFailJob, disruption))),
			pods:               []*corev1.Pod{newPod("mypod-0", running, deleting(), pfpDisruption(corev1.ConditionTrue))},
			wantTerminating:    1,
			wantFinalizersGone: []string{},
		},
		"pod being deleted with DisruptionTarget triggers FailJob once phase Failed": {
			job:  newJob(1, 1, failurePolicy(pfpCondRule(pfpFailJob, disruption))),
			pods: []*corev1.Pod{newPod("mypod-0", failed, deleting(), pfpDisruption(corev1.ConditionTrue))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, disruptionMsg0),
				pfpTrue(fl, reasonPFP, disruptionMsg0),
			},
			wantFailed:   1,
			wantEvents:   []string{"Warning PodFailurePolicy"},
			wantMetrics:  map[string]int32{"FailJob": 1},
			wantFinished: true,
		},
		"podReplacementPolicy TerminatingOrFailed is overridden by a pod failure policy": {
			job: newJob(1, 1, failurePolicy(pfpCondRule(pfpCount, disruption)),
				replacementPolicy(batchv1.TerminatingOrFailed)),
			pods:               []*corev1.Pod{newPod("mypod-0", running, deleting(), podConditionOpt(corev1.PodReady, corev1.ConditionFalse, pfpLongAgo))},
			wantTerminating:    1,
			wantFinalizersGone: []string{},
		},
		"without a pod failure policy a pod being deleted counts as failed and is replaced": {
			job:                newJob(1, 1),
			pods:               []*corev1.Pod{newPod("mypod-0", running, deleting(), podConditionOpt(corev1.PodReady, corev1.ConditionFalse, pfpLongAgo))},
			wantActive:         1,
			wantFailed:         1,
			wantTerminating:    1,
			wantCreated:        1,
			wantCreationReason: PodRecreateTerminatingOrFailed,
			wantFinalizersGone: []string{"mypod-0"},
		},
		"FailJob takes precedence over an exceeded backoffLimit": {
			job: newJob(2, 2, backoffLimit(0), failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{
				newPod("mypod-0", failed, exitCode("main-container", 10, pfpLongAgo)),
				newPod("mypod-1", failed, exitCode("main-container", 5, pfpLongAgo)),
			},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, failJobMsg1),
				pfpTrue(fl, reasonPFP, failJobMsg1),
			},
			wantFailed:   2,
			wantEvents:   []string{"Warning PodFailurePolicy"},
			wantMetrics:  map[string]int32{"FailJob": 1},
			wantFinished: true,
		},
		"FailJob also matches a failed pod already counted (no finalizer)": {
			job: newJob(1, 1, failurePolicy(pfpOnExitCodeRules()...),
				withStatus(func(s *batchv1.JobStatus) { s.Failed = 1 })),
			pods: []*corev1.Pod{newPod("mypod-0", failed, noFinalizer(), exitCode("main-container", 5, pfpLongAgo))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, failJobMsg0),
				pfpTrue(fl, reasonPFP, failJobMsg0),
			},
			wantFailed:         1,
			wantFinalizersGone: []string{},
			wantEvents:         []string{"Warning PodFailurePolicy"},
			wantFinished:       true,
		},
		"FailJob with an ignored failure in the same sync: metrics count both actions": {
			job: newJob(2, 2, failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{
				newPod("mypod-0", failed, exitCode("main-container", 1, pfpLongAgo)),
				newPod("mypod-1", failed, exitCode("main-container", 5, pfpLongAgo)),
			},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, failJobMsg1),
				pfpTrue(fl, reasonPFP, failJobMsg1),
			},
			wantFailed:         1,
			wantFinalizersGone: []string{"mypod-0", "mypod-1"},
			wantEvents:         []string{"Warning PodFailurePolicy"},
			wantMetrics:        map[string]int32{"FailJob": 1, "Ignore": 1},
			wantFinished:       true,
		},
		"mixed Ignore, Count and unmatched failures: metrics by action, two counted": {
			job: newJob(3, 3, failurePolicy(
				pfpExitRule(pfpIgnore, pfpIn, 1),
				pfpExitRule(pfpCount, pfpIn, 2))),
			pods: []*corev1.Pod{
				newPod("mypod-0", failed, exitCode("main-container", 1, pfpLongAgo)),
				newPod("mypod-1", failed, exitCode("main-container", 2, pfpLongAgo)),
				newPod("mypod-2", failed, exitCode("main-container", 3, pfpLongAgo)),
			},
			wantActive:  3,
			wantFailed:  2,
			wantCreated: 3,
			wantMetrics: map[string]int32{"Ignore": 1, "Count": 1},
		},
		"pod already in uncountedTerminatedPods is not matched again": {
			job: newJob(1, 1, failurePolicy(pfpExitRule(pfpCount, pfpIn, 1)),
				withStatus(func(s *batchv1.JobStatus) {
					s.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Failed: []types.UID{"mypod-0-uid"}}
				})),
			pods:               []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 1, pfpLongAgo))},
			wantActive:         1,
			wantFailed:         1,
			wantCreated:        1,
			wantFinalizersGone: []string{"mypod-0"},
		},
		"FailJob with unsatisfied expectations: active pods deleted, FailureTarget waits": {
			job: newJob(2, 2, failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{
				newPod("mypod-0", running),
				newPod("mypod-1", failed, exitCode("main-container", 5, pfpLongAgo)),
			},
			opts:               []syncOpt{unsatisfiedExpectations()},
			wantFailed:         1,
			wantTerminating:    1,
			wantDeletedNames:   []string{"mypod-0"},
			wantFinalizersGone: []string{"mypod-1"},
			wantMetrics:        map[string]int32{"FailJob": 1},
		},
		"SuccessCriteriaMet already set: the policy is not evaluated and the job completes": {
			job: newJob(1, 1, failurePolicy(pfpOnExitCodeRules()...),
				pfpWithConditions(pfpTrue(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods")),
				withStatus(func(s *batchv1.JobStatus) { s.Succeeded = 1 })),
			pods: []*corev1.Pod{
				newPod("mypod-0", succeeded, noFinalizer()),
				newPod("mypod-1", failed, exitCode("main-container", 5, pfpLongAgo)),
			},
			wantConditions: []pfpCondition{
				pfpTrue(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
				pfpTrue(batchv1.JobComplete, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
			},
			wantSucceeded: 1,
			wantFailed:    1,
			wantEvents:    []string{"Normal Completed"},
			wantMetrics:   map[string]int32{"FailJob": 1},
			wantFinished:  true,
		},
		"succeeded pod with DisruptionTarget is never matched: the job completes": {
			job:  newJob(1, 1, failurePolicy(pfpCondRule(pfpFailJob, disruption))),
			pods: []*corev1.Pod{newPod("mypod-0", succeeded, pfpDisruption(corev1.ConditionTrue))},
			wantConditions: []pfpCondition{
				pfpTrue(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
				pfpTrue(batchv1.JobComplete, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
			},
			wantSucceeded: 1,
			wantEvents:    []string{"Normal Completed"},
			wantFinished:  true,
		},
		"running pod with DisruptionTarget is not failed: FailJob does not apply": {
			job:        newJob(1, 1, failurePolicy(pfpCondRule(pfpFailJob, disruption))),
			pods:       []*corev1.Pod{newPod("mypod-0", running, pfpDisruption(corev1.ConditionTrue))},
			wantActive: 1,
		},
		"restartPolicy Never: container restarts of a running pod are not failures": {
			job:        newJob(1, 1, failurePolicy(pfpOnExitCodeRules()...)),
			pods:       []*corev1.Pod{newPod("mypod-0", running, restarts("main-container", 10))},
			wantActive: 1,
		},
		"restartPolicy OnFailure: restarts reaching backoffLimit fail the job when no FailJob rule matched": {
			job:  newJob(1, 1, backoffLimit(2), restartPolicy(corev1.RestartPolicyOnFailure), failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{newPod("mypod-0", running, restarts("main-container", 2))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonBackoff, backoffLimitMsg),
			},
			wantFailed:       1,
			wantTerminating:  1,
			wantDeletedNames: []string{"mypod-0"},
		},
		"restartPolicy OnFailure: FailJob takes precedence over restarts past backoffLimit": {
			job: newJob(2, 2, backoffLimit(2), restartPolicy(corev1.RestartPolicyOnFailure), failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{
				newPod("mypod-0", running, restarts("main-container", 2)),
				newPod("mypod-1", failed, exitCode("main-container", 5, pfpLongAgo)),
			},
			wantConditions:   []pfpCondition{pfpTrue(ft, reasonPFP, failJobMsg1)},
			wantFailed:       2,
			wantTerminating:  1,
			wantDeletedNames: []string{"mypod-0"},
			wantMetrics:      map[string]int32{"FailJob": 1},
		},
		"FailureTarget with status False is not a failure: the policy adds a True one": {
			job: newJob(1, 1, failurePolicy(pfpOnExitCodeRules()...),
				pfpWithConditions(pfpCondition{ft, corev1.ConditionFalse, "Old", "old"})),
			pods: []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 5, pfpLongAgo))},
			wantConditions: []pfpCondition{
				{ft, corev1.ConditionFalse, "Old", "old"},
				pfpTrue(ft, reasonPFP, failJobMsg0),
				pfpTrue(fl, reasonPFP, failJobMsg0),
			},
			wantFailed:   1,
			wantEvents:   []string{"Warning PodFailurePolicy"},
			wantMetrics:  map[string]int32{"FailJob": 1},
			wantFinished: true,
		},
		"FailJob while suspended: the job fails, no Suspended condition": {
			job:  newJob(1, 1, suspended(), failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 5, pfpLongAgo))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, failJobMsg0),
				pfpTrue(fl, reasonPFP, failJobMsg0),
			},
			wantFailed:   1,
			wantEvents:   []string{"Warning PodFailurePolicy"},
			wantMetrics:  map[string]int32{"FailJob": 1},
			wantFinished: true,
		},
		"FailJob takes precedence over a passed active deadline": {
			job:  newJob(1, 1, activeDeadline(10), startedAt(now.Add(-time.Hour)), failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 5, pfpLongAgo))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, failJobMsg0),
				pfpTrue(fl, reasonPFP, failJobMsg0),
			},
			wantFailed:   1,
			wantEvents:   []string{"Warning PodFailurePolicy"},
			wantMetrics:  map[string]int32{"FailJob": 1},
			wantFinished: true,
		},
		"FailJob takes precedence over reaching completions": {
			job: newJob(2, 1, failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{
				newPod("mypod-0", succeeded),
				newPod("mypod-1", failed, exitCode("main-container", 5, pfpLongAgo)),
			},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, failJobMsg1),
				pfpTrue(fl, reasonPFP, failJobMsg1),
			},
			wantSucceeded:      1,
			wantFailed:         1,
			wantFinalizersGone: []string{"mypod-0", "mypod-1"},
			wantEvents:         []string{"Warning PodFailurePolicy"},
			wantMetrics:        map[string]int32{"FailJob": 1},
			wantFinished:       true,
		},
		"FailJob matches a pod whose finalizer removal is in flight; it is counted, not matched again": {
			job: newJob(1, 1, failurePolicy(pfpOnExitCodeRules()...),
				withStatus(func(s *batchv1.JobStatus) {
					s.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Failed: []types.UID{"mypod-0-uid"}}
				})),
			pods: []*corev1.Pod{newPod("mypod-0", failed, exitCode("main-container", 5, pfpLongAgo))},
			opts: []syncOpt{finalizerRemovalsInFlight("mypod-0-uid")},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, failJobMsg0),
				pfpTrue(fl, reasonPFP, failJobMsg0),
			},
			wantFailed:         1,
			wantFinalizersGone: []string{},
			wantEvents:         []string{"Warning PodFailurePolicy"},
			wantFinished:       true,
		},
		"Indexed: FailJob matches a failed pod with an out-of-range index, which is not counted": {
			job: newJob(1, 1, indexed(), failurePolicy(pfpOnExitCodeRules()...)),
			pods: []*corev1.Pod{
				newPod("mypod-5", failed, index(5), exitCode("main-container", 5, pfpLongAgo)),
			},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, "Container main-container for pod default/mypod-5 failed with exit code 5 matching FailJob rule at index 1"),
				pfpTrue(fl, reasonPFP, "Container main-container for pod default/mypod-5 failed with exit code 5 matching FailJob rule at index 1"),
			},
			wantFinalizersGone: []string{"mypod-5"},
			wantEvents:         []string{"Warning PodFailurePolicy"},
			wantFinished:       true,
		},
		"FailIndex fails only the index; the job continues with the other": {
			job: newJob(2, 2, indexed(), backoffLimit(math.MaxInt32), backoffLimitPerIndex(1),
				failurePolicy(pfpExitRule(pfpFailIndex, pfpIn, 3))),
			pods:               []*corev1.Pod{newPod("mypod-0", failed, index(0), failureCount(0), exitCode("main-container", 3, pfpLongAgo))},
			wantActive:         1,
			wantFailed:         1,
			wantFailedIndexes:  ptr.To("0"),
			wantCreated:        1,
			wantCreatedIndexes: []int{1},
			wantFinalizersGone: []string{"mypod-0"},
			wantMetrics:        map[string]int32{"FailIndex": 1},
		},
		"FailIndex on the last index left fails the job with FailedIndexes": {
			job: newJob(2, 2, indexed(), backoffLimit(math.MaxInt32), backoffLimitPerIndex(1),
				failurePolicy(pfpExitRule(pfpFailIndex, pfpIn, 3)),
				withStatus(func(s *batchv1.JobStatus) { s.Succeeded = 1; s.CompletedIndexes = "1" })),
			pods: []*corev1.Pod{
				newPod("mypod-0", failed, index(0), failureCount(0), exitCode("main-container", 3, pfpLongAgo)),
				newPod("mypod-1", succeeded, index(1), noFinalizer()),
			},
			wantConditions: []pfpCondition{
				pfpTrue(ft, batchv1.JobReasonFailedIndexes, "Job has failed indexes"),
				pfpTrue(fl, batchv1.JobReasonFailedIndexes, "Job has failed indexes"),
			},
			wantSucceeded:     1,
			wantFailed:        1,
			wantFailedIndexes: ptr.To("0"),
			wantEvents:        []string{"Warning FailedIndexes"},
			wantMetrics:       map[string]int32{"FailIndex": 1},
			wantFinished:      true,
		},
		"FailJob with backoffLimitPerIndex: the job fails, no index failed": {
			job: newJob(2, 2, indexed(), backoffLimitPerIndex(1),
				failurePolicy(pfpExitRule(pfpFailJob, pfpIn, 3))),
			pods: []*corev1.Pod{newPod("mypod-0", failed, index(0), failureCount(0), exitCode("x", 3, pfpLongAgo))},
			wantConditions: []pfpCondition{
				pfpTrue(ft, reasonPFP, "Container x for pod default/mypod-0 failed with exit code 3 matching FailJob rule at index 0"),
				pfpTrue(fl, reasonPFP, "Container x for pod default/mypod-0 failed with exit code 3 matching FailJob rule at index 0"),
			},
			wantFailed:        1,
			wantFailedIndexes: ptr.To(""),
			wantEvents:        []string{"Warning PodFailurePolicy"},
			wantMetrics:       map[string]int32{"FailJob": 1},
			wantFinished:      true,
		},
		"Ignore with backoffLimitPerIndex: replacement carries the ignored-failure count": {
			job: newJob(2, 2, indexed(), backoffLimitPerIndex(1),
				failurePolicy(pfpExitRule(pfpIgnore, pfpIn, 3))),
			pods:               []*corev1.Pod{newPod("mypod-0", failed, index(0), failureCount(0), exitCode("x", 3, pfpLongAgo))},
			wantActive:         2,
			wantFailedIndexes:  ptr.To(""),
			wantCreated:        2,
			wantCreatedIndexes: []int{0, 1},
			wantFinalizersGone: []string{},
			check: func(t *testing.T, p *Plan) {
				for _, a := range p.Actions {
					c, ok := a.(CreatePods)
					if !ok {
						continue
					}
					for _, pod := range c.Pods {
						if pod.CompletionIndex == nil || *pod.CompletionIndex != 0 {
							continue
						}
						if got := pod.Annotations[batchv1.JobIndexFailureCountAnnotation]; got != "0" {
							t.Errorf("index 0 replacement failure count = %q, want 0", got)
						}
						if got := pod.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation]; got != "1" {
							t.Errorf("index 0 replacement ignored failure count = %q, want 1", got)
						}
					}
				}
			},
		},
		"Count with backoffLimitPerIndex: replacement carries the failure count": {
			job: newJob(1, 1, indexed(), backoffLimitPerIndex(2),
				failurePolicy(pfpExitRule(pfpCount, pfpIn, 3))),
			pods:               []*corev1.Pod{newPod("mypod-0", failed, index(0), failureCount(0), exitCode("x", 3, pfpLongAgo))},
			wantActive:         1,
			wantFailed:         0,
			wantFailedIndexes:  ptr.To(""),
			wantCreated:        1,
			wantCreatedIndexes: []int{0},
			wantFinalizersGone: []string{},
			check: func(t *testing.T, p *Plan) {
				for _, a := range p.Actions {
					if c, ok := a.(CreatePods); ok && len(c.Pods) == 1 {
						if got := c.Pods[0].Annotations[batchv1.JobIndexFailureCountAnnotation]; got != "1" {
							t.Errorf("replacement failure count = %q, want 1", got)
						}
						if got, ok := c.Pods[0].Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation]; ok {
							t.Errorf("replacement ignored failure count = %q, want none", got)
						}
					}
				}
			},
		},
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan := runSync(t, tc.job, tc.pods, tc.opts...)
			o := summarize(plan)
			status := tc.job.Status
			if o.Status != nil {
				status = *o.Status
			}

			var gotConds []pfpCondition
			for _, c := range status.Conditions {
				gotConds = append(gotConds, pfpCondition{c.Type, c.Status, c.Reason, c.Message})
			}
			if diff := cmp.Diff(tc.wantConditions, gotConds); diff != "" {
				t.Errorf("conditions (-want,+got):\n%s", diff)
			}
			if status.Active != tc.wantActive {
				t.Errorf("active = %d, want %d", status.Active, tc.wantActive)
			}
			if status.Failed != tc.wantFailed {
				t.Errorf("failed = %d, want %d", status.Failed, tc.wantFailed)
			}
			if status.Succeeded != tc.wantSucceeded {
				t.Errorf("succeeded = %d, want %d", status.Succeeded, tc.wantSucceeded)
			}
			if got := ptr.Deref(status.Terminating, 0); got != tc.wantTerminating {
				t.Errorf("terminating = %d, want %d", got, tc.wantTerminating)
			}
			if u := status.UncountedTerminatedPods; u != nil && len(u.Failed)+len(u.Succeeded) > 0 {
				t.Errorf("uncountedTerminatedPods left: %+v", u)
			}
			if tc.wantReady != nil && ptr.Deref(status.Ready, -1) != *tc.wantReady {
				t.Errorf("ready = %v, want %d", ptr.Deref(status.Ready, -1), *tc.wantReady)
			}
			if tc.wantFailedIndexes != nil {
				if diff := cmp.Diff(tc.wantFailedIndexes, status.FailedIndexes); diff != "" {
					t.Errorf("failedIndexes (-want,+got):\n%s", diff)
				}
			}
			if o.Created != tc.wantCreated {
				t.Errorf("created %d pods, want %d", o.Created, tc.wantCreated)
			}
			if tc.wantCreatedIndexes != nil || o.CreatedIndexes != nil {
				got := slices.Clone(o.CreatedIndexes)
				slices.Sort(got)
				if diff := cmp.Diff(tc.wantCreatedIndexes, got); diff != "" {
					t.Errorf("created indexes (-want,+got):\n%s", diff)
				}
			}
			if tc.wantCreationReason != "" && o.CreationReason != tc.wantCreationReason {
				t.Errorf("creation reason = %q, want %q", o.CreationReason, tc.wantCreationReason)
			}
			gotDeleted := slices.Clone(o.DeletedNames)
			slices.Sort(gotDeleted)
			if diff := cmp.Diff(tc.wantDeletedNames, gotDeleted); diff != "" {
				t.Errorf("deleted pods (-want,+got):\n%s", diff)
			}
			if len(o.DeletedNames) > 0 && o.DeletesFinalizer != tc.wantDeletesFinalizr {
				t.Errorf("deletion removes the tracking finalizer = %v, want %v", o.DeletesFinalizer, tc.wantDeletesFinalizr)
			}
			if tc.wantFinalizersGone != nil {
				got := slices.Clone(o.FinalizersGone)
				slices.Sort(got)
				if len(got) == 0 {
					got = []string{}
				}
				if diff := cmp.Diff(tc.wantFinalizersGone, got); diff != "" {
					t.Errorf("finalizers removed (-want,+got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.wantEvents, o.Events); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
			if tc.wantEventMessages != nil {
				var msgs []string
				for _, a := range plan.Actions {
					if e, ok := a.(RecordEvent); ok {
						msgs = append(msgs, e.Message)
					}
				}
				if diff := cmp.Diff(tc.wantEventMessages, msgs); diff != "" {
					t.Errorf("event messages (-want,+got):\n%s", diff)
				}
			}
			gotMetrics := map[string]int32{}
			for k, v := range plan.Metrics.PodFailuresByPolicyAction {
				if v != 0 {
					gotMetrics[k] = v
				}
			}
			wantMetrics := tc.wantMetrics
			if wantMetrics == nil {
				wantMetrics = map[string]int32{}
			}
			if diff := cmp.Diff(wantMetrics, gotMetrics); diff != "" {
				t.Errorf("pod failures by policy action (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRequeues, o.Requeues); diff != "" {
				t.Errorf("requeues (-want,+got):\n%s", diff)
			}
			if o.ReleaseJobState != tc.wantFinished {
				t.Errorf("job finished (ReleaseJobState) = %v, want %v", o.ReleaseJobState, tc.wantFinished)
			}
			if tc.check != nil {
				tc.check(t, plan)
			}
		})
	}
}
