package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Scenario is a Job, the scripts of its pods, and how it must end.
type Scenario struct {
	Name  string
	Job   *batchv1.Job
	Fates FateFunc
	// Edits change the Job's spec at given times (suspend, resume).
	Edits []Edit
	// WantCondition and WantReason are the Job's terminal condition.
	WantCondition batchv1.JobConditionType
	WantReason    string
	// IgnoresEvictions: evicted pods are not counted as failed.
	IgnoresEvictions bool
}

// Edit changes the Job's spec At after the start.
type Edit struct {
	At    time.Duration
	Apply func(*batchv1.Job)
}

// kinds of generated scenarios, each with a known ending.
var kinds = []func(r *rand.Rand, seed uint64) Scenario{
	allSucceed, failuresWithinBudget, alwaysFail, failJobExitCode, ignoredEvictions,
	failedIndexes, successPolicyMet, deadlineExceeded, onFailureRestarts, suspendedThenResumed,
	suspendedMidRun, workQueue,
}

// Generate returns the scenario of a seed: its kind, sizes and timings all
// follow from the seed.
func Generate(seed uint64) Scenario {
	r := rand.New(rand.NewPCG(seed, 0x6a6f62706c616e65))
	sc := kinds[seed%uint64(len(kinds))](r, seed)
	sc.Name = fmt.Sprintf("%03d-%s", seed, sc.Name)
	return sc
}

// baseJob is a defaulted Job as the API server stores it.
func baseJob(r *rand.Rand, seed uint64, indexed bool) *batchv1.Job {
	parallelism := int32(1 + r.IntN(4))
	completions := int32(1 + r.IntN(8))
	mode := batchv1.NonIndexedCompletion
	if indexed {
		mode = batchv1.IndexedCompletion
	}
	uid := types.UID(fmt.Sprintf("job-uid-%d", seed))
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sim-%d", seed), Namespace: "default", UID: uid},
		Spec: batchv1.JobSpec{
			Parallelism:          &parallelism,
			Completions:          &completions,
			BackoffLimit:         ptr.To[int32](6),
			CompletionMode:       &mode,
			Suspend:              ptr.To(false),
			PodReplacementPolicy: ptr.To(batchv1.TerminatingOrFailed),
			ManualSelector:       ptr.To(false),
			Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: string(uid)}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{batchv1.ControllerUidLabel: string(uid), "app": "sim"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
				},
			},
		},
	}
}

func secs(r *rand.Rand, lo, hi int) time.Duration {
	return time.Duration(lo+r.IntN(hi-lo+1)) * time.Second
}

// lives scripts a pod that starts and then ends with last.
func lives(r *rand.Rand, last Step) []Step {
	start := secs(r, 1, 3)
	last.At += start
	return []Step{{At: start, Kind: Start}, last}
}

func podRand(seed uint64, n int) *rand.Rand { return rand.New(rand.NewPCG(seed, uint64(n))) }

func allSucceed(r *rand.Rand, seed uint64) Scenario {
	return Scenario{
		Name: "all-succeed", Job: baseJob(r, seed, r.IntN(2) == 0), Fates: succeedingPods(seed),
		WantCondition: batchv1.JobComplete, WantReason: batchv1.JobReasonCompletionsReached,
	}
}

// succeedingPods start and succeed after 2 to 20 seconds.
func succeedingPods(seed uint64) FateFunc {
	return func(n, _ int) []Step {
		pr := podRand(seed, n)
		return lives(pr, Step{At: secs(pr, 2, 20), Kind: Succeed})
	}
}

func failuresWithinBudget(r *rand.Rand, seed uint64) Scenario {
	job := baseJob(r, seed, r.IntN(2) == 0)
	limit := int32(1 + r.IntN(4))
	job.Spec.BackoffLimit = &limit
	failures := 1 + r.IntN(int(limit))
	return Scenario{
		Name: "failures-within-budget", Job: job,
		Fates: func(n, _ int) []Step {
			pr := podRand(seed, n)
			if n <= failures {
				return lives(pr, Step{At: secs(pr, 1, 5), Kind: Fail, ExitCode: 1})
			}
			return lives(pr, Step{At: secs(pr, 2, 10), Kind: Succeed})
		},
		WantCondition: batchv1.JobComplete, WantReason: batchv1.JobReasonCompletionsReached,
	}
}

