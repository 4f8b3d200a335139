// Command executor serves jobplane.v1.ExecutorService and runs the Jobs whose
// spec.managedBy is jobplane's (with -drop-in, the built-in Job
// controller's too): informers, workers and leader election run beside gRPC
// in one lifecycle.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/auth"
	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/fairorder"
	"github.com/jobplane/jobplane/lib/fairqueue"
	"github.com/jobplane/jobplane/lib/featuregates"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/leader"
	"github.com/jobplane/jobplane/lib/plan"
	"github.com/jobplane/jobplane/lib/retryinfo"
	"github.com/jobplane/jobplane/services/executor/internal/controller"
	"github.com/jobplane/jobplane/services/executor/internal/dropin"
	"github.com/jobplane/jobplane/services/executor/internal/gang"
	"github.com/jobplane/jobplane/services/executor/internal/plannerclient"
	"github.com/jobplane/jobplane/services/executor/internal/podwrites"
	"github.com/jobplane/jobplane/services/executor/internal/svc"
)

// config is the executor's own configuration (flags with EXECUTOR_*
// environment fallbacks).
type config struct {
	plannerAddr      string
	plannerCAFile    string
	plannerTokenFile string
	managedBy        string
	finalizer        string
	workers          int
	qps              float64
	burst            int
	namespaceWeights fairorder.Weights
	// weightAnnotations says whether namespaces' annotations set weights.
	weightAnnotations bool
	lease             leader.Flags
	dropIn            dropInFlags
	// featureGates are the reference's gates the cluster runs with.
	featureGates featuregates.Features
}

// dropInFlags are the executor's drop-in mode: the built-in Job
// controller's Jobs run by the executor, in its place.
type dropInFlags struct {
	enabled        bool
	probeNamespace string
	probeWait      time.Duration
}

// trackingFinalizer is -tracking-finalizer, or the mode's: the built-in
// controller's in drop-in mode (its pods carry it), jobplane's otherwise.
func (c *config) trackingFinalizer() string {
	switch {
	case c.finalizer != "":
		return c.finalizer
	case c.dropIn.enabled:
		return batchv1.JobTrackingFinalizer
	default:
		return plan.DefaultTrackingFinalizer
	}
}

// eventSource is the component of the executor's events: the built-in
// controller's in drop-in mode, so that what reads them finds them.
func (c *config) eventSource() string {
	if c.dropIn.enabled {
		return "job-controller"
	}
	return "jobplane-executor"
}

func (c *config) registerFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.plannerAddr, "planner-addr", "127.0.0.1:50051", "address of the PlannerService")
	fs.StringVar(&c.plannerCAFile, "planner-ca-file", "", "PEM CA certificates of the planner's TLS certificate; empty calls it in plaintext (loopback only)")
	fs.StringVar(&c.plannerTokenFile, "planner-token-file", "", "file holding the bearer token to call the planner with (a projected service account token; read again every minute); empty sends none")
	fs.StringVar(&c.managedBy, "managed-by", svc.DefaultManagedBy, "spec.managedBy of the Jobs to run")
	fs.StringVar(&c.finalizer, "tracking-finalizer", "", "pod tracking finalizer; empty: "+plan.DefaultTrackingFinalizer+", or "+batchv1.JobTrackingFinalizer+" with -drop-in")
	fs.IntVar(&c.workers, "workers", 5, "Jobs synced at once")
	fs.Float64Var(&c.qps, "kube-api-qps", 20, "Kubernetes API requests per second, shared fairly between namespaces, then Jobs")
	fs.IntVar(&c.burst, "kube-api-burst", 30, "Kubernetes API request burst")
	fs.Var(&c.namespaceWeights, "namespace-weights", "namespaces' shares of the workers' turns and of the Kubernetes API budget, as team-a=4,team-b=2 (weights 1 to 1000); a namespace not listed has weight 1")
	fs.BoolVar(&c.weightAnnotations, "namespace-weight-annotations", true, "a namespace's annotation "+fairqueue.WeightAnnotation+" (1 to 1000) sets its weight, over -namespace-weights; needs list and watch on namespaces")
	fs.Func("feature-gates", "the reference's feature gates the cluster runs with, as kube-controller-manager's --feature-gates (all on, v1.36's, by default); the executor reads JobManagedBy (off, in drop-in mode: every Job is run, whatever its spec.managedBy, as the built-in controller then does) and WorkloadWithJob (alpha, off: on, gang-schedulable Jobs get a Workload and a PodGroup, scheduling.k8s.io/v1alpha2, which the API server must serve); give the planner the same",
		func(s string) error {
			f, err := featuregates.Parse(s)
			c.featureGates = f
			return err
		})
	fs.BoolVar(&c.dropIn.enabled, "drop-in", false, "run the Jobs of kube-controller-manager's Job controller too (spec.managedBy unset or "+dropin.BuiltinManagedBy+"), in its place: with its tracking finalizer "+batchv1.JobTrackingFinalizer+" and its event source job-controller; refuses to start while that controller evidently runs (-drop-in-probe-wait)")
	fs.StringVar(&c.dropIn.probeNamespace, "drop-in-probe-namespace", metav1.NamespaceSystem, "namespace of the suspended probe Job that finds out whether the built-in Job controller runs (drop-in mode; the executor needs create on jobs there). No tenant may write Jobs there: whoever can mark the probe Suspended keeps the executor from starting")
	fs.DurationVar(&c.dropIn.probeWait, "drop-in-probe-wait", 10*time.Second, "how long the built-in Job controller has to mark the probe Job Suspended before the executor takes it to be stopped (drop-in mode)")
	c.lease.Register(fs, "jobplane-executor")
}

