package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Writes to the Job by others while it runs make the executor's status
// writes conflict; each conflict re-syncs, and the Job still ends with every
// pod counted once.
func TestStatusConflictsResyncAndCountEveryPodOnce(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	const ns = "conflicts"
	namespace(t, e.client, ns)
	if _, err := e.client.BatchV1().Jobs(ns).Create(ctx, newJob(ns, "busy", 6, 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			patch := fmt.Sprintf(`{"metadata":{"labels":{"touched":"%d"}}}`, i)
			_, _ = e.client.BatchV1().Jobs(ns).Patch(ctx, "busy", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		}
	}()
	waitFor(t, 90*time.Second, "the Job to complete", func() (bool, error) {
		finishPods(t, e.client, ns)
		job, err := e.client.BatchV1().Jobs(ns).Get(ctx, "busy", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, cond := finished(job)
		if job.Status.Succeeded > 6 {
			return false, fmt.Errorf("succeeded %d > completions 6", job.Status.Succeeded)
		}
		return cond == batchv1.JobComplete, nil
	})
	conflicts := 0
	for _, r := range e.requests.matching("PUT", "/jobs/busy/status") {
		if r.code == 409 {
			conflicts++
		}
	}
	t.Logf("status writes that conflicted: %d", conflicts)
	job, _ := e.client.BatchV1().Jobs(ns).Get(ctx, "busy", metav1.GetOptions{})
	if job.Status.Succeeded != 6 || job.Status.Failed != 0 {
		t.Fatalf("succeeded %d failed %d, want 6 and 0", job.Status.Succeeded, job.Status.Failed)
	}
	assertNoFinalizerLeft(t, e, ns)
}

// A Job deleted while its pods hold the tracking finalizer: the executor
// removes it from every pod (no garbage collector runs here, so the pods
// keep their dangling owner reference).
func TestDeletedJobLeavesNoFinalizer(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	const ns = "deleted"
	namespace(t, e.client, ns)
	if _, err := e.client.BatchV1().Jobs(ns).Create(ctx, newJob(ns, "doomed", 4, 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPods(t, e.client, ns, 4)
	if err := e.client.BatchV1().Jobs(ns).Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	assertNoFinalizerLeft(t, e, ns)
}