func alwaysFail(r *rand.Rand, seed uint64) Scenario {
	job := baseJob(r, seed, r.IntN(2) == 0)
	job.Spec.BackoffLimit = ptr.To(int32(r.IntN(4)))
	return Scenario{
		Name: "always-fail", Job: job,
		Fates: func(n, _ int) []Step {
			pr := podRand(seed, n)
			return lives(pr, Step{At: secs(pr, 1, 5), Kind: Fail, ExitCode: 2})
		},
		WantCondition: batchv1.JobFailed, WantReason: batchv1.JobReasonBackoffLimitExceeded,
	}
}

func failJobExitCode(r *rand.Rand, seed uint64) Scenario {
	job := baseJob(r, seed, r.IntN(2) == 0)
	*job.Spec.Completions = *job.Spec.Parallelism + 2
	job.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
		{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{ContainerName: ptr.To("main"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
	}}
	job.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	return Scenario{
		Name: "fail-job-exit-code", Job: job, IgnoresEvictions: true,
		Fates: func(n, _ int) []Step {
			pr := podRand(seed, n)
			if n == 1 {
				return lives(pr, Step{At: secs(pr, 3, 6), Kind: Fail, ExitCode: 42})
			}
			return lives(pr, Step{At: secs(pr, 60, 120), Kind: Succeed})
		},
		WantCondition: batchv1.JobFailed, WantReason: batchv1.JobReasonPodFailurePolicy,
	}
}

func ignoredEvictions(r *rand.Rand, seed uint64) Scenario {
	job := baseJob(r, seed, r.IntN(2) == 0)
	job.Spec.BackoffLimit = ptr.To[int32](0)
	job.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
	}}
	job.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	evictions := 1 + r.IntN(4)
	return Scenario{
		Name: "ignored-evictions", Job: job, IgnoresEvictions: true,
		Fates: func(n, _ int) []Step {
			pr := podRand(seed, n)
			if n <= evictions {
				return lives(pr, Step{At: secs(pr, 1, 5), Kind: Evict})
			}
			return lives(pr, Step{At: secs(pr, 2, 10), Kind: Succeed})
		},
		WantCondition: batchv1.JobComplete, WantReason: batchv1.JobReasonCompletionsReached,
	}
}

func failedIndexes(r *rand.Rand, seed uint64) Scenario {
	job := baseJob(r, seed, true)
	*job.Spec.Completions = max(*job.Spec.Completions, 2)
	job.Spec.BackoffLimitPerIndex = ptr.To(int32(r.IntN(3)))
	job.Spec.BackoffLimit = ptr.To[int32](1 << 30)
	bad := r.IntN(int(*job.Spec.Completions))
	reason := batchv1.JobReasonFailedIndexes
	if r.IntN(2) == 0 {
		job.Spec.MaxFailedIndexes = ptr.To[int32](0)
		reason = batchv1.JobReasonMaxFailedIndexesExceeded
	}
	return Scenario{
		Name: "failed-indexes", Job: job,
		Fates: func(n, index int) []Step {
			pr := podRand(seed, n)
			if index == bad {
				return lives(pr, Step{At: secs(pr, 1, 4), Kind: Fail, ExitCode: 3})
			}
			return lives(pr, Step{At: secs(pr, 2, 8), Kind: Succeed})
		},
		WantCondition: batchv1.JobFailed, WantReason: reason,
	}
}

