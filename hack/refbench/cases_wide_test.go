package refbench

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/jobvalidation"
	"github.com/jobplane/jobplane/lib/plan"
)

// The widenings below draw from streams of their own, so that the cases
// randomJob and randomState drew before keep their first draws: each
// widens a case into what the first draws never made (the gaps a reading
// of the reference's syncJob found), a fraction of the time.

// widenJob changes some of seed's Jobs and pods into rarer ones: specs
// the API server takes, states tracking passes through, times on the
// boundaries.
func widenJob(seed uint64, j *batchv1.Job, pods []*corev1.Pod) []*corev1.Pod {
	r := rand.New(rand.NewPCG(seed, 0x77696465))
	widenSpec(r, j)
	pods = widenToTheCaps(r, j, pods)
	for _, p := range pods {
		widenPod(r, j, p)
	}
	widenCounts(r, j, pods)
	if *j.Spec.CompletionMode == batchv1.IndexedCompletion {
		widenIndexes(r, j)
	}
	widenConditions(r, j)
	if r.IntN(15) == 0 {
		j.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-5 * time.Second)))
	}
	if ads := j.Spec.ActiveDeadlineSeconds; ads != nil && r.IntN(5) == 0 {
		// Exactly at, just before and just after the deadline.
		j.Status.StartTime = ptr.To(metav1.NewTime(now.Add(-time.Duration(*ads+int64(r.IntN(3))-1) * time.Second)))
	}
	return pods
}

// widenToTheCaps makes one NonIndexed Job in 150 reach a sync's caps: more
// pods to create than it creates at once (500), or more finished pods than
// it counts at once (500). Which of those it counts the reference takes
// from its informer's order, which is none: the pods are then all alike,
// succeeded (bigPodsAlike compares how many were counted).
func widenToTheCaps(r *rand.Rand, j *batchv1.Job, pods []*corev1.Pod) []*corev1.Pod {
	if *j.Spec.CompletionMode != batchv1.NonIndexedCompletion || r.IntN(150) != 0 {
		return pods
	}
	if r.IntN(2) == 0 {
		j.Spec.Completions, j.Spec.Parallelism = nil, ptr.To(int32(500+r.IntN(120)))
		return pods
	}
	var big []*corev1.Pod
	for i := range 495 + r.IntN(30) {
		name := "big-" + strconv.Itoa(i)
		big = append(big, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: j.Namespace, UID: types.UID(name), ResourceVersion: "1",
				CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
				Labels:            map[string]string{batchv1.ControllerUidLabel: string(j.UID), batchv1.JobNameLabel: j.Name},
				OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))},
				Finalizers:        []string{batchv1.JobTrackingFinalizer}},
			Spec: j.Spec.Template.Spec,
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(now.Add(-30 * time.Second))}}}}},
		})
	}
	return big
}

// widenSpec changes the spec where the API server takes the change.
func widenSpec(r *rand.Rand, j *batchv1.Job) {
	try := func(change func(*batchv1.JobSpec)) {
		spec := j.Spec.DeepCopy()
		change(&j.Spec)
		if len(jobvalidation.ValidateJob(j)) > 0 {
			j.Spec = *spec
		}
	}
	if j.Spec.BackoffLimitPerIndex != nil && r.IntN(2) == 0 {
		try(func(s *batchv1.JobSpec) { s.BackoffLimit = ptr.To(int32(r.IntN(4))) })
	}
	if *j.Spec.CompletionMode == batchv1.NonIndexedCompletion && r.IntN(30) == 0 {
		try(func(s *batchv1.JobSpec) { s.Completions = ptr.To[int32](0) })
	}
	if j.Spec.PodFailurePolicy != nil && r.IntN(2) == 0 {
		try(func(s *batchv1.JobSpec) { s.PodFailurePolicy.Rules = randomFailureRules(r, s) })
	}
	if j.Spec.SuccessPolicy != nil && r.IntN(2) == 0 {
		try(func(s *batchv1.JobSpec) { s.SuccessPolicy.Rules = randomSuccessRules(r, *s.Completions) })
	}
}

