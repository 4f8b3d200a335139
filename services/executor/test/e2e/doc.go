// Package e2e tests jobplane end to end: a whole local cluster (etcd,
// kube-apiserver, kube-controller-manager with the built-in Job controller,
// kube-scheduler and kwok nodes, from lib/kubetest) with the planner and the
// executor running as real processes, built from this repository.
//
// The parity test runs every Job twice in that one cluster: once as a plain
// Job, run by the built-in Job controller, and once with spec.managedBy:
// jobplane.dev/executor, run by jobplane. Both must end with the same status.
// Pods end as the fate.jobplane.dev/ annotations of their template say (see
// hack/kwok/stages/pod-fate.yaml): succeed, fail with an exit code, only on
// some indexes or attempts, be evicted, or run until deleted.
//
//	go test -run TestParity -v ./services/executor/test/e2e/
//
// With JOBPLANE_E2E_BUILTIN_ONLY=1 only the built-in half of each case runs
// (nothing of jobplane is built or started): it checks the cases themselves.
// The package has tests only.
package e2e
