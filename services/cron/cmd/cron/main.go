// Command cron serves jobplane.v1.CronService and runs jobplane CronJobs:
// informers, workers and leader election run beside gRPC in one lifecycle,
// and every run is handed to the executor.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/auth"
	"github.com/jobplane/jobplane/lib/cronapi"
	"github.com/jobplane/jobplane/lib/fairlimit"
	"github.com/jobplane/jobplane/lib/fairorder"
	"github.com/jobplane/jobplane/lib/fairqueue"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/leader"
	"github.com/jobplane/jobplane/lib/retryinfo"
	"github.com/jobplane/jobplane/services/cron/internal/controller"
	"github.com/jobplane/jobplane/services/cron/internal/svc"
)

// config is the cron service's own configuration (flags with CRON_*
// environment fallbacks).
type config struct {
	executorAddr      string
	executorCAFile    string
	executorTokenFile string
	workers           int
	qps               float64
	burst             int
	// namespaceWeights are the namespaces' shares of the workers' turns and
	// of the API budget.
	namespaceWeights fairorder.Weights
	// weightAnnotations reads the namespaces' weights from their
	// annotation, over namespaceWeights.
	weightAnnotations bool
	lease             leader.Flags
	// dropIn runs batch/v1 CronJobs in place of the built-in CronJob
	// controller.
	dropIn bool
	// customCronJobs runs cronjobs.jobplane.dev (false: batch/v1's only,
	// where the custom resource is not installed).
	customCronJobs bool
}

func (c *config) registerFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.executorAddr, "executor-addr", "127.0.0.1:50052", "address of the ExecutorService, which creates and deletes the runs' Jobs")
	fs.StringVar(&c.executorCAFile, "executor-ca-file", "", "PEM CA certificates of the executor's TLS certificate; empty calls it in plaintext (loopback only)")
	fs.StringVar(&c.executorTokenFile, "executor-token-file", "", "file holding the bearer token to call the executor with (a projected service account token; read again every minute); empty sends none")
	fs.IntVar(&c.workers, "workers", 5, "CronJobs synced at once")
	fs.Float64Var(&c.qps, "kube-api-qps", 20, "Kubernetes API requests per second")
	fs.IntVar(&c.burst, "kube-api-burst", 30, "Kubernetes API request burst")
	fs.Var(&c.namespaceWeights, "namespace-weights", "namespaces' shares of the workers' turns and of the Kubernetes API budget, as team-a=4,team-b=2 (weights 1 to 1000); a namespace not listed has weight 1")
	fs.BoolVar(&c.weightAnnotations, "namespace-weight-annotations", true, "a namespace's annotation "+fairqueue.WeightAnnotation+" (1 to 1000; the executor's) sets its weight, over -namespace-weights; needs list and watch on namespaces")
	fs.BoolVar(&c.dropIn, "drop-in", false, "run batch/v1 CronJobs too, in place of kube-controller-manager's CronJob controller (run it with --controllers=*,-cronjob-controller): their Jobs owned by them, their status in batch/v1's status, jobplane's extensions from annotations under cron.jobplane.dev/, events from cronjob-controller and the reference's cronjob_controller_* metrics")
	fs.BoolVar(&c.customCronJobs, "jobplane-cronjobs", true, "run jobplane's CronJobs (cronjobs.jobplane.dev); false, with -drop-in, where the custom resource is not installed")
	c.lease.Register(fs, "jobplane-cron")
}

// eventSource is the component of the events: the built-in controller's in
// drop-in mode, so that what reads them finds them.
func (c *config) eventSource() string {
	if c.dropIn {
		return "cronjob-controller"
	}
	return "jobplane-cron"
}

