package sim

import (
	"context"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/jobplane/jobplane/lib/kubetest"
)

// apiserverLifecycles is how many generated lifecycles replay their status
// writes against the real API server.
const apiserverLifecycles = 72

// Every status the planner writes along simulated lifecycles is accepted by
// a real kube-apiserver's status subresource, whose validation of a Job
// managed by another controller is the strictest it has.
func TestPlannedStatusesAreAcceptedByTheAPIServer(t *testing.T) {
	api := kubetest.StartAPIServer(t)
	for seed := range uint64(apiserverLifecycles) {
		sc := Generate(seed)
		lag := seed >= apiserverLifecycles/2
		t.Run(fmt.Sprintf("%s-lag-%v", sc.Name, lag), func(t *testing.T) {
			replay := newReplay(t, api.Client, sc, seed)
			w := sc.Run(start, 3000, lag, replay.afterSync)
			if !w.Finished() {
				t.Fatalf("lifecycle did not finish")
			}
			if replay.written == 0 {
				t.Fatal("no status written")
			}
			stored, err := api.Client.BatchV1().Jobs("default").Get(context.Background(), replay.job.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !finished(stored) {
				t.Errorf("the stored Job is not finished: %+v", stored.Status)
			}
		})
	}
}

// replay mirrors a simulated Job in the API server.
type replay struct {
	t       *testing.T
	client  kubernetes.Interface
	job     *batchv1.Job // as last stored
	written int
}

func newReplay(t *testing.T, client kubernetes.Interface, sc Scenario, seed uint64) *replay {
	job := sc.Job.DeepCopy()
	job.Name = fmt.Sprintf("replay-%d", seed)
	job.UID = ""
	job.Spec.ManagedBy = ptr.To("jobplane.dev/executor")
	// The API server generates the selector and its labels itself.
	job.Spec.Selector = nil
	delete(job.Spec.Template.Labels, batchv1.ControllerUidLabel)
	created, err := client.BatchV1().Jobs("default").Create(context.Background(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating the Job: %v", err)
	}
	return &replay{t: t, client: client, job: created}
}

// afterSync writes the spec changes and then every status the sync wrote.
func (r *replay) afterSync(w *World) {
	r.t.Helper()
	ctx := context.Background()
	jobs := r.client.BatchV1().Jobs("default")
	if ptr.Deref(w.Job.Spec.Suspend, false) != ptr.Deref(r.job.Spec.Suspend, false) {
		r.job.Spec.Suspend = ptr.To(ptr.Deref(w.Job.Spec.Suspend, false))
		updated, err := jobs.Update(ctx, r.job, metav1.UpdateOptions{})
		if err != nil {
			r.t.Fatalf("updating spec.suspend: %v", err)
		}
		r.job = updated
	}
	for r.written < len(w.StatusWrites) {
		r.job.Status = *w.StatusWrites[r.written].DeepCopy()
		updated, err := jobs.UpdateStatus(ctx, r.job, metav1.UpdateOptions{})
		if err != nil {
			r.t.Fatalf("status write %d at %s refused: %v\nstatus: %+v", r.written, w.Now, err, r.job.Status)
		}
		r.job = updated
		r.written++
	}
}

func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == "True" {
			return true
		}
	}
	return false
}