func successPolicyMet(r *rand.Rand, seed uint64) Scenario {
	job := baseJob(r, seed, true)
	completions := int32(3 + r.IntN(6))
	job.Spec.Completions = &completions
	job.Spec.Parallelism = &completions
	need := int32(1 + r.IntN(int(completions-1)))
	job.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededCount: &need}}}
	return Scenario{
		Name: "success-policy", Job: job,
		Fates: func(n, index int) []Step {
			pr := podRand(seed, n)
			if index < int(need) {
				return lives(pr, Step{At: secs(pr, 2, 10), Kind: Succeed})
			}
			return []Step{{At: secs(pr, 1, 3), Kind: Start}} // runs until stopped
		},
		WantCondition: batchv1.JobComplete, WantReason: batchv1.JobReasonSuccessPolicy,
	}
}

func deadlineExceeded(r *rand.Rand, seed uint64) Scenario {
	job := baseJob(r, seed, r.IntN(2) == 0)
	job.Spec.ActiveDeadlineSeconds = ptr.To(int64(10 + r.IntN(30)))
	return Scenario{
		Name: "deadline-exceeded", Job: job,
		Fates: func(n, _ int) []Step {
			return []Step{{At: secs(podRand(seed, n), 1, 3), Kind: Start}}
		},
		WantCondition: batchv1.JobFailed, WantReason: batchv1.JobReasonDeadlineExceeded,
	}
}

func onFailureRestarts(r *rand.Rand, seed uint64) Scenario {
	job := baseJob(r, seed, r.IntN(2) == 0)
	job.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	job.Spec.BackoffLimit = ptr.To(int32(r.IntN(4)))
	return Scenario{
		Name: "on-failure-restarts", Job: job,
		Fates: func(n, _ int) []Step {
			pr := podRand(seed, n)
			steps := []Step{{At: secs(pr, 1, 3), Kind: Start}}
			for i := 1; i <= 10; i++ {
				steps = append(steps, Step{At: steps[0].At + time.Duration(i)*secs(pr, 2, 4), Kind: Restart})
			}
			return steps
		},
		WantCondition: batchv1.JobFailed, WantReason: batchv1.JobReasonBackoffLimitExceeded,
	}
}

func suspendedThenResumed(r *rand.Rand, seed uint64) Scenario {
	sc := allSucceed(r, seed)
	sc.Name = "suspended-then-resumed"
	sc.Job.Spec.Suspend = ptr.To(true)
	sc.Edits = []Edit{{At: secs(r, 5, 30), Apply: func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) }}}
	return sc
}

func suspendedMidRun(r *rand.Rand, seed uint64) Scenario {
	sc := allSucceed(r, seed)
	sc.Name = "suspended-mid-run"
	suspendAt := secs(r, 2, 4)
	sc.Edits = []Edit{
		{At: suspendAt, Apply: func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }},
		{At: suspendAt + secs(r, 5, 20), Apply: func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) }},
	}
	return sc
}

func workQueue(r *rand.Rand, seed uint64) Scenario {
	job := baseJob(r, seed, false)
	job.Spec.Completions = nil
	return Scenario{
		Name: "work-queue", Job: job, Fates: succeedingPods(seed),
		WantCondition: batchv1.JobComplete, WantReason: batchv1.JobReasonCompletionsReached,
	}
}

// Run plays a scenario from start until the Job finishes or maxSteps
// one-second steps have passed; each step syncs once. With informerLag, pods
// created in a step appear in snapshots only from the next one, and each step
// syncs twice, the second time before the new pods are seen.
func (sc Scenario) Run(start time.Time, maxSteps int, informerLag bool, afterSync func(*World)) *World {
	w := NewWorld(sc.Job, start, sc.Fates)
	w.InformerLag = informerLag
	edits := sc.Edits
	for step := 0; step < maxSteps; step++ {
		for len(edits) > 0 && !start.Add(edits[0].At).After(w.Now) {
			edits[0].Apply(w.Job)
			w.Job.Generation++
			edits = edits[1:]
		}
		w.Sync()
		if afterSync != nil {
			afterSync(w)
		}
		if informerLag && !w.Finished() {
			// A second sync before the informer caught up.
			w.Sync()
			if afterSync != nil {
				afterSync(w)
			}
		}
		if w.Finished() {
			break
		}
		w.Advance(time.Second)
	}
	return w
}
