package kubetest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Test runs leave one executable per checkout and package, and none of a
// checkout that is gone.
func TestBuiltBinariesAreKeptOncePerCheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the planner twice")
	}
	cache := t.TempDir()
	t.Setenv("JOBPLANE_CACHE", cache)
	gone := filepath.Join(cache, "test-bin", "0123456789abcdef")
	if err := os.MkdirAll(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gone, checkoutFile), []byte(filepath.Join(cache, "deleted-clone")), 0o644); err != nil {
		t.Fatal(err)
	}
	const pkg = "./services/planner/cmd/planner"
	t.Cleanup(func() { // the other tests build their own
		buildMu.Lock()
		delete(built, pkg)
		buildMu.Unlock()
	})
	var paths []string
	for range 2 {
		buildMu.Lock()
		delete(built, pkg) // as a new test binary would
		buildMu.Unlock()
		paths = append(paths, BuildBinary(t, pkg))
	}
	if paths[0] != paths[1] {
		t.Errorf("two builds in %s and %s", paths[0], paths[1])
	}
	entries, err := os.ReadDir(filepath.Dir(paths[0]))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 2 { // the executable and its checkout's name
		t.Errorf("the package's directory holds %v", names)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("the directory of a deleted checkout is still there (%v)", err)
	}
}

// A process that finds a port taken before it binds it (the free ports are
// only free when found) is started again on other ports.
func TestAProcessWhosePortIsTakenGetsOthers(t *testing.T) {
	t.Setenv(fakeServerEnv, t.TempDir())
	p := StartProcess(t, "server", os.Args[0])
	if log := p.Tail(60, ""); !strings.Contains(log, "address already in use") || strings.Count(log, "---- ") != 2 {
		t.Errorf("want a failed run then a served one; the log:\n%s", log)
	}
}

// fakeServerEnv names a directory: set, this test binary is a server
// (fakeServer) instead.
const fakeServerEnv = "KUBETEST_FAKE_SERVER"

func TestMain(m *testing.M) {
	if dir := os.Getenv(fakeServerEnv); dir != "" {
		fakeServer(dir)
		return
	}
	os.Exit(m.Run())
}

// fakeServer is a server started as StartProcess starts one (-grpc-addr A
// -metrics-addr M): its first run in dir fails as a server does on a port
// in use; the next serves /readyz on M.
func fakeServer(dir string) {
	if len(os.Args) < 5 {
		os.Exit(2)
	}
	ran := filepath.Join(dir, "ran")
	if _, err := os.Stat(ran); os.IsNotExist(err) {
		_ = os.WriteFile(ran, nil, 0o644)
		fmt.Printf("listening for gRPC: listen tcp %s: bind: address already in use\n", os.Args[2])
		os.Exit(1)
	}
	http.HandleFunc("/readyz", func(http.ResponseWriter, *http.Request) {})
	fmt.Println(http.ListenAndServe(os.Args[4], nil))
	os.Exit(1)
}
