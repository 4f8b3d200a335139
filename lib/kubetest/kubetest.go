// Package kubetest starts real Kubernetes components for tests: etcd with
// kube-apiserver on free loopback ports (integration tests), or a whole kwok
// cluster with kube-controller-manager and kube-scheduler (end-to-end tests).
// The binaries are the ones hack/build-bins.sh builds from pinned modules.
// Each component's log is shown when the test fails.
package kubetest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// BinEnv names the directory holding the cluster binaries; when unset they are
// built (or found in the cache) by hack/build-bins.sh cluster.
const BinEnv = "JOBPLANE_CLUSTER_BIN"

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// Binaries returns the directory holding etcd, kube-apiserver and the rest.
// In -short mode it skips the test instead: building them takes minutes, and
// make test-unit promises tests that need none of them.
func Binaries(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs the cluster binaries; skipped in -short mode (make test-unit)")
	}
	binOnce.Do(func() {
		if dir := os.Getenv(BinEnv); dir != "" {
			binDir = dir
			return
		}
		root, err := repoRoot()
		if err != nil {
			binErr = err
			return
		}
		cmd := exec.Command(filepath.Join(root, "hack", "build-bins.sh"), "cluster")
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			binErr = fmt.Errorf("hack/build-bins.sh cluster: %w", err)
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		binDir = lines[len(lines)-1]
	})
	if binErr != nil {
		tb.Fatalf("cluster binaries: %v", binErr)
	}
	return binDir
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
			return "", fmt.Errorf("no go.work above the working directory")
		}
		dir = parent
	}
}

// freePorts returns n distinct free loopback ports.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("finding a free port: %v", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// showLogsOnFailure prints the last lines of each log file when the test
// has failed.
func showLogsOnFailure(tb testing.TB, logs func() []string) {
	tb.Cleanup(func() {
		if !tb.Failed() {
			return
		}
		for _, path := range logs() {
			tb.Logf("---- last lines of %s ----\n%s", path, tail(path, 40, ""))
		}
	})
}

// tail returns the last n lines of the file at path, only those containing
// match when it is not empty.
func tail(path string, n int, match string) string {
	data, err := os.ReadFile(path)
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