func (c *config) validate() error {
	var errs []error
	if c.plannerAddr == "" {
		errs = append(errs, errors.New("planner-addr is required"))
	}
	if c.plannerCAFile == "" && !grpcserver.IsLoopback(c.plannerAddr) {
		errs = append(errs, fmt.Errorf("planner-addr %q is not a loopback address: call it over TLS (planner-ca-file)", c.plannerAddr))
	}
	if c.managedBy == "" {
		errs = append(errs, errors.New("managed-by is required"))
	}
	if c.workers < 1 {
		errs = append(errs, fmt.Errorf("workers must be positive, got %d", c.workers))
	}
	if c.qps <= 0 || c.burst < 1 {
		errs = append(errs, fmt.Errorf("kube-api-qps and kube-api-burst must be positive, got %g and %d", c.qps, c.burst))
	}
	if err := c.lease.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func main() {
	var cfg config
	server := grpcserver.Defaults("127.0.0.1:50052", "127.0.0.1:9092")
	// The controller runs on the same cores as the API: outside callers'
	// reads (answered from the caches: CPU-bound) get every core but one,
	// so that the controller always finds one. Writes wait on the API
	// server and keep their seats.
	server.Admission.WorkloadReadSeats = max(1, runtime.GOMAXPROCS(0)-1)
	grpcserver.Command{
		Name:   "executor",
		Server: server,
		Flags:  cfg.registerFlags,
		Setup: func(ctx context.Context, srv *grpcserver.Server, log *slog.Logger) error {
			if err := cfg.validate(); err != nil {
				return fmt.Errorf("invalid configuration: %w", err)
			}
			return setup(ctx, cfg, srv, log)
		},
	}.Main()
}

// setup builds the executor; ctx ends when the server starts shutting down.
func setup(ctx context.Context, cfg config, srv *grpcserver.Server, log *slog.Logger) error {
	metrics := controller.NewMetrics(cfg.dropIn.enabled)
	if err := metrics.Register(srv.Registry()); err != nil {
		return err
	}
	// The cluster of the chassis' -kubeconfig: the one that authenticates
	// and authorizes callers is the one the executor runs Jobs on.
	restCfg, err := srv.KubeRESTConfig()
	if err != nil {
		return err
	}
	shares := fairqueue.NewNamespaceShares(cfg.namespaceWeights, log)
	budget := configureClient(restCfg, cfg, shares)
	restCfg.Wrap(metrics.Transport)
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	podWrites, err := podwrites.NewClient(restCfg) // the same budget
	if err != nil {
		return err
	}
	if cfg.dropIn.enabled {
		log.Info("drop-in mode: probing for the built-in Job controller", "namespace", cfg.dropIn.probeNamespace, "wait", cfg.dropIn.probeWait)
		probe := dropin.Probe{Client: client, Namespace: cfg.dropIn.probeNamespace, Wait: cfg.dropIn.probeWait}
		if err := probe.Check(ctx); err != nil {
			return fmt.Errorf("drop-in mode: %w", err)
		}
	}
	if cfg.featureGates.WorkloadWithJob {
		if err := gang.Served(client.Discovery()); err != nil {
			return fmt.Errorf("feature gate WorkloadWithJob: %w", err)
		}
	}
	conn, err := plannerConn(cfg)
	if err != nil {
		return fmt.Errorf("planner client: %w", err)
	}
	planner := plannerclient.New(conn)
	for _, m := range planner.Collectors() {
		if err := srv.Registry().Register(m); err != nil {
			return err
		}
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	if cfg.weightAnnotations {
		if err := shares.Watch(factory.Core().V1().Namespaces().Informer()); err != nil {
			return fmt.Errorf("watching the namespaces' weights: %w", err)
		}
	}
	ctrl, err := controller.New(controller.Config{
		Client: client, PodWrites: podWrites, Informers: factory, Planner: planner,
		ManagedBy: cfg.managedBy, DropIn: cfg.dropIn.enabled, FeatureGates: cfg.featureGates, EventSource: cfg.eventSource(),
		Finalizer: cfg.trackingFinalizer(), Log: log, Metrics: metrics,
		NamespaceWeights: shares, APIBudget: budget,
	})
	if err != nil {
		return err
	}
	runner := &runner{Controller: ctrl}
	if cfg.lease.Elect {
		leaseClient, err := leader.ClientFor(restCfg)
		if err != nil {
			return err
		}
		runner.elector = leader.New(cfg.lease.WithIdentity(), leaseClient, log)
	}
	// SubmitJob creates Jobs as its caller; the controller creates their
	// pods as the executor.
	impersonate, err := svc.Impersonating(restCfg)
	if err != nil {
		return fmt.Errorf("impersonating client: %w", err)
	}
	srv.RegisterService(&jobplanev1.ExecutorService_ServiceDesc, svc.NewExecutorService(svc.Config{
		Client: client, Impersonate: impersonate, Jobs: ctrl.Jobs(), PodsOf: ctrl.PodsOf, Runner: runner,
		ManagedBy: cfg.managedBy, DropIn: cfg.dropIn.enabled, FeatureGates: cfg.featureGates, Log: log, Done: ctx.Done(),
	}))

	srv.Go("informers", func(ctx context.Context) error {
		factory.Start(ctx.Done())
		<-ctx.Done()
		factory.Shutdown()
		return nil
	})
	srv.Go("controller", func(ctx context.Context) error {
		defer conn.Close()
		defer planner.Close()
		if runner.elector == nil {
			return ctrl.Run(ctx, cfg.workers)
		}
		return runner.elector.Run(ctx, func(ctx context.Context) error { return ctrl.Run(ctx, cfg.workers) })
	})
	srv.AddReadinessCheck("caches", func(context.Context) error {
		if !ctrl.HasSynced() {
			return errors.New("the Job and pod caches have not synced")
		}
		return nil
	})
	srv.AddReadinessCheck("planner", planner.Ready)
	return nil
}

// plannerConn is the connection to the planner: TLS when a CA is given,
// with the executor's token when one is.
func plannerConn(cfg config) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if cfg.plannerCAFile != "" {
		var err error
		if creds, err = auth.ClientTLS(cfg.plannerCAFile); err != nil {
			return nil, err
		}
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// The chassis' codec: plans decode as the planner decodes requests
		// (vtprotobuf's decoder), and requests encode deterministically.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20),
			grpcserver.CallCodec()),
	}
	opts = append(opts, grpcserver.ClientWindows()...)
	// A call the planner sheds is made again after the delay it asks; a
	// shed stream is reopened with backoff and its syncs retried.
	opts = append(opts, retryinfo.DialOptions(retryinfo.DefaultPolicy)...)
	if cfg.plannerTokenFile != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.TokenFile(cfg.plannerTokenFile)))
	}
	return grpc.NewClient(cfg.plannerAddr, opts...)
}

// configureClient sets the executor's identity and API budget on restCfg,
// and returns the budget. No client timeout: it would cut the informers'
// watches too.
func configureClient(restCfg *rest.Config, cfg config, shares fairorder.Shares) *fairlimit.Limiter {
	restCfg.UserAgent = "jobplane-executor"
	// Built-in types only: protobuf, as kube-controller-manager talks, is
	// cheaper to decode and encode than JSON.
	restCfg.ContentType = "application/vnd.kubernetes.protobuf"
	restCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	restCfg.QPS, restCfg.Burst = float32(cfg.qps), cfg.burst
	budget := fairlimit.New(float32(cfg.qps), cfg.burst, shares)
	restCfg.RateLimiter = budget
	return budget
}

// runner is the controller with its leadership, as the gRPC service sees it.
type runner struct {
	*controller.Controller
	elector *leader.Elector
}

func (r *runner) Leader() (bool, string) {
	if r.elector == nil {
		return true, ""
	}
	return r.elector.Leader()
}
