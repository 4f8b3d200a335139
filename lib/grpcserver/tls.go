package grpcserver

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// recheckEvery bounds how often the files are looked at: a handshake costs
// at most one stat of each file per interval.
const recheckEvery = time.Second

// reloading holds what was parsed from files and parses them again when one
// of them changes (size or modification time, following symlinks, as a
// Kubernetes Secret volume swaps them). A change that does not parse (a
// rotation caught half-written) keeps the last good value and is logged.
type reloading[T any] struct {
	files []string
	parse func(contents [][]byte) (T, error)
	log   *slog.Logger

	mu      sync.Mutex
	checked time.Time
	stamps  []fileStamp
	value   T
}

type fileStamp struct {
	size    int64
	modTime time.Time
}

// newReloading parses the files once; failing that is a configuration error.
func newReloading[T any](log *slog.Logger, parse func([][]byte) (T, error), files ...string) (*reloading[T], error) {
	r := &reloading[T]{files: files, parse: parse, log: log}
	stamps, err := r.stat()
	if err != nil {
		return nil, err
	}
	if err := r.load(stamps); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *reloading[T]) stat() ([]fileStamp, error) {
	stamps := make([]fileStamp, len(r.files))
	for i, f := range r.files {
		fi, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		stamps[i] = fileStamp{size: fi.Size(), modTime: fi.ModTime()}
	}
	return stamps, nil
}

func (r *reloading[T]) load(stamps []fileStamp) error {
	contents := make([][]byte, len(r.files))
	for i, f := range r.files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		contents[i] = b
	}
	v, err := r.parse(contents)
	if err != nil {
		return err
	}
	r.value, r.stamps, r.checked = v, stamps, time.Now()
	return nil
}

// get returns the current value, parsing the files again if they changed
// since they were last looked at (at most once per recheckEvery).
func (r *reloading[T]) get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) < recheckEvery {
		return r.value
	}
	r.checked = time.Now()
	stamps, err := r.stat()
	if err != nil {
		r.log.Warn("TLS file unreadable; serving the last one read", "files", r.files, "err", err)
		return r.value
	}
	if equalStamps(stamps, r.stamps) {
		return r.value
	}
	if err := r.load(stamps); err != nil {
		r.log.Warn("TLS file changed but does not parse; serving the last one read", "files", r.files, "err", err)
		return r.value
	}
	r.log.Info("TLS file reloaded", "files", r.files)
	return r.value
}

func equalStamps(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].size != b[i].size || !a[i].modTime.Equal(b[i].modTime) {
			return false
		}
	}
	return true
}

// serverTLS is the server's key pair and, for mutual TLS, the client CA,
// both re-read when their files change: one for every listener.
type serverTLS struct {
	pair *reloading[*tls.Certificate]
	cas  *reloading[*x509.CertPool] // nil: no client certificates
}

func newServerTLS(cfg Config, log *slog.Logger) (*serverTLS, error) {
	pair, err := newReloading(log, func(b [][]byte) (*tls.Certificate, error) {
		c, err := tls.X509KeyPair(b[0], b[1])
		return &c, err
	}, cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls-cert-file and tls-key-file: %w", err)
	}
	st := &serverTLS{pair: pair}
	if cfg.ClientCAFile == "" {
		return st, nil
	}
	st.cas, err = newReloading(log, func(b [][]byte) (*x509.CertPool, error) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b[0]) {
			return nil, errors.New("no PEM certificate in it")
		}
		return pool, nil
	}, cfg.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("client-ca-file: %w", err)
	}
	return st, nil
}

// config is the TLS configuration of a listener speaking protocol (ALPN:
// "h2" for gRPC, "http/1.1" for the metrics port). Client certificates are
// verified when given, not required: a client may authenticate with a
// bearer token instead, and a kubelet probing /readyz presents none.
func (st *serverTLS) config(protocol string) *tls.Config {
	base := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{protocol},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return st.pair.get(), nil
		},
	}
	if st.cas == nil {
		return base
	}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := base.Clone()
		c.GetConfigForClient = nil
		c.ClientAuth = tls.VerifyClientCertIfGiven
		c.ClientCAs = st.cas.get()
		return c, nil
	}
	return base
}
