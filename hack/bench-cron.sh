#!/usr/bin/env bash
# jobplane's cron service against the built-in CronJob controller, side by
# side in one kwok cluster, as the cron tables of BENCHMARKS.md.
#
# For each COUNT and each QPS/burst pair, a cluster of its own (jobplane-bench-cron)
# whose kube-controller-manager runs with --kube-api-qps/--kube-api-burst
# KCM_QPS (the pair itself unless set), and planner, executor and cron
# started with -kube-api-qps/-kube-api-burst of the pair, -authn-anonymous
# and no leader election. The driver (services/cron/test/bench) then, in the
# same run:
#   - watches the metadata of every Job and CronJob, with millisecond
#     timestamps, before anything is created;
#   - creates COUNT batch/v1 CronJobs in bench-cron-builtin and COUNT
#     jobplane.dev/v1 CronJobs (dynamic client, apiVersion jobplane.dev/v1)
#     in bench-cron-jobplane (VARIANTS), interleaved, identical:
#     `* * * * *`, concurrencyPolicy Allow, a Job template with
#     suspend: true (no pods: Job creation alone is measured), starting 2 s
#     after a minute boundary; then one more per controller (-quiet), the
#     same, in a namespace of its own (bench-cron-<controller>-quiet): a
#     quiet tenant, whose skew says how long the crowded namespace held it;
#   - waits until the controllers' first syncs of them end (the writes of
#     CronJobs, Jobs and events stop for 3 s; jobplane writes
#     nextScheduleTime) until 8 s before the next boundary; if they have
#     not ended, that boundary is left unmeasured (its runs are then those
#     of a steady state); reads the counters, measures the MINUTES minute
#     boundaries that follow, then GRACE more for late Jobs, and reads the
#     counters again;
#   - skew: the Job first seen by the watch less its scheduled time (the
#     batch.kubernetes.io/cronjob-scheduled-timestamp annotation), p50, p99,
#     max per controller; also from creationTimestamp (1 s, truncated) and
#     from each controller's own skew histogram; the watch's own lag is
#     measured beside it (a ConfigMap updated every second);
#   - missed: CronJobs × boundaries less the (CronJob, boundary) pairs that
#     have a Job by the end;
#   - API requests per run: apiserver_request_total before and after, told
#     apart by what only one controller touches (cronjobs/status of batch
#     vs jobplane.dev), the Jobs and Events of each namespace (Events by
#     source component: cronjob-controller and job-controller,
#     jobplane-cron and jobplane-executor), and the executor's own request
#     counter for Job status; divided by the Jobs created in the interval.
#     The built-in's Job controller and jobplane's executor each write the
#     suspended Jobs' status: counted separately ("Job" columns).
# The floor of the create path is (CronJobs − burst)/QPS of the creating
# client (kcm's cronjob-controller, jobplane's executor): 48.5 s for 1,000
# at 20/30, so p99 ≤ 2 s cannot be met at 20/30; the tables print it.
# Everything listens on 127.0.0.1; every wait is bounded, the load stops
# with the cluster, which is deleted at the end.
#
#   hack/bench-cron.sh                                       # 1,000 side by side at 20/30, 3 minutes (about 8 minutes)
#   QPS_PAIRS=1000/1500 hack/bench-cron.sh                   # the same with every client at 1000/1500
#   COUNTS=10000 QPS_PAIRS=1000/1500 KCM_QPS=20/30 VARIANTS=jobplane CRON_WORKERS=50 hack/bench-cron.sh
#   COUNTS=50 MINUTES=2 hack/bench-cron.sh                   # a quick run (5 minutes)
#   COUNTS=50 MINUTES=2 VARIANTS=jobplane QPS_PAIRS=1000/1500 EXECUTOR_QPS=5/5 CRON_WORKERS=50 hack/bench-cron.sh
#                                       # the executor's rate limit alone in the way
#   COUNTS=50 SLOW_CREATES=20s hack/bench-cron.sh            # the crowded namespaces' Job creations held 20 s each
#                                       # by an admission webhook: does a quiet tenant wait for a worker?
#
# Environment (defaults):
#   COUNTS="1000"             CronJobs per controller
#   QPS_PAIRS="20/30"         cron's and executor's client QPS/burst
#   KCM_QPS=                  kube-controller-manager's QPS/burst (the pair when empty)
#   CRON_QPS= EXECUTOR_QPS=   cron's or the executor's alone (the pair when empty)
#   VARIANTS="builtin jobplane"
#   MINUTES=3 GRACE=90s CRON_WORKERS=5 EXECUTOR_WORKERS=5
#   SLOW_CREATES=0            how long a webhook holds each Job creation in the crowded namespaces
#   CRON_LOG_LEVEL=warn       the cron service's -log-level (debug logs each sync and each call given up)
# Results (JSON lines), the services' logs and their /metrics at the end of
# each run are kept under ${JOBPLANE_CACHE}/bench-cron/runs/.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
source "${root}/hack/lib.sh"
cd "${root}"

