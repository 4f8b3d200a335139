package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/kubetest"
)

// clusterNodes is how many kwok nodes the shared cluster has.
const clusterNodes = 3

// The namespaces of the fault tests. Each is run by that test's own cron
// processes (and, for the executor outage, its own executor); the shared
// processes never see them (see doc.go).
const (
	nsCatchUp        = "cron-fault-catchup"
	nsExecutorOutage = "cron-fault-executor"
	nsFailover       = "cron-fault-failover"
)

// Env is what every test of the binary shares: one cluster with the CRD
// installed, and one planner, executor and cron service running against it.
// Tests keep apart by namespace.
type Env struct {
	Cluster *kubetest.Cluster
	// CronJobs reaches cronjobs.jobplane.dev directly, as kubectl does.
	CronJobs dynamic.NamespaceableResourceInterface
	Planner  *kubetest.Process
	Executor *kubetest.Process
	Cron     *kubetest.Process
	// CronClient calls the shared cron service, without credentials
	// (system:anonymous).
	CronClient jobplanev1.CronServiceClient

	executorBin, cronBin string
}

var (
	envOnce sync.Once
	env     *Env
	suite   = kubetest.NewSuite("cron-e2e")
)

// defaultParallel is how many parallel tests run at once unless -parallel
// says otherwise: they wait on the clock and the cluster, not on the CPU.
const defaultParallel = "64"

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", defaultParallel)
	}
	code := m.Run()
	if suite.Finish(code != 0) && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// sharedEnv starts the cluster and jobplane's services the first time it is
// called, for the whole test binary: they are stopped when TestMain ends.
func sharedEnv(t *testing.T) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the local cluster; skipped in -short mode (make test-unit)")
	}
	envOnce.Do(func() {
		suite.Begin(t)
		defer suite.End()
		started := time.Now()
		e := &Env{Cluster: kubetest.StartCluster(suite, clusterNodes)}
		kubetest.InstallCRDs(suite, e.Cluster.Config)
		grantAnonymous(suite, e)
		dyn, err := dynamic.NewForConfig(e.Cluster.Config)
		if err != nil {
			suite.Fatal(err)
		}
		e.CronJobs = dyn.Resource(cronapi.GroupVersionResource)
		t.Logf("cluster %s up in %s", e.Cluster.Name, time.Since(started).Round(time.Millisecond))

		started = time.Now()
		planner := kubetest.BuildBinary(suite, "./services/planner/cmd/planner")
		e.executorBin = kubetest.BuildBinary(suite, "./services/executor/cmd/executor")
		e.cronBin = kubetest.BuildBinary(suite, "./services/cron/cmd/cron")
		t.Logf("planner, executor and cron built in %s", time.Since(started).Round(time.Millisecond))

		// On loopback; the executor calls it without credentials.
		e.Planner = kubetest.StartProcess(suite, "planner", planner, "-authn-anonymous")
		// The shared executor runs every jobplane Job but those of the
		// executor-outage test, which has its own executor.
		e.Executor = e.startExecutor(suite, "executor", excluding(nsExecutorOutage))
		// The shared cron runs every jobplane CronJob but the fault tests'.
		e.Cron = e.startCron(suite, "cron", excluding(nsCatchUp, nsExecutorOutage, nsFailover), e.Executor)
		e.CronClient = dialCron(suite, e.Cron)
		env = e
	})
	if env == nil {
		t.Fatal("the shared cluster or jobplane's services did not start: see the log of the first test")
	}
	return env
}

// startExecutor starts an executor seeing the pods and Jobs of the
// namespaces scope selects (a field selector on metadata.namespace),
// without leader election, accepting calls without credentials.
func (e *Env) startExecutor(tb testing.TB, name, scope string, extra ...string) *kubetest.Process {
	tb.Helper()
	args := append([]string{
		"-kubeconfig", scopedKubeconfig(tb, e.Cluster, scope),
		"-planner-addr", e.Planner.GRPCAddr,
		"-leader-elect=false",
		"-authn-anonymous",
	}, extra...)
	return kubetest.StartProcess(tb, name, e.executorBin, args...)
}

