package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/kubetest"
)

// How jobplane's Jobs are told apart from plain ones, and the finalizer each
// controller puts on the pods it tracks.
const (
	jobplaneManager   = "jobplane.dev/executor"
	jobplaneFinalizer = "jobplane.dev/job-tracking"
	builtinFinalizer  = batchv1.JobTrackingFinalizer
)

// Pod fates (hack/kwok/stages/pod-fate.yaml and pod-terminate.yaml): template
// annotations telling kwok how the Job's pods end.
const (
	fateAfter          = "fate.jobplane.dev/after"
	fateRun            = "fate.jobplane.dev/run"
	fateForeverIndexes = "fate.jobplane.dev/forever-indexes"
	fateExitCode       = "fate.jobplane.dev/exit-code"
	fateFailIndexes    = "fate.jobplane.dev/fail-indexes"
	fateFailAttempts   = "fate.jobplane.dev/fail-attempts"
	fateDisruption     = "fate.jobplane.dev/disruption"
	fateTerminateAfter = "fate.jobplane.dev/terminate-after"
)

// caseTimeout bounds one case, both halves together.
const caseTimeout = 3 * time.Minute

// parityCase is one Job run under both controllers.
type parityCase struct {
	name string // the behaviour, as the subtest's name
	slug string // short DNS name: the namespace and the Jobs' names derive from it
	spec batchv1.JobSpec
	// steps, when set, act on the running Job (resume it, scale it, delete a
	// pod), the same way for both halves. Pods acted on run 6s or more: every
	// case runs at once on two cores, and the action must land while they run.
	steps func(ctx context.Context, h *half) error
	// want is the terminal condition the built-in controller reaches, as
	// "Type/Reason": it checks the case does what its name says.
	want string
}

// TestParity runs each case's Job as a plain Job and as a Job managed by
// jobplane, in one namespace per case, and requires both to end with the same
// status: counters, indexes and conditions (type, status and reason; no
// times, no messages). It also requires that no pod keeps its controller's
// tracking finalizer once the Job has finished.
//
// JOBPLANE_E2E_BUILTIN_ONLY=1 runs the built-in half alone (jobplane's
// services are neither built nor started), to check the cases themselves.
func TestParity(t *testing.T) {
	e := sharedEnv(t)
	for _, tc := range parityCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runParity(t, e, tc)
		})
	}
}

