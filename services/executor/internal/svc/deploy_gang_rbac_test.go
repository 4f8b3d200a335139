package svc_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	schedulingv1alpha2 "k8s.io/api/scheduling/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/jobplane/jobplane/lib/kubetest"
)

// deploy/gang-scheduling's role is exactly what the executor uses with the
// WorkloadWithJob gate: the caches of Workloads and PodGroups, and their
// creation; without any one permission something it does fails.
func TestTheGangSchedulingRoleIsExactlyWhatItUses(t *testing.T) {
	apiserver := kubetest.StartAPIServer(t, kubetest.WithFlags("--feature-gates=GenericWorkload=true", "--runtime-config=scheduling.k8s.io/v1alpha2=true"))
	deploy := filepath.Join("..", "..", "..", "..", "deploy")
	apiserver.Apply(t, filepath.Join(deploy, "kubernetes", "00-namespace.yaml"), filepath.Join(deploy, "kubernetes", "20-rbac.yaml"),
		filepath.Join(deploy, "gang-scheduling", "rbac.yaml"))
	executor, err := kubernetes.NewForConfig(apiserver.ServiceAccountConfig(t, "jobplane-system", "jobplane-executor"))
	if err != nil {
		t.Fatal(err)
	}
	createNamespace(t, apiserver.Client, "team-a", nil)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	workload := &schedulingv1alpha2.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "job-a-1"},
		Spec: schedulingv1alpha2.WorkloadSpec{
			ControllerRef: &schedulingv1alpha2.TypedLocalObjectReference{APIGroup: "batch", Kind: "Job", Name: "job-a"},
			PodGroupTemplates: []schedulingv1alpha2.PodGroupTemplate{{Name: "job-a-pgt-0",
				SchedulingPolicy: schedulingv1alpha2.PodGroupSchedulingPolicy{Gang: &schedulingv1alpha2.GangSchedulingPolicy{MinCount: 2}}}},
		},
	}
	podGroup := &schedulingv1alpha2.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "job-a-1-job-a-pgt-0-1"},
		Spec: schedulingv1alpha2.PodGroupSpec{
			PodGroupTemplateRef: &schedulingv1alpha2.PodGroupTemplateReference{Workload: &schedulingv1alpha2.WorkloadPodGroupTemplateReference{
				WorkloadName: workload.Name, PodGroupTemplateName: "job-a-pgt-0"}},
			SchedulingPolicy: workload.Spec.PodGroupTemplates[0].SchedulingPolicy,
		},
	}
	// A PodGroup is admitted only beside its Workload.
	if _, err := apiserver.Client.SchedulingV1alpha2().Workloads("team-a").Create(context.Background(), workload, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	another := workload.DeepCopy()
	another.Name, another.Spec.ControllerRef.Name = "job-b-1", "job-b"
	scheduling := executor.SchedulingV1alpha2()
	steps := []kubetest.Step{
		{What: "list and watch Workloads", Do: func(ctx context.Context) error { return listAndWatch(ctx, executor, "workloads") }},
		{What: "list and watch PodGroups", Do: func(ctx context.Context) error { return listAndWatch(ctx, executor, "podgroups") }},
		{What: "create a Workload", Do: func(ctx context.Context) error {
			_, err := scheduling.Workloads("team-a").Create(ctx, another, dryRun)
			return err
		}},
		{What: "create a PodGroup", Do: func(ctx context.Context) error {
			_, err := scheduling.PodGroups("team-a").Create(ctx, podGroup, dryRun)
			return err
		}},
	}
	probe := kubetest.ProbeSteps(steps, 5*time.Second)
	if unneeded := apiserver.EachPermissionIsNeeded(t, "", "jobplane-executor-gang-scheduling", 5*time.Second, probe); len(unneeded) > 0 {
		t.Errorf("jobplane-executor-gang-scheduling grants what the executor does not use: %v", unneeded)
	}
}
