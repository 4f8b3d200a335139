#!/usr/bin/env bash
# `make run`: the local cluster, then planner, executor and cron on their
# default ports, then the grpcurl commands to call them. Runs until Ctrl-C,
# which stops the services (the cluster stays; `make cluster-down` removes it).
#
# MODE=replace runs jobplane in place of kube-controller-manager's Job and
# CronJob controllers: in a cluster of its own (jobplane-replace) whose
# kube-controller-manager runs without them, the executor runs plain
# batch/v1 Jobs and the cron service plain batch/v1 CronJobs (-drop-in),
# with deploy/drop-in's admission policy for their cron.jobplane.dev/
# annotations.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
source "${root}/hack/lib.sh"
cd "${root}"

declare -A service_flags=([planner]="" [executor]="" [cron]="")
case "${MODE:-}" in
  "") ;;
  replace)
    export JOBPLANE_CLUSTER=${JOBPLANE_CLUSTER:-jobplane-replace}
    export JOBPLANE_KCM_CONTROLLERS='*,-job-controller,-cronjob-controller'
    service_flags[executor]="-drop-in -drop-in-probe-wait 5s"
    service_flags[cron]="-drop-in"
    ;;
  *) die "MODE=${MODE}: want replace, or no MODE" ;;
esac

"${root}/hack/cluster.sh" up "${NODES:-3}"
kubeconfig=$("${root}/hack/cluster.sh" kubeconfig)
kubectl="$("${root}/hack/build-bins.sh" cluster | tail -n 1)/kubectl"

# Who may call what on this development cluster. The services run with
# -authn-anonymous (loopback only): a call without credentials is
# system:anonymous, authorized by the cluster's RBAC like any caller, so
# system:anonymous gets jobplane's rights in the namespace default only, and
# so does the ServiceAccount jobplane-dev, whose tokens show the
# authenticated way in. Their /metrics are open on loopback
# (-allow-unauthenticated-metrics); deployed, they need get on /metrics.
"${kubectl}" --kubeconfig "${kubeconfig}" apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: ServiceAccount
metadata: {name: jobplane-dev, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: jobplane-dev, namespace: default}
rules:
  - apiGroups: [batch]
    resources: [jobs]
    verbs: [get, list, watch, create, delete]
  - apiGroups: [batch]
    resources: [jobs/status]
    verbs: [update]
  - apiGroups: [""]
    resources: [pods]
    verbs: [list]
  - apiGroups: [jobplane.dev]
    resources: [cronjobs, cronjobs/trigger, cronjobs/backfill]
    verbs: [get, list, watch, create, update, delete]
  # cron hands runs to the executor as itself: anonymous here, on loopback.
  # Its Jobs' owner references block their CronJob's deletion.
  - apiGroups: [jobplane.dev]
    resources: [cronjobs/finalizers]
    verbs: [update]
  # batch/v1 CronJobs' runs and watches (MODE=replace runs them).
  - apiGroups: [batch]
    resources: [cronjobs, cronjobs/trigger, cronjobs/backfill]
    verbs: [watch, create]
  - apiGroups: [batch]
    resources: [cronjobs/finalizers]
    verbs: [update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: jobplane-dev, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: jobplane-dev}
subjects:
  - {kind: User, apiGroup: rbac.authorization.k8s.io, name: "system:anonymous"}
  - {kind: ServiceAccount, name: jobplane-dev, namespace: default}
YAML

if [[ ${MODE:-} == replace ]]; then
  "${kubectl}" --kubeconfig "${kubeconfig}" apply -f deploy/drop-in/cron-annotations-policy.yaml >/dev/null
fi

# jobplane's CronJobs are a custom resource.
"${kubectl}" --kubeconfig "${kubeconfig}" apply -f deploy/kubernetes/05-crd-cronjobs.yaml >/dev/null
"${kubectl}" --kubeconfig "${kubeconfig}" wait --for condition=established --timeout 60s crd/cronjobs.jobplane.dev >/dev/null

logs="${JOBPLANE_CACHE}/run"
mkdir -p "${logs}"
declare -A grpc_port=([planner]=50051 [executor]=50052 [cron]=50053)
pids=()

