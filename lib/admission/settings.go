package admission

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"time"
)

// Settings are a server's admission flags.
type Settings struct {
	// Seats bounds the calls in flight of each priority level (flag
	// -max-inflight-calls).
	Seats int
	// WorkloadSeats bounds the workload level's alone; 0 is Seats (flag
	// -max-inflight-workload-calls). A service whose calls are CPU-bound
	// keeps a core for the system level with it.
	WorkloadSeats int
	// ClassSeats bounds the calls in flight of one class of RPC in a level
	// (reads, writes, pure computations; flag -max-inflight-calls-per-class;
	// 0 is three quarters of the level's seats), so that a flood of one
	// leaves seats to the others.
	ClassSeats int
	// WorkloadReadSeats bounds the workload level's reads alone; 0 is
	// ClassSeats (flag -max-inflight-workload-reads). A service answering
	// reads from its caches, on the cores its own work needs, keeps a core
	// for that work with it.
	WorkloadReadSeats int
	// Bytes is the memory the requests in flight may take, split evenly
	// between the two levels (flag -max-inflight-bytes; 0 derives it from
	// the process's memory limit, GOMEMLIMIT).
	Bytes int64
	// Expansion is the memory a received byte costs once decoded and worked
	// on (flag -request-memory-per-byte).
	Expansion int64
	// QueueLength bounds the calls one caller has waiting in a level (flag
	// -max-queued-calls-per-caller).
	QueueLength int
	// MaxQueueWait bounds a call's wait (flag -max-queue-wait).
	MaxQueueWait time.Duration
	// StreamsPerCaller bounds the long-lived streams a caller keeps open in
	// a level (flag -max-streams-per-caller).
	StreamsPerCaller int
	// Streams bounds the long-lived streams of all callers in a level
	// (flag -max-streams).
	Streams int
	// UnreadAnswerBytes bounds the answers held for callers that have not
	// read them yet, split evenly between the two levels (flag
	// -max-unread-answer-bytes; 0 is a quarter of the requests' budget),
	// UnreadAnswerBytesPerCaller one caller's (flag
	// -max-unread-answer-bytes-per-caller; 0 is an eighth of a level's).
	UnreadAnswerBytes, UnreadAnswerBytesPerCaller int64
	// SystemUsers are the identities of the services' own calls, served at
	// the system level (flag -system-users, comma-separated user names such
	// as system:serviceaccount:jobplane:executor).
	SystemUsers []string
}

// DefaultSettings: 8 calls in flight a level, memory from GOMEMLIMIT, 16
// bytes of memory a byte received (a 10,000-pod PlanSync of 3.3 MB took
// about 50 MB while planned), 5 s of queue, 64 queued calls and 16 streams
// a caller, 128 streams a level.
func DefaultSettings() Settings {
	return Settings{Seats: 8, Expansion: 16, QueueLength: 64, MaxQueueWait: 5 * time.Second, StreamsPerCaller: 16, Streams: 128}
}

// RegisterFlags binds the settings to fs.
func (s *Settings) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&s.Seats, "max-inflight-calls", s.Seats, "calls served at once in each priority level (system, workload); more wait in a fair queue per caller")
	fs.IntVar(&s.WorkloadSeats, "max-inflight-workload-calls", s.WorkloadSeats, "calls of the workload priority level (every caller but -system-users) served at once; 0: as many as -max-inflight-calls")
	fs.IntVar(&s.WorkloadReadSeats, "max-inflight-workload-reads", s.WorkloadReadSeats, "reads (get, list, watch) of the workload priority level served at once; 0: as any other class (-max-inflight-calls-per-class)")
	fs.IntVar(&s.ClassSeats, "max-inflight-calls-per-class", s.ClassSeats, "calls of one class of RPC (read: get, list, watch; write: create, update, delete; compute: the pure functions) served at once in a priority level, so that a flood of one class leaves seats to the others; 0: three quarters of the level's seats")
	fs.Int64Var(&s.Bytes, "max-inflight-bytes", s.Bytes, "memory the requests in flight may take, half for each priority level; 0: half of the memory limit (GOMEMLIMIT), or 1 GiB without one")
	fs.Int64Var(&s.Expansion, "request-memory-per-byte", s.Expansion, "memory one byte of a request costs once decoded, charged against max-inflight-bytes")
	fs.IntVar(&s.QueueLength, "max-queued-calls-per-caller", s.QueueLength, "calls one caller may have waiting in a priority level; more are refused with RESOURCE_EXHAUSTED")
	fs.DurationVar(&s.MaxQueueWait, "max-queue-wait", s.MaxQueueWait, "longest a call waits for its turn before RESOURCE_EXHAUSTED with RetryInfo")
	fs.IntVar(&s.StreamsPerCaller, "max-streams-per-caller", s.StreamsPerCaller, "long-lived streams one caller may keep open in a priority level")
	fs.IntVar(&s.Streams, "max-streams", s.Streams, "long-lived streams all callers together may keep open in a priority level")
	fs.Int64Var(&s.UnreadAnswerBytes, "max-unread-answer-bytes", s.UnreadAnswerBytes, "memory the answers not yet read by their callers may take, half for each priority level; more are refused with RESOURCE_EXHAUSTED; 0: a quarter of max-inflight-bytes")
	fs.Int64Var(&s.UnreadAnswerBytesPerCaller, "max-unread-answer-bytes-per-caller", s.UnreadAnswerBytesPerCaller, "memory the answers one caller has not read yet may take (a caller holding none may have one answer of any size its level holds); 0: an eighth of a priority level's max-unread-answer-bytes")
	fs.Func("system-users", "comma-separated identities served at the system priority level, apart from every other caller (the executor's for the planner, cron's for the executor)", func(v string) error {
		s.SystemUsers = nil
		for _, u := range strings.Split(v, ",") {
			if u = strings.TrimSpace(u); u != "" {
				s.SystemUsers = append(s.SystemUsers, u)
			}
		}
		return nil
	})
}

