package flagenv

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func newFlags() (*flag.FlagSet, *string, *time.Duration) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("grpc-addr", "127.0.0.1:1", "listen address")
	drain := fs.Duration("shutdown-drain", time.Second, "drain")
	return fs, addr, drain
}

func TestEnvironmentFillsFlagsNotGiven(t *testing.T) {
	t.Setenv("PLANNER_GRPC_ADDR", "127.0.0.1:2")
	t.Setenv("PLANNER_SHUTDOWN_DRAIN", "5s")
	fs, addr, drain := newFlags()
	if err := Parse(fs, "PLANNER", nil); err != nil {
		t.Fatal(err)
	}
	if *addr != "127.0.0.1:2" || *drain != 5*time.Second {
		t.Errorf("got addr %s drain %s", *addr, *drain)
	}
}

func TestCommandLineWinsOverEnvironment(t *testing.T) {
	t.Setenv("PLANNER_GRPC_ADDR", "127.0.0.1:2")
	fs, addr, _ := newFlags()
	if err := Parse(fs, "PLANNER", []string{"-grpc-addr", "127.0.0.1:3"}); err != nil {
		t.Fatal(err)
	}
	if *addr != "127.0.0.1:3" {
		t.Errorf("got %s", *addr)
	}
}

func TestDefaultsStayWithoutEnvironment(t *testing.T) {
	fs, addr, drain := newFlags()
	if err := Parse(fs, "PLANNER", nil); err != nil {
		t.Fatal(err)
	}
	if *addr != "127.0.0.1:1" || *drain != time.Second {
		t.Errorf("got addr %s drain %s", *addr, *drain)
	}
}

func TestBadEnvironmentValueIsReportedWithItsVariable(t *testing.T) {
	t.Setenv("PLANNER_SHUTDOWN_DRAIN", "soon")
	fs, _, _ := newFlags()
	err := Parse(fs, "PLANNER", nil)
	if err == nil || !strings.Contains(err.Error(), "PLANNER_SHUTDOWN_DRAIN") {
		t.Fatalf("got %v", err)
	}
}

func TestUsageNamesTheVariable(t *testing.T) {
	fs, _, _ := newFlags()
	if err := Parse(fs, "CRON", nil); err != nil {
		t.Fatal(err)
	}
	if u := fs.Lookup("grpc-addr").Usage; !strings.Contains(u, "env CRON_GRPC_ADDR") {
		t.Errorf("usage %q", u)
	}
}
