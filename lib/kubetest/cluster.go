package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster is a whole local cluster: etcd, kube-apiserver,
// kube-controller-manager (with the built-in Job controller), kube-scheduler
// and kwok, whose nodes run pods through their lifecycle.
type Cluster struct {
	// Name of the kwokctl cluster.
	Name string
	// Kubeconfig is the path of an admin kubeconfig.
	Kubeconfig string
	// Config reaches the apiserver as a cluster admin.
	Config *rest.Config
	// Client is a clientset built from Config.
	Client kubernetes.Interface
}

// StartCluster creates a kwok cluster with the given number of nodes, on
// loopback, and deletes it when the test ends.
func StartCluster(tb testing.TB, nodes int) *Cluster {
	tb.Helper()
	bin := Binaries(tb)
	root, err := repoRoot()
	if err != nil {
		tb.Fatal(err)
	}
	workdir := tb.TempDir()
	name := fmt.Sprintf("test-%d-%d", os.Getpid(), clusterCount.Add(1))
	kubeconfig := filepath.Join(workdir, "kubeconfig")
	kwokctl := func(args ...string) {
		tb.Helper()
		cmd := exec.Command(filepath.Join(bin, "kwokctl"), append([]string{"--name", name}, args...)...)
		cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+workdir)
		if out, err := cmd.CombinedOutput(); err != nil {
			tb.Fatalf("kwokctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	showLogsOnFailure(tb, func() []string {
		logs, _ := filepath.Glob(filepath.Join(workdir, "clusters", name, "logs", "*.log"))
		return logs
	})

	// kwokctl picks its ports by probing; clusters created at the same time
	// by parallel test binaries could pick the same ones.
	unlock := lockMachineWide(tb, "kwokctl-create")
	kwokctl("create", "cluster", "-c", filepath.Join(root, "hack", "kwokctl.yaml"), "--runtime", "binary",
		"--etcd-binary", filepath.Join(bin, "etcd"),
		"--kube-apiserver-binary", filepath.Join(bin, "kube-apiserver"),
		"--kube-controller-manager-binary", filepath.Join(bin, "kube-controller-manager"),
		"--kube-scheduler-binary", filepath.Join(bin, "kube-scheduler"),
		"--kwok-controller-binary", filepath.Join(bin, "kwok"),
		"--kubeconfig", kubeconfig, "--wait", "2m")
	unlock()
	tb.Cleanup(func() { kwokctl("delete", "cluster") })
	kwokctl("scale", "node", "--replicas", fmt.Sprint(nodes))

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.QPS = -1
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	waitReady(tb, client)
	return &Cluster{Name: name, Kubeconfig: kubeconfig, Config: cfg, Client: client}
}

var clusterCount atomic.Int32

// lockMachineWide takes an exclusive lock shared by every process of this
// machine and returns its release.
func lockMachineWide(tb testing.TB, name string) func() {
	tb.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "jobplane-"+name+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		tb.Fatal(err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}