func parityCases() []parityCase {
	return []parityCase{
		{
			name: "NonIndexedRunsUntilCompletions",
			slug: "nonindexed",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](4), Parallelism: ptr.To[int32](2),
				Template: podTemplate(fateAfter, "1s")},
			want: "Complete/CompletionsReached",
		},
		{
			name: "WorkQueueCompletesWhenPodsSucceed",
			slug: "workqueue",
			spec: batchv1.JobSpec{Parallelism: ptr.To[int32](3),
				Template: podTemplate(fateAfter, "2s")},
			want: "Complete/CompletionsReached",
		},
		{
			name: "IndexedRunsEveryIndex",
			slug: "indexed",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](5), Parallelism: ptr.To[int32](3),
				CompletionMode: ptr.To(batchv1.IndexedCompletion),
				Template:       podTemplate(fateAfter, "1s")},
			want: "Complete/CompletionsReached",
		},
		{
			name: "BackoffLimitExceededFailsTheJob",
			slug: "backofflimit",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2), BackoffLimit: ptr.To[int32](1),
				Template: podTemplate(fateExitCode, "1")},
			want: "Failed/BackoffLimitExceeded",
		},
		{
			name: "PodFailurePolicyFailJobOnExitCode42",
			slug: "pfp-failjob",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2),
				PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
					Action:      batchv1.PodFailurePolicyActionFailJob,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
				}}},
				Template: podTemplate(fateExitCode, "42")},
			want: "Failed/PodFailurePolicy",
		},
		{
			name: "PodFailurePolicyIgnoresDisruptedPodsThenSucceeds",
			slug: "pfp-ignore",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2),
				CompletionMode:       ptr.To(batchv1.IndexedCompletion),
				BackoffLimitPerIndex: ptr.To[int32](1),
				PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
					Action:          batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
				}}},
				// Each index's first pod is evicted, the next one succeeds.
				Template: podTemplate(fateDisruption, "true", fateFailAttempts, "1")},
			want: "Complete/CompletionsReached",
		},
		{
			name: "PodFailurePolicyCountsMatchingFailures",
			slug: "pfp-count",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2),
				CompletionMode:       ptr.To(batchv1.IndexedCompletion),
				BackoffLimitPerIndex: ptr.To[int32](1),
				PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
					Action:      batchv1.PodFailurePolicyActionFailIndex,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{4}},
				}, {
					Action:      batchv1.PodFailurePolicyActionCount,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{3}},
				}}},
				// Each index fails once with exit code 3 (counted), then succeeds.
				Template: podTemplate(fateExitCode, "3", fateFailAttempts, "1")},
			want: "Complete/CompletionsReached",
		},
		{
			name: "BackoffLimitPerIndexEndsWithFailedIndexes",
			slug: "perindex-failed",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](5), Parallelism: ptr.To[int32](5),
				CompletionMode:       ptr.To(batchv1.IndexedCompletion),
				BackoffLimitPerIndex: ptr.To[int32](1), MaxFailedIndexes: ptr.To[int32](2),
				// Indexes 1 and 3 fail twice each; the others succeed.
				Template: podTemplate(fateFailIndexes, "1,3")},
			want: "Failed/FailedIndexes",
		},
		{
			name: "BackoffLimitPerIndexMaxFailedIndexesExceeded",
			slug: "perindex-max",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](4), Parallelism: ptr.To[int32](4),
				CompletionMode:       ptr.To(batchv1.IndexedCompletion),
				BackoffLimitPerIndex: ptr.To[int32](0), MaxFailedIndexes: ptr.To[int32](0),
				// Index 1 fails while the others still run.
				Template: podTemplate(fateFailIndexes, "1", fateForeverIndexes, "0,2,3")},
			want: "Failed/MaxFailedIndexesExceeded",
		},
		{
			name: "SuccessPolicySucceededIndexesEndsTheJobEarly",
			slug: "successpolicy",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](4), Parallelism: ptr.To[int32](4),
				CompletionMode: ptr.To(batchv1.IndexedCompletion),
				SuccessPolicy:  &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0,1")}}},
				// Indexes 0 and 1 succeed while 2 and 3 still run.
				Template: podTemplate(fateForeverIndexes, "2,3")},
			want: "Complete/SuccessPolicy",
		},
		{
			name: "CreatedSuspendedThenResumed",
			slug: "suspend-resume",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2), Suspend: ptr.To(true),
				Template: podTemplate(fateAfter, "1s")},
			steps: func(ctx context.Context, h *half) error {
				if err := h.waitStatus(ctx, "Suspended", func(j *batchv1.Job) bool { return hasCondition(j, batchv1.JobSuspended) }); err != nil {
					return err
				}
				return h.patch(ctx, `{"spec":{"suspend":false}}`)
			},
			want: "Complete/CompletionsReached",
		},
		{
			name: "SuspendedMidRunThenResumed",
			slug: "suspend-midrun",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2),
				Template: podTemplate(fateAfter, "8s", fateTerminateAfter, "1s")},
			steps: func(ctx context.Context, h *half) error {
				if err := h.waitReady(ctx, 2); err != nil {
					return err
				}
				if err := h.patch(ctx, `{"spec":{"suspend":true}}`); err != nil {
					return err
				}
				if err := h.waitStatus(ctx, "Suspended with no pod left", func(j *batchv1.Job) bool {
					return hasCondition(j, batchv1.JobSuspended) && j.Status.Active == 0 && ptr.Deref(j.Status.Terminating, 0) == 0
				}); err != nil {
					return err
				}
				return h.patch(ctx, `{"spec":{"suspend":false}}`)
			},
			want: "Complete/CompletionsReached",
		},
		{
			name: "ActiveDeadlineSecondsFailsRunningPods",
			slug: "deadline",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2), ActiveDeadlineSeconds: ptr.To[int64](3),
				Template: podTemplate(fateRun, "forever")},
			want: "Failed/DeadlineExceeded",
		},
		{
			name: "PodReplacementPolicyFailedWaitsForTerminatingPods",
			slug: "replace-failed",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2),
				PodReplacementPolicy: ptr.To(batchv1.Failed),
				Template:             podTemplate(fateAfter, "6s", fateTerminateAfter, "2s")},
			// A pod deleted from outside (as by a drain) is replaced only
			// once it has failed.
			steps: func(ctx context.Context, h *half) error {
				if err := h.waitReady(ctx, 2); err != nil {
					return err
				}
				return h.deleteOnePod(ctx)
			},
			want: "Complete/CompletionsReached",
		},
		{
			name: "ParallelismLoweredMidRun",
			slug: "parallelism",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](3), Parallelism: ptr.To[int32](3),
				Template: podTemplate(fateAfter, "6s")},
			steps: func(ctx context.Context, h *half) error {
				if err := h.waitReady(ctx, 3); err != nil {
					return err
				}
				return h.patch(ctx, `{"spec":{"parallelism":2}}`)
			},
			want: "Complete/CompletionsReached",
		},
		{
			name: "IndexedCompletionsScaledUp",
			slug: "elastic-up",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2),
				CompletionMode: ptr.To(batchv1.IndexedCompletion),
				Template:       podTemplate(fateAfter, "6s")},
			steps: func(ctx context.Context, h *half) error {
				if err := h.waitReady(ctx, 2); err != nil {
					return err
				}
				return h.patch(ctx, `{"spec":{"completions":4,"parallelism":4}}`)
			},
			want: "Complete/CompletionsReached",
		},
		{
			name: "IndexedCompletionsScaledDown",
			slug: "elastic-down",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](4), Parallelism: ptr.To[int32](4),
				CompletionMode: ptr.To(batchv1.IndexedCompletion),
				Template:       podTemplate(fateAfter, "6s")},
			steps: func(ctx context.Context, h *half) error {
				if err := h.waitReady(ctx, 4); err != nil {
					return err
				}
				return h.patch(ctx, `{"spec":{"completions":2,"parallelism":2}}`)
			},
			want: "Complete/CompletionsReached",
		},
	}
}

