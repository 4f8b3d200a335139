package kubetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// loopback, and deletes it when the test ends. Its nodes and pods go through
// the stages of hack/kwok/stages: a pod's fate can be chosen by the
// fate.jobplane.dev/ annotations of hack/kwok/stages/pod-fate.yaml.
func StartCluster(tb testing.TB, nodes int, opts ...ClusterOption) *Cluster {
	tb.Helper()
	var o clusterOptions
	for _, opt := range opts {
		opt(&o)
	}
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
	// One cluster at a time on this machine: two kwok clusters with their
	// controllers and services starve each other on two cores (kwok and the
	// built-in controllers stall), so the test binaries needing one take
	// turns, each holding the lock until its cluster is deleted.
	release := lockMachineWide(tb, "kwok-cluster", clusterLockWait)
	tb.Cleanup(release)
	// Deleted however far its creation got; the logs, registered after the
	// deletion so that they are shown before it (it removes them), too.
	tb.Cleanup(func() { kwokctl("delete", "cluster") })
	showLogsOnFailure(tb, func() []string {
		logs, _ := filepath.Glob(filepath.Join(workdir, "clusters", name, "logs", "*.log"))
		return logs
	})
	func() {
		// kwokctl picks its ports by probing; clusters created at the same
		// time by parallel test binaries could pick the same ones.
		defer lockMachineWide(tb, "kwokctl-create", lockWait)()
		kwokctl("create", "cluster", "-c", kwokctlConfig(tb, root, workdir, o), "--runtime", "binary",
			"--etcd-binary", filepath.Join(bin, "etcd"),
			"--kube-apiserver-binary", filepath.Join(bin, "kube-apiserver"),
			"--kube-controller-manager-binary", filepath.Join(bin, "kube-controller-manager"),
			"--kube-scheduler-binary", filepath.Join(bin, "kube-scheduler"),
			"--kwok-controller-binary", filepath.Join(bin, "kwok"),
			"--kubeconfig", kubeconfig, "--wait", "2m")
	}()
	// kubectl runs kubectl on the cluster, bounded by 30 s.
	kubectl := func(args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	}
	// Nodes become Ready only once their stages exist.
	if out, err := kubectl("apply", "-f", filepath.Join(root, "hack", "kwok", "stages")); err != nil {
		tb.Fatalf("applying hack/kwok/stages: %v\n%s", err, out)
	}
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
	// Shown first when the test fails: which stage controllers kwok started
	// and stopped (see waitNodesReady).
	tb.Cleanup(func() {
		if tb.Failed() {
			kwokLog := filepath.Join(workdir, "clusters", name, "logs", "kwok-controller.log")
			tb.Logf("kwok's stage controllers:\n%s", cmp.Or(tail(kwokLog, 4, "stage controller"), "(none started)"))
		}
	})
	remedies := nodeRemedies{restart: func() {
		kwokctl("stop", "cluster")
		kwokctl("start", "cluster", "--wait", "2m")
	}}
	remedies.nudge = func(resources string) {
		if out, err := kubectl("annotate", resources, "--all", "--overwrite", fmt.Sprintf("jobplane.dev/nudged=%d", time.Now().UnixNano())); err != nil {
			tb.Logf("nudging %s: %v\n%s", resources, err, out)
		}
	}
	waitNodesReady(tb, client, nodes, remedies)
	if runsServiceAccounts(o.controllers) {
		waitDefaultServiceAccount(tb, client)
	}
	return &Cluster{Name: name, Kubeconfig: kubeconfig, Config: cfg, Client: client}
}

var clusterCount atomic.Int32

// ClusterOption changes the cluster StartCluster creates.
type ClusterOption func(*clusterOptions)

type clusterOptions struct {
	controllers string
}

// KubeControllerManagerControllers runs kube-controller-manager with
// --controllers=controllers, such as "*,-job-controller" for a cluster where
// jobplane's executor runs plain Jobs in drop-in mode.
func KubeControllerManagerControllers(controllers string) ClusterOption {
	return func(o *clusterOptions) { o.controllers = controllers }
}

