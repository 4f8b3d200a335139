package grpcserver

import (
	"strings"
	"testing"
)

func TestDefaultsAreValid(t *testing.T) {
	if err := Defaults("127.0.0.1:50051", "127.0.0.1:9091").Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateReportsEveryProblemAtOnce(t *testing.T) {
	cfg := Defaults("no-port", "also-no-port")
	cfg.MaxRecvMsgBytes = -1
	cfg.KeepaliveTime = -1
	cfg.ShutdownDrain = -1
	cfg.ReadinessInterval = 0
	cfg.LogLevel = "chatty"
	err := cfg.Validate()
	if err == nil {
		t.Fatal("invalid configuration accepted")
	}
	for _, want := range []string{"grpc-addr", "metrics-addr", "max-recv-msg-bytes", "keepalive-time", "shutdown-drain", "readiness-interval", "log-level"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
}

func TestEmptyMetricsAddrDisablesMetrics(t *testing.T) {
	if err := Defaults("127.0.0.1:0", "").Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestPlaintextIsServedOnLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		addr, tlsCert, tlsKey string
		allowInsecure         bool
		wantErr               string
	}{
		{addr: "127.0.0.1:50051"},
		{addr: "[::1]:50051"},
		{addr: "localhost:50051"},
		{addr: "0.0.0.0:50051", wantErr: "not a loopback address"},
		{addr: ":50051", wantErr: "not a loopback address"},
		{addr: "10.0.0.7:50051", wantErr: "not a loopback address"},
		{addr: "0.0.0.0:50051", allowInsecure: true},
		{addr: "0.0.0.0:50051", tlsCert: "tls.crt", tlsKey: "tls.key"},
		{addr: "0.0.0.0:50051", tlsCert: "tls.crt", wantErr: "tls-cert-file and tls-key-file go together"},
	} {
		cfg := Defaults(tc.addr, "")
		cfg.TLSCertFile, cfg.TLSKeyFile, cfg.AllowInsecureNonLoopback = tc.tlsCert, tc.tlsKey, tc.allowInsecure
		checkValidate(t, cfg, tc.wantErr, tc)
	}
}

func TestClientCANeedsTLS(t *testing.T) {
	cfg := Defaults("127.0.0.1:50051", "")
	cfg.ClientCAFile = "ca.crt"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "client-ca-file needs TLS") {
		t.Errorf("client CA without TLS: %v", err)
	}
}

func TestMetricsAreServedInPlaintextAndOpenOnLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		metricsAddr         string
		tls, allowInsecure  bool
		unauthenticatedOpen bool
		wantErr             string
	}{
		{metricsAddr: "127.0.0.1:9091"},
		{metricsAddr: "127.0.0.1:9091", unauthenticatedOpen: true},
		{metricsAddr: "localhost:9091", unauthenticatedOpen: true},
		{metricsAddr: "", unauthenticatedOpen: true},
		{metricsAddr: "0.0.0.0:9091", wantErr: `metrics-addr "0.0.0.0:9091" is not a loopback address`},
		{metricsAddr: "0.0.0.0:9091", tls: true},
		{metricsAddr: "0.0.0.0:9091", allowInsecure: true},
		{metricsAddr: "0.0.0.0:9091", tls: true, unauthenticatedOpen: true, wantErr: "allow-unauthenticated-metrics is for development on loopback only"},
		{metricsAddr: ":9091", allowInsecure: true, unauthenticatedOpen: true, wantErr: "allow-unauthenticated-metrics is for development on loopback only"},
	} {
		cfg := Defaults("127.0.0.1:50051", tc.metricsAddr)
		if tc.tls {
			cfg.TLSCertFile, cfg.TLSKeyFile = "tls.crt", "tls.key"
		}
		cfg.AllowInsecureNonLoopback = tc.allowInsecure
		cfg.Auth.AllowUnauthenticatedMetrics = tc.unauthenticatedOpen
		checkValidate(t, cfg, tc.wantErr, tc)
	}
}

// checkValidate checks that cfg is valid (wantErr empty) or that its error
// says wantErr; the case tc names the configuration in a failure.
func checkValidate(t *testing.T, cfg Config, wantErr string, tc any) {
	t.Helper()
	err := cfg.Validate()
	switch {
	case wantErr == "" && err != nil:
		t.Errorf("%+v: %v", tc, err)
	case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
		t.Errorf("%+v: %v, want an error saying %q", tc, err, wantErr)
	}
}
