// Package refbench holds the reference Job controller's syncJob in process
// beside the planner: refbench_test.go times it, agree_test.go compares its
// decisions with the planner's on random Jobs; cron_agree_test.go compares
// the reference CronJob controller's sync with the cron service's
// PlanCronJob on random CronJobs (make test runs both).
package refbench
