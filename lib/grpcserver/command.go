package grpcserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/jobplane/jobplane/lib/flagenv"
)

// Command is the main function of a service binary: flags with environment
// fallbacks, a JSON logger, the server, and a graceful stop on SIGTERM or
// SIGINT.
type Command struct {
	// Name of the service ("planner"); its upper case prefixes the
	// environment variables (PLANNER_GRPC_ADDR).
	Name string
	// Server holds the defaults of the server's flags.
	Server Config
	// Flags binds the service's own flags.
	Flags func(fs *flag.FlagSet)
	// Setup validates the service's own configuration and registers on srv
	// its handlers, its long-lived work (srv.Go) and its readiness checks
	// (srv.AddReadinessCheck). ctx ends on SIGTERM, when shutdown starts; the
	// work's own ctx lasts until after the drain.
	Setup func(ctx context.Context, srv *Server, log *slog.Logger) error
}

// Main runs the command with the process's arguments and exits.
func (c Command) Main() {
	if err := c.Run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", c.Name, err)
		os.Exit(1)
	}
}

// Run parses args, builds and serves until a signal arrives.
func (c Command) Run(args []string) error {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	cfg := c.Server
	cfg.RegisterFlags(fs)
	if c.Flags != nil {
		c.Flags(fs)
	}
	if err := flagenv.Parse(fs, strings.ToUpper(c.Name), args); err != nil {
		return err
	}
	logger, err := NewLogger(cfg.LogLevel, c.Name)
	if err != nil {
		return err
	}
	if limit := limitMemoryToContainer(cgroupMemoryFiles); limit > 0 {
		logger.Info("memory limit set from the container's (GOMEMLIMIT unset)", "bytes", limit)
	}
	srv, err := New(cfg, logger)
	if err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if c.Setup != nil {
		if err := c.Setup(ctx, srv, logger); err != nil {
			return err
		}
	}
	return srv.Run(ctx)
}