// randomFailureRules are one to four pod failure policy rules of any
// action, on exit codes (of any container or one) or pod conditions.
func randomFailureRules(r *rand.Rand, s *batchv1.JobSpec) []batchv1.PodFailurePolicyRule {
	actions := []batchv1.PodFailurePolicyAction{batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionIgnore,
		batchv1.PodFailurePolicyActionCount}
	if s.BackoffLimitPerIndex != nil {
		actions = append(actions, batchv1.PodFailurePolicyActionFailIndex)
	}
	var rules []batchv1.PodFailurePolicyRule
	for range 1 + r.IntN(4) {
		rule := batchv1.PodFailurePolicyRule{Action: actions[r.IntN(len(actions))]}
		if r.IntN(3) == 0 {
			rule.OnPodConditions = []batchv1.PodFailurePolicyOnPodConditionsPattern{{
				Type:   []corev1.PodConditionType{corev1.DisruptionTarget, "ConfigIssue"}[r.IntN(2)],
				Status: []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse}[r.IntN(2)]}}
		} else {
			var values []int32
			for _, code := range []int32{0, 1, 7, 42, 137} {
				if r.IntN(3) == 0 {
					values = append(values, code)
				}
			}
			op := []batchv1.PodFailurePolicyOnExitCodesOperator{batchv1.PodFailurePolicyOnExitCodesOpIn, batchv1.PodFailurePolicyOnExitCodesOpNotIn}[r.IntN(2)]
			if op == batchv1.PodFailurePolicyOnExitCodesOpIn {
				values = slices.DeleteFunc(values, func(v int32) bool { return v == 0 })
			}
			if len(values) == 0 {
				values = []int32{7}
			}
			rule.OnExitCodes = &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: op, Values: values}
			if r.IntN(4) == 0 {
				rule.OnExitCodes.ContainerName = ptr.To("main")
			}
		}
		rules = append(rules, rule)
	}
	return rules
}

// randomSuccessRules are one to three success policy rules: a count, a
// list of indexes (ranges, several, not from 0) or both.
func randomSuccessRules(r *rand.Rand, completions int32) []batchv1.SuccessPolicyRule {
	var rules []batchv1.SuccessPolicyRule
	for range 1 + r.IntN(3) {
		var rule batchv1.SuccessPolicyRule
		var listed int32
		if r.IntN(3) != 0 {
			var ixs []int
			for ix := range int(completions) {
				if r.IntN(2) == 0 {
					ixs = append(ixs, ix)
				}
			}
			if len(ixs) == 0 {
				ixs = []int{int(completions) - 1}
			}
			rule.SucceededIndexes = ptr.To(indexList(ixs))
			listed = int32(len(ixs))
		}
		if rule.SucceededIndexes == nil || r.IntN(2) == 0 {
			most := completions
			if rule.SucceededIndexes != nil {
				most = listed
			}
			rule.SucceededCount = ptr.To(1 + int32(r.IntN(int(most))))
		}
		rules = append(rules, rule)
	}
	return rules
}

// indexList writes sorted indexes as the reference does: runs of three or
// more as ranges.
func indexList(ixs []int) string {
	var out []byte
	for i := 0; i < len(ixs); {
		end := i
		for end+1 < len(ixs) && ixs[end+1] == ixs[end]+1 {
			end++
		}
		if len(out) > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, int64(ixs[i]), 10)
		switch {
		case end-i >= 2:
			out = strconv.AppendInt(append(out, '-'), int64(ixs[end]), 10)
		case end > i:
			out = strconv.AppendInt(append(out, ','), int64(ixs[end]), 10)
		}
		i = end + 1
	}
	return string(out)
}