// podTemplate is a pod template whose pods end as the fate annotations given
// as key, value pairs say.
var podTemplate = kubetest.PodTemplate

func runParity(t *testing.T, e *Env, tc parityCase) {
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	client := e.Cluster.Client
	ns := "parity-" + tc.slug
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	kubetest.ShowLogLinesOnFailure(t, ns, e.Processes()...)

	halves := []*half{{client: client, namespace: ns, name: tc.slug + "-builtin", finalizer: builtinFinalizer}}
	if !builtinOnly() {
		halves = append(halves, &half{client: client, namespace: ns, name: tc.slug + "-jobplane", managed: true, finalizer: jobplaneFinalizer})
	}
	var wg sync.WaitGroup
	for _, h := range halves {
		wg.Go(func() { h.run(ctx, tc) })
	}
	wg.Wait()

	builtin := halves[0]
	for _, h := range halves {
		if h.err != nil {
			t.Errorf("%s: %v", h.name, h.err)
			continue
		}
		t.Logf("%s (in %s): %s", h.name, h.took.Round(100*time.Millisecond), h.outcome)
		if u := h.final.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) != 0 {
			t.Errorf("%s finished with uncounted terminated pods: %+v", h.name, *u)
		}
		if h.leftFinalizers != nil {
			t.Errorf("%s finished but pods keep the finalizer %s: %v", h.name, h.finalizer, h.leftFinalizers)
		}
	}
	if builtin.err == nil && builtin.outcome.terminal() != tc.want {
		t.Errorf("the built-in controller ended %s with %q, want %q: the case does not do what it says", builtin.name, builtin.outcome.terminal(), tc.want)
	}
	if len(halves) == 2 && halves[0].err == nil && halves[1].err == nil {
		for _, d := range diffOutcomes(halves[0].outcome, halves[1].outcome) {
			t.Errorf("status differs: %s", d)
		}
	}
}