func (c *config) validate() error {
	var errs []error
	if c.executorAddr == "" {
		errs = append(errs, errors.New("executor-addr is required"))
	}
	if c.executorCAFile == "" && !grpcserver.IsLoopback(c.executorAddr) {
		errs = append(errs, fmt.Errorf("executor-addr %q is not a loopback address: call it over TLS (executor-ca-file)", c.executorAddr))
	}
	if !c.customCronJobs && !c.dropIn {
		errs = append(errs, errors.New("-jobplane-cronjobs=false runs no CronJobs at all without -drop-in"))
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
	grpcserver.Command{
		Name:   "cron",
		Server: grpcserver.Defaults("127.0.0.1:50053", "127.0.0.1:9093"),
		Flags:  cfg.registerFlags,
		Setup: func(ctx context.Context, srv *grpcserver.Server, log *slog.Logger) error {
			if err := cfg.validate(); err != nil {
				return fmt.Errorf("invalid configuration: %w", err)
			}
			return setup(ctx, cfg, srv, log)
		},
	}.Main()
}

// setup builds the cron service; ctx ends when the server starts shutting
// down.
func setup(ctx context.Context, cfg config, srv *grpcserver.Server, log *slog.Logger) error {
	metrics := controller.NewMetrics(cfg.dropIn)
	if err := metrics.Register(srv.Registry()); err != nil {
		return err
	}
	restCfg, err := srv.KubeRESTConfig()
	if err != nil {
		return err
	}
	restCfg.UserAgent = "jobplane-cron"
	restCfg.QPS, restCfg.Burst = float32(cfg.qps), cfg.burst
	restCfg.Wrap(metrics.Transport)
	shares := fairqueue.NewNamespaceShares(cfg.namespaceWeights, log)
	kube, err := kubernetes.NewForConfig(fairBudget(restCfg, cfg, shares))
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(fairBudget(restCfg, cfg, shares))
	if err != nil {
		return err
	}
	conn, err := executorConn(cfg)
	if err != nil {
		return fmt.Errorf("executor client: %w", err)
	}
	jobInformers := informers.NewSharedInformerFactory(kube, 0)
	if cfg.weightAnnotations {
		if err := shares.Watch(jobInformers.Core().V1().Namespaces().Informer()); err != nil {
			return fmt.Errorf("watching the namespaces' weights: %w", err)
		}
	}
	var cronJobs dynamic.NamespaceableResourceInterface
	var cronJobInformers dynamicinformer.DynamicSharedInformerFactory
	if cfg.customCronJobs {
		cronJobs = dyn.Resource(cronapi.GroupVersionResource)
		cronJobInformers = dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	}
	ctrl, err := controller.New(controller.Config{
		Kube: kube, Informers: jobInformers, CronJobs: cronJobs, CronJobInformers: cronJobInformers,
		DropIn: cfg.dropIn, EventSource: cfg.eventSource(), NamespaceWeights: shares,
		Executor: jobplanev1.NewExecutorServiceClient(conn), Local: time.Local, Log: log, Metrics: metrics,
	})
	if err != nil {
		return err
	}
	var elector *leader.Elector
	if cfg.lease.Elect {
		leaseClient, err := leader.ClientFor(restCfg)
		if err != nil {
			return err
		}
		elector = leader.New(cfg.lease.WithIdentity(), leaseClient, log)
		ctrl.SetLeader(elector.Leader)
	}
	srv.RegisterService(&jobplanev1.CronService_ServiceDesc, svc.NewCronService(svc.Config{
		CronJobs: cronJobs, Kube: kube, Runs: ctrl, DropIn: cfg.dropIn, Local: time.Local, Log: log, Done: ctx.Done(),
	}))

	srv.Go("informers", func(ctx context.Context) error {
		jobInformers.Start(ctx.Done())
		if cronJobInformers != nil {
			cronJobInformers.Start(ctx.Done())
		}
		<-ctx.Done()
		jobInformers.Shutdown()
		if cronJobInformers != nil {
			cronJobInformers.Shutdown()
		}
		return nil
	})
	srv.Go("controller", func(ctx context.Context) error {
		defer conn.Close()
		if elector == nil {
			return ctrl.Run(ctx, cfg.workers)
		}
		return elector.Run(ctx, func(ctx context.Context) error { return ctrl.Run(ctx, cfg.workers) })
	})
	srv.AddReadinessCheck("caches", func(context.Context) error {
		if !ctrl.HasSynced() {
			return errors.New("the CronJob and Job caches have not synced")
		}
		return nil
	})
	return nil
}

// fairBudget is restCfg with an API budget of its own (as client-go gives
// each client), shared fairly between namespaces then CronJobs
// (fairlimit), by their shares: a namespace whose CronJobs are all due at
// once takes its turns beside another's one CronJob instead of before it.
func fairBudget(restCfg *rest.Config, cfg config, shares fairorder.Shares) *rest.Config {
	c := rest.CopyConfig(restCfg)
	c.RateLimiter = fairlimit.New(float32(cfg.qps), cfg.burst, shares)
	return c
}

// executorConn is the connection to the executor: TLS when a CA is given,
// with the cron service's token when one is.
func executorConn(cfg config) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if cfg.executorCAFile != "" {
		var err error
		if creds, err = auth.ClientTLS(cfg.executorCAFile); err != nil {
			return nil, err
		}
	}
	// A run the executor sheds is submitted again after the delay it asks.
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, retryinfo.DialOptions(retryinfo.DefaultPolicy)...)
	opts = append(opts, grpcserver.ClientWindows()...)
	if cfg.executorTokenFile != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.TokenFile(cfg.executorTokenFile)))
	}
	return grpc.NewClient(cfg.executorAddr, opts...)
}
