// Package job stands in for the reference's Job controller
// (k8s.io/kubernetes/pkg/controller/job) when hack/conformance.sh runs the
// reference's integration tests: through `go test -overlay` it replaces the
// package's files, so that the tests, unchanged, start jobplane's planner
// and executor (drop-in mode) against their test API server where they
// started the controller in process. The package variables the tests set
// (the pod failure backoff) become the planner's flags.
package job

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	schedulinginformers "k8s.io/client-go/informers/scheduling/v1alpha2"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/component-base/featuregate"

	"k8s.io/kubernetes/pkg/controller/job/metrics"
	"k8s.io/kubernetes/pkg/features"
)

// The reference's tunables the tests read or set.
var (
	SyncJobBatchPeriod          = time.Second
	DefaultJobApiBackOff        = time.Second
	MaxJobApiBackOff            = time.Minute
	DefaultJobPodFailureBackOff = 10 * time.Second
	MaxJobPodFailureBackOff     = 10 * time.Minute
	MaxUncountedPods            = 500
	MaxPodCreateDeletePerSync   = 500
)

// binEnv names the directory holding the planner and executor binaries;
// logEnv the file their output is appended to.
const (
	binEnv = "JOBPLANE_CONFORMANCE_BIN"
	logEnv = "JOBPLANE_CONFORMANCE_LOG"
)

// Controller is jobplane in the reference controller's place.
type Controller struct {
	client clientset.Interface
	// dir holds the kubeconfig and token of this controller's processes,
	// removed once they exited.
	dir string
	// exited is closed once the processes exited, after their context
	// ended.
	exited chan struct{}
}

// NewController starts jobplane's planner and executor (-drop-in) against
// the client's API server, with the feature gates the test process has
// now, and returns once the executor is ready; they stop when ctx ends.
// The reference's controller syncs a Job from the moment its Run starts,
// and the tests create their Jobs right after: started in Run, jobplane
// would sync them a second or two later than the reference does (its
// start and the drop-in probe), so that a test's steps, timed for the
// reference's batched syncs, could meet syncs the reference makes only
// after the test ended (TestJobPodReplacementPolicy's cleanup, which
// deletes pods until none is left, once met a replacement pod created
// meanwhile and, its finalizers kept, waited for the two hours of the run).
func NewController(ctx context.Context, kubeClient clientset.Interface, _ coreinformers.PodInformer, _ batchinformers.JobInformer,
	_ schedulinginformers.WorkloadInformer, _ schedulinginformers.PodGroupInformer) (*Controller, error) {
	// The tests read the reference's metrics in process: they mirror the
	// executor's (mirrorMetrics).
	metrics.Register()
	c := &Controller{client: kubeClient, exited: make(chan struct{})}
	// The last controller's processes, stopping, could still sync this
	// one's Jobs (with other feature gates: TestManagedBy's subtests), and
	// two executors in drop-in mode would find each other (the new one's
	// probe is answered by the old one).
	waitLastExited(30 * time.Second)
	runningMu.Lock()
	running = c.exited
	runningMu.Unlock()
	procs, executorAddr, metricsURL, err := c.start(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance shim: starting jobplane: %v\n", err)
	}
	if metricsURL != "" {
		mirrorMetrics(ctx, metricsURL)
	}
	go func() {
		defer close(c.exited)
		defer forgetExecutor(executorAddr)
		stopWhenDone(ctx, procs...)
		if c.dir != "" {
			_ = os.RemoveAll(c.dir)
		}
	}()
	return c, nil
}

// waitLastExited waits, at most wait, for the processes of the last
// controller to exit.
func waitLastExited(wait time.Duration) {
	runningMu.Lock()
	last := running
	runningMu.Unlock()
	if last == nil {
		return
	}
	select {
	case <-last:
	case <-time.After(wait):
	}
}

// running is closed once the last controller's processes exited.
var (
	runningMu sync.Mutex
	running   chan struct{}
)

// Run returns once ctx ended and jobplane's processes, started by
// NewController, exited. The executor runs one worker, as every test asks.
func (c *Controller) Run(ctx context.Context, _ int) {
	<-ctx.Done()
	<-c.exited
}

