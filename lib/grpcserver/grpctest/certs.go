package grpctest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority for tests: it issues server certificates for
// loopback and client certificates whose CN and O are a user and its groups,
// as Kubernetes reads them.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertFile is the CA certificate in PEM.
	CertFile string
	// Pool holds the CA certificate.
	Pool *x509.CertPool
	dir  string
}

// NewCA creates a CA whose files live in a directory removed when the test
// ends.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, dir: tb.TempDir(), Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	ca.CertFile = filepath.Join(ca.dir, "ca.crt")
	writePEM(tb, ca.CertFile, "CERTIFICATE", der)
	return ca
}

// KeyPair is an issued certificate and its key, as files and as loaded.
type KeyPair struct {
	CertFile, KeyFile string
	Certificate       tls.Certificate
}

// ServerCert issues a certificate for 127.0.0.1, ::1 and localhost, into
// files named after name.
func (ca *CA) ServerCert(tb testing.TB, name string) KeyPair {
	tb.Helper()
	return ca.issue(tb, name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// ClientCert issues a client certificate for user in groups.
func (ca *CA) ClientCert(tb testing.TB, user string, groups ...string) KeyPair {
	tb.Helper()
	return ca.issue(tb, "client-"+user, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(tb testing.TB, name string, tmpl *x509.Certificate) KeyPair {
	tb.Helper()
	key := newKey(tb)
	tmpl.SerialNumber = serial(tb)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	kp := KeyPair{CertFile: filepath.Join(ca.dir, name+".crt"), KeyFile: filepath.Join(ca.dir, name+".key")}
	writePEM(tb, kp.CertFile, "CERTIFICATE", der)
	writePEM(tb, kp.KeyFile, "EC PRIVATE KEY", keyDER)
	if kp.Certificate, err = tls.LoadX509KeyPair(kp.CertFile, kp.KeyFile); err != nil {
		tb.Fatal(err)
	}
	return kp
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// writePEM writes through a temporary file and a rename, as a rotation
// does, so a reader never sees half a file.
func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}
