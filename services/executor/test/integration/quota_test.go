package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/jobplane/jobplane/lib/plan"
)

// setQuota sets the namespace's pod quota; with no quota controller running
// the test also writes the status the admission plugin counts from.
func setQuota(t *testing.T, e *env, ns string, pods int64, used int64) {
	t.Helper()
	ctx := context.Background()
	hard := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI)}
	q, err := e.client.CoreV1().ResourceQuotas(ns).Get(ctx, "pods", metav1.GetOptions{})
	if err != nil {
		q, err = e.client.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "pods"}, Spec: corev1.ResourceQuotaSpec{Hard: hard},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	} else {
		q.Spec.Hard = hard
		if q, err = e.client.CoreV1().ResourceQuotas(ns).Update(ctx, q, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(used, resource.DecimalSI)}}
	if _, err := e.client.CoreV1().ResourceQuotas(ns).UpdateStatus(ctx, q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A quota admitting 3 pods and a Job of 10: the creations go in slow-start
// batches of 1, 2 and 4; the batch of 4 is refused and creation stops there,
// with a FailedCreate event per refusal, as the reference does. Once the
// quota is raised the Job completes.
func TestSlowStartStopsAtTheQuotaAndCompletesOnceRaised(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	const ns = "quota"
	namespace(t, e.client, ns)
	setQuota(t, e, ns, 3, 0)
	if _, err := e.client.BatchV1().Jobs(ns).Create(ctx, newJob(ns, "ten", 10, 10), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	waitFor(t, 30*time.Second, "the first slow start to end", func() (bool, error) {
		return len(e.requests.matching("POST", "/namespaces/"+ns+"/pods")) >= 7, nil
	})
	creates := e.requests.matching("POST", "/namespaces/"+ns+"/pods")[:7]
	var codes []int
	for _, r := range creates {
		codes = append(codes, r.code)
	}
	// Batches 1 and 2 created; the 4 of the third batch refused.
	want := []int{201, 201, 201, 403, 403, 403, 403}
	if !slices.Equal(codes, want) {
		t.Fatalf("create answers %v, want %v", codes, want)
	}
	waitFor(t, 10*time.Second, "four FailedCreate events", func() (bool, error) {
		events, err := e.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("reason", "FailedCreate").String()})
		if err != nil {
			return false, err
		}
		var n int32
		for _, ev := range events.Items {
			n += ev.Count
		}
		return n >= 4, nil
	})
	// Retries start over at a batch of one: a refused retry costs one call.
	time.Sleep(3 * time.Second)
	later := e.requests.matching("POST", "/namespaces/"+ns+"/pods")[7:]
	for _, r := range later {
		if r.code != 403 {
			t.Fatalf("a create succeeded beyond the quota: %+v", r)
		}
	}
	if len(later) > 4 {
		t.Fatalf("%d creates in 3s of retries; want one per retried sync (backoff 1s, 2s, ...)", len(later))
	}

	setQuota(t, e, ns, 20, 3)
	waitFor(t, 60*time.Second, "the Job to complete", func() (bool, error) {
		finishPods(t, e.client, ns)
		job, err := e.client.BatchV1().Jobs(ns).Get(ctx, "ten", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, cond := finished(job)
		return cond == batchv1.JobComplete && job.Status.Succeeded == 10, nil
	})
	assertNoFinalizerLeft(t, e, ns)
}

func assertNoFinalizerLeft(t *testing.T, e *env, ns string) {
	t.Helper()
	waitFor(t, 30*time.Second, "no pod left with jobplane's finalizer", func() (bool, error) {
		pods, err := e.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if slices.Contains(p.Finalizers, plan.DefaultTrackingFinalizer) {
				return false, nil
			}
		}
		return true, nil
	})
}
