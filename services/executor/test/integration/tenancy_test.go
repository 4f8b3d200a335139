package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/plan"
)

// A tenant of namespace team-a points pods at team-b's Job: one whose
// controller reference names the Job's UID (with its controller-uid label,
// jobplane's finalizer and a Succeeded phase), one matching its selector
// without an owner. Owner references are namespace-local, so neither is the
// Job's: team-b's Job is not seen through (GetJob), not disturbed (its syncs,
// suspension, resumption and completion count its own pods only), and the
// foreign pods are neither adopted nor deleted.
func TestPodsInAnotherNamespaceAreNotTheJobs(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	const attacker, victim = "team-a", "team-b"
	namespace(t, e.client, attacker)
	namespace(t, e.client, victim)
	job, err := e.client.BatchV1().Jobs(victim).Create(ctx, newJob(victim, "victim-job", 2, 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitPods(t, e.client, victim, 2)

	intruder := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: attacker, Name: "intruder",
			Labels:          job.Spec.Selector.MatchLabels,
			Finalizers:      []string{plan.DefaultTrackingFinalizer},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: job.Spec.Template.Spec,
	}
	created := createSucceededPod(t, e, intruder)
	stray := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: attacker, Name: "stray", Labels: job.Spec.Selector.MatchLabels},
		Spec:       job.Spec.Template.Spec,
	}
	createSucceededPod(t, e, stray)

	assertOnlyOwnPods := func(t *testing.T) {
		t.Helper()
		got, err := e.api.GetJob(ctx, &jobplanev1.GetJobRequest{Namespace: victim, Name: "victim-job", IncludePods: true})
		if err != nil {
			t.Fatalf("GetJob: %v", err)
		}
		for _, p := range got.GetPods() {
			if p.GetMetadata().GetNamespace() != victim {
				t.Fatalf("GetJob of %s/victim-job returned pod %s/%s", victim, p.GetMetadata().GetNamespace(), p.GetMetadata().GetName())
			}
		}
		pods, err := e.ctrl.PodsOf(job)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if p.Namespace != victim {
				t.Fatalf("PodsOf the victim holds %s/%s", p.Namespace, p.Name)
			}
		}
	}
	assertOnlyOwnPods(t)
	// A plan naming the foreign pod is refused whole, never reported done.
	for _, name := range []string{"intruder", "stray"} {
		p, err := e.client.CoreV1().Pods(attacker).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.api.Execute(ctx, &jobplanev1.ExecuteRequest{Namespace: victim, Name: "victim-job", Uid: string(job.UID), Plan: &jobplanev1.SyncPlan{
			Actions: []*jobplanev1.Action{{Reason: "Manual", Kind: &jobplanev1.Action_DeletePods{DeletePods: &jobplanev1.DeletePodsAction{
				Pods: []*jobplanev1.PodRef{{Name: name, Uid: string(p.UID)}},
			}}}},
		}})
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("Execute deleting %s/%s for %s/victim-job: %v, want FailedPrecondition", attacker, name, victim, err)
		}
	}
	if _, err := e.api.SyncJob(ctx, &jobplanev1.SyncJobRequest{Namespace: victim, Name: "victim-job"}); err != nil {
		t.Fatalf("SyncJob of the victim with a foreign pod pointing at it: %v", err)
	}

	setSuspend(t, e, victim, "victim-job", true)
	waitFor(t, 30*time.Second, "the suspended victim without active pods", func() (bool, error) {
		j, err := e.client.BatchV1().Jobs(victim).Get(ctx, "victim-job", metav1.GetOptions{})
		return err == nil && j.Status.Active == 0 && hasCondition(j, batchv1.JobSuspended), err
	})
	setSuspend(t, e, victim, "victim-job", false)
	waitFor(t, 60*time.Second, "the resumed victim to complete", func() (bool, error) {
		finishPods(t, e.client, victim)
		j, err := e.client.BatchV1().Jobs(victim).Get(ctx, "victim-job", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, cond := finished(j)
		return cond == batchv1.JobComplete, nil
	})
	assertOnlyOwnPods(t)
	j, err := e.client.BatchV1().Jobs(victim).Get(ctx, "victim-job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j.Status.Succeeded != 2 || j.Status.Failed != 0 {
		t.Fatalf("victim succeeded %d failed %d, want 2 and 0 (the foreign Succeeded pods counted?)", j.Status.Succeeded, j.Status.Failed)
	}

	// The attacker's pods stay as they were, but for jobplane's finalizer:
	// no Job of jobplane in team-a controls the intruder, so it is an
	// orphan there and its finalizer is removed, as any orphan's.
	for _, name := range []string{"intruder", "stray"} {
		p, err := e.client.CoreV1().Pods(attacker).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the attacker's pod %s: %v", name, err)
		}
		if p.DeletionTimestamp != nil {
			t.Fatalf("the attacker's pod %s is being deleted", name)
		}
		if name == "stray" && len(p.OwnerReferences) > 0 {
			t.Fatalf("the stray pod was adopted across namespaces: %v", p.OwnerReferences)
		}
		if name == "intruder" && (len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != created.OwnerReferences[0].UID) {
			t.Fatalf("the intruder's owner references changed: %v", p.OwnerReferences)
		}
	}
	assertNoFinalizerLeft(t, e, victim)
	assertNoFinalizerLeft(t, e, attacker)
}