// Validate reports every setting out of range.
func (s Settings) Validate() error {
	var errs []error
	for _, v := range []struct {
		name  string
		value int64
	}{
		{"max-inflight-calls", int64(s.Seats)}, {"request-memory-per-byte", s.Expansion},
		{"max-queued-calls-per-caller", int64(s.QueueLength)}, {"max-streams-per-caller", int64(s.StreamsPerCaller)},
		{"max-streams", int64(s.Streams)},
	} {
		if v.value <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", v.name, v.value))
		}
	}
	if s.WorkloadSeats < 0 {
		errs = append(errs, fmt.Errorf("max-inflight-workload-calls must not be negative, got %d", s.WorkloadSeats))
	}
	if s.WorkloadReadSeats < 0 {
		errs = append(errs, fmt.Errorf("max-inflight-workload-reads must not be negative, got %d", s.WorkloadReadSeats))
	}
	if s.ClassSeats < 0 {
		errs = append(errs, fmt.Errorf("max-inflight-calls-per-class must not be negative, got %d", s.ClassSeats))
	}
	if s.Bytes < 0 {
		errs = append(errs, fmt.Errorf("max-inflight-bytes must not be negative, got %d", s.Bytes))
	}
	if s.UnreadAnswerBytes < 0 {
		errs = append(errs, fmt.Errorf("max-unread-answer-bytes must not be negative, got %d", s.UnreadAnswerBytes))
	}
	if s.UnreadAnswerBytesPerCaller < 0 {
		errs = append(errs, fmt.Errorf("max-unread-answer-bytes-per-caller must not be negative, got %d", s.UnreadAnswerBytesPerCaller))
	}
	if s.MaxQueueWait <= 0 {
		errs = append(errs, fmt.Errorf("max-queue-wait must be positive, got %s", s.MaxQueueWait))
	}
	return errors.Join(errs...)
}

// Config is the controller's configuration from the settings.
func (s Settings) Config() Config {
	perLevel := s.TotalBytes() / 2
	unread := s.UnreadAnswerBytes
	if unread == 0 {
		unread = s.TotalBytes() / 4
	}
	unreadPerCaller := s.UnreadAnswerBytesPerCaller
	if unreadPerCaller == 0 {
		unreadPerCaller = unread / 2 / 8 // a level's, over eight callers
	}
	level := LevelConfig{Seats: s.Seats, Bytes: perLevel, StreamsPerFlow: s.StreamsPerCaller, Streams: s.Streams,
		UnreadAnswerBytes: unread / 2, UnreadAnswerBytesPerCaller: min(unreadPerCaller, unread/2)}
	workload := level
	if s.WorkloadSeats > 0 {
		workload.Seats = s.WorkloadSeats
	}
	level.ClassSeats, workload.ClassSeats = s.classSeats(level.Seats), s.classSeats(workload.Seats)
	if s.WorkloadReadSeats > 0 {
		workload.SeatsOfClass = map[string]int{ClassRead: min(s.WorkloadReadSeats, workload.Seats)}
	}
	return Config{
		Levels:       map[string]LevelConfig{System: level, Workload: workload},
		QueueLength:  s.QueueLength,
		MaxQueueWait: s.MaxQueueWait,
		Expansion:    s.Expansion,
	}
}

// classSeats is the seats of one class in a level of seats.
func (s Settings) classSeats(seats int) int {
	if s.ClassSeats > 0 {
		return min(s.ClassSeats, seats)
	}
	return max(1, seats*3/4)
}

// LargestRequest is the largest request a level can ever take: its bytes
// budget over the expansion factor, and at most 64 MiB.
func (s Settings) LargestRequest() int {
	return int(min(64<<20, s.TotalBytes()/2/max(s.Expansion, 1)))
}

// TotalBytes is the memory budget of the requests in flight: Bytes, or half
// of GOMEMLIMIT (the rest is the process's own: caches, held snapshots,
// garbage not yet collected), or 1 GiB without a limit.
func (s Settings) TotalBytes() int64 {
	if s.Bytes > 0 {
		return s.Bytes
	}
	if limit := debug.SetMemoryLimit(-1); limit != math.MaxInt64 {
		return limit / 2
	}
	return 1 << 30
}
