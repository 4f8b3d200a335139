package e2e

import (
	"flag"
	"fmt"
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
	suite   = &suiteTB{}
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
	if suite.finish(code != 0) && code == 0 {
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
		suite.begin(t)
		defer suite.end()
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

// suiteTB is the testing.TB of what the whole test binary shares. While
// sharedEnv starts it, it is the test that asked first (a Fatal stops that
// test); its cleanups and temporary directories last until TestMain ends, and
// it counts as failed there when any test failed, so that the cluster's logs
// are shown.
type suiteTB struct {
	testing.TB // the test starting the shared things; nil otherwise

	mu       sync.Mutex
	cleanups []func()
	dirs     []string
	failed   bool // set by finish
	errored  bool // an error reported while nothing was running
}

func (s *suiteTB) begin(t testing.TB) { s.TB = t }
func (s *suiteTB) end()               { s.TB = nil }

// finish runs the cleanups, last registered first, and removes the
// temporary directories; it reports whether a cleanup failed.
func (s *suiteTB) finish(failed bool) bool {
	s.mu.Lock()
	s.failed = failed
	cleanups := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	for _, dir := range s.dirs {
		_ = os.RemoveAll(dir)
	}
	return s.errored
}

func (s *suiteTB) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *suiteTB) TempDir() string {
	dir, err := os.MkdirTemp("", "jobplane-e2e-")
	if err != nil {
		s.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dirs = append(s.dirs, dir)
	return dir
}

func (s *suiteTB) Name() string { return "e2e" }

func (s *suiteTB) Helper() {
	if s.TB != nil {
		s.TB.Helper()
	}
}

func (s *suiteTB) Failed() bool {
	if s.TB != nil {
		return s.TB.Failed()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed || s.errored
}

func (s *suiteTB) Log(args ...any) { s.Logf("%s", fmt.Sprintln(args...)) }

func (s *suiteTB) Logf(format string, args ...any) {
	if s.TB != nil {
		s.TB.Logf(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
}

func (s *suiteTB) Error(args ...any) { s.Errorf("%s", fmt.Sprintln(args...)) }

func (s *suiteTB) Errorf(format string, args ...any) {
	if s.TB != nil {
		s.TB.Errorf(format, args...)
		return
	}
	s.mu.Lock()
	s.errored = true
	s.mu.Unlock()
	s.Logf(format, args...)
}

func (s *suiteTB) Fatal(args ...any) { s.Fatalf("%s", fmt.Sprintln(args...)) }

// Fatalf stops the test starting the shared things; once nothing is running
// (in a cleanup at the end) it only reports the error.
func (s *suiteTB) Fatalf(format string, args ...any) {
	if s.TB != nil {
		s.TB.Fatalf(format, args...)
		return
	}
	s.Errorf(format, args...)
}
