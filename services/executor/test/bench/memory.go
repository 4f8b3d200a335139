package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// memoryResult is the memory scenario's line of the results file: what a
// cached pod costs each controller, both caching every pod of the cluster.
type memoryResult struct {
	Scenario string `json:"scenario"` // memory
	Pods     int    `json:"pods"`
	// Indexed: the pods were labelled as an Indexed Job's, each with its
	// own completion index.
	Indexed bool `json:"indexed,omitempty"`
	// Live heap (the least heap in use seen over the settle window: just
	// after a collection) and resident memory, before the pods and after.
	ExecutorHeap, KCMHeap [2]float64
	ExecutorRSS, KCMRSS   [2]float64
}

// memory measures issue 20's memory per cached pod: the executor beside
// kube-controller-manager running its Job controller only, before and after
// the driver creates -pods pods (as 10 Jobs' pods are, but with no
// controller, so that neither controller acts on them: only their caches
// grow).
func memory(args []string) error {
	fs := flag.NewFlagSet("memory", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	pods := fs.Int("pods", 10000, "pods created")
	indexed := fs.Bool("indexed", false, "label and annotate the pods as 10 Indexed Jobs' pods: each with its own completion index")
	executorMetrics := fs.String("executor-metrics", "", "URL of the executor's /metrics")
	kcmMetrics := fs.String("kcm-metrics", "", "URL of kube-controller-manager's /metrics (TLS not verified)")
	settle := fs.Duration("settle", 130*time.Second, "how long each measurement watches the heaps: past the runtime's forced collection (every 2 minutes), so that the least heap in use seen is the live heap")
	results := fs.String("results", "", "JSON-lines file the result is appended to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS = -1
	cfg.UserAgent = "jobplane-bench"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	const ns = "memory"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// The ServiceAccount admission plugin wants one; with the Job
	// controller alone, no controller creates it.
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	res := memoryResult{Scenario: "memory", Pods: *pods, Indexed: *indexed}
	urls := [2]string{*executorMetrics, *kcmMetrics}
	heaps, rss, err := watchMemory(ctx, urls, *settle)
	if err != nil {
		return err
	}
	res.ExecutorHeap[0], res.KCMHeap[0], res.ExecutorRSS[0], res.KCMRSS[0] = heaps[0], heaps[1], rss[0], rss[1]
	log.Printf("creating %d pods in %s", *pods, ns)
	if err := createPods(ctx, client, ns, *pods, *indexed); err != nil {
		return err
	}
	heaps, rss, err = watchMemory(ctx, urls, *settle)
	if err != nil {
		return err
	}
	res.ExecutorHeap[1], res.KCMHeap[1], res.ExecutorRSS[1], res.KCMRSS[1] = heaps[0], heaps[1], rss[0], rss[1]
	if *results != "" {
		f, err := os.OpenFile(*results, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := json.NewEncoder(f).Encode(res); err != nil {
			return err
		}
	}
	writeMemory(res)
	return nil
}

// watchMemory scrapes both /metrics every second for settle: the least
// heap in use of each (go_memstats_heap_inuse_bytes: what a collection
// leaves), and its last resident memory.
func watchMemory(ctx context.Context, urls [2]string, settle time.Duration) (heaps, rss [2]float64, err error) {
	deadline := time.Now().Add(settle)
	for first := true; first || time.Now().Before(deadline); first = false {
		for i, url := range urls {
			m, err := httpMetrics(ctx, url)
			if err != nil {
				return heaps, rss, err
			}
			if h := m.sum("go_memstats_heap_inuse_bytes"); first || h < heaps[i] {
				heaps[i] = h
			}
			rss[i] = m.sum("process_resident_memory_bytes")
		}
		time.Sleep(time.Second)
	}
	return heaps, rss, nil
}

// createPods creates n pods as 10 Jobs' (labels, a template's spec), 64 at
// a time; indexed: as 10 Indexed Jobs', whose pods each carry their
// completion index in a label and an annotation, so no two pods of a Job
// have the same labels.
func createPods(ctx context.Context, client kubernetes.Interface, ns string, n int, indexed bool) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				// As the pods of 10 Jobs: each Job's have the same labels.
				job := fmt.Sprintf("cached-%d", i%10)
				uid := fmt.Sprintf("00000000-0000-0000-0000-00000000000%d", i%10)
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{GenerateName: job + "-", Labels: map[string]string{
						"batch.kubernetes.io/job-name": job, "job-name": job, "batch.kubernetes.io/controller-uid": uid, "controller-uid": uid,
					}},
					Spec: corev1.PodSpec{
						RestartPolicy:                 corev1.RestartPolicyNever,
						TerminationGracePeriodSeconds: ptr.To[int64](0),
						Containers:                    []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sh", "-c", "echo done"}}},
					},
				}
				if indexed {
					index := strconv.FormatInt(i/10, 10)
					pod.Labels[batchv1.JobCompletionIndexAnnotation] = index
					pod.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: index}
					pod.Spec.Hostname = job + "-" + index
					pod.Spec.Subdomain = job
				}
				if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func writeMemory(r memoryResult) {
	perPod := func(v [2]float64) float64 { return (v[1] - v[0]) / float64(r.Pods) / 1024 }
	if r.Indexed {
		fmt.Println("Pods labelled and annotated as 10 Indexed Jobs' (a completion index each).")
	}
	fmt.Printf("| %d pods | heap before | heap after | heap per pod (KiB) | RSS before | RSS after | RSS per pod (KiB) |\n|---|---:|---:|---:|---:|---:|---:|\n", r.Pods)
	row := func(name string, heap, rss [2]float64) {
		fmt.Printf("| %s | %.0f MiB | %.0f MiB | %.2f | %.0f MiB | %.0f MiB | %.2f |\n", name,
			heap[0]/(1<<20), heap[1]/(1<<20), perPod(heap), rss[0]/(1<<20), rss[1]/(1<<20), perPod(rss))
	}
	row("kube-controller-manager (--controllers=job-controller)", r.KCMHeap, r.KCMRSS)
	row("executor", r.ExecutorHeap, r.ExecutorRSS)
	fmt.Printf("\nexecutor / kube-controller-manager per pod: heap %.2f×, RSS %.2f×\n",
		perPod(r.ExecutorHeap)/perPod(r.KCMHeap), perPod(r.ExecutorRSS)/perPod(r.KCMRSS))
}