// widenPod gives a pod what the first draws never do: a node, phase
// Unknown, restarts of other containers, finish times from other
// sources, annotations that do not parse.
func widenPod(r *rand.Rand, j *batchv1.Job, p *corev1.Pod) {
	if r.IntN(3) != 0 {
		p.Spec.NodeName = "node-" + strconv.Itoa(r.IntN(2))
	}
	switch p.Status.Phase {
	case corev1.PodPending:
		if r.IntN(8) == 0 {
			p.Status.Phase = corev1.PodUnknown
		}
		if r.IntN(5) == 0 {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", RestartCount: int32(r.IntN(3))}}
		}
	case corev1.PodRunning:
		if r.IntN(5) == 0 && len(p.Spec.InitContainers) > 0 {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.InitContainers[len(p.Spec.InitContainers)-1].Name,
				RestartCount: int32(r.IntN(3))}}
		}
	case corev1.PodFailed:
		switch r.IntN(8) {
		case 0: // a finish time not recorded
			for i := range p.Status.ContainerStatuses {
				if t := p.Status.ContainerStatuses[i].State.Terminated; t != nil {
					t.FinishedAt = metav1.Time{}
				}
			}
		case 1: // another container still running
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "helper",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: p.CreationTimestamp}}})
		case 2: // exit code 0, an init container's code not
			p.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 42, FinishedAt: p.CreationTimestamp}}}}
			for i := range p.Status.ContainerStatuses {
				if t := p.Status.ContainerStatuses[i].State.Terminated; t != nil {
					t.ExitCode = 0
				}
			}
		case 3: // a container status with nothing terminated
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main"}}
		}
	}
	if p.DeletionTimestamp != nil && r.IntN(2) == 0 {
		p.DeletionGracePeriodSeconds = ptr.To(int64(r.IntN(31)))
	}
	if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp != nil && r.IntN(3) == 0 {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "PreemptionByScheduler", LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Second))})
	}
	if *j.Spec.CompletionMode == batchv1.IndexedCompletion && p.Annotations != nil && r.IntN(15) == 0 {
		odd := []string{"+1", "2147483648", " 1", "1e1"}[r.IntN(4)]
		p.Annotations[batchv1.JobCompletionIndexAnnotation] = odd
	}
	if j.Spec.BackoffLimitPerIndex != nil && p.Annotations != nil && r.IntN(10) == 0 {
		key := []string{batchv1.JobIndexFailureCountAnnotation, batchv1.JobIndexIgnoredFailureCountAnnotation}[r.IntN(2)]
		p.Annotations[key] = []string{"x", "-1", "2147483648", "2147483647", "9"}[r.IntN(5)]
	}
}

