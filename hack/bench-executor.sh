#!/usr/bin/env bash
# The executor against the built-in Job controller, side by side in one kwok
# cluster, at the same client QPS/burst, as the tables of BENCHMARKS.md.
#
# For each QPS/burst pair, a cluster of its own (jobplane-bench) whose
# kube-controller-manager runs with that --kube-api-qps/--kube-api-burst, and
# an executor started with the same -kube-api-qps/-kube-api-burst. Then, for
# each scenario, the built-in controller (plain Jobs) and jobplane (Jobs with
# spec.managedBy: jobplane.dev/executor) one after the other, each in a
# namespace of its own, so that the API server's request counters taken
# before and after are one controller's:
#   big   one Job of SIZE completions, PARALLELISM wide, and a BESIDE-pod Job
#         created once a quarter of the big Job's pods exist;
#   many  JOBS Jobs of JOB_COMPLETIONS completions, JOB_PARALLELISM wide,
#         created at once;
#   memory (not in the default SCENARIOS; issue 20) what a cached pod
#         costs each side: kube-controller-manager runs its Job controller
#         only (KCM_CONTROLLERS, default job-controller for this scenario),
#         and the driver creates MEMORY_PODS pods no controller owns, so
#         that only the caches grow; live heap (least heap in use over
#         MEMORY_SETTLE, which a collection has run in) and RSS before and
#         after, from both sides' /metrics.
#   tenants (not in the default SCENARIOS; issue 19) namespace A's
#         TENANT_JOBS Jobs of TENANT_JOB_COMPLETIONS completions,
#         TENANT_JOB_PARALLELISM wide, created at once, then, once every
#         creation has returned, namespace B's Job of BESIDE pods; B's Job is
#         also run alone first. Its pods run TENANT_POD_RUNTIME each.
#         TENANT_BESIDE_AFTER=pods: B's Job is created once every pod of A's
#         Jobs exists instead, so that it meets A's finalizer removals.
#         TENANT_BESIDE_AFTER=deadline: A's pods run until deleted; once they
#         all exist, A's Jobs pass their deadline (activeDeadlineSeconds: 1)
#         and B's Job is created, so that it meets the deletions of A's
#         active pods, then their finalizer removals; A's Jobs end Failed.
#   flood (not in the default SCENARIOS; issue 19) a hostile tenant's probe
#         of each controller's front door: namespace B's Job of FLOOD_BESIDE
#         pods runs FLOOD_RUNS times quietly, then while FLOODERS goroutines
#         of another caller list namespace A's FLOOD_JOBS suspended Jobs
#         (the API server's list for the built-in, the executor's ListJobs
#         for jobplane), then while they list B's, which they may not, then
#         while they list a namespace of a new name each call (no cached
#         authorization: each is asked of the API server).
# The driver is services/executor/test/bench. kwok takes its stages from
# hack/kwok/stages, as the repository's other clusters: the pods of big and
# many carry no fate.jobplane.dev/ annotation, so they run at once and then
# succeed; those of tenants carry fate.jobplane.dev/after: TENANT_POD_RUNTIME,
# so they run that long, then succeed.
# Everything listens on 127.0.0.1; every wait is bounded and the cluster is
# deleted at the end.
#
#   hack/bench-executor.sh                 # the full measurement (about 30 minutes on 2 cores)
#   SIZE=200 QPS_PAIRS=200/300 NODES=3 hack/bench-executor.sh    # a quick run (2 minutes)
#   SCENARIOS=tenants QPS_PAIRS=20/30 hack/bench-executor.sh       # issue 19's tenants (about 7 minutes)
#   SCENARIOS=memory QPS_PAIRS=1000/1500 NODES=1 hack/bench-executor.sh   # issue 20's memory per cached pod (about 6 minutes)
#   SCENARIOS=flood QPS_PAIRS=20/30 NODES=2 hack/bench-executor.sh  # issue 19's hostile tenant (about 4 minutes)
#
# Environment (defaults):
#   QPS_PAIRS="20/30 200/300"   the controllers' client QPS/burst pairs
#   SIZE=2000 PARALLELISM=SIZE/10 BESIDE=2
#   JOBS=SIZE/4 JOB_COMPLETIONS=4 JOB_PARALLELISM=2
#   TENANT_JOBS=200 TENANT_JOB_COMPLETIONS=4 TENANT_JOB_PARALLELISM=4 TENANT_POD_RUNTIME=2s
#   TENANT_BESIDE_AFTER=creations (or pods, deadline)
#   FLOOD_JOBS=200 FLOOD_BESIDE=4 FLOODERS=64 FLOOD_RUNS=3
#   SCENARIOS="big many" (or any of big, many, tenants, flood, memory) NODES=10 WORKERS=5 SCENARIO_TIMEOUT=20m
#   MEMORY_PODS=10000 MEMORY_SETTLE=130s (each memory reading watches the heaps
#     this long: past the runtime's forced collection every 2 minutes)
#   MEMORY_INDEXED= (1: the memory scenario's pods as Indexed Jobs', each
#     with a completion index label and annotation of its own)
#   KCM_CONTROLLERS (kube-controller-manager's --controllers; all but for
#     memory; the Job scenarios need at least job-controller,
#     namespace-controller, garbage-collector-controller,
#     serviceaccount-controller and node-lifecycle-controller, which lifts
#     the nodes' not-ready taint)
#   PROFILE_SECONDS=0: when set, CPU profiles of the executor, the planner
#     and kube-controller-manager, back to back in windows of that many
#     seconds (at most 50), over what the driver counts (the last window may
#     outlast it by up to PROFILE_SECONDS, idle: the cleanup waits for it),
#     merged into one file per service and run, kept beside the results
#     (go tool pprof FILE); those of the
#     built-in's run (...-builtin.pprof) are what following it costs, the
#     base to subtract (go tool pprof -diff_base BUILTIN JOBPLANE); each
#     side's share by what its samples were doing in shares-SCENARIO-QPS.md
#   SERVICES_ENV: environment of the planner and the executor (not of the
#     cluster), as NAME=VALUE words, for probes such as GOMAXPROCS=1
#   VARIANTS="builtin jobplane": the runs of each scenario, in this order;
#     "builtin jobplane jobplane builtin" balances what a run leaves to the
#     next (the report shows each side's last run; results keeps them all,
#     profiles the last of each side)
# Results (JSON lines), the services' logs and their /metrics at the end of
# each QPS pair are kept under ${JOBPLANE_CACHE}/bench/runs/.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
source "${root}/hack/lib.sh"
cd "${root}"

