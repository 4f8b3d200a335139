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
