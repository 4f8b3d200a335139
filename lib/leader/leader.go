// Package leader runs a service's leading work only while this replica holds a
// Lease (client-go leaderelection), and says who holds it, so that a standby
// can name the leader when it refuses a write.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Config is the Lease and its timing (the kube-controller-manager flags).
type Config struct {
	Namespace     string
	Name          string
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// Elector holds or waits for the Lease.
type Elector struct {
	cfg     Config
	client  kubernetes.Interface
	log     *slog.Logger
	leading atomic.Bool
	started atomic.Bool  // set before the leading work starts
	holder  atomic.Value // string
}

// ClientFor is a client of restCfg for the Lease alone, with a rate
// limiter of its own at the same QPS and burst, as kube-controller-manager
// gives its leader election: the requests a service makes for its tenants,
// however many wait, never keep a renewal waiting.
func ClientFor(restCfg *rest.Config) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(restCfg)
	cfg.RateLimiter = nil
	cfg.UserAgent += "/leader-election"
	return kubernetes.NewForConfig(cfg)
}

// New returns an elector.
func New(cfg Config, client kubernetes.Interface, log *slog.Logger) *Elector {
	e := &Elector{cfg: cfg, client: client, log: log}
	e.holder.Store("")
	return e
}

// Leader says whether this replica leads and who does.
func (e *Elector) Leader() (bool, string) { return e.leading.Load(), e.holder.Load().(string) }

// Run campaigns for the Lease and runs lead while holding it. It returns
// when ctx ends (releasing the Lease) or with an error when the Lease is
// lost: a replica that lost it may no longer write, and restarting is the
// simple way back to a consistent standby.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context) error) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name},
		Client:     e.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.cfg.Identity},
	}
	leadErr := make(chan error, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   e.cfg.LeaseDuration,
		RenewDeadline:   e.cfg.RenewDeadline,
		RetryPeriod:     e.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            e.cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				e.started.Store(true)
				e.leading.Store(true)
				e.log.Info("leading", "lease", e.cfg.Namespace+"/"+e.cfg.Name, "identity", e.cfg.Identity)
				leadErr <- lead(ctx)
			},
			OnStoppedLeading: func() { e.leading.Store(false) },
			OnNewLeader: func(identity string) {
				e.holder.Store(identity)
				if identity != e.cfg.Identity {
					e.log.Info("standing by", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx)
	// le.Run does not wait for the leading work: wait here, so that nothing
	// of it still runs when the caller tears down what it uses.
	var leadResult error
	if e.started.Load() {
		leadResult = <-leadErr
	}
	if ctx.Err() != nil {
		return leadResult
	}
	if leadResult != nil {
		return leadResult
	}
	return errors.New("lost the leader Lease")
}
