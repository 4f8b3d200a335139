// Package dropin tests the executor in drop-in mode end to end: a whole local
// cluster whose kube-controller-manager runs without its Job controller
// (--controllers=*,-job-controller), and the planner and the executor
// (-drop-in) in its place, running plain batch/v1 Jobs as `kubectl create
// job` makes them.
//
//	go test -v ./services/executor/test/dropin/
//
// The package has tests only.
package dropin