// start starts the planner and the executor; it returns them, the
// executor's address and its /metrics.
func (c *Controller) start(ctx context.Context) ([]*exec.Cmd, string, string, error) {
	dir, err := os.MkdirTemp("", "jobplane-conformance-")
	if err != nil {
		return nil, "", "", err
	}
	c.dir = dir
	kubeconfig, tokenFile, err := c.writeKubeconfig(ctx, dir)
	if err != nil {
		return nil, "", "", err
	}
	bin := os.Getenv(binEnv)
	ports, err := freePorts(3)
	if err != nil {
		return nil, "", "", err
	}
	plannerAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	gates := featureGates()
	planner, err := startProcess(bin, "planner", "-grpc-addr", plannerAddr, "-metrics-addr", "", "-authn-anonymous", "-shutdown-drain", "0s",
		"-pod-failure-backoff", DefaultJobPodFailureBackOff.String(), "-max-pod-failure-backoff", MaxJobPodFailureBackOff.String(),
		"-feature-gates", gates)
	if err != nil {
		return nil, "", "", err
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", ports[2])
	executorAddr := fmt.Sprintf("127.0.0.1:%d", ports[1])
	executor, err := startProcess(bin, "executor", "-grpc-addr", executorAddr, "-metrics-addr", metricsAddr,
		"-allow-unauthenticated-metrics", "-authn-anonymous", "-shutdown-drain", "0s", "-kubeconfig", kubeconfig,
		"-planner-addr", plannerAddr, "-leader-elect=false", "-workers", "1",
		"-kube-api-qps", "1000", "-kube-api-burst", "1000", "-drop-in", "-drop-in-probe-wait", "1s", "-feature-gates", gates)
	if err != nil {
		_ = planner.Process.Kill()
		return nil, "", "", err
	}
	procs := []*exec.Cmd{planner, executor}
	err = waitReady(ctx, "http://"+metricsAddr+"/readyz")
	announceExecutor(runningExecutor{addr: executorAddr, kubeconfig: kubeconfig, tokenFile: tokenFile})
	return procs, executorAddr, "http://" + metricsAddr + "/metrics", err
}

// featureGates are the gates the Job controller reads as the test process
// has them (a test emulating an older version turns some off, for its API
// server and its controller alike), in --feature-gates syntax: jobplane is
// started with them, as kube-controller-manager would be.
func featureGates() string {
	var gates []string
	for _, g := range []featuregate.Feature{features.JobBackoffLimitPerIndex, features.JobManagedBy, features.JobPodReplacementPolicy, features.JobSuccessPolicy,
		features.MutableSchedulingDirectivesForSuspendedJobs, features.WorkloadWithJob} {
		gates = append(gates, fmt.Sprintf("%s=%t", g, utilfeature.DefaultFeatureGate.Enabled(g)))
	}
	return strings.Join(gates, ",")
}

// writeKubeconfig gives jobplane an identity of its own on the test API
// server, as kube-controller-manager has one: a ServiceAccount bound to
// cluster-admin, with a token from the TokenRequest API, also written alone
// (the cron service calls the executor with it).
func (c *Controller) writeKubeconfig(ctx context.Context, dir string) (kubeconfig, tokenFile string, err error) {
	const ns, name = "kube-system", "jobplane-conformance"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, err := c.client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", "", err
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}
	if _, err := c.client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", "", err
	}
	expiry := int64(24 * 3600)
	token, err := c.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return "", "", err
	}
	url := c.client.CoreV1().RESTClient().Get().URL()
	server := url.Scheme + "://" + url.Host
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: jobplane, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: jobplane}}]
current-context: test
`, server, token.Status.Token)
	kubeconfig, tokenFile = filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token.Status.Token), 0o600); err != nil {
		return "", "", err
	}
	return kubeconfig, tokenFile, os.WriteFile(kubeconfig, []byte(config), 0o600)
}

var logMu sync.Mutex

// startProcess starts bin/name with args, its output appended to the log.
func startProcess(bin, name string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(filepath.Join(bin, name), args...)
	if path := os.Getenv(logEnv); path != "" {
		logMu.Lock()
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		logMu.Unlock()
		if err == nil {
			fmt.Fprintf(f, "---- %s %s\n", name, strings.Join(args, " "))
			cmd.Stdout, cmd.Stderr = f, f
			defer f.Close()
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, cmd.Start()
}

func waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(time.Minute)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ctx.Err() != nil {
		return nil // the test ended first
	}
	return fmt.Errorf("%s not ready within a minute", url)
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
