package refbench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/plan"
)

// randomState is what the executor knows of seed's Job from syncs before,
// as the reference's controller would: in a third of the cases a pod
// failure backoff record, in a tenth pod creations or deletions expected
// and not yet seen (set just now: not expired).
func randomState(seed uint64) plan.State {
	r := rand.New(rand.NewPCG(seed, 0x6261636b))
	var state plan.State
	if r.IntN(10) == 0 {
		state.Expectations = plan.Expectations{PendingCreations: int32(r.IntN(3)), PendingDeletions: int32(r.IntN(2)), RecordedAt: now}
	}
	state.Backoff = randomBackoff(r)
	return state
}

// randomBackoff is a backoff record in a third of the cases.
func randomBackoff(r *rand.Rand) *plan.BackoffRecord {
	if r.IntN(3) != 0 {
		return nil
	}
	if r.IntN(5) == 0 {
		return &plan.BackoffRecord{} // a success after the last failure
	}
	return &plan.BackoffRecord{FailuresAfterLastSuccess: int32(1 + r.IntN(4)),
		LastFailureTime: ptr.To(now.Add(-time.Duration(r.IntN(120)) * time.Second))}
}

// randomJob is the Job and pods of seed: a Job as the API server stores it
// (defaulted), mid-run, with pods in every phase.
func randomJob(seed uint64) (*batchv1.Job, []*corev1.Pod) {
	r := rand.New(rand.NewPCG(seed, 0x61677265))
	uid := types.UID(fmt.Sprintf("job-%d", seed))
	labels := map[string]string{batchv1.ControllerUidLabel: string(uid), batchv1.JobNameLabel: "job"}
	indexed := r.IntN(2) == 0
	mode := batchv1.NonIndexedCompletion
	if indexed {
		mode = batchv1.IndexedCompletion
	}
	completions := ptr.To(int32(1 + r.IntN(6)))
	if !indexed && r.IntN(5) == 0 {
		completions = nil // a work queue
	}
	parallelism := int32(r.IntN(5))
	restart := corev1.RestartPolicyNever
	if r.IntN(4) == 0 {
		restart = corev1.RestartPolicyOnFailure
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: uid, ResourceVersion: "1",
			CreationTimestamp: metav1.NewTime(now.Add(-10 * time.Minute))},
		Spec: batchv1.JobSpec{
			Parallelism:    &parallelism,
			Completions:    completions,
			CompletionMode: &mode,
			BackoffLimit:   ptr.To(int32(r.IntN(4))),
			Suspend:        ptr.To(r.IntN(8) == 0),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: string(uid)}},
			ManualSelector: nil,
			PodReplacementPolicy: ptr.To([]batchv1.PodReplacementPolicy{
				batchv1.TerminatingOrFailed, batchv1.Failed}[r.IntN(2)]),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{RestartPolicy: restart,
					Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
			},
		},
	}
	if r.IntN(4) == 0 {
		j.Spec.ActiveDeadlineSeconds = ptr.To(int64(60 + r.IntN(600)))
	}
	if r.IntN(4) == 0 { // a template of more than the defaults
		tmpl := &j.Spec.Template
		tmpl.Annotations = map[string]string{"team": "a"}
		tmpl.Finalizers = []string{"example.com/keep"}
		tmpl.Spec.Subdomain = "workers"
		always := corev1.ContainerRestartPolicyAlways
		tmpl.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"},
			{Name: "sidecar", Image: "busybox", RestartPolicy: &always}}
		tmpl.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "batch"}}
	}
	if indexed && r.IntN(3) == 0 {
		j.Spec.BackoffLimitPerIndex = ptr.To(int32(r.IntN(3)))
		j.Spec.BackoffLimit = ptr.To(int32(1<<31 - 1))
		if r.IntN(2) == 0 {
			j.Spec.MaxFailedIndexes = ptr.To(int32(r.IntN(3)))
		}
	}
	if restart == corev1.RestartPolicyNever && r.IntN(3) == 0 {
		j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
			{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
			{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
				{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
			{Action: batchv1.PodFailurePolicyActionCount, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0, 42, 7}}},
		}}
		if j.Spec.BackoffLimitPerIndex != nil {
			j.Spec.PodFailurePolicy.Rules = append(j.Spec.PodFailurePolicy.Rules, batchv1.PodFailurePolicyRule{
				Action: batchv1.PodFailurePolicyActionFailIndex, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{7}}})
		}
	}
	if indexed && r.IntN(4) == 0 {
		rule := batchv1.SuccessPolicyRule{SucceededCount: ptr.To(int32(1 + r.IntN(int(*completions))))}
		if r.IntN(2) == 0 {
			rule = batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To("0-" + strconv.Itoa(r.IntN(int(*completions))))}
		}
		j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{rule}}
	}
	if r.IntN(5) != 0 {
		j.Status.StartTime = ptr.To(metav1.NewTime(now.Add(-time.Duration(r.IntN(600)) * time.Second)))
	}
	var pods []*corev1.Pod
	for i := range r.IntN(9) {
		pods = append(pods, randomPod(r, j, i))
	}
	countSome(r, j, pods)
	if indexed {
		someIndexes(r, j)
	}
	someCondition(r, j)
	return j, pods
}

// someIndexes records some indexes as completed or failed.
func someIndexes(r *rand.Rand, j *batchv1.Job) {
	var completed, failed []string
	for ix := range int(*j.Spec.Completions) {
		switch r.IntN(6) {
		case 0:
			completed = append(completed, strconv.Itoa(ix))
		case 1:
			if j.Spec.BackoffLimitPerIndex != nil {
				failed = append(failed, strconv.Itoa(ix))
			}
		}
	}
	j.Status.CompletedIndexes = strings.Join(completed, ",")
	if j.Spec.BackoffLimitPerIndex != nil {
		j.Status.FailedIndexes = ptr.To(strings.Join(failed, ","))
	}
}

