// Package refbench times the reference Job controller's syncJob in process;
// see refbench_test.go.
package refbench
