// Package cronjob stands in for the reference's CronJob controller
// (k8s.io/kubernetes/pkg/controller/cronjob) when hack/conformance.sh runs
// the reference's integration tests: through `go test -overlay` it replaces
// the package's files, so that the tests, unchanged, start jobplane's cron
// service (drop-in mode) against their test API server where they started
// the controller in process. The cron service hands its runs to the
// executor the Job controller's shim started.
package cronjob

import (
	"context"

	batchinformers "k8s.io/client-go/informers/batch/v1"
	clientset "k8s.io/client-go/kubernetes"

	"k8s.io/kubernetes/pkg/controller/job"
)

// ControllerV2 is jobplane's cron service in the reference controller's
// place.
type ControllerV2 struct{}

// NewControllerV2 takes the reference's arguments; the informers are the
// reference's, which the cron service does not share, and its client comes
// from the Job controller's shim.
func NewControllerV2(_ context.Context, _ batchinformers.JobInformer, _ batchinformers.CronJobInformer, _ clientset.Interface) (*ControllerV2, error) {
	return &ControllerV2{}, nil
}

// Run runs the cron service until ctx ends.
func (c *ControllerV2) Run(ctx context.Context, workers int) {
	job.RunCron(ctx, workers)
}
