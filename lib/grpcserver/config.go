package grpcserver

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/jobplane/jobplane/lib/admission"
	"github.com/jobplane/jobplane/lib/auth"
)

// Config is what every jobplane gRPC server is configured with. Each field has
// a flag (and, through flagenv, an environment variable).
type Config struct {
	// Addr is the gRPC listen address (flag -grpc-addr).
	Addr string
	// MetricsAddr serves /healthz (liveness) and /readyz (readiness) to
	// anyone and /metrics to callers allowed get on it (a non-resource URL),
	// over HTTPS when gRPC is served over TLS, else HTTP (on loopback only,
	// as gRPC); empty disables it (flag -metrics-addr).
	MetricsAddr string
	// MaxRecvMsgBytes bounds a received message (flag -max-recv-msg-bytes);
	// 0 is the largest a priority level's bytes budget can ever take
	// (admission.Settings.LargestRequest).
	MaxRecvMsgBytes int
	// MaxSendMsgBytes bounds a sent message (flag -max-send-msg-bytes).
	MaxSendMsgBytes int
	// StreamWindowBytes is each call's HTTP/2 flow-control window: what the
	// transport buffers of a request not read yet, such as a call waiting
	// for admission. Fixed, it turns off grpc-go's window growth, which on a
	// fast link let every queued call buffer megabytes (flag
	// -stream-window-bytes).
	StreamWindowBytes int
	// MaxStreamsPerConn bounds the calls one connection has open at once
	// (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): with the window, what the
	// transport buffers of one connection (flag
	// -max-concurrent-streams-per-connection).
	MaxStreamsPerConn int
	// MaxConnsPerCaller bounds the connections of one caller (a tenant),
	// the services' own identities aside: a call on one more is refused and
	// its connection closed (flag -max-connections-per-caller).
	MaxConnsPerCaller int
	// MaxUnidentifiedConns bounds the connections none of whose calls is
	// authenticated yet; the oldest is closed to make room for a new one
	// (flag -max-unidentified-connections).
	MaxUnidentifiedConns int
	// MaxMetricsConns bounds the metrics port's connections; the oldest
	// not serving a request is closed to make room for a new one, and
	// there are more only while all serve one (flag
	// -max-metrics-connections).
	MaxMetricsConns int
	// FirstCallTimeout closes a connection none of whose calls is
	// authenticated within it, once none is open (flag
	// -first-call-timeout).
	FirstCallTimeout time.Duration
	// KeepaliveMinTime: clients pinging more often than this are disconnected
	// (flag -keepalive-min-time).
	KeepaliveMinTime time.Duration
	// KeepaliveTime: the server pings a connection idle this long
	// (flag -keepalive-time).
	KeepaliveTime time.Duration
	// KeepaliveTimeout: a connection not answering a ping within this is
	// closed (flag -keepalive-timeout).
	KeepaliveTimeout time.Duration
	// ShutdownDrain is how long the server reports NOT_SERVING before it stops
	// accepting calls, so that load balancers move away (flag -shutdown-drain).
	ShutdownDrain time.Duration
	// ShutdownTimeout bounds the wait for the long-lived work to return, then
	// again the wait for calls in flight; past it the server stops hard
	// (flag -shutdown-timeout).
	ShutdownTimeout time.Duration
	// ReadinessInterval is how often the readiness checks run, and how long
	// one may take before it counts as failing (flag -readiness-interval).
	ReadinessInterval time.Duration
	// LogLevel is debug, info, warn or error (flag -log-level).
	LogLevel string
	// Profiling serves Go's profiles under /debug/pprof/ on the metrics
	// port, to the callers allowed get on their non-resource URLs, as
	// kube-controller-manager's --profiling does (flag -profiling).
	Profiling bool

	// TLSCertFile and TLSKeyFile are the server's certificate (with its
	// chain) and key in PEM; both or neither. Set, gRPC is served over TLS
	// and the files are read again whenever they change, so a rotated
	// certificate is served without a restart (flags -tls-cert-file,
	// -tls-key-file).
	TLSCertFile string
	TLSKeyFile  string
	// ClientCAFile holds the CA certificates (PEM) that sign client
	// certificates: a client presenting one they signed is authenticated as
	// its subject's CN, in the groups of its O; a client presenting another is
	// refused in the handshake. Needs TLS; re-read when it changes (flag
	// -client-ca-file).
	ClientCAFile string
	// AllowInsecureNonLoopback allows plaintext gRPC on an address other
	// than loopback (behind a mesh that encrypts for it); without it,
	// plaintext is served on loopback only (flag -allow-insecure-non-loopback).
	AllowInsecureNonLoopback bool

	// Kubeconfig reaches the Kubernetes API that reviews tokens and
	// authorizes calls (and that the service itself uses); empty uses the
	// in-cluster configuration (flag -kubeconfig, default $KUBECONFIG).
	Kubeconfig string
	// Auth says how callers are authenticated and authorized.
	Auth auth.Config
	// Admission bounds the calls in flight and shares them fairly between
	// callers (lib/admission).
	Admission admission.Settings
}

