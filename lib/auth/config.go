package auth

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"
)

// Config is how a server authenticates and authorizes. Each field has a flag
// (and, through flagenv, an environment variable).
type Config struct {
	// Anonymous gives callers without credentials the identity
	// system:anonymous (group system:unauthenticated), authorized like any
	// other; for development on loopback only (flag -authn-anonymous).
	Anonymous bool
	// Audiences the bearer tokens must be issued for, comma-separated;
	// empty accepts the API server's own audiences (flag -authn-audience).
	Audiences string
	// TokenCacheTTL bounds how long a TokenReview's answer is reused, and
	// never past the token's own expiry (flag -authn-cache-ttl).
	TokenCacheTTL time.Duration
	// TokenCacheSize bounds how many answers are kept, accepted and refused
	// tokens each (flag -authn-cache-size).
	TokenCacheSize int
	// AuthzCacheTTL bounds how long a SubjectAccessReview's answer is
	// reused: a revoked permission is effective within it (flag
	// -authz-cache-ttl).
	AuthzCacheTTL time.Duration
	// AuthzCacheSize bounds how many answers are kept (flag -authz-cache-size).
	AuthzCacheSize int
	// AllowUnauthenticatedPureRPCs lets callers without credentials call
	// the RPCs that need authentication only (the planner's, PreviewSchedule)
	// (flag -allow-unauthenticated-pure-rpcs).
	AllowUnauthenticatedPureRPCs bool
	// AllowUnauthenticatedMetrics serves /metrics (everything on the
	// metrics address but /healthz and /readyz, which are always open) to
	// anyone, without authentication or authorization; for development on a
	// loopback metrics address only (flag -allow-unauthenticated-metrics).
	AllowUnauthenticatedMetrics bool
}

// Defaults returns the configuration of a server that requires credentials.
func Defaults() Config {
	return Config{
		TokenCacheTTL:  10 * time.Second,
		TokenCacheSize: 1024,
		AuthzCacheTTL:  10 * time.Second,
		AuthzCacheSize: 4096,
	}
}

// RegisterFlags binds the fields to flags of fs, with the current values as
// defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Anonymous, "authn-anonymous", c.Anonymous, "callers without credentials are system:anonymous (authorized like anyone); loopback development only")
	fs.StringVar(&c.Audiences, "authn-audience", c.Audiences, "audiences bearer tokens must be issued for, comma-separated; empty: the API server's")
	fs.DurationVar(&c.TokenCacheTTL, "authn-cache-ttl", c.TokenCacheTTL, "reuse a TokenReview's answer this long at most (never past the token's expiry)")
	fs.IntVar(&c.TokenCacheSize, "authn-cache-size", c.TokenCacheSize, "TokenReview answers kept, of accepted and of refused tokens each")
	fs.DurationVar(&c.AuthzCacheTTL, "authz-cache-ttl", c.AuthzCacheTTL, "reuse a SubjectAccessReview's answer this long at most: a revoked permission is effective within it")
	fs.IntVar(&c.AuthzCacheSize, "authz-cache-size", c.AuthzCacheSize, "SubjectAccessReview answers kept")
	fs.BoolVar(&c.AllowUnauthenticatedPureRPCs, "allow-unauthenticated-pure-rpcs", c.AllowUnauthenticatedPureRPCs, "let callers without credentials call the RPCs that need authentication only (PlannerService, PreviewSchedule)")
	fs.BoolVar(&c.AllowUnauthenticatedMetrics, "allow-unauthenticated-metrics", c.AllowUnauthenticatedMetrics, "serve /metrics to anyone, unauthenticated and unauthorized (otherwise: to callers allowed get on the non-resource URL); loopback -metrics-addr only, for development")
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	if c.TokenCacheTTL < 0 {
		errs = append(errs, fmt.Errorf("authn-cache-ttl must not be negative, got %s", c.TokenCacheTTL))
	}
	if c.AuthzCacheTTL < 0 {
		errs = append(errs, fmt.Errorf("authz-cache-ttl must not be negative, got %s", c.AuthzCacheTTL))
	}
	if c.TokenCacheSize < 1 {
		errs = append(errs, fmt.Errorf("authn-cache-size must be positive, got %d", c.TokenCacheSize))
	}
	if c.AuthzCacheSize < 1 {
		errs = append(errs, fmt.Errorf("authz-cache-size must be positive, got %d", c.AuthzCacheSize))
	}
	for _, a := range strings.Split(c.Audiences, ",") {
		if c.Audiences != "" && strings.TrimSpace(a) == "" {
			errs = append(errs, fmt.Errorf("authn-audience %q has an empty audience", c.Audiences))
			break
		}
	}
	return errors.Join(errs...)
}

// audiences is the list of Audiences.
func (c Config) audiences() []string {
	if c.Audiences == "" {
		return nil
	}
	var out []string
	for _, a := range strings.Split(c.Audiences, ",") {
		out = append(out, strings.TrimSpace(a))
	}
	return out
}
