package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/kubetest"
	"github.com/jobplane/jobplane/services/executor/internal/dropin"
)

// Drop-in mode on a cluster without kube-controller-manager's Job
// controller: a plain batch/v1 Job (no spec.managedBy) runs to completion
// under the executor, with the built-in controller's tracking finalizer and
// event source, while a Job another controller manages and its pod (with
// that same reserved finalizer) are left alone. Beside a Job controller
// that answers the probe, the executor refuses to start; a tenant playing
// that controller in its own namespace cannot make it refuse.
func TestDropIn(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver")
	}
	apiserver := kubetest.StartAPIServer(t)
	kube, ctx := apiserver.Client, context.Background()
	kubeconfig := apiserver.WriteKubeconfig(t)
	planner := kubetest.StartProcess(t, "planner", kubetest.BuildBinary(t, "./services/planner/cmd/planner"), "-shutdown-drain", "0s", "-authn-anonymous")
	executorBin := kubetest.BuildBinary(t, "./services/executor/cmd/executor")
	args := []string{"-shutdown-drain", "0s", "-kubeconfig", kubeconfig, "-planner-addr", planner.GRPCAddr,
		"-drop-in", "-drop-in-probe-wait", "3s", "-leader-elect=false"}

	t.Run("RefusesToStartBesideTheBuiltinJobController", func(t *testing.T) {
		stop := playBuiltinJobController(t, kube, metav1.NamespaceSystem)
		defer stop()
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, executorBin, append([]string{"-grpc-addr", "127.0.0.1:0", "-metrics-addr", ""}, args...)...).CombinedOutput()
		if err == nil || ctx.Err() != nil {
			t.Fatalf("the executor did not refuse to start (%v); its output:\n%s", err, out)
		}
		if !strings.Contains(string(out), "the built-in Job controller is running") || !strings.Contains(string(out), "--controllers=*,-job-controller,-cronjob-controller") {
			t.Errorf("the refusal does not say why nor what to do:\n%s", out)
		}
		noProbeLeft(t, kube)
	})

	// A tenant who may write the status of Jobs in default (make run
	// grants that to anonymous callers) answers as the built-in controller
	// would: the probe is in kube-system, which no tenant writes, so the
	// executor starts all the same.
	tenant := tenantOf(t, apiserver, metav1.NamespaceDefault)
	stopTenant := playBuiltinJobController(t, tenant, metav1.NamespaceDefault)
	kubetest.StartProcess(t, "executor", executorBin, args...)
	stopTenant()
	noProbeLeft(t, kube)
	namespace := "team-a"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	plain := batchJob(namespace, "plain", nil)
	plain.Spec.Completions, plain.Spec.Parallelism = ptr.To[int32](2), ptr.To[int32](2)
	plain, err := kube.BatchV1().Jobs(namespace).Create(ctx, plain, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Another controller's Job, and a pod of it with the reserved finalizer
	// (the reference's TestManagedBy_UsingReservedJobFinalizers).
	foreign, err := kube.BatchV1().Jobs(namespace).Create(ctx, batchJob(namespace, "foreign", ptr.To("example.com/other")), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	foreignPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "foreign-0", Labels: foreign.Spec.Template.Labels,
			Finalizers:      []string{batchv1.JobTrackingFinalizer},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(foreign, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: foreign.Spec.Template.Spec,
	}
	if _, err := kube.CoreV1().Pods(namespace).Create(ctx, foreignPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patchPodStatus(t, kube, namespace, "foreign-0", `{"status":{"phase":"Succeeded"}}`)

	eventually(t, "the plain Job's two pods, with the built-in's finalizer", func() (bool, error) {
		pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=plain"})
		if err != nil || len(pods.Items) != 2 {
			return false, err
		}
		for _, p := range pods.Items {
			if !slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
				return false, fmt.Errorf("pod %s has finalizers %v, want %s", p.Name, p.Finalizers, batchv1.JobTrackingFinalizer)
			}
		}
		return true, nil
	})
	pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=plain"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		patchPodStatus(t, kube, namespace, p.Name, `{"status":{"phase":"Succeeded","containerStatuses":[{"name":"main","image":"busybox","imageID":"","ready":false,"restartCount":0,"state":{"terminated":{"exitCode":0}}}]}}`)
	}
	eventually(t, "the plain Job Complete, its pods' finalizers removed", func() (bool, error) {
		j, err := kube.BatchV1().Jobs(namespace).Get(ctx, "plain", metav1.GetOptions{})
		if err != nil || j.Status.Succeeded != 2 || !conditionTrue(j, batchv1.JobComplete) {
			return false, err
		}
		pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=plain"})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if len(p.Finalizers) > 0 {
				return false, nil
			}
		}
		return true, nil
	})

	events, err := kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(plain.UID)})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range events.Items {
		if e.Source.Component != "job-controller" {
			t.Errorf("event %s %q from %q, want the built-in's source job-controller", e.Reason, e.Message, e.Source.Component)
		}
		reasons = append(reasons, e.Reason)
	}
	if !slices.Contains(reasons, "SuccessfulCreate") || !slices.Contains(reasons, "Completed") {
		t.Errorf("events %v, want SuccessfulCreate and Completed", reasons)
	}

	// Another controller's Job: no pod created for it, its status and its
	// pod's finalizer as they were.
	j, err := kube.BatchV1().Jobs(namespace).Get(ctx, "foreign", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j.Status.Active+j.Status.Succeeded+j.Status.Failed != 0 || len(j.Status.Conditions) > 0 || j.Status.UncountedTerminatedPods != nil {
		t.Errorf("another controller's Job was synced: %+v", j.Status)
	}
	p, err := kube.CoreV1().Pods(namespace).Get(ctx, "foreign-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
		t.Errorf("the finalizer of another controller's pod was removed: %v", p.Finalizers)
	}
	foreignPods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=foreign"})
	if err != nil {
		t.Fatal(err)
	}
	if len(foreignPods.Items) != 1 {
		t.Errorf("another controller's Job has %d pods, want its one", len(foreignPods.Items))
	}
}

