package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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
	Planner  *Process // nil when only the built-in half runs
	Executor *Process // nil when only the built-in half runs
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
	envOnce.Do(func() {
		suite.begin(t)
		defer suite.end()
		started := time.Now()
		e := &Env{Cluster: kubetest.StartCluster(suite, clusterNodes)}
		t.Logf("cluster %s up in %s", e.Cluster.Name, time.Since(started).Round(time.Millisecond))
		if !builtinOnly() {
			started = time.Now()
			bin := buildServices(suite)
			t.Logf("planner and executor built in %s", time.Since(started).Round(time.Millisecond))
			e.Planner = StartProcess(suite, "planner", filepath.Join(bin, "planner"))
			e.Executor = StartProcess(suite, "executor", filepath.Join(bin, "executor"),
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
func (e *Env) Processes() []*Process {
	if e.Planner == nil {
		return nil
	}
	return []*Process{e.Planner, e.Executor}
}

// buildServices builds the planner and the executor from the repository into a
// directory it returns.
func buildServices(tb testing.TB) string {
	tb.Helper()
	root, err := repoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	bin := tb.TempDir()
	for name, pkg := range map[string]string{
		"planner":  "./services/planner/cmd/planner",
		"executor": "./services/executor/cmd/executor",
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return bin
}

// repoRoot walks up from the working directory to the directory with go.work.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory")
		}
		dir = parent
	}
}

// Process is one of jobplane's services run as a real process on free
// loopback ports. Its output goes to a log file (kept across restarts), shown
// when a test fails. It can be killed and started again on the same ports,
// for fault tests.
type Process struct {
	Name        string
	GRPCAddr    string
	MetricsAddr string
	// LogPath is the file its stdout and stderr go to.
	LogPath string

	bin  string
	args []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

// processReadyTimeout bounds how long a process may take to answer /readyz.
const processReadyTimeout = time.Minute

// StartProcess runs bin with args and -grpc-addr and -metrics-addr on free
// loopback ports, and waits until its /readyz answers OK. The process is
// stopped (SIGTERM, then SIGKILL) when tb ends, and its log shown if tb failed.
func StartProcess(tb testing.TB, name, bin string, args ...string) *Process {
	tb.Helper()
	ports := freePorts(tb, 2)
	p := &Process{
		Name:        name,
		GRPCAddr:    fmt.Sprintf("127.0.0.1:%d", ports[0]),
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		LogPath:     filepath.Join(tb.TempDir(), name+".log"),
		bin:         bin,
	}
	p.args = append([]string{"-grpc-addr", p.GRPCAddr, "-metrics-addr", p.MetricsAddr}, args...)
	tb.Cleanup(func() {
		p.Stop(tb)
		if tb.Failed() {
			tb.Logf("---- last lines of %s ----\n%s", p.LogPath, p.Tail(60, ""))
		}
	})
	p.Start(tb)
	return p
}

// Start starts the process (again, after Kill or Stop) with the same
// arguments and ports, and waits until it is ready.
func (p *Process) Start(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		tb.Fatalf("%s is already running", p.Name)
	}
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	defer logFile.Close() // the child has its own copy
	fmt.Fprintf(logFile, "---- %s: %s %s\n", time.Now().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group, and killed if the test binary dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", p.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.cmd, p.exited = cmd, exited

	deadline := time.Now().Add(processReadyTimeout)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-exited:
			p.cmd = nil
			tb.Fatalf("%s exited before it was ready (%s); its log:\n%s", p.Name, cmd.ProcessState, p.Tail(60, ""))
		default:
		}
		if resp, err := client.Get("http://" + p.MetricsAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s not ready after %s; its log:\n%s", p.Name, processReadyTimeout, p.Tail(60, ""))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Kill kills the process with SIGKILL, as a crash would, and waits for it to
// be gone.
func (p *Process) Kill(tb testing.TB) {
	tb.Helper()
	p.signal(syscall.SIGKILL, 0)
}

// Stop asks the process to stop with SIGTERM and kills it if it has not
// stopped after ten seconds.
func (p *Process) Stop(tb testing.TB) {
	tb.Helper()
	p.signal(syscall.SIGTERM, 10*time.Second)
}

// Restart kills the process and starts it again on the same ports.
func (p *Process) Restart(tb testing.TB) {
	tb.Helper()
	p.Kill(tb)
	p.Start(tb)
}

// signal sends sig and waits for the process to exit, killing it after grace
// (unless sig is SIGKILL already). It does nothing if the process is not
// running.
func (p *Process) signal(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	if sig != syscall.SIGKILL {
		select {
		case <-p.exited:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
		}
	}
	<-p.exited
	p.cmd = nil
}

// Tail returns the last n lines of the process's log, only those containing
// match when it is not empty.
func (p *Process) Tail(n int, match string) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return err.Error()
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if match != "" && !strings.Contains(sc.Text(), match) {
			continue
		}
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// showLogsOnFailure prints, when t has failed, the lines of each process's log
// that mention match (a namespace, say), since the processes serve every test.
func showLogsOnFailure(t *testing.T, match string, procs ...*Process) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range procs {
			t.Logf("---- %s log lines mentioning %q ----\n%s", p.Name, match, p.Tail(80, match))
		}
	})
}

// freePorts returns n distinct free loopback ports.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("finding a free port: %v", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
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
