package kubetest

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
// returns the path of the executable. Executables are kept in one place per
// checkout and package (testBinDir), each build replacing the last, so that
// test runs leave no copy behind: a temporary directory per build would
// outlive the test binary, which has no hook at its exit.
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
	dir, err := testBinDir(root, pkg)
	if err != nil {
		tb.Fatal(err)
	}
	// Built under a new name, then renamed over the last build: another
	// test binary may be running that one (a rename leaves it running).
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	name := filepath.Base(pkg)
	cmd := exec.Command("go", "build", "-o", filepath.Join(tmp, name), pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	path := filepath.Join(dir, name)
	if err := os.Rename(filepath.Join(tmp, name), path); err != nil {
		tb.Fatal(err)
	}
	built[pkg] = path
	return path
}

// testBinDir is where BuildBinary keeps the executable of pkg built from
// the checkout at root: under JOBPLANE_CACHE (as hack/lib.sh sets it, else
// the user's cache directory), one directory per checkout and package, which
// names its checkout and is removed once that checkout is gone.
func testBinDir(root, pkg string) (string, error) {
	cache := os.Getenv("JOBPLANE_CACHE")
	if cache == "" {
		user, err := os.UserCacheDir()
		if err != nil {
			user = os.TempDir()
		}
		cache = filepath.Join(user, "jobplane")
	}
	bins := filepath.Join(cache, "test-bin")
	pruneTestBins(bins)
	sum := sha256.Sum256([]byte(root + "\x00" + pkg))
	dir := filepath.Join(bins, hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nameCheckout(dir, root)
}

// checkoutFile, in a directory of testBinDir, holds its checkout's path.
const checkoutFile = "checkout"

// nameCheckout writes dir's checkoutFile once, whole (renamed into place),
// so that another test binary pruning never reads it half written.
func nameCheckout(dir, root string) error {
	path := filepath.Join(dir, checkoutFile)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	f, err := os.CreateTemp(dir, checkoutFile+"-")
	if err != nil {
		return err
	}
	_, err = f.WriteString(root)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// staleBuild is how old a build directory is once its build was cut short
// (a test binary killed while it built).
const staleBuild = time.Hour

// pruneTestBins removes the directories of bins whose checkout is gone
// (a fresh clone deleted after its run), and builds cut short.
func pruneTestBins(bins string) {
	entries, _ := os.ReadDir(bins)
	for _, e := range entries {
		dir := filepath.Join(bins, e.Name())
		root, err := os.ReadFile(filepath.Join(dir, checkoutFile))
		if err != nil || len(root) == 0 {
			continue // being made, or not ours
		}
		if _, err := os.Stat(string(root)); errors.Is(err, fs.ErrNotExist) {
			os.RemoveAll(dir)
			continue
		}
		builds, _ := filepath.Glob(filepath.Join(dir, "build-*"))
		for _, b := range builds {
			if info, err := os.Stat(b); err == nil && time.Since(info.ModTime()) > staleBuild {
				os.RemoveAll(b)
			}
		}
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
// loopback ports, and waits until its /readyz answers OK (over HTTPS when
// args give -tls-cert-file: the metrics port serves TLS as gRPC does). The process is
// stopped (SIGTERM, then SIGKILL) when tb ends, and its log shown if tb failed.
func StartProcess(tb testing.TB, name, bin string, args ...string) *Process {
	tb.Helper()
	p := &Process{
		Name:    name,
		LogPath: filepath.Join(tb.TempDir(), name+".log"),
		bin:     bin,
	}
	tb.Cleanup(func() {
		p.Stop(tb)
		if tb.Failed() {
			tb.Logf("---- last lines of %s ----\n%s", p.LogPath, p.Tail(60, ""))
		}
	})
	// The free ports found may be taken before the process binds them
	// (another process's, or a connection's own port): then new ones.
	for attempt := 1; ; attempt++ {
		ports := freePorts(tb, 2)
		p.GRPCAddr, p.MetricsAddr = fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
		p.args = append([]string{"-grpc-addr", p.GRPCAddr, "-metrics-addr", p.MetricsAddr}, args...)
		err := p.start()
		if err == nil {
			return p
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			tb.Fatal(err)
		}
		tb.Logf("%v; on other ports", err)
	}
}

// errPortTaken is a process's exit for a port another took first.
var errPortTaken = errors.New("a port was taken")

// lastRun is the part of a log written by its last run, each run's
// starting with its "---- " line.
func lastRun(log string) string {
	if i := strings.LastIndex(log, "---- "); i >= 0 {
		return log[i:]
	}
	return log
}

// Start starts the process (again, after Kill or Stop) with the same
// arguments and ports, and waits until it is ready.
func (p *Process) Start(tb testing.TB) {
	tb.Helper()
	if err := p.start(); err != nil {
		tb.Fatal(err)
	}
}

func (p *Process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s is already running", p.Name)
	}
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own copy
	fmt.Fprintf(logFile, "---- %s: %s %s\n", time.Now().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group, and killed if the test binary dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %v", p.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.cmd, p.exited = cmd, exited

	deadline := time.Now().Add(processReadyTimeout)
	readyz := "http://" + p.MetricsAddr + "/readyz"
	client := &http.Client{Timeout: time.Second}
	if p.servesTLS() {
		// As a kubelet probes: the certificate is not verified.
		readyz = "https://" + p.MetricsAddr + "/readyz"
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	}
	for {
		select {
		case <-exited:
			p.cmd = nil
			log := p.Tail(60, "")
			err := fmt.Errorf("%s exited before it was ready (%s); its log:\n%s", p.Name, cmd.ProcessState, log)
			if strings.Contains(lastRun(log), "address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		default:
		}
		if resp, err := client.Get(readyz); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s; its log:\n%s", p.Name, processReadyTimeout, p.Tail(60, ""))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// servesTLS says whether the process's arguments give it a certificate.
func (p *Process) servesTLS() bool {
	for _, arg := range p.args {
		if name := strings.TrimLeft(arg, "-"); name == "tls-cert-file" || strings.HasPrefix(name, "tls-cert-file=") {
			return true
		}
	}
	return false
}

// Binary is the executable the process runs.
func (p *Process) Binary() string { return p.bin }

// PeakRSS is the most resident memory the running process has had
// (VmHWM of /proc/PID/status, Linux), in bytes.
func (p *Process) PeakRSS(tb testing.TB) int64 {
	tb.Helper()
	n, err := peakRSS(p.pid(tb))
	if err != nil {
		tb.Fatalf("%s: %v", p.Name, err)
	}
	return n
}

// CPUTime is the CPU time the running process has used, user and system
// (/proc/PID/stat, Linux; in clock ticks of 10 ms).
func (p *Process) CPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid(tb)))
	if err != nil {
		tb.Fatalf("%s: %v", p.Name, err)
	}
	// The fields after the command's name, which is in parentheses and
	// may hold spaces: utime and stime are the 12th and 13th.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			tb.Fatalf("%s: /proc stat field %q: %v", p.Name, f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// pid is the running process's.
func (p *Process) pid(tb testing.TB) int {
	tb.Helper()
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		tb.Fatalf("%s is not running", p.Name)
	}
	return cmd.Process.Pid
}

// peakRSS is the VmHWM of process pid, in bytes.
func peakRSS(pid int) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmHWM %q: %v", rest, err)
			}
			return kib << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
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
	return tail(p.LogPath, n, match)
}

// ShowLogLinesOnFailure prints, when t has failed, the lines of each
// process's log that mention match (a namespace, say): processes shared by
// several tests log for all of them.
func ShowLogLinesOnFailure(t testing.TB, match string, procs ...*Process) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range procs {
			t.Logf("---- %s log lines mentioning %q ----\n%s", p.Name, match, p.Tail(80, match))
		}
	})
}