// createSucceededPod creates pod and plays the kubelet: it has run and
// succeeded.
func createSucceededPod(t *testing.T, e *env, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	created, err := e.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	// The executor may already be removing the orphan's finalizer: a
	// patch does not conflict with that write, an update would.
	updated, err := succeed(ctx, e.client, pod.Namespace, created.Name)
	if err != nil {
		t.Fatalf("finishing pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return updated
}

func setSuspend(t *testing.T, e *env, ns, name string, suspend bool) {
	t.Helper()
	patch := []byte(`{"spec":{"suspend":false}}`)
	if suspend {
		patch = []byte(`{"spec":{"suspend":true}}`)
	}
	if _, err := e.client.BatchV1().Jobs(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("setting suspend=%v on %s/%s: %v", suspend, ns, name, err)
	}
}

func hasCondition(job *batchv1.Job, typ batchv1.JobConditionType) bool {
	return slices.ContainsFunc(job.Status.Conditions, func(c batchv1.JobCondition) bool {
		return c.Type == typ && c.Status == corev1.ConditionTrue
	})
}

// A Job whose snapshot is larger than the planner takes in one request
// (here, at a planner taking 4 KiB, its forty pods) is sent in parts, and
// runs to completion, as the reference runs it; another namespace's Job
// runs beside it on the one stream.
func TestAJobLargerThanThePlannerTakesIsPlannedInParts(t *testing.T) {
	e := startWith(t, options{planner: []string{"-max-recv-msg-bytes", "4096"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const huge, small = "huge", "small"
	namespace(t, e.client, huge)
	namespace(t, e.client, small)
	if _, err := e.client.BatchV1().Jobs(huge).Create(ctx, newJob(huge, "big", 40, 40), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.BatchV1().Jobs(small).Create(ctx, newJob(small, "one", 1, 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPods(t, e.client, huge, 40)
	waitPods(t, e.client, small, 1)
	finishPods(t, e.client, huge)
	finishPods(t, e.client, small)
	waitComplete(t, e.client, huge, "big")
	waitComplete(t, e.client, small, "one")
	if n := e.plans.SentInParts(); n == 0 {
		t.Error("no snapshot was sent in parts")
	}
	if n := e.plans.BrokenStreams(); n != 0 {
		t.Errorf("%d planner streams broke, want none: a request was too large for the planner", n)
	}
}

// A Job whose snapshot is more than the planner keeps, even in parts
// (here 40 pods at a planner keeping 32 KiB of snapshots), is refused
// alone, with a Warning event on it naming the bound; another namespace's
// Job runs beside it on the one stream.
func TestAJobBeyondWhatThePlannerKeepsWaitsAloneWithAnEvent(t *testing.T) {
	e := startWith(t, options{planner: []string{"-max-recv-msg-bytes", "4096", "-stream-snapshot-max-bytes", "32768"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const huge, small = "huge", "small"
	namespace(t, e.client, huge)
	namespace(t, e.client, small)
	// Its first snapshot (no pods) fits; once its pods exist, it does not.
	if _, err := e.client.BatchV1().Jobs(huge).Create(ctx, newJob(huge, "big", 40, 40), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the big Job refused, with an event", func() (bool, error) {
		events, err := e.client.CoreV1().Events(huge).List(ctx, metav1.ListOptions{FieldSelector: "reason=SnapshotTooLarge"})
		if err != nil || len(events.Items) == 0 {
			return false, err
		}
		if msg := events.Items[0].Message; !strings.Contains(msg, "-stream-snapshot-max-bytes") {
			t.Errorf("the event says %q, not the planner's bound", msg)
		}
		return true, nil
	})
	if _, err := e.client.BatchV1().Jobs(small).Create(ctx, newJob(small, "one", 1, 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPods(t, e.client, small, 1)
	finishPods(t, e.client, small)
	waitComplete(t, e.client, small, "one")
	if n := e.plans.BrokenStreams(); n != 0 {
		t.Errorf("%d planner streams broke, want none: the big Job broke one", n)
	}
}

// A Job's pods are sent to the planner with what a sync reads of them: a
// tenant's annotations of 100 KB on each of four pods (and a planner
// taking 256 KiB) do not keep the Job from running.
func TestPodsAnnotationsAreNotSentToThePlanner(t *testing.T) {
	e := startWith(t, options{planner: []string{"-max-recv-msg-bytes", "262144"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ns = "annotated"
	namespace(t, e.client, ns)
	job := newJob(ns, "noted", 4, 4)
	job.Spec.Template.Annotations = map[string]string{"note": strings.Repeat("x", 100<<10)}
	if _, err := e.client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPods(t, e.client, ns, 4)
	finishPods(t, e.client, ns)
	waitComplete(t, e.client, ns, "noted")
}