// Defaults returns the configuration of a server listening on addr with its
// metrics on metricsAddr.
func Defaults(addr, metricsAddr string) Config {
	return Config{
		Addr:              addr,
		MetricsAddr:       metricsAddr,
		MaxSendMsgBytes:   64 << 20,
		StreamWindowBytes: 256 << 10,
		// HTTP/2's advised minimum, above what a caller can have admitted
		// (8 seats, 64 queued, 16 streams).
		MaxStreamsPerConn:    100,
		MaxConnsPerCaller:    64,
		MaxUnidentifiedConns: 1024,
		MaxMetricsConns:      256,
		FirstCallTimeout:     30 * time.Second,
		KeepaliveMinTime:     10 * time.Second,
		KeepaliveTime:        2 * time.Minute,
		KeepaliveTimeout:     20 * time.Second,
		ShutdownDrain:        2 * time.Second,
		ShutdownTimeout:      15 * time.Second,
		ReadinessInterval:    time.Second,
		LogLevel:             "info",
		Auth:                 auth.Defaults(),
		Admission:            admission.DefaultSettings(),
	}
}

// RegisterFlags binds the fields to flags of fs, with the current values as
// defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "grpc-addr", c.Addr, "gRPC listen address")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", c.MetricsAddr, "HTTP address (HTTPS with -tls-cert-file) of /metrics, for callers allowed get on it, and of /healthz and /readyz, for anyone; empty disables")
	fs.IntVar(&c.MaxRecvMsgBytes, "max-recv-msg-bytes", c.MaxRecvMsgBytes, "largest message received, in bytes; 0: the largest a priority level's bytes budget can take (max-inflight-bytes / 2 / request-memory-per-byte, at most 64 MiB), for a larger one is refused anyway, and until it is charged it is outside the budget")
	fs.IntVar(&c.MaxSendMsgBytes, "max-send-msg-bytes", c.MaxSendMsgBytes, "largest message sent, in bytes")
	fs.IntVar(&c.StreamWindowBytes, "stream-window-bytes", c.StreamWindowBytes, "HTTP/2 flow-control window of each call: the most the server buffers of a request it has not read (a call waiting its turn), at least 65535")
	fs.IntVar(&c.MaxStreamsPerConn, "max-concurrent-streams-per-connection", c.MaxStreamsPerConn, "calls open at once on one connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); a client queues more itself")
	fs.IntVar(&c.MaxConnsPerCaller, "max-connections-per-caller", c.MaxConnsPerCaller, "connections one caller (a ServiceAccount's namespace, any other user) keeps open; a call on one more is refused (RESOURCE_EXHAUSTED) and its connection closed; the -system-users are not bounded")
	fs.IntVar(&c.MaxUnidentifiedConns, "max-unidentified-connections", c.MaxUnidentifiedConns, "connections no call of which is authenticated yet; the oldest is closed to make room for a new one")
	fs.IntVar(&c.MaxMetricsConns, "max-metrics-connections", c.MaxMetricsConns, "connections to the metrics port (/metrics, /healthz, /readyz); the oldest not serving a request is closed to make room for a new one")
	fs.DurationVar(&c.FirstCallTimeout, "first-call-timeout", c.FirstCallTimeout, "close a connection no call of which is authenticated within this, once none is open (health checks)")
	fs.DurationVar(&c.KeepaliveMinTime, "keepalive-min-time", c.KeepaliveMinTime, "clients pinging more often are disconnected")
	fs.DurationVar(&c.KeepaliveTime, "keepalive-time", c.KeepaliveTime, "ping connections idle this long")
	fs.DurationVar(&c.KeepaliveTimeout, "keepalive-timeout", c.KeepaliveTimeout, "close connections not answering a ping within this")
	fs.DurationVar(&c.ShutdownDrain, "shutdown-drain", c.ShutdownDrain, "time reported NOT_SERVING before stopping on SIGTERM")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "wait for long-lived work, then for calls in flight, at most this long each; then stop hard")
	fs.DurationVar(&c.ReadinessInterval, "readiness-interval", c.ReadinessInterval, "run the readiness checks this often; a check taking longer fails")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.BoolVar(&c.Profiling, "profiling", c.Profiling, "serve Go's profiles under /debug/pprof/ on the metrics port, to callers allowed get on them (as /metrics); a CPU profile is at most 50 s (the port's write timeout)")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", c.TLSCertFile, "PEM certificate (and chain) served over TLS, re-read when it changes; empty serves plaintext, on loopback only")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", c.TLSKeyFile, "PEM key of -tls-cert-file")
	fs.StringVar(&c.ClientCAFile, "client-ca-file", c.ClientCAFile, "PEM CA certificates of client certificates (mutual TLS: CN is the user, O the groups); a certificate they did not sign is refused")
	fs.BoolVar(&c.AllowInsecureNonLoopback, "allow-insecure-non-loopback", c.AllowInsecureNonLoopback, "serve plaintext gRPC on an address other than loopback")
	kubeconfig := c.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	fs.StringVar(&c.Kubeconfig, "kubeconfig", kubeconfig, "kubeconfig of the cluster, whose API authenticates and authorizes callers (default $KUBECONFIG); empty uses the in-cluster configuration")
	c.Auth.RegisterFlags(fs)
	c.Admission.RegisterFlags(fs)
}