qps_pairs=${QPS_PAIRS:-"20/30 200/300"}
size=${SIZE:-2000}
parallelism=${PARALLELISM:-$((size / 10))}
beside=${BESIDE:-2}
jobs=${JOBS:-$((size / 4))}
job_completions=${JOB_COMPLETIONS:-4}
job_parallelism=${JOB_PARALLELISM:-2}
tenant_jobs=${TENANT_JOBS:-200}
tenant_job_completions=${TENANT_JOB_COMPLETIONS:-4}
tenant_job_parallelism=${TENANT_JOB_PARALLELISM:-4}
tenant_pod_runtime=${TENANT_POD_RUNTIME:-2s}
tenant_beside_after=${TENANT_BESIDE_AFTER:-creations}
flood_jobs=${FLOOD_JOBS:-200}
flood_beside=${FLOOD_BESIDE:-4}
flooders=${FLOODERS:-64}
flood_runs=${FLOOD_RUNS:-3}
scenarios=${SCENARIOS:-"big many"}
memory_pods=${MEMORY_PODS:-10000}
memory_settle=${MEMORY_SETTLE:-130s}
memory_indexed=${MEMORY_INDEXED:+-indexed}
profile_seconds=${PROFILE_SECONDS:-0}
services_env=${SERVICES_ENV:-}
kcm_controllers=${KCM_CONTROLLERS:-}
if [[ -z ${kcm_controllers} && ${scenarios} == memory ]]; then kcm_controllers=job-controller; fi
nodes=${NODES:-10}
workers=${WORKERS:-5}
scenario_timeout=${SCENARIO_TIMEOUT:-20m}
variants=${VARIANTS:-"builtin jobplane"}
for variant in ${variants}; do
  [[ ${variant} == builtin || ${variant} == jobplane ]] || die "VARIANTS: ${variant} is neither builtin nor jobplane"
done

name=jobplane-bench
export KWOK_WORKDIR="${JOBPLANE_CACHE}/bench"
run_dir="${KWOK_WORKDIR}/runs/$(date +%Y%m%d-%H%M%S)"
results="${run_dir}/results.jsonl"
kubeconfig="${run_dir}/kubeconfig"
mkdir -p "${run_dir}"
kwoklog="${run_dir}/kwokctl.log"

bin=$("${root}/hack/build-bins.sh" cluster | tail -n 1)
work=$(mktemp -d)
counting=${work}/counting
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
    "${bin}/kwokctl" --name "${name}" delete cluster >>"${kwoklog}" 2>&1 || true
    cluster_up=false
  fi
  rm -rf "${work}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

