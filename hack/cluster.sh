#!/usr/bin/env bash
# The local Kubernetes cluster: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok, built from pinned Go modules (hack/build-bins.sh
# cluster) and run by kwokctl's binary runtime on loopback.
#
#   hack/cluster.sh up [NODES]   create (or restart) the cluster with NODES kwok
#                                nodes (default 3); idempotent
#   hack/cluster.sh down         delete the cluster and its state
#   hack/cluster.sh kubeconfig   print the kubeconfig path
#
# The kubeconfig is written to ${JOBPLANE_CACHE}/kubeconfig (JOBPLANE_CACHE
# defaults to ~/.cache/jobplane; kubeconfig-NAME for another cluster than
# jobplane); JOBPLANE_CLUSTER names the cluster (jobplane).
# kwok's stages (how nodes and pods go through their lifecycle, and the pod
# fates of hack/kwok/stages/pod-fate.yaml) are Stage objects applied from
# hack/kwok/stages on every up, so editing them needs no new cluster.
# JOBPLANE_KCM_CONTROLLERS, when set, is kube-controller-manager's
# --controllers at creation (MODE=replace runs it without the Job and
# CronJob controllers, in a cluster of its own); a cluster created with
# other controllers is refused, with how to recreate it.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
source "${root}/hack/lib.sh"

name=${JOBPLANE_CLUSTER:-jobplane}
# The default cluster's kubeconfig keeps its name; another's has its own.
kubeconfig="${JOBPLANE_CACHE}/kubeconfig"
[[ ${name} == jobplane ]] || kubeconfig="${JOBPLANE_CACHE}/kubeconfig-${name}"
export KWOK_WORKDIR="${JOBPLANE_CACHE}/kwok"
kwoklog="${KWOK_WORKDIR}/kwokctl.log"

# kwokctl runs kwokctl for the cluster, its chatter going to a log that is
# shown when it fails.
kwokctl() {
  mkdir -p "${KWOK_WORKDIR}"
  if ! "${bin}/kwokctl" --name "${name}" "$@" 2>>"${kwoklog}"; then
    tail -n 20 "${kwoklog}" >&2
    die "kwokctl $1 $2 failed; its log: ${kwoklog}"
  fi
}

up() {
  local nodes=${1:-3}
  if exists; then
    same_controllers || die "cluster ${name} was created with other kube-controller-manager controllers than ${JOBPLANE_KCM_CONTROLLERS}; recreate it: JOBPLANE_CLUSTER=${name} $0 down"
    if ! ready; then
      log "cluster ${name} exists but is not running; starting it"
      kwokctl start cluster --wait 2m >/dev/null
    fi
  else
    log "creating cluster ${name}"
    kwokctl create cluster -c "$(kwokctl_config)" --runtime binary \
      --etcd-binary "${bin}/etcd" \
      --kube-apiserver-binary "${bin}/kube-apiserver" \
      --kube-controller-manager-binary "${bin}/kube-controller-manager" \
      --kube-scheduler-binary "${bin}/kube-scheduler" \
      --kwok-controller-binary "${bin}/kwok" \
      --kubeconfig "${kubeconfig}" --wait 2m >/dev/null
  fi
  kwokctl get kubeconfig >"${kubeconfig}"
  apply_stages
  kwokctl scale node --replicas "${nodes}" >/dev/null
  kwok_nodes_ready 60 "${bin}/kubectl" --kubeconfig "${kubeconfig}" ||
    die "the nodes of cluster ${name} are not Ready after a minute; logs in ${KWOK_WORKDIR}/clusters/${name}/logs"
  ready || die "cluster ${name} did not become ready; logs in ${KWOK_WORKDIR}/clusters/${name}/logs"
  log "cluster ${name} is ready with ${nodes} nodes; kubeconfig: ${kubeconfig}"
}

# kwokctl_config is hack/kwokctl.yaml, with kube-controller-manager's
# --controllers when JOBPLANE_KCM_CONTROLLERS sets them.
kwokctl_config() {
  local base="${root}/hack/kwokctl.yaml"
  if [[ -z ${JOBPLANE_KCM_CONTROLLERS:-} ]]; then
    echo "${base}"
    return
  fi
  local config="${KWOK_WORKDIR}/kwokctl-${name}.yaml"
  mkdir -p "${KWOK_WORKDIR}"
  {
    cat "${base}"
    printf 'componentsPatches:\n- name: kube-controller-manager\n  extraArgs:\n  - key: controllers\n    value: "%s"\n' "${JOBPLANE_KCM_CONTROLLERS}"
  } >"${config}"
  echo "${config}"
}

# same_controllers says whether the existing cluster was created with the
# --controllers JOBPLANE_KCM_CONTROLLERS asks for (when it asks).
same_controllers() {
  [[ -z ${JOBPLANE_KCM_CONTROLLERS:-} ]] && return 0
  grep -qF "value: \"${JOBPLANE_KCM_CONTROLLERS}\"" "${KWOK_WORKDIR}/kwokctl-${name}.yaml" 2>/dev/null
}

# apply_stages makes the cluster's Stage objects those of hack/kwok/stages,
# deleting the ones no longer there. Nodes become Ready only once their stages
# exist, so this comes before any node is added.
apply_stages() {
  local kubectl=("${bin}/kubectl" --kubeconfig "${kubeconfig}")
  "${kubectl[@]}" get crd stages.kwok.x-k8s.io >/dev/null 2>&1 ||
    die "cluster ${name} has no Stage CRD (it was created before hack/kwok/stages); recreate it: $0 down && $0 up"
  "${kubectl[@]}" wait --for condition=established --timeout 1m crd/stages.kwok.x-k8s.io >/dev/null
  "${kubectl[@]}" apply --prune --all --prune-allowlist=kwok.x-k8s.io/v1alpha1/Stage \
    -f "${root}/hack/kwok/stages" >/dev/null
}

exists() {
  "${bin}/kwokctl" get clusters 2>/dev/null | grep -qx "${name}"
}

ready() {
  [[ -f ${kubeconfig} ]] && "${bin}/kubectl" --kubeconfig "${kubeconfig}" get --raw /readyz >/dev/null 2>&1
}

down() {
  if exists; then
    kwokctl delete cluster >/dev/null
    log "cluster ${name} deleted"
  else
    log "no cluster ${name}"
  fi
  rm -f "${kubeconfig}"
}

case "${1:-}" in
  up | down) bin=$("${root}/hack/build-bins.sh" cluster | tail -n 1) ;;
esac
case "${1:-}" in
  up) up "${2:-3}" ;;
  down) down ;;
  kubeconfig) echo "${kubeconfig}" ;;
  *) die "usage: $0 up [NODES] | down | kubeconfig" ;;
esac
