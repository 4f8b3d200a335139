package dropin

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/kubetest"
)

// A plain Job's case: its spec, and the terminal condition it must reach
// ("Type/Reason").
type plainCase struct {
	name string
	spec batchv1.JobSpec
	want string
}

// TestDropIn runs a local cluster whose kube-controller-manager has neither
// its Job nor its CronJob controller, with the planner, the executor and the
// cron service in drop-in mode in their place; its subtests share it.
func TestDropIn(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local cluster; skipped in -short mode (make test-unit)")
	}
	cluster := kubetest.StartCluster(t, 3, kubetest.KubeControllerManagerControllers("*,-job-controller,-cronjob-controller"))
	planner := kubetest.StartProcess(t, "planner", kubetest.BuildBinary(t, "./services/planner/cmd/planner"), "-authn-anonymous")
	// On loopback the cron service calls the executor without credentials:
	// its runs are created as system:anonymous (granted in the CronJobs'
	// namespace only).
	executor := kubetest.StartProcess(t, "executor", kubetest.BuildBinary(t, "./services/executor/cmd/executor"),
		"-kubeconfig", cluster.Kubeconfig, "-planner-addr", planner.GRPCAddr, "-leader-elect=false", "-authn-anonymous",
		"-allow-unauthenticated-metrics", "-drop-in", "-drop-in-probe-wait", "5s")
	// The cluster has no jobplane CRD: batch/v1 CronJobs only.
	cron := kubetest.StartProcess(t, "cron", kubetest.BuildBinary(t, "./services/cron/cmd/cron"),
		"-kubeconfig", cluster.Kubeconfig, "-executor-addr", executor.GRPCAddr, "-leader-elect=false", "-authn-anonymous",
		"-allow-unauthenticated-metrics", "-drop-in", "-jobplane-cronjobs=false")
	t.Run("PlainJobs", func(t *testing.T) {
		t.Parallel()
		plainJobs(t, cluster.Client, planner, executor)
	})
	t.Run("BatchCronJobs", func(t *testing.T) {
		t.Parallel()
		batchCronJobs(t, cluster.Client, executor, cron)
	})
}

// Plain batch/v1 Jobs (no spec.managedBy) run to their end under the
// executor in drop-in mode, with the built-in controller's finalizer (none
// left once they finish) and event source; a Job another controller manages
// is left alone; the executor's /metrics counts them under the reference's
// names too.
func plainJobs(t *testing.T, kube kubernetes.Interface, planner, executor *kubetest.Process) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns = "plain"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.ShowLogLinesOnFailure(t, ns, planner, executor)

	cases := []plainCase{
		{name: "nonindexed", want: "Complete/CompletionsReached",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](3), Parallelism: ptr.To[int32](2), Template: kubetest.PodTemplate("fate.jobplane.dev/after", "1s")}},
		{name: "indexed", want: "Complete/CompletionsReached",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](3), Parallelism: ptr.To[int32](3), CompletionMode: ptr.To(batchv1.IndexedCompletion),
				Template: kubetest.PodTemplate("fate.jobplane.dev/after", "1s")}},
		{name: "backofflimit", want: "Failed/BackoffLimitExceeded",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2), BackoffLimit: ptr.To[int32](1),
				Template: kubetest.PodTemplate("fate.jobplane.dev/exit-code", "1")}},
		{name: "pfp-failjob", want: "Failed/PodFailurePolicy",
			spec: batchv1.JobSpec{Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2),
				PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
					Action:      batchv1.PodFailurePolicyActionFailJob,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}},
				}}},
				Template: kubetest.PodTemplate("fate.jobplane.dev/exit-code", "42")}},
	}
	// Another controller's Job, created first: nobody runs it here.
	foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foreign"},
		Spec: batchv1.JobSpec{ManagedBy: ptr.To("example.com/other"), Template: kubetest.PodTemplate("fate.jobplane.dev/after", "1s")}}
	if _, err := kube.BatchV1().Jobs(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make([]error, len(cases))
	for i, tc := range cases {
		wg.Go(func() { errs[i] = runPlain(ctx, kube, ns, tc) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s: %v", cases[i].name, err)
		}
	}

	if j, err := kube.BatchV1().Jobs(ns).Get(ctx, "foreign", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if len(j.Status.Conditions) > 0 || j.Status.Active+j.Status.Succeeded+j.Status.Failed > 0 {
		t.Errorf("another controller's Job was run: %+v", j.Status)
	}
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=foreign"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Errorf("another controller's Job has %d pods", len(pods.Items))
	}

	metrics := scrape(t, "http://"+executor.MetricsAddr+"/metrics")
	for _, want := range []string{
		`job_controller_jobs_finished_total{completion_mode="NonIndexed",reason="CompletionsReached",result="succeeded"} 1`,
		`job_controller_jobs_finished_total{completion_mode="Indexed",reason="CompletionsReached",result="succeeded"} 1`,
		`job_controller_jobs_finished_total{completion_mode="NonIndexed",reason="BackoffLimitExceeded",result="failed"} 1`,
		`job_controller_jobs_finished_total{completion_mode="NonIndexed",reason="PodFailurePolicy",result="failed"} 1`,
		`job_controller_jobs_by_external_controller_total{controller_name="example.com/other"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("the executor's /metrics lacks %s", want)
		}
	}
}

// runPlain creates the case's Job as kubectl would (no managedBy) and waits
// until it reaches its terminal condition, no pod keeps the built-in's
// tracking finalizer, and its events are the built-in's (source
// job-controller).
func runPlain(ctx context.Context, kube kubernetes.Interface, ns string, tc plainCase) error {
	job, err := kube.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name}, Spec: tc.spec}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		j, err := kube.BatchV1().Jobs(ns).Get(ctx, tc.name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = terminal(j)
		return last != "", nil
	})
	if err != nil {
		return fmt.Errorf("never finished (%v)", err)
	}
	if last != tc.want {
		return fmt.Errorf("ended %s, want %s", last, tc.want)
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + tc.name})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("pods keep %s after the Job finished", batchv1.JobTrackingFinalizer)
	}
	events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(job.UID)})
	if err != nil {
		return err
	}
	if len(events.Items) == 0 {
		return fmt.Errorf("no events")
	}
	for _, e := range events.Items {
		if e.Source.Component != "job-controller" {
			return fmt.Errorf("event %s from %q, want the built-in's source job-controller", e.Reason, e.Source.Component)
		}
	}
	return nil
}

// terminal is the Job's Complete or Failed condition as "Type/Reason", or "".
func terminal(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return string(c.Type) + "/" + c.Reason
		}
	}
	return ""
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