// kwokctlConfig is hack/kwokctl.yaml, with the options' component flags (in
// a copy under workdir) when there are any.
func kwokctlConfig(tb testing.TB, root, workdir string, o clusterOptions) string {
	base := filepath.Join(root, "hack", "kwokctl.yaml")
	if o.controllers == "" {
		return base
	}
	data, err := os.ReadFile(base)
	if err != nil {
		tb.Fatal(err)
	}
	data = fmt.Appendf(data, "componentsPatches:\n- name: kube-controller-manager\n  extraArgs:\n  - key: controllers\n    value: %q\n", o.controllers)
	path := filepath.Join(workdir, "kwokctl.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// nodesReadyWithin bounds the wait for kwok's nodes to be Ready. kwok marks
// them within seconds; the rest is room for waitNodesReady's remedies (a
// minute of nudges, then a restart of the cluster).
const nodesReadyWithin = 3 * time.Minute

// nudgeEvery is how long the nodes may stay not Ready before kwok's stages
// are nudged again; restartAfter, before the cluster is restarted.
const (
	nudgeEvery   = 10 * time.Second
	restartAfter = time.Minute
)

// nodeRemedies are what waitNodesReady tries while nodes are not Ready.
type nodeRemedies struct {
	// nudge annotates every object of the resources named.
	nudge func(resources string)
	// restart stops and starts the cluster's processes, kwok's among them.
	restart func()
}

// waitNodesReady waits until n nodes are Ready, so that pods created next are
// scheduled at once. While they are not, it nudges kwok's stages and the
// nodes, and after restartAfter restarts the cluster once; when they are,
// it nudges the stages again.
//
// Why nudge: kwok caches its list of stages under its informer's last
// resource version, which client-go's reflector moves on before the objects
// reach the informer's store. When kwok reads its stages in between (its
// first list landing while they are created), it caches the list short,
// even empty, under the final version: without node stages it never starts
// its node controller, without node-initialize it leaves the nodes as they
// are. CI saw "0 of 2 nodes Ready" for 3 minutes. A change to a Stage moves
// the version on and refreshes the cache; a change to a node has kwok look
// at it again with the stages it now has. The restart is for whatever else
// stops kwok (kwokctl does not restart a kwok that exited).
func waitNodesReady(tb testing.TB, client kubernetes.Interface, n int, remedies nodeRemedies) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), nodesReadyWithin)
	defer cancel()
	started := time.Now()
	nextNudge, restarted := started.Add(nudgeEvery), false
	ready := 0
	for ctx.Err() == nil {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			ready = 0
			for _, node := range list.Items {
				for _, c := range node.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			if ready >= n {
				// The pods' stages could have been cached short as well.
				remedies.nudge("stages.kwok.x-k8s.io")
				return
			}
		}
		switch {
		case !restarted && time.Since(started) > restartAfter:
			tb.Logf("%d of %d nodes Ready when last listed, after %v; restarting the cluster", ready, n, restartAfter)
			remedies.restart()
			restarted, nextNudge = true, time.Now().Add(nudgeEvery)
		case time.Now().After(nextNudge):
			tb.Logf("%d of %d nodes Ready when last listed; nudging kwok's stages and the nodes", ready, n)
			remedies.nudge("stages.kwok.x-k8s.io")
			remedies.nudge("nodes")
			nextNudge = time.Now().Add(nudgeEvery)
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("%d of %d nodes Ready after %v", ready, n, nodesReadyWithin)
}

// waitDefaultServiceAccount waits for kube-controller-manager to create the
// default namespace's ServiceAccount: until then the API server refuses that
// namespace's pods, and the built-in Job controller retries them with a
// backoff that reaches a minute.
func waitDefaultServiceAccount(tb testing.TB, client kubernetes.Interface) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	for ctx.Err() == nil {
		if _, err = client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("no default ServiceAccount after a minute: %v", err)
}

// runsServiceAccounts tells whether kube-controller-manager run with
// --controllers=controllers creates namespaces' default ServiceAccounts.
func runsServiceAccounts(controllers string) bool {
	if controllers == "" {
		return true
	}
	list := strings.Split(controllers, ",")
	return !slices.Contains(list, "-serviceaccount-controller") &&
		(slices.Contains(list, "*") || slices.Contains(list, "serviceaccount-controller"))
}

// lockWait bounds how long the create lock is waited for: a create holds it
// for seconds, so a lock held longer has leaked, as when a cluster is created
// under flock(1) without -o and its processes inherit the locked file.
const lockWait = time.Minute

// clusterLockWait bounds the wait for another test binary's cluster to be
// deleted: the longest end-to-end package runs for about 7 minutes.
const clusterLockWait = 20 * time.Minute

// lockMachineWide takes an exclusive lock shared by every process of this
// machine and returns its release. After wait it goes on without the lock.
func lockMachineWide(tb testing.TB, name string, wait time.Duration) func() {
	tb.Helper()
	path := filepath.Join(os.TempDir(), "jobplane-"+name+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	deadline := time.Now().Add(wait)
	started := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			tb.Fatal(err)
		}
		if time.Now().After(deadline) {
			tb.Logf("%s still locked after %s (a process holding it by mistake?); going on without it", path, wait)
			f.Close()
			return func() {}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if waited := time.Since(started); waited > time.Second {
		tb.Logf("waited %s for %s", waited.Round(time.Second), path)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}