// batchJob is a plain batch/v1 Job, as kubectl would create it.
func batchJob(namespace, name string, managedBy *string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: batchv1.JobSpec{
			ManagedBy: managedBy,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			}},
		},
	}
}

// playBuiltinJobController marks every suspended Job of namespace Suspended,
// as kube-controller-manager's Job controller does, until stopped.
func playBuiltinJobController(t *testing.T, kube kubernetes.Interface, namespace string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			jobs, err := kube.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, j := range jobs.Items {
				if ptr.Deref(j.Spec.Suspend, false) && !conditionTrue(&j, batchv1.JobSuspended) {
					j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue,
						Reason: "JobSuspended", Message: "Job suspended", LastProbeTime: metav1.Now(), LastTransitionTime: metav1.Now()})
					_, _ = kube.BatchV1().Jobs(namespace).UpdateStatus(ctx, &j, metav1.UpdateOptions{})
				}
			}
			return false, nil
		})
	}()
	return func() { cancel(); <-done }
}

func conditionTrue(j *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// tenantOf is a client of a ServiceAccount that may read Jobs and write
// their status in namespace, and nothing else.
func tenantOf(t *testing.T, apiserver *kubetest.APIServer, namespace string) kubernetes.Interface {
	t.Helper()
	ctx, kube := context.Background(), apiserver.Client
	if _, err := kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs", "jobs/status"}, Verbs: []string{"get", "list", "update"}}}}
	if _, err := kube.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: "tenant"}}}
	if _, err := kube.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tenant, err := kubernetes.NewForConfig(apiserver.ServiceAccountConfig(t, namespace, "tenant"))
	if err != nil {
		t.Fatal(err)
	}
	return tenant
}

// noProbeLeft checks that the executor deleted its probe Jobs.
func noProbeLeft(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	eventually(t, "no probe Job left", func() (bool, error) {
		jobs, err := kube.BatchV1().Jobs(metav1.NamespaceSystem).List(context.Background(), metav1.ListOptions{LabelSelector: dropin.ProbeLabel})
		return err == nil && len(jobs.Items) == 0, err
	})
}

func patchPodStatus(t *testing.T, kube kubernetes.Interface, namespace, name, patch string) {
	t.Helper()
	if _, err := kube.CoreV1().Pods(namespace).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("patching the status of pod %s: %v", name, err)
	}
}

func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return cond()
	}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
