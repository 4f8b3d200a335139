package admission

import (
	"context"
	"flag"
	"runtime/debug"
	"slices"
	"testing"
	"time"
)

func TestSettingsFromFlags(t *testing.T) {
	s := DefaultSettings()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	s.RegisterFlags(fs)
	if err := fs.Parse([]string{"-system-users", "system:serviceaccount:jobplane-system:jobplane-executor, alice", "-max-inflight-bytes", "1000"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.SystemUsers, []string{"system:serviceaccount:jobplane-system:jobplane-executor", "alice"}) {
		t.Errorf("system users %q", s.SystemUsers)
	}
	cfg := s.Config()
	if cfg.Levels[System].Bytes != 500 || cfg.Levels[Workload].Bytes != 500 || cfg.Levels[Workload].Seats != 8 {
		t.Errorf("levels %+v", cfg.Levels)
	}
	if err := s.Validate(); err != nil {
		t.Error(err)
	}
	s.Seats, s.MaxQueueWait, s.Bytes = 0, 0, -1
	if err := s.Validate(); err == nil {
		t.Error("zero seats, zero queue wait and negative bytes accepted")
	}
}

// Without -max-inflight-bytes the budget is half of the memory limit.
func TestTheBytesBudgetFollowsGOMEMLIMIT(t *testing.T) {
	previous := debug.SetMemoryLimit(1 << 30)
	defer debug.SetMemoryLimit(previous)
	if got := DefaultSettings().TotalBytes(); got != 1<<29 {
		t.Errorf("budget %d, want half of 1 GiB", got)
	}
}

// The largest request a server receives is what a level's bytes budget can
// take: larger ones would be refused once received anyway.
func TestTheLargestRequestIsWhatALevelCanTake(t *testing.T) {
	s := DefaultSettings()
	s.Bytes = 320 << 20 // 160 MiB a level, 16 bytes a byte: 10 MiB
	if got := s.LargestRequest(); got != 10<<20 {
		t.Errorf("largest request %d, want 10 MiB", got)
	}
	s.Bytes = 1 << 40
	if got := s.LargestRequest(); got != 64<<20 {
		t.Errorf("largest request %d, want at most 64 MiB", got)
	}
}

// Each class of RPC gets three quarters of a level's seats by default, at
// least one; -max-inflight-calls-per-class sets it.
func TestClassSeats(t *testing.T) {
	s := DefaultSettings()
	s.WorkloadSeats = 1
	cfg := s.Config()
	if got := cfg.Levels[System].ClassSeats; got != 6 {
		t.Errorf("system class seats %d, want 6 of 8", got)
	}
	if got := cfg.Levels[Workload].ClassSeats; got != 1 {
		t.Errorf("workload class seats %d, want 1 of 1", got)
	}
	s.ClassSeats = 2
	if got := s.Config().Levels[System].ClassSeats; got != 2 {
		t.Errorf("class seats %d, want the flag's 2", got)
	}
}

// -max-inflight-workload-reads bounds the workload level's reads alone:
// not its writes, not the system level's reads.
func TestWorkloadReadSeats(t *testing.T) {
	s := DefaultSettings()
	s.WorkloadReadSeats = 1
	cfg := s.Config()
	workload, system := cfg.Levels[Workload], cfg.Levels[System]
	if got := workload.seatsOf(ClassRead); got != 1 {
		t.Errorf("workload reads %d, want 1", got)
	}
	if got := workload.seatsOf(ClassWrite); got != 6 {
		t.Errorf("workload writes %d, want 6 of 8", got)
	}
	if got := system.seatsOf(ClassRead); got != 6 {
		t.Errorf("system reads %d, want 6 of 8", got)
	}
	c := New(cfg, nil)
	ctx := context.Background()
	read, err := c.Admit(ctx, Workload, "reader", ClassRead)
	if err != nil {
		t.Fatal(err)
	}
	defer read.Release()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := c.Admit(short, Workload, "another-reader", ClassRead); err == nil {
		t.Error("a second workload read admitted beside the first")
	}
	for level, class := range map[string]string{Workload: ClassWrite, System: ClassRead} {
		tk, err := c.Admit(ctx, level, "other", class)
		if err != nil {
			t.Fatalf("a %s call of the %s level beside the read: %v", class, level, err)
		}
		tk.Release()
	}
}
