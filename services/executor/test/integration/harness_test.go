// Package integration runs the executor's controller in process against a
// real kube-apiserver (no kube-controller-manager, no kubelet: the tests play
// the kubelet by setting pod phases) with the real planner as a process.
package integration

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/featuregates"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
	"github.com/jobplane/jobplane/lib/kubetest"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/services/executor/internal/controller"
	"github.com/jobplane/jobplane/services/executor/internal/plannerclient"
	"github.com/jobplane/jobplane/services/executor/internal/podwrites"
	"github.com/jobplane/jobplane/services/executor/internal/svc"
)

const (
	managedBy           = "jobplane.dev/executor"
	protobufContentType = "application/vnd.kubernetes.protobuf"
)

// env is an apiserver, a planner, a running controller and the executor's
// gRPC API in front of it.
type env struct {
	client kubernetes.Interface
	// config reaches the API server as its administrator.
	config *rest.Config
	// requests records the API requests of the controller.
	requests *requestLog
	ctrl     *controller.Controller
	// plans is the controller's client of the planner.
	plans *plannerclient.Client
	// api is ExecutorService over the controller; its callers are anonymous
	// and allowed everything.
	api jobplanev1.ExecutorServiceClient
}

// leading is the controller as the service's Runner of a sole replica.
type leading struct{ *controller.Controller }

func (leading) Leader() (bool, string) { return true, "" }

// request is one API call of the controller and its answer.
type request struct {
	method, path string
	code         int
}

type requestLog struct {
	mu  sync.Mutex
	all []request
}

func (l *requestLog) RoundTrip(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		l.mu.Lock()
		l.all = append(l.all, request{method: r.Method, path: r.URL.Path, code: code})
		l.mu.Unlock()
		return resp, err
	})
}

// matching returns the requests with method whose path ends with suffix.
func (l *requestLog) matching(method, suffix string) []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []request
	for _, r := range l.all {
		if r.method == method && len(r.path) >= len(suffix) && r.path[len(r.path)-len(suffix):] == suffix {
			out = append(out, r)
		}
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func start(t *testing.T) *env {
	t.Helper()
	return startWith(t, options{})
}

// options change what start starts.
type options struct {
	// apiServer are kube-apiserver's extra flags.
	apiServer []string
	// gates are the controller's feature gates.
	gates featuregates.Features
	// planner are the planner's extra flags.
	planner []string
}

func startWith(t *testing.T, o options) *env {
	t.Helper()
	api := kubetest.StartAPIServer(t, kubetest.WithFlags(o.apiServer...))
	planner := kubetest.StartProcess(t, "planner", kubetest.BuildBinary(t, "./services/planner/cmd/planner"), append([]string{"-shutdown-drain", "0s",
		// On loopback; the controller calls it without credentials.
		"-authn-anonymous"}, o.planner...)...)

	log := &requestLog{}
	cfg := rest.CopyConfig(api.Config)
	cfg.Wrap(log.RoundTrip)
	// As the executor's main: built-in types read and written as protobuf.
	cfg.ContentType, cfg.AcceptContentTypes = protobufContentType, protobufContentType+",application/json"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	podWrites, err := podwrites.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(planner.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	plans := plannerclient.New(conn)
	factory := informers.NewSharedInformerFactory(client, 0)
	ctrl, err := controller.New(controller.Config{
		Client: client, PodWrites: podWrites, Informers: factory, Planner: plans, ManagedBy: managedBy, FeatureGates: o.gates,
		Finalizer: plan.DefaultTrackingFinalizer, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx, 5) }()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
		plans.Close()
		conn.Close()
	})
	impersonate, err := svc.Impersonating(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpctest.Start(t, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.ExecutorService_ServiceDesc, svc.NewExecutorService(svc.Config{
			Client: api.Client, Impersonate: impersonate, Jobs: ctrl.Jobs(), PodsOf: ctrl.PodsOf, Runner: leading{ctrl},
			ManagedBy: managedBy, Log: slog.New(slog.DiscardHandler),
		}))
	})
	return &env{client: api.Client, config: api.Config, requests: log, ctrl: ctrl, plans: plans, api: jobplanev1.NewExecutorServiceClient(srv.Conn)}
}

func namespace(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	_, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// newJob is a NonIndexed jobplane Job of completions pods, parallelism wide.
func newJob(ns, name string, completions, parallelism int32) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{
			ManagedBy:   ptr.To(managedBy),
			Completions: ptr.To(completions),
			Parallelism: ptr.To(parallelism),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			}},
		},
	}
}

// finishPods plays the kubelet: every pod of the namespace not yet terminal
// and not being deleted succeeds.
func finishPods(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, err := succeed(ctx, client, ns, pod.Name); err != nil {
			t.Logf("finishing pod %s: %v", pod.Name, err)
		}
	}
}

// succeed plays the kubelet for one pod: it patches the status to Succeeded
// with a terminated container, without a resourceVersion precondition.
func succeed(ctx context.Context, client kubernetes.Interface, ns, name string) (*corev1.Pod, error) {
	at := metav1.Now().UTC().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"status":{"phase":"Succeeded","containerStatuses":[{"name":"main","image":"","imageID":"","ready":false,"restartCount":0,"state":{"terminated":{"exitCode":0,"startedAt":%q,"finishedAt":%q}}}]}}`, at, at)
	return client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
}

// waitFor polls cond every 100ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond()
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// waitPods waits for namespace ns to hold n pods.
func waitPods(t *testing.T, client kubernetes.Interface, ns string, n int) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%d pods in %s", n, ns), func() (bool, error) {
		pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(pods.Items) == n, err
	})
}

// waitComplete waits for the Job ns/name to be Complete.
func waitComplete(t *testing.T, client kubernetes.Interface, ns, name string) {
	t.Helper()
	waitFor(t, 30*time.Second, "Job "+ns+"/"+name+" complete", func() (bool, error) {
		job, err := client.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, finish := finished(job)
		return finish == batchv1.JobComplete, nil
	})
}

func finished(job *batchv1.Job) (corev1.ConditionStatus, batchv1.JobConditionType) {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Status, c.Type
		}
	}
	return "", ""
}
