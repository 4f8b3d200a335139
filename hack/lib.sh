# Shared by the scripts in hack/: paths and messages. Sourced, not run.

# Everything built or downloaded outside git lives here (Go binaries, cluster state).
JOBPLANE_CACHE=${JOBPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobplane}
export JOBPLANE_CACHE

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# kwok_nodes_ready SECONDS KUBECTL...: waits up to SECONDS for every node to be
# Ready, nudging kwok's stages every 10 s while they are not and once after.
# kwok caches its list of stages under its informer's last resource version,
# which client-go's reflector moves on before the objects reach the store:
# when its first list lands while they are read, kwok caches an empty list
# and never starts its node and pod controllers. Any later change to a Stage
# refreshes that cache. lib/kubetest's waitNodesReady does the same.
kwok_nodes_ready() {
  local deadline=$((SECONDS + $1)) next_nudge=$((SECONDS + 10))
  shift
  until all_nodes_ready "$@"; do
    ((SECONDS < deadline)) || return 1
    if ((SECONDS >= next_nudge)); then
      log "nodes not Ready yet; nudging kwok's stages"
      nudge_stages "$@"
      next_nudge=$((SECONDS + 10))
    fi
    sleep 1
  done
  nudge_stages "$@"
}

# all_nodes_ready KUBECTL...: whether there are nodes and all are Ready, in
# one read (kubectl wait reads a node at a time: seconds for 50).
all_nodes_ready() {
  local ready
  ready=$("$@" get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null) || return 1
  [[ -n ${ready} ]] && ! grep -qvx True <<<"${ready}"
}

nudge_stages() {
  "$@" annotate stages.kwok.x-k8s.io --all --overwrite "jobplane.dev/nudged=$(date +%s%N)" >/dev/null
}