// half is one run of a case's Job, by the built-in controller or by jobplane.
type half struct {
	client    kubernetes.Interface
	namespace string
	name      string
	managed   bool   // spec.managedBy is jobplane's
	finalizer string // what the Job's controller puts on its pods

	// Results.
	err            error
	final          *batchv1.Job
	outcome        outcome
	took           time.Duration
	leftFinalizers []string // pods keeping the finalizer after the Job finished
}

// run creates the Job, performs the case's steps, waits until the Job has
// finished and then until no pod keeps the tracking finalizer. The code is the
// same for both halves: only spec.managedBy differs.
func (h *half) run(ctx context.Context, tc parityCase) {
	started := time.Now()
	h.err = func() error {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: h.name, Namespace: h.namespace},
			Spec:       *tc.spec.DeepCopy(),
		}
		if h.managed {
			job.Spec.ManagedBy = ptr.To(jobplaneManager)
		}
		if _, err := h.client.BatchV1().Jobs(h.namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the Job: %w", err)
		}
		if tc.steps != nil {
			if err := tc.steps(ctx, h); err != nil {
				return err
			}
		}
		var final *batchv1.Job
		if err := h.waitStatus(ctx, "Complete or Failed", func(j *batchv1.Job) bool {
			final = j
			return hasCondition(j, batchv1.JobComplete) || hasCondition(j, batchv1.JobFailed)
		}); err != nil {
			return err
		}
		h.final, h.outcome, h.took = final, outcomeOf(final), time.Since(started)
		return h.waitFinalizersRemoved(ctx, final)
	}()
}

// waitStatus polls the Job until cond holds.
func (h *half) waitStatus(ctx context.Context, what string, cond func(*batchv1.Job) bool) error {
	var last *batchv1.Job
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		j, err := h.client.BatchV1().Jobs(h.namespace).Get(ctx, h.name, metav1.GetOptions{})
		if err != nil {
			return false, nil // retried until the case's deadline
		}
		last = j
		return cond(j), nil
	})
	if err != nil {
		status := "never read"
		if last != nil {
			status = outcomeOf(last).String()
		}
		return fmt.Errorf("waiting for %s: %w; last status: %s", what, err, status)
	}
	return nil
}

// waitReady waits until n pods of the Job are ready.
func (h *half) waitReady(ctx context.Context, n int32) error {
	return h.waitStatus(ctx, fmt.Sprintf("%d ready pods", n), func(j *batchv1.Job) bool {
		return ptr.Deref(j.Status.Ready, 0) >= n
	})
}

func (h *half) patch(ctx context.Context, patch string) error {
	_, err := h.client.BatchV1().Jobs(h.namespace).Patch(ctx, h.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patching the Job with %s: %w", patch, err)
	}
	return nil
}

// pods lists the Job's pods by its selector.
func (h *half) pods(ctx context.Context, job *batchv1.Job) ([]corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return nil, err
	}
	list, err := h.client.CoreV1().Pods(h.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// deleteOnePod deletes the running pod of the Job whose name sorts first.
func (h *half) deleteOnePod(ctx context.Context) error {
	job, err := h.client.BatchV1().Jobs(h.namespace).Get(ctx, h.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pods, err := h.pods(ctx, job)
	if err != nil {
		return err
	}
	var running []string
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p.Name)
		}
	}
	if len(running) == 0 {
		return fmt.Errorf("no running pod to delete")
	}
	slices.Sort(running)
	if err := h.client.CoreV1().Pods(h.namespace).Delete(ctx, running[0], metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting pod %s: %w", running[0], err)
	}
	return nil
}

