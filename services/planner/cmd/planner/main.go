// Command planner serves jobplane.v1.PlannerService.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"runtime"

	"github.com/jobplane/jobplane/lib/featuregates"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/services/planner/internal/engine"
	"github.com/jobplane/jobplane/services/planner/internal/svc"
)

func main() {
	cfg := svc.Config{StreamSnapshotMaxPods: svc.DefaultStreamSnapshotMaxPods,
		PodFailureBackoff: engine.PodFailureBackoff{Initial: engine.DefaultPodFailureBackoff, Max: engine.MaxPodFailureBackoff}}
	server := grpcserver.Defaults("127.0.0.1:50051", "127.0.0.1:9091")
	// Planning is CPU-bound: outside callers get every core but one, so
	// the executor's plans (the system level) always find one.
	server.Admission.WorkloadSeats = max(1, runtime.GOMAXPROCS(0)-1)
	grpcserver.Command{
		Name:   "planner",
		Server: server,
		Flags: func(fs *flag.FlagSet) {
			fs.IntVar(&cfg.StreamSnapshotMaxPods, "stream-snapshot-max-pods", cfg.StreamSnapshotMaxPods,
				"the most pods of the snapshots StreamPlanSync keeps, over all streams, as bases of deltas, each Job counting as one pod more; the least recently used are evicted (0: none kept, every delta is answered FAILED_PRECONDITION)")
			fs.Int64Var(&cfg.StreamSnapshotMaxBytes, "stream-snapshot-max-bytes", cfg.StreamSnapshotMaxBytes,
				"the most memory the snapshots StreamPlanSync keeps may take, over all streams, counted from the bytes they were sent as and about 2 KB a pod; the least recently used are evicted (0: a quarter of GOMEMLIMIT, or 512 MiB without one)")
			fs.DurationVar(&cfg.PodFailureBackoff.Initial, "pod-failure-backoff", cfg.PodFailureBackoff.Initial,
				"delay before a failed pod is replaced, doubled with each further failure (the reference's DefaultJobPodFailureBackOff)")
			fs.DurationVar(&cfg.PodFailureBackoff.Max, "max-pod-failure-backoff", cfg.PodFailureBackoff.Max,
				"the longest delay before a failed pod is replaced (the reference's MaxJobPodFailureBackOff)")
			fs.Func("feature-gates", "the reference's feature gates the plans follow, as kube-controller-manager's --feature-gates (JobBackoffLimitPerIndex, JobManagedBy, JobPodReplacementPolicy, JobSuccessPolicy, MutableSchedulingDirectivesForSuspendedJobs; all on, v1.36's, by default): set them as the cluster's, e.g. JobSuccessPolicy=false where it emulates an older version",
				func(s string) error {
					f, err := featuregates.Parse(s)
					cfg.Features = f
					return err
				})
		},
		Setup: func(_ context.Context, srv *grpcserver.Server, _ *slog.Logger) error {
			if cfg.StreamSnapshotMaxPods < 0 {
				return fmt.Errorf("-stream-snapshot-max-pods %d: must not be negative", cfg.StreamSnapshotMaxPods)
			}
			if cfg.StreamSnapshotMaxBytes < 0 {
				return fmt.Errorf("-stream-snapshot-max-bytes %d: must not be negative", cfg.StreamSnapshotMaxBytes)
			}
			if b := cfg.PodFailureBackoff; b.Initial <= 0 || b.Max < b.Initial {
				return fmt.Errorf("-pod-failure-backoff %s and -max-pod-failure-backoff %s: the first must be positive and the second no shorter", b.Initial, b.Max)
			}
			srv.RegisterService(&svc.ServiceDesc, svc.NewPlannerServiceWith(cfg))
			return nil
		},
	}.Main()
}
