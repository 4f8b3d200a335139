package integration

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/kubeconv"
	"github.com/jobplane/jobplane/services/cron/internal/controller"
)

// A status write that conflicts (the CronJob changed between the read and
// the write) fails the sync, which plans again from fresh state: the run
// created before the conflict is found by its name and recorded once.
func TestStatusConflictRePlans(t *testing.T) {
	e := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	executor := &interferingExecutor{client: e.api.Client, cronJobs: e.cronJobs}
	metrics := controller.NewMetrics(false)
	registry := prometheus.NewRegistry()
	if err := metrics.Register(registry); err != nil {
		t.Fatal(err)
	}
	startController(ctx, t, e, executor, metrics)

	cj := cronJob("conflicted")
	cj.Spec.Schedule = "@every 2s"
	created, err := e.createDirectly(t, cj)
	if err != nil {
		t.Fatal(err)
	}
	executor.interfereWith(created.Name)

	eventually(t, "the run recorded in the CronJob's status", func() error {
		got := e.stored(t, namespace, created.Name)
		if len(got.Status.Active) == 0 || got.Status.LastScheduleTime == nil {
			return fmt.Errorf("status %+v", got.Status)
		}
		return nil
	})
	executor.mu.Lock()
	if executor.touchErr != nil {
		t.Fatalf("changing the CronJob: %v", executor.touchErr)
	}
	executor.mu.Unlock()
	if n := counterValue(t, registry, "jobplane_cronjob_status_write_failures_total", "conflict", "true"); n < 1 {
		t.Errorf("conflicts counted %v, want at least 1", n)
	}
	jobs, err := e.api.Client.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := 0
	for _, j := range jobs.Items {
		if ref := metav1.GetControllerOf(&j); ref != nil && ref.UID == created.UID {
			owned++
		}
	}
	// @every 2s runs every 2 s, but the Jobs are named by the minute (the
	// reference's resolution): the runs of one minute are one Job.
	if owned < 1 || owned > 2 {
		t.Errorf("%d Jobs of the CronJob, want 1 (2 across a minute boundary)", owned)
	}
}

// startController runs the cron controller in process on the test's API
// server, handing runs to executor.
func startController(ctx context.Context, t *testing.T, e *env, executor jobplanev1.ExecutorServiceClient, metrics *controller.Metrics) {
	t.Helper()
	kube, err := kubernetes.NewForConfig(e.api.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(e.api.Config)
	if err != nil {
		t.Fatal(err)
	}
	jobInformers := informers.NewSharedInformerFactory(kube, 0)
	cronJobInformers := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	ctrl, err := controller.New(controller.Config{
		Kube: kube, Informers: jobInformers,
		CronJobs: dyn.Resource(cronapi.GroupVersionResource), CronJobInformers: cronJobInformers,
		Executor: executor, Local: time.UTC, Log: slog.New(slog.DiscardHandler), Metrics: metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	jobInformers.Start(ctx.Done())
	cronJobInformers.Start(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := ctrl.Run(ctx, 2); err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	t.Cleanup(wg.Wait)
}

// interferingExecutor creates Jobs as the executor's SubmitJob does; for
// the CronJob it is told of, its first creation also changes the CronJob,
// so the status write that follows conflicts.
type interferingExecutor struct {
	jobplanev1.ExecutorServiceClient
	client   kubernetes.Interface
	cronJobs dynamic.NamespaceableResourceInterface

	mu       sync.Mutex
	target   string
	touchErr error
}

func (x *interferingExecutor) interfereWith(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.target = name
}

func (x *interferingExecutor) SubmitJob(ctx context.Context, req *jobplanev1.SubmitJobRequest, _ ...grpc.CallOption) (*jobplanev1.SubmitJobResponse, error) {
	job, err := kubeconv.JobToKube(req.GetJob(), kubeconv.FullTemplate)
	if err != nil {
		return nil, err
	}
	if ref := metav1.GetControllerOf(job); ref != nil {
		x.touchOnce(ctx, job.Namespace, ref.Name)
	}
	created, err := x.client.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{})
	isNew := err == nil
	if apierrors.IsAlreadyExists(err) {
		created, err = x.client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	out, err := kubeconv.JobFromKube(created)
	if err != nil {
		return nil, err
	}
	return &jobplanev1.SubmitJobResponse{Job: out, Created: isNew}, nil
}

// touchOnce labels the CronJob the first time, changing its resourceVersion.
func (x *interferingExecutor) touchOnce(ctx context.Context, namespace, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.target != name {
		return
	}
	x.target = ""
	patch := []byte(`{"metadata":{"labels":{"touched":"true"}}}`)
	_, x.touchErr = x.cronJobs.Namespace(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
}

func (x *interferingExecutor) DeleteJob(ctx context.Context, req *jobplanev1.DeleteJobRequest, _ ...grpc.CallOption) (*jobplanev1.DeleteJobResponse, error) {
	background := metav1.DeletePropagationBackground
	err := x.client.BatchV1().Jobs(req.GetNamespace()).Delete(ctx, req.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
	return &jobplanev1.DeleteJobResponse{}, err
}

func counterValue(t *testing.T, registry *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
