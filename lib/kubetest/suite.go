package kubetest

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// Suite is the testing.TB of what a whole test binary shares (a cluster and
// the services on it), started by the first test that needs it. While it
// starts, it is that test (a Fatal stops that test); its cleanups and
// temporary directories last until TestMain calls Finish, and it counts as
// failed there when any test failed, so that the cluster's logs are shown.
type Suite struct {
	testing.TB // the test starting the shared things; nil otherwise

	name     string
	mu       sync.Mutex
	cleanups []func()
	dirs     []string
	failed   bool // set by Finish
	errored  bool // an error reported while nothing was running
}

// NewSuite returns the suite of a test binary, named in its log lines and
// temporary directories.
func NewSuite(name string) *Suite { return &Suite{name: name} }

// Begin makes t the test starting the shared things, until End.
func (s *Suite) Begin(t testing.TB) { s.TB = t }

// End: the shared things started.
func (s *Suite) End() { s.TB = nil }

// Finish runs the cleanups, last registered first, and removes the
// temporary directories, once the tests ran (failed: whether any failed);
// it reports whether a cleanup failed.
func (s *Suite) Finish(failed bool) bool {
	s.mu.Lock()
	s.failed = failed
	cleanups := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	for _, dir := range s.dirs {
		_ = os.RemoveAll(dir)
	}
	return s.errored
}

func (s *Suite) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

func (s *Suite) TempDir() string {
	dir, err := os.MkdirTemp("", "jobplane-"+s.name+"-")
	if err != nil {
		s.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dirs = append(s.dirs, dir)
	return dir
}

func (s *Suite) Name() string { return s.name }

func (s *Suite) Helper() {
	if s.TB != nil {
		s.TB.Helper()
	}
}

func (s *Suite) Failed() bool {
	if s.TB != nil {
		return s.TB.Failed()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed || s.errored
}

func (s *Suite) Log(args ...any) { s.Logf("%s", fmt.Sprintln(args...)) }

func (s *Suite) Logf(format string, args ...any) {
	if s.TB != nil {
		s.TB.Logf(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, s.name+": "+format+"\n", args...)
}

func (s *Suite) Error(args ...any) { s.Errorf("%s", fmt.Sprintln(args...)) }

func (s *Suite) Errorf(format string, args ...any) {
	if s.TB != nil {
		s.TB.Errorf(format, args...)
		return
	}
	s.mu.Lock()
	s.errored = true
	s.mu.Unlock()
	s.Logf(format, args...)
}

func (s *Suite) Fatal(args ...any) { s.Fatalf("%s", fmt.Sprintln(args...)) }

// Fatalf stops the test starting the shared things; once nothing is running
// (in a cleanup at the end) it only reports the error.
func (s *Suite) Fatalf(format string, args ...any) {
	if s.TB != nil {
		s.TB.Fatalf(format, args...)
		return
	}
	s.Errorf(format, args...)
}
