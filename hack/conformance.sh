#!/usr/bin/env bash
# `make conformance`: the reference's own integration tests of the Job
# controller (k8s.io/kubernetes v1.36.3 test/integration/job), unchanged, run
# against jobplane in drop-in mode. `go test -overlay` replaces the files of
# the reference controller's package (pkg/controller/job) with
# hack/conformance/shim/job, which starts jobplane's planner and executor
# (built here) against each test's API server where the test started the
# controller in process. The results, test by test, go to CONFORMANCE.md
# (hack/conformance/report adds the reason of each test not passing).
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
log "building the planner and the executor"
go build -o "${work}/bin/" ./services/planner/cmd/planner ./services/executor/cmd/executor

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
controller="${reference}/pkg/controller/job"
# Every file of the controller's package but its tests and doc.go is
# replaced: the shim is the package.
{
  printf '{"Replace":{'
  sep=""
  for f in "${controller}"/*.go; do
    case ${f} in *_test.go | */doc.go) continue ;; esac
    printf '%s"%s":""' "${sep}" "${f}"
    sep=","
  done
  for f in "${root}"/hack/conformance/shim/job/*.go; do
    printf '%s"%s":"%s"' "${sep}" "${controller}/jobplane_$(basename "${f}")" "${f}"
  done
  printf '}}\n'
} >"${work}/overlay.json"

log "running test/integration/job against jobplane (results in ${work}/job.json, jobplane's logs in ${work}/jobplane.log)"
JOBPLANE_CONFORMANCE_BIN="${work}/bin" JOBPLANE_CONFORMANCE_LOG="${work}/jobplane.log" \
  go test -mod=mod -modfile "${work}/go.mod" -overlay "${work}/overlay.json" -json -count=1 -timeout 120m -run "${RUN:-.}" \
  k8s.io/kubernetes/test/integration/job >"${work}/job.json" || true
# What -mod=mod added for the tests' own imports is kept, pinned, in this
# module's go.mod and go.sum (without the run's replace).
grep -v '^replace k8s.io/kubernetes => ' "${work}/go.mod" >go.mod
cp "${work}/go.sum" go.sum
go run ./report -reference v1.36.3 <"${work}/job.json" >"${root}/CONFORMANCE.md"
log "wrote CONFORMANCE.md: $(grep -c '| PASS |' "${root}/CONFORMANCE.md") passed, $(grep -c '| FAIL |' "${root}/CONFORMANCE.md") failed, $(grep -c '| SKIP |' "${root}/CONFORMANCE.md") skipped"