// someCondition gives some Jobs a condition of a Job finishing or
// finished, set a while ago.
func someCondition(r *rand.Rand, j *batchv1.Job) {
	since := metav1.NewTime(now.Add(-30 * time.Second))
	add := func(typ batchv1.JobConditionType, reason string) {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue,
			Reason: reason, Message: "set before", LastProbeTime: since, LastTransitionTime: since})
	}
	switch r.IntN(12) {
	case 0:
		add(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded)
	case 1:
		add(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached)
	case 2:
		add(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded)
		add(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded)
	case 3:
		add(batchv1.JobSuspended, "JobSuspended")
	}
}

// randomPod is the i-th pod of j, in a random phase.
func randomPod(r *rand.Rand, j *batchv1.Job, i int) *corev1.Pod {
	// Distinct creation times: of pods alike in all else, the reference
	// deletes the newest, and keeps its informer's order, no set one, for a
	// tie.
	created := now.Add(-time.Duration(10+50*i+r.IntN(50)) * time.Second)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job-%d", i), Namespace: j.Namespace, UID: types.UID(fmt.Sprintf("pod-%d", i)),
			ResourceVersion: "1", CreationTimestamp: metav1.NewTime(created),
			Labels:          map[string]string{batchv1.ControllerUidLabel: string(j.UID), batchv1.JobNameLabel: j.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: j.Spec.Template.Spec,
	}
	if r.IntN(6) != 0 {
		p.Finalizers = []string{batchv1.JobTrackingFinalizer}
	}
	if *j.Spec.CompletionMode == batchv1.IndexedCompletion {
		ix := strconv.Itoa(r.IntN(int(*j.Spec.Completions) + 1)) // one past the last: out of range
		p.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: ix}
		p.Labels[batchv1.JobCompletionIndexAnnotation] = ix
		switch r.IntN(20) {
		case 0:
			delete(p.Annotations, batchv1.JobCompletionIndexAnnotation) // no index: not the Job's to count
		case 1:
			p.Annotations[batchv1.JobCompletionIndexAnnotation] = []string{"x", "-1", "01"}[r.IntN(3)]
		}
		if j.Spec.BackoffLimitPerIndex != nil && r.IntN(2) == 0 {
			p.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(r.IntN(3))
			if r.IntN(3) == 0 {
				p.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(r.IntN(2))
			}
		}
	}
	finished := metav1.NewTime(created.Add(time.Duration(r.IntN(10)+1) * time.Second))
	switch r.IntN(5) {
	case 0:
		p.Status.Phase = corev1.PodPending
	case 1, 2:
		p.Status.Phase = corev1.PodRunning
		ready := corev1.ConditionFalse
		if r.IntN(2) == 0 {
			ready = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready,
			LastTransitionTime: metav1.NewTime(created.Add(time.Duration(1+r.IntN(5)) * time.Second))}}
		if j.Spec.Template.Spec.RestartPolicy == corev1.RestartPolicyOnFailure {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", RestartCount: int32(r.IntN(3))}}
		}
	case 3:
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, FinishedAt: finished}}}}
	case 4:
		p.Status.Phase = corev1.PodFailed
		code := []int32{1, 7, 42}[r.IntN(3)]
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: finished}}}}
		if r.IntN(4) == 0 {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: "EvictionByEvictionAPI", LastTransitionTime: finished}}
		}
		switch r.IntN(6) {
		case 0: // no container status: its finish time is its Ready=False condition's
			p.Status.ContainerStatuses = nil
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady,
				Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(finished.Add(2 * time.Second))})
		case 1: // a sidecar that stopped after the main container
			always := corev1.ContainerRestartPolicyAlways
			p.Spec.InitContainers = []corev1.Container{{Name: "sidecar", Image: "busybox", RestartPolicy: &always}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "sidecar", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, FinishedAt: metav1.NewTime(finished.Add(3 * time.Second))}}}}
		}
	}
	if r.IntN(6) == 0 {
		// Distinct too: the reference keeps a failed index's latest pod, the
		// informer's order deciding a tie.
		p.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-time.Duration(1+i) * time.Second)))
	}
	return p
}

// countSome puts the status in agreement with the pods already counted
// (terminal pods without the finalizer), and some in uncounted.
func countSome(r *rand.Rand, j *batchv1.Job, pods []*corev1.Pod) {
	var ready, active int32
	for _, p := range pods {
		terminal := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		if !terminal {
			if p.DeletionTimestamp == nil {
				active++
			}
			continue
		}
		counted := !slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer)
		switch {
		case counted && p.Status.Phase == corev1.PodSucceeded:
			j.Status.Succeeded++
		case counted:
			j.Status.Failed++
		case r.IntN(4) == 0:
			if j.Status.UncountedTerminatedPods == nil {
				j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
			}
			if p.Status.Phase == corev1.PodSucceeded {
				j.Status.UncountedTerminatedPods.Succeeded = append(j.Status.UncountedTerminatedPods.Succeeded, p.UID)
			} else {
				j.Status.UncountedTerminatedPods.Failed = append(j.Status.UncountedTerminatedPods.Failed, p.UID)
			}
		}
	}
	if r.IntN(2) == 0 {
		j.Status.Active = active
		j.Status.Ready = &ready
		j.Status.Terminating = ptr.To(int32(r.IntN(2)))
	}
}
