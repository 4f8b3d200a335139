#!/usr/bin/env bash
# `make conformance`: the reference's own integration tests of the Job and
# CronJob controllers (k8s.io/kubernetes v1.36.3 test/integration/job and
# test/integration/cronjob), unchanged, run against jobplane in drop-in
# mode. `go test -overlay` replaces the files of the reference controllers'
# packages (pkg/controller/job, pkg/controller/cronjob) with
# hack/conformance/shim/job and shim/cronjob, which start jobplane's
# planner, executor and cron service (built here) against each test's API
# server where the test started the controllers in process. The results,
# test by test, go to CONFORMANCE.md (hack/conformance/report adds the
# reason of each test not passing).
#
#   make conformance                      # about 30 minutes
#   RUN='TestNonParallelJob|TestIndexedJob' make conformance   # some tests only
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
source "${root}/hack/lib.sh"
cd "${root}"

bin=$("${root}/hack/build-bins.sh" cluster | tail -n 1)
# The tests' framework starts etcd from PATH.
export PATH="${bin}:${PATH}"
work="${JOBPLANE_CACHE}/conformance"
rm -rf "${work}"
mkdir -p "${work}/bin"
log "building the planner, the executor and the cron service"
go build -o "${work}/bin/" ./services/planner/cmd/planner ./services/executor/cmd/executor ./services/cron/cmd/cron

cd "${root}/hack/conformance"
# A module of its own, outside go.work (it reaches k8s.io/kubernetes).
export GOWORK=off
# go refuses overlays of files in the module cache: the tests build against a
# copy of the reference's module (kept, so that its build is cached), through
# a go.mod of this run that points there.
cached=$(go list -mod=mod -m -f '{{.Dir}}' k8s.io/kubernetes)
reference="${JOBPLANE_CACHE}/conformance-reference/$(basename "${cached}")"
if [[ ! -d ${reference} ]]; then
  log "copying ${cached} to ${reference}"
  mkdir -p "$(dirname "${reference}")"
  cp -r "${cached}" "${reference}.tmp"
  chmod -R u+w "${reference}.tmp"
  mv "${reference}.tmp" "${reference}"
fi
cp go.mod go.sum "${work}/"
printf 'replace k8s.io/kubernetes => %s\n' "${reference}" >>"${work}/go.mod"
# Every file of each controller's package but its tests and doc.go is
# replaced: the shim is the package.
overlay() { # the package's directory in the reference, then the shim's
  local controller=$1 shim=$2 f
  for f in "${controller}"/*.go; do
    case ${f} in *_test.go | */doc.go) continue ;; esac
    printf '%s"%s":""' "${sep}" "${f}"
    sep=","
  done
  for f in "${shim}"/*.go; do
    printf '%s"%s":"%s"' "${sep}" "${controller}/jobplane_$(basename "${f}")" "${f}"
  done
}
{
  printf '{"Replace":{'
  sep=""
  overlay "${reference}/pkg/controller/job" "${root}/hack/conformance/shim/job"
  overlay "${reference}/pkg/controller/cronjob" "${root}/hack/conformance/shim/cronjob"
  printf '}}\n'
} >"${work}/overlay.json"

log "running test/integration/job and test/integration/cronjob against jobplane (results in ${work}/tests.json, jobplane's logs in ${work}/jobplane.log)"
# One package at a time (-p 1): each test runs its own API server and
# jobplane, on a machine of two cores.
JOBPLANE_CONFORMANCE_BIN="${work}/bin" JOBPLANE_CONFORMANCE_LOG="${work}/jobplane.log" \
  go test -mod=mod -modfile "${work}/go.mod" -overlay "${work}/overlay.json" -json -count=1 -p 1 -timeout 120m -run "${RUN:-.}" \
  k8s.io/kubernetes/test/integration/job k8s.io/kubernetes/test/integration/cronjob >"${work}/tests.json" || true
# What -mod=mod added for the tests' own imports is kept, pinned, in this
# module's go.mod and go.sum (without the run's replace).
grep -v '^replace k8s.io/kubernetes => ' "${work}/go.mod" >go.mod
cp "${work}/go.sum" go.sum
go run ./report -reference v1.36.3 <"${work}/tests.json" >"${root}/CONFORMANCE.md"
log "wrote CONFORMANCE.md: $(grep -c '| PASS |' "${root}/CONFORMANCE.md") passed, $(grep -c '| FAIL |' "${root}/CONFORMANCE.md") failed, $(grep -c '| SKIP |' "${root}/CONFORMANCE.md") skipped"