// startCron starts a cron service seeing the CronJobs and Jobs of the
// namespaces scope selects, handing its runs to executor, with its /metrics
// open on loopback for the tests to read. Without extra flags it runs
// without leader election.
func (e *Env) startCron(tb testing.TB, name, scope string, executor *kubetest.Process, extra ...string) *kubetest.Process {
	tb.Helper()
	args := []string{
		"-kubeconfig", scopedKubeconfig(tb, e.Cluster, scope),
		"-executor-addr", executor.GRPCAddr,
		"-authn-anonymous",
		"-allow-unauthenticated-metrics",
	}
	if len(extra) == 0 {
		extra = []string{"-leader-elect=false"}
	}
	return kubetest.StartProcess(tb, name, e.cronBin, append(args, extra...)...)
}

// dialCron is a client of a cron process, without credentials.
func dialCron(tb testing.TB, p *kubetest.Process) jobplanev1.CronServiceClient {
	tb.Helper()
	conn, err := grpc.NewClient(p.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	return jobplanev1.NewCronServiceClient(conn)
}

// excluding is the field selector of every namespace but these.
func excluding(namespaces ...string) string {
	var parts []string
	for _, ns := range namespaces {
		parts = append(parts, "metadata.namespace!="+ns)
	}
	return strings.Join(parts, ",")
}

// only is the field selector of one namespace.
func only(namespace string) string { return "metadata.namespace=" + namespace }

// grantAnonymous gives system:anonymous, cluster-wide, what hack/run.sh
// gives it in the namespace default: the services run with
// -authn-anonymous, the tests call the cron service without credentials,
// and the cron service calls the executor without them (the executor
// creates the Jobs as its caller; their owner references block their
// CronJob's deletion, hence the finalizers).
func grantAnonymous(tb testing.TB, e *Env) {
	tb.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "jobplane-e2e-anonymous"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
			{APIGroups: []string{"batch"}, Resources: []string{"jobs/status"}, Verbs: []string{"update"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
			{APIGroups: []string{cronapi.Group}, Resources: []string{"cronjobs", "cronjobs/trigger", "cronjobs/backfill"},
				Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
			{APIGroups: []string{cronapi.Group}, Resources: []string{"cronjobs/finalizers"}, Verbs: []string{"update"}},
		},
	}
	if _, err := e.Cluster.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "jobplane-e2e-anonymous"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:anonymous"}},
	}
	if _, err := e.Cluster.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
}

// sharedProcesses are the shared services, for showing their logs.
func (e *Env) sharedProcesses() []*kubetest.Process {
	return []*kubetest.Process{e.Planner, e.Executor, e.Cron}
}

// newNamespace creates a namespace for the test, deleted when it ends; the
// log lines of procs (the shared services when none are given) mentioning
// it are shown if the test fails.
func newNamespace(t *testing.T, e *Env, name string, procs ...*kubetest.Process) string {
	t.Helper()
	if _, err := e.Cluster.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Cluster.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if len(procs) == 0 {
		procs = e.sharedProcesses()
	}
	kubetest.ShowLogLinesOnFailure(t, name, procs...)
	// Before the namespace goes (cleanups run last registered first).
	t.Cleanup(func() {
		if t.Failed() {
			showEvents(t, e, name)
		}
	})
	return name
}

// showEvents logs the events of a namespace, oldest first.
func showEvents(t *testing.T, e *Env, namespace string) {
	list, err := e.Cluster.Client.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("events of %s: %v", namespace, err)
		return
	}
	events := list.Items
	slices.SortStableFunc(events, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
	var b strings.Builder
	for _, ev := range events {
		fmt.Fprintf(&b, "%s %s/%s %s %s: %s (x%d)\n", ev.LastTimestamp.Format(time.TimeOnly), ev.InvolvedObject.Kind, ev.InvolvedObject.Name,
			ev.Type, ev.Reason, ev.Message, ev.Count)
	}
	t.Logf("---- events of %s ----\n%s", namespace, b.String())
}
