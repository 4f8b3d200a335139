package grpcserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/grpcserver/grpctest"
)

// tlsServer serves the planner over TLS with pair and, when clientCA is
// not nil, mutual TLS with it.
func tlsServer(t *testing.T, pair grpctest.KeyPair, clientCA *grpctest.CA) *grpctest.Server {
	t.Helper()
	cfg := fastShutdown()
	cfg.TLSCertFile, cfg.TLSKeyFile = pair.CertFile, pair.KeyFile
	if clientCA != nil {
		cfg.ClientCAFile = clientCA.CertFile
	}
	return grpctest.StartWith(t, grpctest.Options{Config: &cfg}, func(s *grpcserver.Server) {
		s.RegisterService(&jobplanev1.PlannerService_ServiceDesc, panickyPlanner{})
	})
}

// handshake connects over TLS trusting roots, presenting client when not
// nil, and returns the server's leaf certificate.
func handshake(addr string, roots *x509.CertPool, client *tls.Certificate) (*x509.Certificate, error) {
	cfg := &tls.Config{RootCAs: roots, NextProtos: []string{"h2"}}
	if client != nil {
		// Presented whatever CAs the server names as acceptable, as a
		// client that wants in would.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return client, nil }
	}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// TLS 1.3 reports a refused client certificate on the first read.
	_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := conn.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
		return nil, err
	}
	return conn.ConnectionState().PeerCertificates[0], nil
}

func isTimeout(err error) bool {
	ne, ok := err.(interface{ Timeout() bool })
	return ok && ne.Timeout()
}

func TestTLSServesTheCertificateFilesAndReloadsThemWhenTheyChange(t *testing.T) {
	first, second := grpctest.NewCA(t, "first"), grpctest.NewCA(t, "second")
	pair := first.ServerCert(t, "server")
	srv := tlsServer(t, pair, nil)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(mustRead(t, first.CertFile))
	roots.AppendCertsFromPEM(mustRead(t, second.CertFile))

	cert, err := handshake(srv.Addr, roots, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Issuer.CommonName != "first" {
		t.Fatalf("served a certificate issued by %q", cert.Issuer.CommonName)
	}

	// Rotate: the new pair replaces the files in place, as a Secret update does.
	rotated := second.ServerCert(t, "rotated")
	replace(t, rotated.CertFile, pair.CertFile)
	replace(t, rotated.KeyFile, pair.KeyFile)
	eventually(t, 5*time.Second, "the rotated certificate is served", func() bool {
		cert, err := handshake(srv.Addr, roots, nil)
		return err == nil && cert.Issuer.CommonName == "second"
	})

	// A half-written rotation keeps the last good pair.
	if err := os.WriteFile(pair.KeyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if cert, err := handshake(srv.Addr, roots, nil); err != nil || cert.Issuer.CommonName != "second" {
		t.Fatalf("after a broken rotation: %v, %v", cert, err)
	}
}

func TestMutualTLSRefusesClientCertificatesOfAnotherCA(t *testing.T) {
	ca, other := grpctest.NewCA(t, "jobplane"), grpctest.NewCA(t, "other")
	srv := tlsServer(t, ca.ServerCert(t, "server"), ca)

	good := ca.ClientCert(t, "alice", "team-a")
	if _, err := handshake(srv.Addr, ca.Pool, &good.Certificate); err != nil {
		t.Errorf("a client certificate of the client CA: %v", err)
	}
	foreign := other.ClientCert(t, "mallory", "system:masters")
	if _, err := handshake(srv.Addr, ca.Pool, &foreign.Certificate); err == nil {
		t.Error("a client certificate of another CA was accepted in the handshake")
	}
	// Without a certificate the handshake succeeds: a bearer token may follow.
	if _, err := handshake(srv.Addr, ca.Pool, nil); err != nil {
		t.Errorf("no client certificate: %v", err)
	}

	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: ca.Pool, Certificates: []tls.Certificate{good.Certificate},
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("gRPC over mutual TLS: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replace writes the contents of from over to through a rename.
func replace(t *testing.T, from, to string) {
	t.Helper()
	if err := os.WriteFile(to+".new", mustRead(t, from), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(to+".new", to); err != nil {
		t.Fatal(err)
	}
}
