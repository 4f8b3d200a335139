package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// What one jobplane service presents to another it calls.

// tokenFileRereadEvery: the kubelet rotates a projected token well before
// it expires (at 80% of its life); reading it again this often follows.
const tokenFileRereadEvery = time.Minute

// TokenFile returns per-call credentials sending the bearer token held in
// path (a projected service account token), read again every minute.
func TokenFile(path string) credentials.PerRPCCredentials {
	return &tokenFile{path: path}
}

type tokenFile struct {
	path string

	mu    sync.Mutex
	read  time.Time
	token string
}

func (t *tokenFile) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token == "" || time.Since(t.read) > tokenFileRereadEvery {
		b, err := os.ReadFile(t.path)
		if err != nil {
			if t.token == "" {
				return nil, fmt.Errorf("reading the token to call with: %w", err)
			}
		} else if tok := strings.TrimSpace(string(b)); tok != "" {
			t.token, t.read = tok, time.Now()
		}
	}
	return map[string]string{"authorization": "Bearer " + t.token}, nil
}

// RequireTransportSecurity is false so that loopback plaintext works; the
// caller's configuration refuses a token over plaintext elsewhere.
func (t *tokenFile) RequireTransportSecurity() bool { return false }

// ClientTLS returns transport credentials verifying the server against the
// CA certificates (PEM) in caFile.
func ClientTLS(caFile string) (credentials.TransportCredentials, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}), nil
}
