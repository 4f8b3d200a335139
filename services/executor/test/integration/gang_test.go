package integration

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/featuregates"
)

// With the WorkloadWithJob gate (and the API server serving the alpha
// Workload API), a gang-schedulable Job gets its Workload and PodGroup
// before its first pod, both controlled by it, and each of its pods names
// the PodGroup. A Job of another shape gets none; so does a Job whose name
// another tenant's Workload already claims, which runs as any other Job and
// leaves that Workload alone.
func TestGangScheduledJobsGetTheirWorkloadAndPodGroup(t *testing.T) {
	e := startWith(t, options{
		apiServer: []string{"--feature-gates=GenericWorkload=true", "--runtime-config=scheduling.k8s.io/v1alpha2=true"},
		gates:     featuregates.Features{WorkloadWithJob: true},
	})
	ctx := context.Background()
	const ns = "gang"
	namespace(t, e.client, ns)

	// Written before the Job exists, by someone else: not the Job's.
	foreign := &schedulingv1alpha2.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "claimed"},
		Spec: schedulingv1alpha2.WorkloadSpec{
			ControllerRef: &schedulingv1alpha2.TypedLocalObjectReference{APIGroup: "batch", Kind: "Job", Name: "taken"},
			PodGroupTemplates: []schedulingv1alpha2.PodGroupTemplate{{Name: "t",
				SchedulingPolicy: schedulingv1alpha2.PodGroupSchedulingPolicy{Gang: &schedulingv1alpha2.GangSchedulingPolicy{MinCount: 3}}}},
		},
	}
	if _, err := e.client.SchedulingV1alpha2().Workloads(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	gang := indexedJob(ns, "gang", 3)
	gang.Spec.Suspend = ptr.To(true)
	taken := indexedJob(ns, "taken", 3)
	plain := newJob(ns, "plain", 3, 3)
	for _, j := range []*batchv1.Job{gang, taken, plain} {
		created, err := e.client.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		*j = *created
	}

	// Suspended: the scheduling objects come first, and no pod.
	var podGroup *schedulingv1alpha2.PodGroup
	waitFor(t, 30*time.Second, "the suspended Job's Workload and PodGroup", func() (bool, error) {
		pgs, err := e.client.SchedulingV1alpha2().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pgs.Items) == 0 {
			return false, err
		}
		podGroup = &pgs.Items[0]
		return true, nil
	})
	workloads, err := e.client.SchedulingV1alpha2().Workloads(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var workload *schedulingv1alpha2.Workload
	for i, wl := range workloads.Items {
		if wl.Name != foreign.Name {
			workload = &workloads.Items[i]
		}
	}
	if len(workloads.Items) != 2 || workload == nil || !metav1.IsControlledBy(workload, gang) {
		t.Fatalf("Workloads %v: want the foreign one and one controlled by Job gang", workloads.Items)
	}
	if gs := workload.Spec.PodGroupTemplates; len(gs) != 1 || gs[0].SchedulingPolicy.Gang == nil || gs[0].SchedulingPolicy.Gang.MinCount != 3 {
		t.Errorf("Workload's templates %v: want one gang of 3", gs)
	}
	if !metav1.IsControlledBy(podGroup, gang) || len(podGroup.OwnerReferences) != 2 || podGroup.OwnerReferences[1].UID != workload.UID ||
		podGroup.Spec.PodGroupTemplateRef.Workload.WorkloadName != workload.Name {
		t.Errorf("PodGroup %+v: want it controlled by Job gang, owned by and referencing Workload %s", podGroup.ObjectMeta, workload.Name)
	}
	if pods := jobPods(t, e, gang); len(pods) != 0 {
		t.Fatalf("%d pods of the suspended Job", len(pods))
	}

	// Resumed: each pod joins the PodGroup; the other Jobs' pods join none.
	if _, err := e.client.BatchV1().Jobs(ns).Patch(ctx, gang.Name, "application/merge-patch+json", []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "every Job's 3 pods", func() (bool, error) {
		return len(jobPods(t, e, gang)) == 3 && len(jobPods(t, e, taken)) == 3 && len(jobPods(t, e, plain)) == 3, nil
	})
	for _, j := range []*batchv1.Job{gang, taken, plain} {
		for _, pod := range jobPods(t, e, j) {
			group := pod.Spec.SchedulingGroup
			switch {
			case j == gang && (group == nil || ptr.Deref(group.PodGroupName, "") != podGroup.Name):
				t.Errorf("pod %s's scheduling group %v: want PodGroup %s", pod.Name, group, podGroup.Name)
			case j != gang && group != nil:
				t.Errorf("pod %s of Job %s joined scheduling group %v", pod.Name, j.Name, group)
			}
		}
	}
	after, err := e.client.SchedulingV1alpha2().Workloads(ns).Get(ctx, foreign.Name, metav1.GetOptions{})
	if err != nil || after.ResourceVersion == "" || len(after.OwnerReferences) != 0 {
		t.Errorf("the foreign Workload after: %+v, %v", after, err)
	}
	events, err := e.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=WorkloadCreated"})
	if err != nil || len(events.Items) != 1 || events.Items[0].InvolvedObject.Name != gang.Name {
		t.Errorf("WorkloadCreated events %v (%v): want one, on Job gang", events, err)
	}

	waitFor(t, 60*time.Second, "every Job to complete", func() (bool, error) {
		finishPods(t, e.client, ns)
		for _, j := range []*batchv1.Job{gang, taken, plain} {
			got, err := e.client.BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if _, cond := finished(got); cond != batchv1.JobComplete {
				return false, nil
			}
		}
		return true, nil
	})
	assertNoFinalizerLeft(t, e, ns)
}

// indexedJob is an Indexed jobplane Job of n pods, all at once.
func indexedJob(ns, name string, n int32) *batchv1.Job {
	j := newJob(ns, name, n, n)
	j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	return j
}

// jobPods are the pods the Job controls.
func jobPods(t *testing.T, e *env, job *batchv1.Job) []corev1.Pod {
	t.Helper()
	pods, err := e.client.CoreV1().Pods(job.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if metav1.IsControlledBy(&p, job) {
			out = append(out, p)
		}
	}
	return out
}
