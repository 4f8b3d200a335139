package leader

import (
	"errors"
	"flag"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
)

// Flags are the leader-election flags of a service (kube-controller-manager's
// names and defaults).
type Flags struct {
	Elect bool
	Config
}

// Register registers -leader-elect and its Lease flags; the Lease is named
// id in kube-system unless told otherwise.
func (f *Flags) Register(fs *flag.FlagSet, id string) {
	fs.BoolVar(&f.Elect, "leader-elect", true, "run the control loop only while holding a Lease")
	fs.StringVar(&f.Namespace, "leader-elect-namespace", "kube-system", "namespace of the Lease")
	fs.StringVar(&f.Name, "leader-elect-id", id, "name of the Lease")
	fs.DurationVar(&f.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits before taking an unrenewed Lease")
	fs.DurationVar(&f.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing before giving up")
	fs.DurationVar(&f.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "wait between Lease attempts")
}

// Validate checks the timing, as kube-controller-manager does.
func (f *Flags) Validate() error {
	if f.Elect && !(f.LeaseDuration > f.RenewDeadline && f.RenewDeadline > f.RetryPeriod && f.RetryPeriod > 0) {
		return errors.New("want leader-elect-lease-duration > leader-elect-renew-deadline > leader-elect-retry-period > 0")
	}
	return nil
}

// WithIdentity is the Lease configuration with this replica's identity: its
// host name and a unique suffix, as kube-controller-manager's.
func (f *Flags) WithIdentity() Config {
	cfg := f.Config
	hostname, _ := os.Hostname()
	cfg.Identity = hostname + "_" + string(uuid.NewUUID())
	return cfg
}
