// Package refbench holds the reference Job controller's syncJob in process
// beside the planner: refbench_test.go times it, agree_test.go compares its
// decisions with the planner's on random Jobs (make test runs it).
package refbench
