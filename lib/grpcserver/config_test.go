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
	cfg.MaxRecvMsgBytes = 0
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
		err := cfg.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%+v: %v", tc, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%+v: %v, want an error saying %q", tc, err, tc.wantErr)
		}
	}
}

func TestClientCANeedsTLS(t *testing.T) {
	cfg := Defaults("127.0.0.1:50051", "")
	cfg.ClientCAFile = "ca.crt"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "client-ca-file needs TLS") {
		t.Errorf("client CA without TLS: %v", err)
	}
}
