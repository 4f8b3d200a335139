package load

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs the tests, or, with JOBPLANE_FLOOD_TARGET set, is
// BenchmarkFlood's flooding process (floodChild).
func TestMain(m *testing.M) {
	if spec := os.Getenv(floodTargetEnv); spec != "" {
		if err := floodChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
