package job

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
)

// runningExecutor is the executor of the current Run, which the cron
// service hands its runs to.
type runningExecutor struct {
	addr, kubeconfig, tokenFile string
}

var (
	executorMu      sync.Mutex
	executorChanged = make(chan struct{})
	executorNow     *runningExecutor
)

func announceExecutor(e runningExecutor) {
	executorMu.Lock()
	defer executorMu.Unlock()
	executorNow = &e
	close(executorChanged)
	executorChanged = make(chan struct{})
}

// forgetExecutor forgets the executor at addr, unless another one was
// announced since.
func forgetExecutor(addr string) {
	executorMu.Lock()
	defer executorMu.Unlock()
	if executorNow != nil && executorNow.addr == addr {
		executorNow = nil
	}
}

// currentExecutor waits for a Run's executor: the tests start the CronJob
// controller and the Job controller side by side, in either order.
func currentExecutor(ctx context.Context) (*runningExecutor, error) {
	for {
		executorMu.Lock()
		e, changed := executorNow, executorChanged
		executorMu.Unlock()
		if e != nil {
			return e, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// RunCron is the CronJob controller's Run in the cronjob package's shim:
// the cron service (-drop-in, batch/v1 CronJobs only: the test API server
// has no jobplane CRD) against the test API server, handing its runs to
// the executor of the Job controller's Run, until ctx ends.
func RunCron(ctx context.Context, workers int) {
	executor, err := currentExecutor(ctx)
	if err != nil {
		return
	}
	port, err := freePorts(1)
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance shim: starting cron: %v\n", err)
		return
	}
	cron, err := startProcess(os.Getenv(binEnv), "cron", "-grpc-addr", fmt.Sprintf("127.0.0.1:%d", port[0]), "-metrics-addr", "",
		"-authn-anonymous", "-shutdown-drain", "0s", "-kubeconfig", executor.kubeconfig, "-leader-elect=false",
		"-executor-addr", executor.addr, "-executor-token-file", executor.tokenFile, "-workers", fmt.Sprint(max(workers, 1)),
		"-kube-api-qps", "1000", "-kube-api-burst", "1000", "-drop-in", "-jobplane-cronjobs=false")
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance shim: starting cron: %v\n", err)
		return
	}
	stopWhenDone(ctx, cron)
}

// stopWhenDone stops the processes once ctx ends, and returns once they
// exited.
func stopWhenDone(ctx context.Context, procs ...*exec.Cmd) {
	<-ctx.Done()
	for _, p := range procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		_ = p.Wait()
	}
}
