package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jobplane/jobplane/services/executor/internal/dropin"
)

// The shared cluster's kube-controller-manager runs its Job controller: an
// executor started in drop-in mode against it finds that out from its probe
// Job and refuses to start, saying why, and leaves no probe behind.
func TestDropInRefusesToStartBesideTheBuiltinJobController(t *testing.T) {
	e := sharedEnv(t)
	if e.Executor == nil {
		t.Skip("jobplane's services are not running (" + builtinOnlyEnv + ")")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, e.Executor.Binary(), "-grpc-addr", "127.0.0.1:0", "-metrics-addr", "",
		"-kubeconfig", e.Cluster.Kubeconfig, "-planner-addr", e.Planner.GRPCAddr, "-leader-elect=false",
		"-drop-in", "-drop-in-probe-wait", "30s").CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("the executor in drop-in mode did not refuse to start beside the built-in Job controller (%v); its output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "the built-in Job controller is running") {
		t.Errorf("the refusal does not name the built-in Job controller:\n%s", out)
	}
	jobs, err := e.Cluster.Client.BatchV1().Jobs(metav1.NamespaceSystem).List(context.Background(), metav1.ListOptions{LabelSelector: dropin.ProbeLabel})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) > 0 {
		t.Errorf("%d probe Jobs left in kube-system", len(jobs.Items))
	}
}