counts=${COUNTS:-1000}
qps_pairs=${QPS_PAIRS:-"20/30"}
kcm_qps=${KCM_QPS:-}
cron_qps=${CRON_QPS:-}
executor_qps=${EXECUTOR_QPS:-}
variants=${VARIANTS:-"builtin jobplane"}
minutes=${MINUTES:-3}
grace=${GRACE:-90s}
cron_workers=${CRON_WORKERS:-5}
executor_workers=${EXECUTOR_WORKERS:-5}
slow_creates=${SLOW_CREATES:-0}

name=jobplane-bench-cron
export KWOK_WORKDIR="${JOBPLANE_CACHE}/bench-cron"
run_dir="${KWOK_WORKDIR}/runs/$(date +%Y%m%d-%H%M%S)"
results="${run_dir}/results.jsonl"
kubeconfig="${run_dir}/kubeconfig"
mkdir -p "${run_dir}"
kwoklog="${run_dir}/kwokctl.log"

bin=$("${root}/hack/build-bins.sh" cluster | tail -n 1)
work=$(mktemp -d)
pids=()
cluster_up=false

stop_services() {
  local pid
  for pid in "${pids[@]}"; do
    kill -TERM "${pid}" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "${pid}" 2>/dev/null || true
  done
  pids=()
}

cleanup() {
  stop_services
  if ${cluster_up}; then
    timeout 120 "${bin}/kwokctl" --name "${name}" delete cluster >>"${kwoklog}" 2>&1 || true
    cluster_up=false
  fi
  rm -rf "${work}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

kubectl() { "${bin}/kubectl" --kubeconfig "${kubeconfig}" --request-timeout 60s "$@"; }

# cluster_create QPS BURST: a cluster whose kube-controller-manager has that
# client rate (its cronjob-controller and job-controller each get a client
# of their own at that rate). No nodes: the Jobs are suspended. Neither
# component elects a leader: on a busy 2-core machine the API server can
# stall past a lease's renew deadline, and a component that loses its lease
# exits (kwokctl does not restart it).
cluster_create() {
  local qps=$1 burst=$2
  if "${bin}/kwokctl" get clusters 2>/dev/null | grep -qx "${name}"; then
    log "deleting the cluster ${name} left by an earlier run"
    timeout 120 "${bin}/kwokctl" --name "${name}" delete cluster >>"${kwoklog}" 2>&1 || die "deleting the old cluster failed; its log: ${kwoklog}"
  fi
  cat >"${work}/kwokctl.yaml" <<EOF
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  bindAddress: 127.0.0.1
componentsPatches:
- name: kube-controller-manager
  extraArgs:
  - key: leader-elect
    value: "false"
  - key: kube-api-qps
    value: "${qps}"
  - key: kube-api-burst
    value: "${burst}"
- name: kube-scheduler
  extraArgs:
  - key: leader-elect
    value: "false"
EOF
  log "creating cluster ${name} (kube-controller-manager at ${qps}/${burst})"
  cluster_up=true
  # The lock kubetest.StartCluster and hack/bench-executor.sh take: kwokctl
  # picks its ports by probing. -o: the cluster's processes must not hold it.
  flock -o -w 600 "${TMPDIR:-/tmp}/jobplane-kwokctl-create.lock" \
    timeout 300 "${bin}/kwokctl" --name "${name}" create cluster -c "${work}/kwokctl.yaml" --runtime binary \
    --etcd-binary "${bin}/etcd" \
    --kube-apiserver-binary "${bin}/kube-apiserver" \
    --kube-controller-manager-binary "${bin}/kube-controller-manager" \
    --kube-scheduler-binary "${bin}/kube-scheduler" \
    --kwok-controller-binary "${bin}/kwok" \
    --kubeconfig "${kubeconfig}" --wait 2m >>"${kwoklog}" 2>&1 ||
    { tail -n 20 "${kwoklog}" >&2; die "creating the cluster failed; its log: ${kwoklog}"; }
  "${bin}/kwokctl" --name "${name}" get kubeconfig 2>>"${kwoklog}" >"${kubeconfig}"

  # jobplane's CronJobs, and what cron (anonymous on loopback) may do at
  # the executor in the benchmark's namespaces (the crowded one and the
  # quiet tenant's), as hack/run.sh grants it.
  kubectl apply -f deploy/kubernetes/05-crd-cronjobs.yaml >/dev/null
  kubectl wait --for condition=established --timeout 60s crd/cronjobs.jobplane.dev >/dev/null
  kubectl create namespace bench-cron-builtin >/dev/null
  kubectl create namespace bench-cron-jobplane >/dev/null
  kubectl create namespace bench-cron-jobplane-quiet >/dev/null
  kubectl apply -f - >/dev/null <<'YAML'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: jobplane-bench-cron}
rules:
  - apiGroups: [batch]
    resources: [jobs]
    verbs: [get, list, watch, create, delete]
  # The runs' owner references block their CronJob's deletion.
  - apiGroups: [jobplane.dev]
    resources: [cronjobs/finalizers]
    verbs: [update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: jobplane-bench-cron, namespace: bench-cron-jobplane}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: jobplane-bench-cron}
