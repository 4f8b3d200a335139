package kubetest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildMu sync.Mutex
	built   = map[string]string{}
)

// BuildBinary builds the main package pkg (relative to the repository root,
// such as "./services/executor/cmd/executor") once per test binary and
// returns the path of the executable.
func BuildBinary(tb testing.TB, pkg string) string {
	tb.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if path, ok := built[pkg]; ok {
		return path
	}
	root, err := repoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "jobplane-bin-")
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", path, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	built[pkg] = path
	return path
}

// Process is a jobplane service run as a real process for a test: it can be
// killed and started again, and its log is shown when the test fails.
type Process struct {
	tb     testing.TB
	name   string
	binary string
	args   []string
	log    string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartProcess runs binary with args; it is stopped when the test ends.
func StartProcess(tb testing.TB, name, binary string, args ...string) *Process {
	tb.Helper()
	p := &Process{tb: tb, name: name, binary: binary, args: args, log: filepath.Join(tb.TempDir(), name+".log")}
	showLogsOnFailure(tb, func() []string { return []string{p.log} })
	p.Start()
	tb.Cleanup(func() { p.Stop(syscall.SIGTERM) })
	return p
}

// Start starts the process (again), appending to its log.
func (p *Process) Start() {
	p.tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	logFile, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		p.tb.Fatal(err)
	}
	fmt.Fprintf(logFile, "==== %s started %s\n", p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.binary, p.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.tb.Fatalf("starting %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(done) }()
	p.cmd, p.done = cmd, done
}

// Stop sends sig (SIGKILL to kill, SIGTERM to stop gracefully) and waits for
// the process to exit, killing it after 20 seconds.
func (p *Process) Stop(sig syscall.Signal) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Exited says whether the process has exited, and its exit code.
func (p *Process) Exited() (bool, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return true, p.cmd.ProcessState.ExitCode()
	default:
		return false, 0
	}
}

// FreeAddr returns a free loopback address ("127.0.0.1:port").
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(freePorts(tb, 1)[0]))
}
