package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeResults(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The Job controller's CPU is kube-controller-manager's with it less without
// it; jobplane's is its own run less its following of the built-in's.
func TestReplacementSubtractsAcrossTheTwoClusters(t *testing.T) {
	builtin := writeResults(t,
		`{"scenario":"many","variant":"builtin","qps":"1000/1500","seconds":150,"pods":5000,"kcmCPU":47.5,"jobplaneCPU":10.5}`)
	jobplane := writeResults(t,
		`{"scenario":"many","variant":"jobplane","qps":"1000/1500","seconds":153,"pods":5000,"kcmCPU":12.5,"jobplaneCPU":37.5,"plannerCPU":4.25}`,
		`{"scenario":"many","variant":"jobplane","qps":"200/300","seconds":40,"pods":2000,"kcmCPU":5,"jobplaneCPU":9}`)
	pairs, err := replacementRounds([]string{builtin}, []string{jobplane})
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 1 {
		t.Fatalf("%d pairs, want the one scenario and QPS both sides ran", len(pairs))
	}
	if got := pairs[0].jobControllerCPU(); got != 35 {
		t.Errorf("Job controller CPU = %v, want 47.5 - 12.5", got)
	}
	if got := pairs[0].jobplaneCPU(); got != 27 {
		t.Errorf("jobplane CPU = %v, want 37.5 - 10.5", got)
	}
	var out bytes.Buffer
	writeReplacement(&out, pairs)
	// 7.0 and 5.4 ms a pod: 0.77; jobplane's whole 7.5 ms a pod: 1.07.
	if row := out.String(); !strings.Contains(row, "| 7.0 | 5.4 | 0.77 | 7.5 | 1.07 |") {
		t.Errorf("report:\n%s\nwant the Job controller's 7.0 ms a pod, jobplane's 5.4 and their ratio 0.77, then jobplane's whole 7.5 and 1.07", row)
	}
}

func TestReplacementNeedsARoundOfEachSide(t *testing.T) {
	builtin := writeResults(t, `{"scenario":"many","variant":"builtin","qps":"20/30","pods":1}`)
	if _, err := replacementRounds([]string{builtin, builtin}, []string{builtin}); err == nil {
		t.Error("two built-in rounds against one of jobplane: no error")
	}
	if _, err := replacementRounds([]string{builtin}, []string{builtin}); err == nil {
		t.Error("no jobplane run: no error")
	}
}
