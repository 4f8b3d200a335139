package grpcserver

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestTheMemoryLimitFollowsTheContainers(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("GOMEMLIMIT", "")
	if got := limitMemoryToContainer([]string{filepath.Join(dir, "absent"), file("v1", "1073741824\n")}); got != 966367641 || debug.SetMemoryLimit(-1) != got {
		t.Errorf("a 1 GiB container: limit %d (runtime %d), want 90%%", got, debug.SetMemoryLimit(-1))
	}
	for name, content := range map[string]string{"v2-max": "max\n", "v1-none": "9223372036854771712\n", "garbage": "x"} {
		debug.SetMemoryLimit(math.MaxInt64)
		if got := limitMemoryToContainer([]string{file(name, content)}); got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
			t.Errorf("%s: limit %d, want none", name, got)
		}
	}
	t.Setenv("GOMEMLIMIT", "512MiB")
	debug.SetMemoryLimit(math.MaxInt64)
	if got := limitMemoryToContainer([]string{file("v2", "1073741824")}); got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set: limit %d, want it left alone", got)
	}
}