// widenCounts puts the status's counters where tracking leaves them:
// ready and terminating pods counted, pods counted before they were
// deleted, uncounted pods whose finalizer is gone already, or that are
// gone.
func widenCounts(r *rand.Rand, j *batchv1.Job, pods []*corev1.Pod) {
	if r.IntN(2) == 0 {
		var ready, terminating int32
		for _, p := range pods {
			terminal := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
			switch {
			case p.DeletionTimestamp != nil && !terminal:
				terminating++
			case !terminal && p.DeletionTimestamp == nil && podReady(p):
				ready++
			}
		}
		j.Status.Ready, j.Status.Terminating = &ready, &terminating
	}
	if r.IntN(5) == 0 {
		j.Status.Failed += int32(1 + r.IntN(3))
	}
	if *j.Spec.CompletionMode == batchv1.NonIndexedCompletion && r.IntN(6) == 0 {
		j.Status.Succeeded += int32(1 + r.IntN(3))
	}
	if r.IntN(5) != 0 {
		return
	}
	uncounted := j.Status.UncountedTerminatedPods
	if uncounted == nil {
		uncounted = &batchv1.UncountedTerminatedPods{}
		j.Status.UncountedTerminatedPods = uncounted
	}
	for _, p := range pods {
		if slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) || r.IntN(2) == 0 {
			continue
		}
		switch p.Status.Phase { // counted in the last sync, its finalizer removed since
		case corev1.PodSucceeded:
			uncounted.Succeeded = append(uncounted.Succeeded, p.UID)
		case corev1.PodFailed:
			uncounted.Failed = append(uncounted.Failed, p.UID)
		}
	}
	// A pod gone since. (A pod listed twice, or in both lists, the API
	// server refuses to store.)
	switch r.IntN(3) {
	case 0:
		uncounted.Succeeded = append(uncounted.Succeeded, "gone-0")
	case 1:
		uncounted.Failed = append(uncounted.Failed, "gone-1")
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// widenIndexes writes the indexes recorded as the reference writes them
// (ranges), or records no failed indexes yet. (Lists that do not parse
// the API server refuses to store.)
func widenIndexes(r *rand.Rand, j *batchv1.Job) {
	canonical := func(list string) string {
		ixs, ok := parseIndexList(list)
		if !ok {
			return list
		}
		return indexList(ixs)
	}
	if r.IntN(2) == 0 {
		j.Status.CompletedIndexes = canonical(j.Status.CompletedIndexes)
		if f := j.Status.FailedIndexes; f != nil {
			j.Status.FailedIndexes = ptr.To(canonical(*f))
		}
	}
	if j.Spec.BackoffLimitPerIndex != nil && r.IntN(4) == 0 {
		j.Status.FailedIndexes = nil // not yet recorded: the first sync
	}
	if j.Spec.BackoffLimitPerIndex == nil && r.IntN(20) == 0 {
		j.Status.FailedIndexes = ptr.To("0")
	}
}

// parseIndexList reads a list of single indexes, in order.
func parseIndexList(list string) ([]int, bool) {
	if list == "" {
		return nil, true
	}
	var ixs []int
	start := 0
	for i := 0; i <= len(list); i++ {
		if i < len(list) && list[i] != ',' {
			continue
		}
		ix, err := strconv.Atoi(list[start:i])
		if err != nil {
			return nil, false
		}
		ixs = append(ixs, ix)
		start = i + 1
	}
	return ixs, slices.IsSorted(ixs)
}

// widenConditions sets the conditions tracking leaves in a Job: a
// suspension as the reference writes it (steady) or ended, conditions
// together, or set to False.
func widenConditions(r *rand.Rand, j *batchv1.Job) {
	since := metav1.NewTime(now.Add(-time.Duration(20+r.IntN(40)) * time.Second))
	condition := func(typ batchv1.JobConditionType, status corev1.ConditionStatus, reason, message string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: typ, Status: status, Reason: reason, Message: message, LastProbeTime: since, LastTransitionTime: since}
	}
	switch r.IntN(10) {
	case 0, 1:
		j.Status.Conditions = slices.DeleteFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool { return c.Type == batchv1.JobSuspended })
		if ptr.Deref(j.Spec.Suspend, false) || r.IntN(2) == 0 {
			j.Status.Conditions = append(j.Status.Conditions, condition(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended"))
		} else {
			j.Status.Conditions = append(j.Status.Conditions, condition(batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed"))
		}
	case 2:
		j.Status.Conditions = append(j.Status.Conditions,
			condition(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
			condition(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"))
	case 3:
		typ := []batchv1.JobConditionType{batchv1.JobFailureTarget, batchv1.JobSuccessCriteriaMet, batchv1.JobComplete, batchv1.JobFailed}[r.IntN(4)]
		j.Status.Conditions = append(j.Status.Conditions, condition(typ, corev1.ConditionFalse, "Earlier", "set to False before"))
	}
}

// widenState gives the executor's state what the first draws never do:
// finalizer removals sent and not yet seen, and backoff records of many
// failures or old ones.
func widenState(seed uint64, state *plan.State, pods []*corev1.Pod) {
	r := rand.New(rand.NewPCG(seed, 0x73746174))
	if r.IntN(8) == 0 {
		for _, p := range pods {
			if slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) && r.IntN(2) == 0 {
				state.FinalizerRemovalsInFlight = append(state.FinalizerRemovalsInFlight, p.UID)
			}
		}
		if r.IntN(4) == 0 {
			state.FinalizerRemovalsInFlight = append(state.FinalizerRemovalsInFlight, "gone-0")
		}
	}
	if r.IntN(6) == 0 {
		state.Backoff = &plan.BackoffRecord{FailuresAfterLastSuccess: int32(1 + r.IntN(10)),
			LastFailureTime: ptr.To(now.Add(time.Duration(r.IntN(920)-5) * time.Second * -1))}
	}
}
