package kubetest

import (
	"os"
	"path/filepath"
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
