package main

import (
	"strings"
	"testing"
	"time"
)

// tracesOutput is the shape of go tool pprof -traces: a header, then traces
// between dashed lines, the value on each one's first line.
const tracesOutput = `File: executor
Type: cpu
Duration: 60s, Total samples = 1.03s ( 1.7%)
-----------+-------------------------------------------------------
      10ms   runtime.futex
             runtime.wakep
             k8s.io/client-go/rest.(*Request).Do
-----------+-------------------------------------------------------
     1.02s   runtime.memmove
             github.com/jobplane/jobplane/services/executor/internal/plannerclient.(*Client).PlanSnapshot
             github.com/jobplane/jobplane/services/executor/internal/controller.(*Controller).sync
-----------+-------------------------------------------------------
`

func TestEachTraceReadsValuesAndStacks(t *testing.T) {
	var values []time.Duration
	var stacks []string
	if err := eachTrace(strings.NewReader(tracesOutput), func(v time.Duration, stack string) {
		values = append(values, v)
		stacks = append(stacks, stack)
	}); err != nil {
		t.Fatal(err)
	}
	if len(values) != 2 || values[0] != 10*time.Millisecond || values[1] != 1020*time.Millisecond {
		t.Fatalf("values = %v, want [10ms 1.02s]", values)
	}
	// The first matching category wins: the planner call is the hop, though
	// the sync's controller code is under it too.
	if got := categoryOf(stacks[0]); got != shareCategories[2].name {
		t.Errorf("category of %q = %q, want the API requests", stacks[0], got)
	}
	if got := categoryOf(stacks[1]); got != shareCategories[0].name {
		t.Errorf("category of %q = %q, want the planner hop", stacks[1], got)
	}
	// Decoding an answer is the request's, though the controller's write is
	// under it.
	answer := "k8s.io/api/batch/v1.(*Job).Unmarshal\nk8s.io/client-go/rest.Result.Into\n" +
		"k8s.io/client-go/gentype.(*Client[go.shape.*uint8]).UpdateStatus\n" +
		"github.com/jobplane/jobplane/services/executor/internal/controller.updateStatus\n"
	if got := categoryOf(answer); got != shareCategories[2].name {
		t.Errorf("category of %q = %q, want the API requests", answer, got)
	}
	if got := categoryOf("runtime.memmove\n"); got != otherCategory {
		t.Errorf("category of a bare runtime stack = %q, want %q", got, otherCategory)
	}
}
