package kubetest_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/kubetest"
)

const jobplaneManager = "jobplane.dev/executor"

func job(name string, managedBy *string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: batchv1.JobSpec{
			Completions: ptr.To[int32](2),
			Parallelism: ptr.To[int32](2),
			ManagedBy:   managedBy,
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
				},
			},
		},
	}
}

func TestAPIServerStoresJobsManagedByJobplaneAndTheirStatus(t *testing.T) {
	api := kubetest.StartAPIServer(t)
	ctx := context.Background()
	created, err := api.Client.BatchV1().Jobs("default").Create(ctx, job("managed", ptr.To(jobplaneManager)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(created.Spec.ManagedBy, ""); got != jobplaneManager {
		t.Fatalf("managedBy = %q", got)
	}
	// The status subresource takes a status written by an external controller.
	now := metav1.Now()
	created.Status.StartTime = &now
	created.Status.Active = 1
	created.Status.Ready = ptr.To[int32](0)
	created.Status.Terminating = ptr.To[int32](0)
	if _, err := api.Client.BatchV1().Jobs("default").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status write refused: %v", err)
	}
}

func TestBuiltInJobControllerSkipsJobsManagedByJobplane(t *testing.T) {
	cluster := kubetest.StartCluster(t, 2)
	ctx := context.Background()
	showDefaultNamespaceOnFailure(t, cluster.Client)
	jobs := cluster.Client.BatchV1().Jobs("default")
	if _, err := jobs.Create(ctx, job("managed", ptr.To(jobplaneManager)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Create(ctx, job("plain", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	waitFor(t, 2*time.Minute, "the plain Job to complete on kwok nodes", func() bool {
		j, err := jobs.Get(ctx, "plain", metav1.GetOptions{})
		return err == nil && hasCondition(j, batchv1.JobComplete) && j.Status.Succeeded == 2
	})
	pods := podsOf(t, cluster.Client, "plain")
	if len(pods) != 2 {
		t.Errorf("plain Job has %d pods, want 2", len(pods))
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s on node %q in phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}

	managed, err := jobs.Get(ctx, "managed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(podsOf(t, cluster.Client, "managed")); n != 0 {
		t.Errorf("the built-in controller created %d pods for the managed Job", n)
	}
	if managed.Status.StartTime != nil || len(managed.Status.Conditions) != 0 || managed.Status.Active != 0 {
		t.Errorf("the built-in controller wrote the managed Job's status: %+v", managed.Status)
	}
}

// showDefaultNamespaceOnFailure logs the Jobs, pods and events of the
// default namespace when the test fails, before the cluster is deleted.
func showDefaultNamespaceOnFailure(t *testing.T, client kubernetes.Interface) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if jobs, err := client.BatchV1().Jobs("default").List(ctx, metav1.ListOptions{}); err == nil {
			for _, j := range jobs.Items {
				t.Logf("job %s: %+v", j.Name, j.Status)
			}
		}
		if pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err == nil {
			for _, p := range pods.Items {
				t.Logf("pod %s on %q: %s %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
			}
		}
		if events, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{}); err == nil {
			for _, e := range events.Items {
				t.Logf("event %s %s/%s: %s %s", e.LastTimestamp.Format(time.TimeOnly), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	})
}

func podsOf(t *testing.T, client kubernetes.Interface, jobName string) []corev1.Pod {
	t.Helper()
	list, err := client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + jobName})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func hasCondition(j *batchv1.Job, c batchv1.JobConditionType) bool {
	for _, cond := range j.Status.Conditions {
		if cond.Type == c && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// deploy/ is applied by users to real clusters: the apiserver must accept it.
func TestDeployManifestsAreAcceptedByTheAPIServer(t *testing.T) {
	api := kubetest.StartAPIServer(t)
	kubeconfig := api.WriteKubeconfig(t)
	kubectl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(kubetest.Binaries(t), "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	dir := filepath.Join("..", "..", "deploy", "kubernetes")
	// A server-side dry run does not create the namespace the rest lives in.
	kubectl("apply", "-f", filepath.Join(dir, "00-namespace.yaml"))
	out := kubectl("apply", "--dry-run=server", "-f", dir)
	for _, want := range []string{"deployment.apps/jobplane-planner", "deployment.apps/jobplane-executor", "deployment.apps/jobplane-cron", "clusterrole.rbac.authorization.k8s.io/jobplane-executor"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s not applied:\n%s", want, out)
		}
	}
}