subjects:
  - {kind: User, apiGroup: rbac.authorization.k8s.io, name: "system:anonymous"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: jobplane-bench-cron, namespace: bench-cron-jobplane-quiet}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: jobplane-bench-cron}
subjects:
  - {kind: User, apiGroup: rbac.authorization.k8s.io, name: "system:anonymous"}
YAML
  log "cluster ${name} ready"
}

# component_url COMPONENT: the https address of kube-controller-manager's
# --secure-port (which serves /metrics without authorization), from
# kwokctl's record of the cluster.
component_url() {
  local port
  port=$(awk -v c="  name: $1" '/^- args:/ {blk = ""} {blk = blk "\n" $0} $0 == c {print blk}' \
    "${KWOK_WORKDIR}/clusters/${name}/kwok.yaml" | grep -o -- '--secure-port=[0-9]*' | cut -d= -f2)
  [[ -n ${port} ]] || die "no --secure-port of $1 in ${KWOK_WORKDIR}/clusters/${name}/kwok.yaml"
  echo "https://127.0.0.1:${port}"
}

# wait_ready URL LOG WHAT: a service's /readyz, at most 60 s.
wait_ready() {
  local i
  for ((i = 0; ; i++)); do
    curl -sf --max-time 2 "$1" >/dev/null 2>&1 && return 0
    ((i < 600)) || { tail -n 20 "$2" >&2; die "$3 did not become ready"; }
    sleep 0.1
  done
}

# start_services PAIR LABEL: planner, executor and cron on free loopback
# ports, each client at PAIR (QPS/burst) unless EXECUTOR_QPS or CRON_QPS
# says otherwise.
start_services() {
  local pair=$1 label=$2 ports
  local epair=${executor_qps:-${pair}} cpair=${cron_qps:-${pair}}
  mapfile -t ports < <("${work}/ports" ports 6)
  local planner_addr=127.0.0.1:${ports[0]} executor_addr=127.0.0.1:${ports[2]}
  executor_metrics=http://127.0.0.1:${ports[3]}/metrics
  cron_metrics=http://127.0.0.1:${ports[5]}/metrics
  # Loopback development mode, as make run: calls without credentials, and
  # the benchmark reads the executor's and cron's /metrics without them.
  "${work}/planner" -grpc-addr "${planner_addr}" -metrics-addr "127.0.0.1:${ports[1]}" -authn-anonymous \
    -log-level warn >"${run_dir}/planner-${label}.log" 2>&1 &
  pids+=($!)
  "${work}/executor" -kubeconfig "${kubeconfig}" -planner-addr "${planner_addr}" -authn-anonymous \
    -grpc-addr "${executor_addr}" -metrics-addr "127.0.0.1:${ports[3]}" -allow-unauthenticated-metrics \
    -kube-api-qps "${epair%/*}" -kube-api-burst "${epair#*/}" -workers "${executor_workers}" -leader-elect=false \
    -log-level warn >"${run_dir}/executor-${label}.log" 2>&1 &
  pids+=($!)
  wait_ready "http://127.0.0.1:${ports[3]}/readyz" "${run_dir}/executor-${label}.log" executor
  "${work}/cron" -kubeconfig "${kubeconfig}" -executor-addr "${executor_addr}" -authn-anonymous \
    -grpc-addr "127.0.0.1:${ports[4]}" -metrics-addr "127.0.0.1:${ports[5]}" -allow-unauthenticated-metrics \
    -kube-api-qps "${cpair%/*}" -kube-api-burst "${cpair#*/}" -workers "${cron_workers}" -leader-elect=false \
    -log-level "${CRON_LOG_LEVEL:-warn}" >"${run_dir}/cron-${label}.log" 2>&1 &
  pids+=($!)
  wait_ready "http://127.0.0.1:${ports[5]}/readyz" "${run_dir}/cron-${label}.log" cron
  log "planner, executor (${executor_workers} workers, ${epair}) and cron (${cron_workers} workers, ${cpair}) ready"
}

