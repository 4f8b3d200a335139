package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/jobplane/jobplane/lib/kubetest"
	"github.com/jobplane/jobplane/services/cron/internal/batchcron"
)

// batchCronJob is a batch/v1 CronJob with annotations.
func batchCronJob(name string, annotations map[string]string) *batchv1.CronJob {
	c := cronJob(name)
	return &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: annotations}, Spec: c.Spec.CronJobSpec}
}

// deploy/drop-in's admission policy refuses exactly the extension
// annotations the cron service refuses: what the custom resource's schema
// is to its fields. (The state annotation, the service's own, is checked
// by the service alone.)
func TestTheAnnotationPolicyRefusesWhatTheCronServiceRefuses(t *testing.T) {
	api := kubetest.StartAPIServer(t)
	ctx := context.Background()
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	api.Apply(t, filepath.Join("..", "..", "..", "..", "deploy", "drop-in", "cron-annotations-policy.yaml"))
	cronJobs := api.Client.BatchV1().CronJobs(namespace)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	// The policy applies once the API server has compiled it.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cronJobs.Create(ctx, batchCronJob("probe", map[string]string{batchcron.JitterAnnotation: "x"}), dryRun)
		return err != nil, nil
	}); err != nil {
		t.Fatal("the admission policy never refused anything")
	}

	a := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []map[string]string{
		nil,
		a("example.com/other", "anything"),
		a(batchcron.ConcurrencyPolicyAnnotation, "BufferOne"), a(batchcron.ConcurrencyPolicyAnnotation, "BufferAll"),
		a(batchcron.ConcurrencyPolicyAnnotation, "Forbid"), a(batchcron.ConcurrencyPolicyAnnotation, "bufferone"),
		a(batchcron.ConcurrencyPolicyAnnotation, ""),
		a(batchcron.CatchUpPolicyAnnotation, "All"), a(batchcron.CatchUpPolicyAnnotation, "Skip"), a(batchcron.CatchUpPolicyAnnotation, "Most"),
		a(batchcron.CatchUpWindowAnnotation, "0"), a(batchcron.CatchUpWindowAnnotation, "3600"), a(batchcron.CatchUpWindowAnnotation, "-1"),
		a(batchcron.CatchUpWindowAnnotation, "1h"), a(batchcron.CatchUpWindowAnnotation, "99999999999999999999"),
		a(batchcron.CatchUpMaxRunsAnnotation, "1"), a(batchcron.CatchUpMaxRunsAnnotation, "1000"), a(batchcron.CatchUpMaxRunsAnnotation, "0"),
		a(batchcron.CatchUpMaxRunsAnnotation, "1001"), a(batchcron.CatchUpMaxRunsAnnotation, "99999999999"),
		a(batchcron.JitterAnnotation, "30"), a(batchcron.JitterAnnotation, "2147483647"), a(batchcron.JitterAnnotation, "2147483648"),
		a(batchcron.JitterAnnotation, "-5"), a(batchcron.JitterAnnotation, ""),
		a(batchcron.SkippedHourAnnotation, "RunAtNextValidTime"), a(batchcron.SkippedHourAnnotation, "Never"),
		a(batchcron.RepeatedHourAnnotation, "Once"), a(batchcron.RepeatedHourAnnotation, "Thrice"),
		a(batchcron.NoRetroactiveRunsAnnotation, "true"), a(batchcron.NoRetroactiveRunsAnnotation, "yes"),
		a(batchcron.Prefix+"jitter", "5"),
		a(batchcron.ConcurrencyPolicyAnnotation, "BufferAll", batchcron.CatchUpPolicyAnnotation, "All", batchcron.CatchUpMaxRunsAnnotation, "5",
			batchcron.JitterAnnotation, "10", batchcron.SkippedHourAnnotation, "Skip", batchcron.RepeatedHourAnnotation, "Twice"),
	}
	for i, annotations := range cases {
		_, serviceErrs := batchcron.FromBatch(batchCronJob("c", annotations))
		_, policyErr := cronJobs.Create(ctx, batchCronJob(fmt.Sprintf("c%d", i), annotations), dryRun)
		if (len(serviceErrs) == 0) != (policyErr == nil) {
			t.Errorf("%v: the cron service says %v, the admission policy %v", annotations, serviceErrs, policyErr)
		}
		if policyErr != nil && len(annotations) == 1 {
			for key := range annotations {
				if !strings.Contains(policyErr.Error(), "metadata.annotations") {
					t.Errorf("%s: the policy's refusal %q does not name the annotations", key, policyErr)
				}
			}
		}
	}
}
