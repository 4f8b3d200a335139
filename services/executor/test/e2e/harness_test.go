package e2e

import (
	"flag"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jobplane/jobplane/lib/kubetest"
)

// builtinOnlyEnv, set to 1, runs only the built-in half of the parity cases:
// jobplane's services are neither built nor started.
const builtinOnlyEnv = "JOBPLANE_E2E_BUILTIN_ONLY"

func builtinOnly() bool { return os.Getenv(builtinOnlyEnv) == "1" }

// clusterNodes is how many kwok nodes the shared cluster has.
const clusterNodes = 3

// Env is what every test of the binary shares: one cluster, and (unless
// JOBPLANE_E2E_BUILTIN_ONLY=1) one planner and one executor running against it.
// Tests keep apart by namespace.
type Env struct {
	Cluster  *kubetest.Cluster
	Planner  *kubetest.Process // nil when only the built-in half runs
	Executor *kubetest.Process // nil when only the built-in half runs
}

var (
	envOnce sync.Once
	env     *Env
	suite   = kubetest.NewSuite("e2e")
)

// defaultParallel is how many parallel tests run at once unless -parallel
// says otherwise: they wait on the cluster, not on the CPU, so all at once.
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
		t.Logf("cluster %s up in %s", e.Cluster.Name, time.Since(started).Round(time.Millisecond))
		if !builtinOnly() {
			started = time.Now()
			planner := kubetest.BuildBinary(suite, "./services/planner/cmd/planner")
			executor := kubetest.BuildBinary(suite, "./services/executor/cmd/executor")
			t.Logf("planner and executor built in %s", time.Since(started).Round(time.Millisecond))
			// On loopback; the executor calls it without credentials.
			e.Planner = kubetest.StartProcess(suite, "planner", planner, "-authn-anonymous")
			e.Executor = kubetest.StartProcess(suite, "executor", executor,
				"-kubeconfig", e.Cluster.Kubeconfig,
				"-planner-addr", e.Planner.GRPCAddr,
				"-leader-elect=false")
		}
		env = e
	})
	if env == nil {
		t.Fatal("the shared cluster or jobplane's services did not start: see the log of the first test")
	}
	return env
}

// Processes returns jobplane's running services, for showing their logs.
func (e *Env) Processes() []*kubetest.Process {
	if e.Planner == nil {
		return nil
	}
	return []*kubetest.Process{e.Planner, e.Executor}
}