log "building planner, executor, cron and the driver"
go build -o "${work}/planner" ./services/planner/cmd/planner
go build -o "${work}/executor" ./services/executor/cmd/executor
go build -o "${work}/cron" ./services/cron/cmd/cron
go build -o "${work}/bench" ./services/cron/test/bench
go build -o "${work}/ports" ./services/executor/test/bench # for `ports N` only

seconds() {
  case $1 in
    *h) echo $((${1%h} * 3600)) ;;
    *m) echo $((${1%m} * 60)) ;;
    *s) echo "${1%s}" ;;
    *) echo "$1" ;;
  esac
}

commit=$(git rev-parse --short HEAD)
if [[ -n $(git status --porcelain -- services lib gen) ]]; then
  commit+=" with uncommitted changes"
fi
log "results: ${results}; commit ${commit}; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
variant_list=$(echo "${variants}" | tr ' ' ',')
for count in ${counts}; do
  for pair in ${qps_pairs}; do
    qps=${pair%/*} burst=${pair#*/}
    kpair=${kcm_qps:-${pair}}
    label="${count}-${qps}-${burst}"
    cluster_create "${kpair%/*}" "${kpair#*/}"
    start_services "${pair}" "${label}"
    kcm_url=$(component_url kube-controller-manager)
    # Creating, settling (at most 3 minutes), a minute to the first
    # boundary, MINUTES, the grace, and the listing of the events.
    driver_timeout=$((300 + 180 + 60 + minutes * 60 + $(seconds "${grace}") + 300))
    log "${count} CronJobs (${variants}) at ${pair}, kcm at ${kpair}, ${minutes} minutes"
    timeout "${driver_timeout}" "${work}/bench" run -kubeconfig "${kubeconfig}" -results "${results}" \
      -count "${count}" -minutes "${minutes}" -grace "${grace}" -variants "${variant_list}" \
      -qps "${pair}" -cron-qps "${cron_qps:-${pair}}" -executor-qps "${executor_qps:-${pair}}" -kcm-qps "${kpair}" -cron-workers "${cron_workers}" -executor-workers "${executor_workers}" -slow-creates "${slow_creates}" \
      -kcm-metrics "${kcm_url}/metrics" -executor-metrics "${executor_metrics}" -cron-metrics "${cron_metrics}" >/dev/null ||
      log "the driver failed or timed out (${driver_timeout}s); results so far in ${results}"
    curl -sf --max-time 30 "${executor_metrics}" >"${run_dir}/executor-metrics-${label}.txt" || true
    curl -sf --max-time 30 "${cron_metrics}" >"${run_dir}/cron-metrics-${label}.txt" || true
    curl -skf --max-time 30 "${kcm_url}/metrics" >"${run_dir}/kcm-metrics-${label}.txt" || true
    stop_services
    timeout 120 "${bin}/kwokctl" --name "${name}" delete cluster >>"${kwoklog}" 2>&1 || log "deleting the cluster failed; see ${kwoklog}"
    cluster_up=false
  done
done

echo
[[ -s ${results} ]] || die "no results"
"${work}/bench" report -results "${results}"
echo
echo "Commit ${commit}, on a shared machine with $(nproc) cores (load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)); results in ${results}."
