// Package e2e tests the cron service end to end, and under faults, on a
// whole local cluster (etcd, kube-apiserver, kube-controller-manager with
// the built-in CronJob and Job controllers and the garbage collector,
// kube-scheduler and kwok nodes, from lib/kubetest) with the CRD of
// deploy/kubernetes installed and the planner, the executor and the cron
// service running as real processes built from this repository.
//
//	go test -v ./services/cron/test/e2e/
//
// One cluster serves the whole package, and every test runs in parallel,
// each in namespaces of its own: schedules are minutes, so a test waits
// for the minute boundaries it is about, and tests waiting at once share
// those waits. The slowest test (the cron outage over three scheduled
// times) sets the package's wall time, about six minutes.
//
// # Who runs which CronJob
//
// A cron process lists and watches the CronJobs and Jobs of the whole
// cluster, and so does an executor its Jobs and pods. Two cron processes
// leading at once would both schedule every CronJob (Job names are
// deterministic, so nothing would run twice, but a fault test could not
// stop "the" cron service, and its counts would be ambiguous); and a
// single deployment shared by all tests could not be killed by one fault
// test for minutes without stopping every other test's schedule.
//
// So every process runs behind a proxy of the API server (scope_test.go)
// that adds a field selector on metadata.namespace to its cluster-wide
// lists and watches of pods, Jobs and CronJobs, and passes everything else
// through: each process sees only its namespaces, as a namespace-scoped
// installation would, and each CronJob is owned by exactly one cron
// deployment for the whole run:
//
//   - the shared cron service (one replica, no leader election) runs every
//     namespace but the three fault namespaces below, and hands its runs to
//     the shared executor; the shared executor runs every namespace but
//     cron-fault-executor;
//   - cron-fault-catchup is run by the catch-up test's own cron process,
//     killed for three scheduled times and started again; its runs go to
//     the shared executor;
//   - cron-fault-executor is run by the outage test's own cron process and
//     its own executor, which it kills over a scheduled time;
//   - cron-fault-failover is run by the failover test's two cron replicas,
//     electing a leader on their own Lease; one is killed.
//
// The built-in controllers of the parity test's batch/v1 CronJobs are the
// cluster's, untouched.
//
// The services run with -authn-anonymous, on loopback: the tests call the
// cron service without credentials and the cron service calls the executor
// without them, so system:anonymous is granted, cluster-wide, what
// hack/run.sh grants it in the namespace default.
//
// # What the tests show
//
//   - TestParity: each case runs as a batch/v1 CronJob, under the built-in
//     controllers, and as the same jobplane CronJob created with
//     CreateCronJob, under the cron service and the executor, in two
//     namespaces under the same name (so their Jobs' names match), created
//     in the same minute. Both must reach the case's end state, then be
//     alike: Jobs and their terminal conditions, active,
//     lastScheduleTime, lastSuccessfulTime set or not, events by reason.
//     Allow every minute with successfulJobsHistoryLimit 1 over three runs;
//     Forbid with pods running forever; Replace with pods running forever;
//     a failing template with failedJobsHistoryLimit 1; created suspended
//     and resumed after its first scheduled time (which then runs late).
//   - TestTriggerWatchAndBackfill: WatchJobInstances, TriggerCronJob,
//     resuming from a resource_version, BackfillCronJob, DeleteCronJob.
//   - TestBufferOneQueuesTheRunWhileAJobIsActive: an extension, end to
//     end: the run due while a Job runs waits in status.pendingRuns and
//     starts once that Job has completed.
//   - TestKubectlCronJobRunsAndItsDeletionDeletesItsJobs: a CronJob
//     created directly with a dynamic client runs; its deletion lets the
//     garbage collector delete its Jobs.
//   - TestCatchUpPoliciesAfterCronOutage, TestExecutorOutageWithinAndPastTheStartingDeadline,
//     TestLeaderFailoverRunsTheBoundaryOnce: the faults.
//
// Waits are bounded and generous; nothing asserts how fast anything is.
// The package has tests only.
package e2e