// finalizerWait bounds how long pods may keep the tracking finalizer after
// their Job has finished.
const finalizerWait = 30 * time.Second

// waitFinalizersRemoved waits until no pod of the finished Job has the
// tracking finalizer; the ones that keep it are left in h.leftFinalizers.
func (h *half) waitFinalizersRemoved(ctx context.Context, job *batchv1.Job) error {
	ctx, cancel := context.WithTimeout(ctx, finalizerWait)
	defer cancel()
	var kept []string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := h.pods(ctx, job)
		if err != nil {
			return false, nil
		}
		kept = nil
		for _, p := range pods {
			if slices.Contains(p.Finalizers, h.finalizer) {
				kept = append(kept, p.Name)
			}
		}
		return len(kept) == 0, nil
	})
	if err != nil {
		h.leftFinalizers = kept
		if len(kept) == 0 {
			return fmt.Errorf("listing the pods of the finished Job: %w", err)
		}
	}
	return nil
}

func hasCondition(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// outcome is what parity compares of a Job's status: no times and no
// messages. Pointer fields stay pointers: an absent field and a zero differ
// in the API too.
type outcome struct {
	Active           int32
	Succeeded        int32
	Failed           int32
	Ready            *int32
	Terminating      *int32
	CompletedIndexes string
	FailedIndexes    *string
	// Conditions as "Type=Status/Reason", sorted.
	Conditions []string
}

func outcomeOf(j *batchv1.Job) outcome {
	s := j.Status
	o := outcome{
		Active: s.Active, Succeeded: s.Succeeded, Failed: s.Failed,
		Ready: s.Ready, Terminating: s.Terminating,
		CompletedIndexes: s.CompletedIndexes, FailedIndexes: s.FailedIndexes,
	}
	for _, c := range s.Conditions {
		o.Conditions = append(o.Conditions, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	slices.Sort(o.Conditions)
	return o
}

// terminal is the finished Job's Complete or Failed condition as
// "Type/Reason".
func (o outcome) terminal() string {
	for _, c := range o.Conditions {
		for _, t := range []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed} {
			if rest, ok := strings.CutPrefix(c, string(t)+"=True/"); ok {
				return string(t) + "/" + rest
			}
		}
	}
	return ""
}

// fields lists the outcome's fields as name and value, in a fixed order.
func (o outcome) fields() [][2]string {
	show := func(v any) string {
		data, _ := json.Marshal(v)
		return string(data)
	}
	return [][2]string{
		{"active", show(o.Active)},
		{"succeeded", show(o.Succeeded)},
		{"failed", show(o.Failed)},
		{"ready", show(o.Ready)},
		{"terminating", show(o.Terminating)},
		{"completedIndexes", show(o.CompletedIndexes)},
		{"failedIndexes", show(o.FailedIndexes)},
		{"conditions", show(o.Conditions)},
	}
}

func (o outcome) String() string {
	var b strings.Builder
	for i, f := range o.fields() {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%s", f[0], f[1])
	}
	return b.String()
}

// diffOutcomes says, field by field, where jobplane's outcome differs from the
// built-in controller's.
func diffOutcomes(builtin, jobplane outcome) []string {
	var diffs []string
	b, j := builtin.fields(), jobplane.fields()
	for i := range b {
		if b[i][1] != j[i][1] {
			diffs = append(diffs, fmt.Sprintf("%s: built-in %s, jobplane %s", b[i][0], b[i][1], j[i][1]))
		}
	}
	return diffs
}
