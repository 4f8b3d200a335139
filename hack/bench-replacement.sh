#!/usr/bin/env bash
# What replacing the built-in Job controller with jobplane saves and costs
# (issue 20): each side runs the same scenario alone, in a cluster of its own.
#
# hack/bench-executor.sh runs both sides in one cluster and takes each side's
# cost as its CPU in its own run less its CPU in the other's. That leaves out
# whatever kube-controller-manager's Job controller does for Jobs it does not
# run: it follows jobplane's Jobs too, and each finished or deleted Job sends
# its orphan worker through every pod of the namespace (a list by the Job's
# selector), whichever controller ran it. Here, for each round:
#   the built-in's run: kube-controller-manager with its Job controller
#     (VARIANTS=builtin), the executor and the planner following;
#   jobplane's run: kube-controller-manager without it, as once jobplane has
#     replaced it (VARIANTS=jobplane).
# The Job controller's CPU is kube-controller-manager's in the first less in
# the second; jobplane's the executor's and the planner's in the second less
# in the first. Both clusters run the controllers the scenarios need
# (namespace, garbage collector, service accounts, node lifecycle).
#
#   ROUNDS=2 SCENARIOS=many JOBS=5000 JOB_COMPLETIONS=1 JOB_PARALLELISM=1 QPS_PAIRS=1000/1500 NODES=50 hack/bench-replacement.sh
#   ROUNDS=1 hack/bench-replacement.sh      # the default scenarios, as hack/bench-executor.sh's
#
# Every other variable is hack/bench-executor.sh's (SCENARIOS, QPS_PAIRS,
# PROFILE_SECONDS, …). Each run's results and logs stay under
# ${JOBPLANE_CACHE}/bench/runs/; the table is printed at the end.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
source "${root}/hack/lib.sh"
cd "${root}"

rounds=${ROUNDS:-1}
needed=namespace-controller,garbage-collector-controller,serviceaccount-controller,node-lifecycle-controller

# run LABEL KCM_CONTROLLERS VARIANT: one side's run; prints its results file.
run() {
  local out
  out=$(mktemp)
  log "round $1: ${3} (kube-controller-manager --controllers=${2})"
  KCM_CONTROLLERS=$2 VARIANTS=$3 "${root}/hack/bench-executor.sh" >"${out}" || {
    tail -n 20 "${out}" >&2
    rm -f "${out}"
    die "the ${3} run failed"
  }
  sed -n 's/.*results in \(.*results\.jsonl\)\.$/\1/p' "${out}" | tail -n 1
  rm -f "${out}"
}

builtin_results=() jobplane_results=()
for ((round = 1; round <= rounds; round++)); do
  builtin_results+=("$(run "${round}" "job-controller,${needed}" builtin)")
  jobplane_results+=("$(run "${round}" "${needed}" jobplane)")
done

driver=$(mktemp -d)
trap 'rm -rf "${driver}"' EXIT
go build -o "${driver}/bench" ./services/executor/test/bench
join() { local IFS=,; echo "$*"; }
echo
"${driver}/bench" replacement -builtin "$(join "${builtin_results[@]}")" -jobplane "$(join "${jobplane_results[@]}")"
echo
echo "Commit $(git rev-parse --short HEAD), on a shared machine with $(nproc) cores."
