// Package dropin tests drop-in mode end to end: a whole local cluster whose
// kube-controller-manager runs without its Job and CronJob controllers
// (--controllers=*,-job-controller,-cronjob-controller), and the planner,
// the executor and the cron service (-drop-in) in their place, running plain
// batch/v1 Jobs and CronJobs as kubectl makes them.
//
//	go test -v ./services/executor/test/dropin/
//
// The package has tests only.
package dropin
