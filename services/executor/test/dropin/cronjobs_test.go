package dropin

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/kubetest"
)

// The cron namespace, and the annotations under test (spelled out: they
// are the contract users write).
const (
	cronNamespace     = "cron"
	concurrencyPolicy = "cron.jobplane.dev/concurrency-policy"
	stateAnnotation   = "cron.jobplane.dev/state"
)

// batch/v1 CronJobs, as kubectl creates them, run under the cron service in
// drop-in mode: on schedule and by TriggerCronJob, their Jobs owned by the
// batch/v1 CronJob and left plain (no spec.managedBy) for the drop-in
// executor, their status in batch/v1's status, the events the built-in's
// (source cronjob-controller); a buffer asked for by annotation queues a run
// in the state annotation until the active Job ends; an invalid annotation
// keeps a CronJob from running, saying why; /metrics has the reference's
// creation skew.
func batchCronJobs(t *testing.T, kube kubernetes.Interface, executor, cron *kubetest.Process) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cronNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grantAnonymous(ctx, t, kube, cronNamespace)
	kubetest.ShowLogLinesOnFailure(t, cronNamespace, executor, cron)
	conn, err := grpc.NewClient(cron.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := jobplanev1.NewCronServiceClient(conn)
	instances, err := client.WatchJobInstances(ctx, &jobplanev1.WatchJobInstancesRequest{Namespace: cronNamespace, ApiVersion: "batch/v1"})
	if err != nil {
		t.Fatal(err)
	}

	cronJobs := kube.BatchV1().CronJobs(cronNamespace)
	everyMinute, err := cronJobs.Create(ctx, cronJob("every-minute", "* * * * *", "1s", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	buffered, err := cronJobs.Create(ctx, cronJob("buffered", "0 0 1 1 *", "15s", map[string]string{concurrencyPolicy: "BufferOne"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cronJobs.Create(ctx, cronJob("invalid", "* * * * *", "1s", map[string]string{"cron.jobplane.dev/jitter-seconds": "soon"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	trigger := func(name string) (*jobplanev1.TriggerCronJobResponse, error) {
		return client.TriggerCronJob(ctx, &jobplanev1.TriggerCronJobRequest{Namespace: cronNamespace, Name: name, ApiVersion: "batch/v1"})
	}
	first, err := trigger("buffered")
	if err != nil || first.GetJob() == nil {
		t.Fatalf("the first trigger: %v, %v; want a Job", first, err)
	}
	time.Sleep(1100 * time.Millisecond) // a trigger's Job is named by the second
	second, err := trigger("buffered")
	if err != nil || second.GetQueued() == nil {
		t.Fatalf("the second trigger while the first runs: %v, %v; want it queued (BufferOne)", second, err)
	}
	if state := get(ctx, t, cronJobs, "buffered").Annotations[stateAnnotation]; !strings.Contains(state, `"trigger":"Manual"`) {
		t.Errorf("state annotation %q, want the queued run", state)
	}
	// As a tenant of namespace cron only: another namespace's CronJobs and
	// every namespace's runs are not its own.
	if _, err := client.TriggerCronJob(ctx, &jobplanev1.TriggerCronJobRequest{Namespace: "plain", Name: "buffered", ApiVersion: "batch/v1"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("triggering a CronJob of another namespace: %v, want PERMISSION_DENIED", err)
	}
	if w, err := client.WatchJobInstances(ctx, &jobplanev1.WatchJobInstancesRequest{ApiVersion: "batch/v1"}); err == nil {
		if _, err = w.Recv(); status.Code(err) != codes.PermissionDenied {
			t.Errorf("watching every namespace's runs: %v, want PERMISSION_DENIED", err)
		}
	}
	if _, err := trigger("invalid"); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "jitter-seconds") {
		t.Errorf("triggering a CronJob with an invalid annotation: %v, want FAILED_PRECONDITION naming it", err)
	}

	// The buffered run starts once the first Job ends; both complete.
	waitFor(ctx, t, "two Complete Jobs of buffered, and its queue empty", func() error {
		if n := completeJobsOf(ctx, kube, buffered); n < 2 {
			return fmt.Errorf("%d Complete", n)
		}
		if state, ok := get(ctx, t, cronJobs, "buffered").Annotations[stateAnnotation]; ok {
			return fmt.Errorf("state annotation still %q", state)
		}
		return nil
	})
	waitFor(ctx, t, "a scheduled run of every-minute, Complete, in the CronJob's status", func() error {
		if completeJobsOf(ctx, kube, everyMinute) < 1 {
			return fmt.Errorf("no Complete Job")
		}
		if got := get(ctx, t, cronJobs, "every-minute").Status; got.LastScheduleTime == nil || got.LastSuccessfulTime == nil {
			return fmt.Errorf("status %+v", got)
		}
		return nil
	})

	jobs, err := kube.BatchV1().Jobs(cronNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		ref := metav1.GetControllerOf(&j)
		if ref == nil || ref.APIVersion != "batch/v1" || ref.Kind != "CronJob" || !strings.HasPrefix(j.Name, ref.Name+"-") {
			t.Errorf("Job %s: controller %+v, want its batch/v1 CronJob", j.Name, ref)
		}
		if j.Spec.ManagedBy != nil {
			t.Errorf("Job %s: spec.managedBy %q, want it unset as the built-in makes it", j.Name, *j.Spec.ManagedBy)
		}
		if ref != nil && ref.Name == "invalid" {
			t.Errorf("Job %s of the CronJob with an invalid annotation", j.Name)
		}
	}
	events, err := kube.CoreV1().Events(cronNamespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=CronJob"})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, e := range events.Items {
		if e.Source.Component != "cronjob-controller" {
			t.Errorf("event %s from %q, want cronjob-controller", e.Reason, e.Source.Component)
		}
		reasons[e.InvolvedObject.Name+"/"+e.Reason] = true
	}
	for _, want := range []string{"every-minute/SuccessfulCreate", "every-minute/SawCompletedJob", "buffered/SuccessfulCreate", "invalid/InvalidAnnotations"} {
		if !reasons[want] {
			t.Errorf("no %s event (have %v)", want, reasons)
		}
	}
	instance, err := instances.Recv()
	if err != nil || instance.GetCronJob().GetApiVersion() != "batch/v1" {
		t.Errorf("WatchJobInstances of batch/v1: %v, %v", instance, err)
	}
	if metrics := scrape(t, "http://"+cron.MetricsAddr+"/metrics"); !strings.Contains(metrics, "cronjob_controller_job_creation_skew_duration_seconds_count ") {
		t.Error("the cron service's /metrics lacks the reference's cronjob_controller_job_creation_skew_duration_seconds")
	}
}

// cronJob is a batch/v1 CronJob as kubectl creates it: pods that succeed
// after podTime.
func cronJob(name, schedule, podTime string, annotations map[string]string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: cronNamespace, Name: name, Annotations: annotations},
		Spec: batchv1.CronJobSpec{
			Schedule: schedule,
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Template: kubetest.PodTemplate("fate.jobplane.dev/after", podTime),
			}},
			SuccessfulJobsHistoryLimit: ptr.To[int32](5),
		},
	}
}

// grantAnonymous lets system:anonymous (the cron service and the test,
// calling on loopback without credentials) create Jobs and run and watch
// batch/v1 CronJobs in namespace.
func grantAnonymous(ctx context.Context, t *testing.T, kube kubernetes.Interface, namespace string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "anonymous"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "create"}},
		{APIGroups: []string{"batch"}, Resources: []string{"cronjobs", "cronjobs/trigger"}, Verbs: []string{"watch", "create"}},
	}}
	if _, err := kube.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "anonymous"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:anonymous"}}}
	if _, err := kube.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func get(ctx context.Context, t *testing.T, cronJobs typedbatchv1.CronJobInterface, name string) *batchv1.CronJob {
	t.Helper()
	cj, err := cronJobs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cj
}

// completeJobsOf counts the Complete Jobs cronJob controls.
func completeJobsOf(ctx context.Context, kube kubernetes.Interface, cronJob *batchv1.CronJob) int {
	jobs, err := kube.BatchV1().Jobs(cronJob.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0
	}
	n := 0
	for _, j := range jobs.Items {
		if ref := metav1.GetControllerOf(&j); ref != nil && ref.UID == cronJob.UID && terminal(&j) == "Complete/CompletionsReached" {
			n++
		}
	}
	return n
}

func waitFor(ctx context.Context, t *testing.T, what string, check func() error) {
	t.Helper()
	var last error
	if err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	}); err != nil {
		t.Fatalf("waiting for %s: %v (last: %v)", what, err, last)
	}
}