stop_services() {
  ((${#pids[@]})) || return 0
  log "stopping the services"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
}
trap stop_services EXIT
trap 'exit 130' INT TERM

for svc in planner executor cron; do
  # A service left over from an earlier run would hold the port.
  pkill -f "^${root}/bin/${svc}( |$)" 2>/dev/null || true
done
for svc in planner executor cron; do
  # shellcheck disable=SC2086 # the flags are words
  KUBECONFIG="${kubeconfig}" "${root}/bin/${svc}" -authn-anonymous -allow-unauthenticated-metrics ${service_flags[$svc]} >"${logs}/${svc}.log" 2>&1 &
  pids+=($!)
done

for svc in planner executor cron; do
  addr="127.0.0.1:${grpc_port[$svc]}"
  for ((i = 0; ; i++)); do
    if bin/grpcurl -plaintext "${addr}" grpc.health.v1.Health/Check >/dev/null 2>&1; then
      break
    fi
    # The executor in drop-in mode first probes for 5 s.
    if ((i == 300)); then
      tail -n 20 "${logs}/${svc}.log" >&2
      die "${svc} did not become healthy on ${addr}; log: ${logs}/${svc}.log"
    fi
    sleep 0.1
  done
  log "${svc} serving on ${addr} (metrics on 127.0.0.1:909${grpc_port[$svc]: -1}, log ${logs}/${svc}.log)"
done

# replace_hint is what MODE=replace adds: a plain batch/v1 Job, run by the
# executor since the built-in Job controller is off.
replace_hint() {
  [[ ${MODE:-} == replace ]] || return 0
  cat <<HINT

  # MODE=replace: kube-controller-manager runs without its Job and CronJob
  # controllers (--controllers=${JOBPLANE_KCM_CONTROLLERS}); the executor runs
  # plain batch/v1 Jobs in their place (no managedBy, the events' source
  # job-controller), and the cron service plain batch/v1 CronJobs:
  ${kubectl} --kubeconfig ${kubeconfig} create job hello --image=busybox
  ${kubectl} --kubeconfig ${kubeconfig} get job hello -w
  ${kubectl} --kubeconfig ${kubeconfig} get events --field-selector involvedObject.name=hello -o custom-columns=SOURCE:.source.component,REASON:.reason
  # A batch/v1 CronJob with jobplane's extensions as annotations, run now
  # twice: the second run waits in its buffer (BufferOne, kept in the state
  # annotation) until the first ends; an invalid annotation is refused by
  # deploy/drop-in's admission policy.
  ${kubectl} --kubeconfig ${kubeconfig} apply -f deploy/examples/batch-cronjob.yaml
  bin/grpcurl -plaintext -d '{"namespace":"default","name":"example-batch-cron","apiVersion":"batch/v1"}' 127.0.0.1:50053 jobplane.v1.CronService/TriggerCronJob
  sleep 1; bin/grpcurl -plaintext -d '{"namespace":"default","name":"example-batch-cron","apiVersion":"batch/v1"}' 127.0.0.1:50053 jobplane.v1.CronService/TriggerCronJob
  ${kubectl} --kubeconfig ${kubeconfig} get cronjob example-batch-cron -o jsonpath='{.metadata.annotations.cron\\.jobplane\\.dev/state}{"\\n"}'
  ${kubectl} --kubeconfig ${kubeconfig} annotate cronjob example-batch-cron cron.jobplane.dev/catch-up-policy=Most --overwrite
  bin/grpcurl -plaintext -d '{"namespace":"default","apiVersion":"batch/v1"}' 127.0.0.1:50053 jobplane.v1.CronService/WatchJobInstances
HINT
}

cat <<EOF

jobplane is running, in plaintext on 127.0.0.1 only: the services refuse
plaintext on any other address (serve TLS with -tls-cert-file and
-tls-key-file, or -client-ca-file for mutual TLS; see bin/executor -help).
They run with -authn-anonymous (loopback development only): a call without
credentials is system:anonymous, which this cluster allows jobplane's RPCs in
the namespace default only. From ${root}, in another terminal:

  # What each service offers (server reflection):
  bin/grpcurl -plaintext 127.0.0.1:50051 list
  bin/grpcurl -plaintext 127.0.0.1:50052 list
  bin/grpcurl -plaintext 127.0.0.1:50053 list
  bin/grpcurl -plaintext 127.0.0.1:50053 describe jobplane.v1.CronService

  # Health, per service:
  bin/grpcurl -plaintext -d '{"service":"jobplane.v1.PlannerService"}' 127.0.0.1:50051 grpc.health.v1.Health/Check

  # Plan one sync of a Job (a snapshot as an executor sends it), and check a Job:
  bin/grpcurl -plaintext -d @ 127.0.0.1:50051 jobplane.v1.PlannerService/PlanSync < services/planner/testdata/plansync-indexed-job.json
  bin/grpcurl -plaintext -d '{"job":{"metadata":{"name":"x","namespace":"default"},"spec":{"parallelism":-1,"template":{"spec":{"restartPolicy":"Always","containers":[{"name":"main","image":"busybox"}]}}}}}' 127.0.0.1:50051 jobplane.v1.PlannerService/ValidateJob

  # Run a Job through the executor: submit it, follow it, read it with its pods.
  bin/grpcurl -plaintext -d @ 127.0.0.1:50052 jobplane.v1.ExecutorService/SubmitJob < deploy/examples/submit-job.json
  bin/grpcurl -plaintext -d '{"namespace":"default","labelSelector":"app=example"}' 127.0.0.1:50052 jobplane.v1.ExecutorService/WatchJobs
  bin/grpcurl -plaintext -d '{"namespace":"default","name":"example","includePods":true}' 127.0.0.1:50052 jobplane.v1.ExecutorService/GetJob
  bin/grpcurl -plaintext -d '{"namespace":"default"}' 127.0.0.1:50052 jobplane.v1.ExecutorService/ListJobs

  # The authenticated way (how every call is made outside loopback
  # development): a ServiceAccount's token from the TokenRequest API,
  # checked with TokenReview; each RPC then needs the RBAC permission its
  # contract names. jobplane-dev may list Jobs in default, not in kube-system:
  token=\$(${kubectl} --kubeconfig ${kubeconfig} create token jobplane-dev)
  bin/grpcurl -plaintext -H "authorization: Bearer \${token}" -d '{"namespace":"default"}' 127.0.0.1:50052 jobplane.v1.ExecutorService/ListJobs
  bin/grpcurl -plaintext -H "authorization: Bearer \${token}" -d '{"namespace":"kube-system"}' 127.0.0.1:50052 jobplane.v1.ExecutorService/ListJobs

  # The same with kubectl: spec.managedBy hands a Job to jobplane.
  ${kubectl} --kubeconfig ${kubeconfig} apply -f deploy/examples/job.yaml
  ${kubectl} --kubeconfig ${kubeconfig} get job example-kubectl -w
$(replace_hint)

  # CronJobs: create one from a file (every minute), preview its schedule,
  # run it now, follow the Jobs it emits (scheduled and manual), read it:
  bin/grpcurl -plaintext -d @ 127.0.0.1:50053 jobplane.v1.CronService/CreateCronJob < deploy/examples/create-cronjob.json
  bin/grpcurl -plaintext -d '{"schedule":"* * * * *","timeZone":"Etc/UTC","count":3}' 127.0.0.1:50053 jobplane.v1.CronService/PreviewSchedule
  bin/grpcurl -plaintext -d '{"namespace":"default","name":"example-every-minute"}' 127.0.0.1:50053 jobplane.v1.CronService/TriggerCronJob
  bin/grpcurl -plaintext -d '{"namespace":"default","cronJobName":"example-every-minute"}' 127.0.0.1:50053 jobplane.v1.CronService/WatchJobInstances
  bin/grpcurl -plaintext -d '{"namespace":"default","name":"example-every-minute"}' 127.0.0.1:50053 jobplane.v1.CronService/GetCronJob
  bin/grpcurl -plaintext -d '{"namespace":"default","name":"example-every-minute"}' 127.0.0.1:50053 jobplane.v1.CronService/DeleteCronJob

  # Or with kubectl (catch-up, BufferOne, jitter; short name jcj):
  ${kubectl} --kubeconfig ${kubeconfig} apply -f deploy/examples/cronjob.yaml
  ${kubectl} --kubeconfig ${kubeconfig} get jcj -w

  # The decision alone, for a platform keeping its own schedules: a
  # CronJob, its Jobs and the time in, the sync's plan out (nothing stored):
  bin/grpcurl -plaintext -d @ 127.0.0.1:50053 jobplane.v1.CronService/PlanCronJob < services/cron/testdata/plancronjob.json

  # The next runs of a schedule in a time zone (across the 2026 daylight-saving change):
  bin/grpcurl -plaintext -d '{"schedule":"30 9 * * MON-FRI","timeZone":"Europe/Paris","from":"2026-03-26T00:00:00Z","count":4}' 127.0.0.1:50053 jobplane.v1.CronService/PreviewSchedule

  # A bad request answers InvalidArgument with the violated fields:
  bin/grpcurl -plaintext -d '{"schedule":"TZ=UTC 0 * * * *","timeZone":"Local","from":"2026-03-26T00:00:00Z"}' 127.0.0.1:50053 jobplane.v1.CronService/PreviewSchedule

  # Metrics (open on loopback here; deployed, a scraper needs get on the
  # non-resource URL /metrics, as with kube-controller-manager's):
  curl -s 127.0.0.1:9093/metrics | grep -E '^grpc_server_handled_total.* [1-9]'

  # What each server admits, sheds and keeps open (calls, streams, unread
  # answers, connections; deploy/README.md, "Sizing the limits"):
  curl -s 127.0.0.1:9092/metrics | grep -E '^jobplane_(admission_(admitted|rejected)_total|connections)'

  # The cluster:
  ${kubectl} --kubeconfig ${kubeconfig} get nodes

Ctrl-C stops the services; make cluster-down removes the cluster.
EOF

wait -n "${pids[@]}" || true
die "a service exited; see ${logs}"
