package dropin

import (
	"context"
	"errors"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// builtinController plays kube-controller-manager's Job controller on the
// fake API: every suspended Job created gets the condition Suspended.
func builtinController(client *fake.Clientset) {
	client.PrependReactor("get", "jobs", func(action k8stesting.Action) (bool, runtime.Object, error) {
		name := action.(k8stesting.GetAction).GetName()
		obj, err := client.Tracker().Get(batchv1.SchemeGroupVersion.WithResource("jobs"), action.GetNamespace(), name)
		if err != nil {
			return true, nil, err
		}
		job := obj.(*batchv1.Job).DeepCopy()
		job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: "JobSuspended",
			LastTransitionTime: metav1.Now()}}
		return true, job, nil
	})
}

func TestProbe(t *testing.T) {
	for _, tc := range []struct {
		name    string
		builtin bool
	}{{"the built-in controller marks the probe: refused", true}, {"nobody marks it: no error", false}} {
		t.Run(tc.name, func(t *testing.T) {
			left := probeJob("jobplane-system")
			left.Name = "jobplane-drop-in-probe-left"
			client := fake.NewClientset(left)
			if tc.builtin {
				builtinController(client)
			}
			err := Probe{Client: client, Namespace: "jobplane-system", Wait: 300 * time.Millisecond, Poll: 10 * time.Millisecond}.Check(context.Background())
			if got := errors.Is(err, ErrBuiltinActive); got != tc.builtin || (!tc.builtin && err != nil) {
				t.Fatalf("Check: %v, want the built-in found %v", err, tc.builtin)
			}
			jobs, err := client.BatchV1().Jobs("jobplane-system").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs.Items) > 0 {
				t.Errorf("probe Jobs left: %d (%s)", len(jobs.Items), jobs.Items[0].Name)
			}
			var created *batchv1.Job
			for _, a := range client.Actions() {
				if c, ok := a.(k8stesting.CreateAction); ok {
					created = c.GetObject().(*batchv1.Job)
				}
			}
			if created == nil || created.Spec.ManagedBy != nil || created.Spec.Suspend == nil || !*created.Spec.Suspend {
				t.Errorf("the probe is not a suspended Job of the built-in controller: %+v", created)
			}
		})
	}
}