// RecvMsgBytes is the largest message the server receives.
func (c Config) RecvMsgBytes() int {
	if c.MaxRecvMsgBytes > 0 {
		return c.MaxRecvMsgBytes
	}
	return c.Admission.LargestRequest()
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("grpc-addr %q: %w", c.Addr, err))
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("tls-cert-file and tls-key-file go together: set both or neither"))
	}
	if c.ClientCAFile != "" && !c.TLS() {
		errs = append(errs, errors.New("client-ca-file needs TLS: set tls-cert-file and tls-key-file"))
	}
	if !c.TLS() && !c.AllowInsecureNonLoopback && !IsLoopback(c.Addr) {
		errs = append(errs, fmt.Errorf("grpc-addr %q is not a loopback address: serve TLS (tls-cert-file, tls-key-file) or allow plaintext explicitly (allow-insecure-non-loopback)", c.Addr))
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("metrics-addr %q: %w", c.MetricsAddr, err))
		} else if !IsLoopback(c.MetricsAddr) {
			// Bearer tokens travel to /metrics as to gRPC.
			if !c.TLS() && !c.AllowInsecureNonLoopback {
				errs = append(errs, fmt.Errorf("metrics-addr %q is not a loopback address: serve TLS (tls-cert-file, tls-key-file) or allow plaintext explicitly (allow-insecure-non-loopback)", c.MetricsAddr))
			}
			if c.Auth.AllowUnauthenticatedMetrics {
				errs = append(errs, fmt.Errorf("allow-unauthenticated-metrics is for development on loopback only: metrics-addr %q is not a loopback address", c.MetricsAddr))
			}
		}
	}
	if err := c.Admission.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxRecvMsgBytes < 0 {
		errs = append(errs, fmt.Errorf("max-recv-msg-bytes must not be negative, got %d", c.MaxRecvMsgBytes))
	}
	if c.StreamWindowBytes < 65535 || c.StreamWindowBytes > 64<<20 {
		errs = append(errs, fmt.Errorf("stream-window-bytes must be from 65535 (HTTP/2's initial window) to 64 MiB, got %d", c.StreamWindowBytes))
	}
	for _, n := range []struct {
		name  string
		value int
	}{
		{"max-concurrent-streams-per-connection", c.MaxStreamsPerConn},
		{"max-connections-per-caller", c.MaxConnsPerCaller},
		{"max-unidentified-connections", c.MaxUnidentifiedConns},
		{"max-metrics-connections", c.MaxMetricsConns},
	} {
		if n.value <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", n.name, n.value))
		}
	}
	if c.MaxSendMsgBytes <= 0 {
		errs = append(errs, fmt.Errorf("max-send-msg-bytes must be positive, got %d", c.MaxSendMsgBytes))
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"first-call-timeout", c.FirstCallTimeout},
		{"keepalive-min-time", c.KeepaliveMinTime},
		{"keepalive-time", c.KeepaliveTime},
		{"keepalive-timeout", c.KeepaliveTimeout},
		{"shutdown-timeout", c.ShutdownTimeout},
		{"readiness-interval", c.ReadinessInterval},
	} {
		if d.value <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.name, d.value))
		}
	}
	if c.ShutdownDrain < 0 {
		errs = append(errs, fmt.Errorf("shutdown-drain must not be negative, got %s", c.ShutdownDrain))
	}
	if _, err := ParseLogLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if err := c.Auth.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Auth.Anonymous && !IsLoopback(c.Addr) {
		errs = append(errs, fmt.Errorf("authn-anonymous is for development on loopback only: grpc-addr %q is not a loopback address", c.Addr))
	}
	return errors.Join(errs...)
}

// KubeRESTConfig is the Kubernetes client configuration of Kubeconfig, or
// the in-cluster one when it is empty.
func (c Config) KubeRESTConfig() (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if c.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	return cfg, nil
}

// TLS says whether gRPC is served over TLS.
func (c Config) TLS() bool { return c.TLSCertFile != "" && c.TLSKeyFile != "" }

// IsLoopback says whether addr (host:port) listens on loopback only:
// "localhost" or a loopback IP. An empty host or 0.0.0.0 is every interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ParseLogLevel maps debug, info, warn and error to slog levels.
func ParseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}