kwokctl() {
  if ! "${bin}/kwokctl" --name "${name}" "$@" >>"${kwoklog}" 2>&1; then
    tail -n 20 "${kwoklog}" >&2
    die "kwokctl $1 $2 failed; its log: ${kwoklog}"
  fi
}
kubectl() { "${bin}/kubectl" --kubeconfig "${kubeconfig}" "$@"; }

# cluster_create QPS BURST: a cluster whose kube-controller-manager has that
# client rate; the scheduler's is unlimited, so that binding never holds
# either controller back. Neither elects a leader: on a busy 2-core machine
# the API server can stall past a lease's renew deadline, and a component
# that loses its lease exits (kwokctl does not restart it).
cluster_create() {
  local qps=$1 burst=$2
  if "${bin}/kwokctl" get clusters 2>/dev/null | grep -qx "${name}"; then
    log "deleting the cluster ${name} left by an earlier run"
    kwokctl delete cluster
  fi
  cat >"${work}/kwokctl.yaml" <<EOF
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  bindAddress: 127.0.0.1
  enableCRDs:
  - Stage
componentsPatches:
- name: kube-controller-manager
  extraArgs:
  - key: leader-elect
    value: "false"
  - key: kube-api-qps
    value: "${qps}"
  - key: kube-api-burst
    value: "${burst}"
  # Appended to kwokctl's own list, for PROFILE_SECONDS.
  - key: authorization-always-allow-paths
    value: /debug/pprof/*
${kcm_controllers:+  - key: controllers
    value: "${kcm_controllers}"
}- name: kube-scheduler
  extraArgs:
  - key: leader-elect
    value: "false"
  - key: kube-api-qps
    value: "5000"
  - key: kube-api-burst
    value: "10000"
EOF
  log "creating cluster ${name} (kube-controller-manager at ${qps}/${burst}, ${nodes} nodes)"
  cluster_up=true
  # kubetest.StartCluster takes the same lock: kwokctl picks its ports by
  # probing, and clusters created at the same time could pick the same ones.
  # -o: the cluster's processes must not inherit (and so hold) the lock.
  flock -o -w 600 "${TMPDIR:-/tmp}/jobplane-kwokctl-create.lock" \
    "${bin}/kwokctl" --name "${name}" create cluster -c "${work}/kwokctl.yaml" --runtime binary \
    --etcd-binary "${bin}/etcd" \
    --kube-apiserver-binary "${bin}/kube-apiserver" \
    --kube-controller-manager-binary "${bin}/kube-controller-manager" \
    --kube-scheduler-binary "${bin}/kube-scheduler" \
    --kwok-controller-binary "${bin}/kwok" \
    --kubeconfig "${kubeconfig}" --wait 2m >>"${kwoklog}" 2>&1 ||
    { tail -n 20 "${kwoklog}" >&2; die "creating the cluster failed; its log: ${kwoklog}"; }
  "${bin}/kwokctl" --name "${name}" get kubeconfig 2>>"${kwoklog}" >"${kubeconfig}"
  # Nodes become Ready only once their stages exist.
  kubectl wait --for condition=established --timeout 1m crd/stages.kwok.x-k8s.io >/dev/null
  kubectl apply -f "${root}/hack/kwok/stages" >/dev/null
  kwokctl scale node --replicas "${nodes}"
  kwok_nodes_ready 120 kubectl || die "the nodes are not Ready after 2 minutes; the cluster's logs: ${KWOK_WORKDIR}/clusters/${name}/logs"
  # kwok's nodes hold 110 pods each: enough for the widest moment of a run?
  local capacity
  capacity=$(kubectl get nodes -o jsonpath='{range .items[*]}{.status.allocatable.pods}{"\n"}{end}' | awk '{s += $1} END {print s}')
  local scenario need=0 n
  for scenario in ${scenarios}; do
    case ${scenario} in
      big) n=$((parallelism + beside)) ;;
      many) n=$((jobs * job_parallelism)) ;;
      tenants) n=$((tenant_jobs * tenant_job_parallelism + beside)) ;;
      flood) n=${flood_beside} ;;
      memory) n=0 ;;
      *) die "unknown scenario ${scenario} (big, many, tenants, flood or memory)" ;;
    esac
    if ((n > need)); then need=${n}; fi
  done
  ((capacity >= need)) || die "the ${nodes} nodes hold ${capacity} pods, the runs need ${need} at once: raise NODES"
  log "cluster ${name} ready: ${nodes} nodes holding ${capacity} pods (the runs need up to ${need} at once)"
}

cluster_delete() {
  kwokctl delete cluster
  cluster_up=false
}

# component_url COMPONENT: the https address of kube-controller-manager's or
# kube-scheduler's --secure-port (which serves /metrics and /healthz without
# authorization), from kwokctl's record of the cluster.
component_url() {
  local port
  port=$(awk -v c="  name: $1" '/^- args:/ {blk = ""} {blk = blk "\n" $0} $0 == c {print blk}' \
    "${KWOK_WORKDIR}/clusters/${name}/kwok.yaml" | grep -o -- '--secure-port=[0-9]*' | cut -d= -f2)
  [[ -n ${port} ]] || die "no --secure-port of $1 in ${KWOK_WORKDIR}/clusters/${name}/kwok.yaml"
  echo "https://127.0.0.1:${port}"
}

# components_healthy fails when the controller manager or the scheduler is
# gone: a run without them would only wait for its timeout.
components_healthy() {
  local url
  for url in "${kcm_url}" "${scheduler_url}"; do
    curl -skf --max-time 10 "${url}/healthz" >/dev/null ||
      die "${url}/healthz does not answer; logs in ${KWOK_WORKDIR}/clusters/${name}/logs"
  done
}

# start_services QPS BURST LABEL: planner and executor on free loopback ports.
start_services() {
  local qps=$1 burst=$2 label=$3 ports
  mapfile -t ports < <("${work}/bench" ports 4)
  planner_addr=127.0.0.1:${ports[0]}
  planner_metrics=http://127.0.0.1:${ports[1]}/metrics
  executor_metrics=http://127.0.0.1:${ports[3]}/metrics
  executor_addr=127.0.0.1:${ports[2]}
  # Loopback development mode, as make run: the executor calls the planner
  # without credentials (PlanSync needs authentication only, no API call),
  # and the benchmark reads both services' /metrics without credentials.
  env ${services_env} "${work}/planner" -grpc-addr "${planner_addr}" -metrics-addr "127.0.0.1:${ports[1]}" -authn-anonymous \
    -allow-unauthenticated-metrics -profiling -log-level warn >"${run_dir}/planner-${label}.log" 2>&1 &
  pids+=($!)
  env ${services_env} "${work}/executor" -kubeconfig "${kubeconfig}" -planner-addr "${planner_addr}" -authn-anonymous \
    -grpc-addr "127.0.0.1:${ports[2]}" -metrics-addr "127.0.0.1:${ports[3]}" -allow-unauthenticated-metrics \
    -kube-api-qps "${qps}" -kube-api-burst "${burst}" -workers "${workers}" -leader-elect=false \
    -profiling -log-level warn >"${run_dir}/executor-${label}.log" 2>&1 &
  pids+=($!)
  local i
  for ((i = 0; ; i++)); do
    curl -sf "http://127.0.0.1:${ports[3]}/readyz" >/dev/null 2>&1 && break
    ((i < 300)) || { tail -n 20 "${run_dir}/executor-${label}.log" >&2; die "the executor did not become ready"; }
    sleep 0.1
  done
  log "planner on ${planner_addr}, executor ready (metrics ${executor_metrics}, workers ${workers}, ${qps}/${burst})"
}

# profile NAME: CPU profiles of the executor, the planner and
# kube-controller-manager while the driver counts (its -counting-file exists:
# from its first reading of the counters to its last), back to back in
# windows of PROFILE_SECONDS, merged into one profile per service. The
# driver cleans up only once ${counting}.done says the last window ended.
profile() {
  local window=0 service
  until [[ -e ${counting} ]]; do
    [[ -e ${work}/profiling ]] || return 0
    sleep 0.2
  done
  while [[ -e ${counting} && -e ${work}/profiling ]]; do
    curl -sf "${executor_metrics%/metrics}/debug/pprof/profile?seconds=${profile_seconds}" >"${work}/executor-cpu-${window}.pprof" &
    curl -sf "${planner_metrics%/metrics}/debug/pprof/profile?seconds=${profile_seconds}" >"${work}/planner-cpu-${window}.pprof" &
    curl -skf "${kcm_url}/debug/pprof/profile?seconds=${profile_seconds}" >"${work}/kcm-cpu-${window}.pprof" || true
    wait
    window=$((window + 1))
  done
  for service in executor planner kcm; do
    go tool pprof -proto "${work}/${service}"-cpu-*.pprof >"${run_dir}/${service}-cpu-$1.pprof" 2>/dev/null || true
    rm -f "${work}/${service}"-cpu-*.pprof
  done
  touch "${counting}.done"
}

log "building planner, executor and the driver"
go build -o "${work}/planner" ./services/planner/cmd/planner
go build -o "${work}/executor" ./services/executor/cmd/executor
go build -o "${work}/bench" ./services/executor/test/bench

# The driver waits at most SCENARIO_TIMEOUT for the Jobs (tenants: and two
# minutes for B's Job alone), then up to a minute for writes to settle and
# five for each namespace to go.
seconds() {
  case $1 in
    *h) echo $((${1%h} * 3600)) ;;
    *m) echo $((${1%m} * 60)) ;;
    *s) echo "${1%s}" ;;
    *) echo "$1" ;;
  esac
}
driver_timeout=$(($(seconds "${scenario_timeout}") + 900))

commit=$(git rev-parse --short HEAD)
if [[ -n $(git status --porcelain -- services lib gen) ]]; then
  commit+=" with uncommitted changes"
fi
log "results: ${results}; commit ${commit}; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for pair in ${qps_pairs}; do
  qps=${pair%/*} burst=${pair#*/}
  label="${qps}-${burst}"
  cluster_create "${qps}" "${burst}"
  start_services "${qps}" "${burst}" "${label}"
  kcm_url=$(component_url kube-controller-manager)
  scheduler_url=$(component_url kube-scheduler)
  for scenario in ${scenarios}; do
    if [[ ${scenario} == memory ]]; then
      log "${pair}: memory, ${memory_pods} pods (kube-controller-manager --controllers=${kcm_controllers:-all})"
      "${work}/bench" memory -kubeconfig "${kubeconfig}" -pods "${memory_pods}" ${memory_indexed} -settle "${memory_settle}" -results "${results}" \
        -kcm-metrics "${kcm_url}/metrics" -executor-metrics "${executor_metrics}" | tee "${run_dir}/memory-${label}.md"
      # Where the executor's holds it: go tool pprof -sample_index=inuse_space FILE
      curl -sf "${executor_metrics%/metrics}/debug/pprof/heap?gc=1" >"${run_dir}/executor-heap-memory-${label}.pprof" || true
      continue
    fi
    for variant in ${variants}; do
      components_healthy
      log "${pair}: ${scenario}, ${variant}"
      if [[ ${scenario} == tenants ]]; then
        scenario_args=(-jobs "${tenant_jobs}" -job-completions "${tenant_job_completions}"
          -job-parallelism "${tenant_job_parallelism}" -pod-runtime "${tenant_pod_runtime}"
          -beside-after "${tenant_beside_after}")
      elif [[ ${scenario} == flood ]]; then
        scenario_args=(-jobs "${flood_jobs}" -beside "${flood_beside}" -flooders "${flooders}" -flood-runs "${flood_runs}"
          -executor-addr "${executor_addr}")
      else
        scenario_args=(-jobs "${jobs}" -job-completions "${job_completions}" -job-parallelism "${job_parallelism}")
      fi
      profiler= counting_args=()
      if ((profile_seconds > 0)); then
        touch "${work}/profiling"
        counting_args=(-counting-file "${counting}")
        # In the built-in's run, what following it costs jobplane: the base
        # of go tool pprof -diff_base.
        suffix=
        [[ ${variant} == builtin ]] && suffix=-builtin
        profile "${scenario}-${label}${suffix}" &
        profiler=$!
      fi
      timeout "${driver_timeout}" "${work}/bench" "${scenario}" -kubeconfig "${kubeconfig}" -variant "${variant}" \
        -qps "${pair}" -results "${results}" -timeout "${scenario_timeout}" \
        -kcm-metrics "${kcm_url}/metrics" -executor-metrics "${executor_metrics}" -planner-metrics "${planner_metrics}" \
        -completions "${size}" -parallelism "${parallelism}" -beside "${beside}" "${scenario_args[@]}" "${counting_args[@]}" >/dev/null
      if [[ -n ${profiler} ]]; then
        rm -f "${work}/profiling"
        wait "${profiler}" || true
        rm -f "${counting}" "${counting}.done"
      fi
    done
    if ((profile_seconds > 0)); then
      "${work}/bench" shares -run "${run_dir}" -scenario "${scenario}" -qps "${label}" >"${run_dir}/shares-${scenario}-${label}.md" ||
        log "no shares for ${scenario} at ${pair}"
    fi
  done
  curl -sf "${executor_metrics}" >"${run_dir}/executor-metrics-${label}.txt" || true
  curl -sf "${planner_metrics}" >"${run_dir}/planner-metrics-${label}.txt" || true
  curl -skf "${kcm_url}/metrics" >"${run_dir}/kcm-metrics-${label}.txt" || true
  stop_services
  cluster_delete
done

echo
"${work}/bench" report -results "${results}"
echo
echo "Commit ${commit}, on a shared machine with $(nproc) cores (load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)); results in ${results}."
