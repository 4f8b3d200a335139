# Shared by the scripts in hack/: paths and messages. Sourced, not run.

# Everything built or downloaded outside git lives here (Go binaries, cluster state).
JOBPLANE_CACHE=${JOBPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobplane}
export JOBPLANE_CACHE

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# kwok_nodes_ready SECONDS KUBECTL...: waits up to SECONDS for every node to be
# Ready; while they are not, nudges kwok's stages and the nodes every 10 s,
# and the stages once after. kwok caches its list of stages under its
# informer's last resource version, which client-go's reflector moves on
# before the objects reach the store: read in between (its first list landing
# while they are created), the list stays short, even empty, and kwok never
# makes its nodes Ready. A change to a Stage refreshes the cache; a change to
# a node has kwok look at it again. lib/kubetest's waitNodesReady does the same.
kwok_nodes_ready() {
  local deadline=$((SECONDS + $1)) next_nudge=$((SECONDS + 10))
  shift
  until all_nodes_ready "$@"; do
    ((SECONDS < deadline)) || return 1
    if ((SECONDS >= next_nudge)); then
      log "nodes not Ready yet; nudging kwok's stages and the nodes"
      nudge stages.kwok.x-k8s.io "$@"
      nudge nodes "$@"
      next_nudge=$((SECONDS + 10))
    fi
    sleep 1
  done
  nudge stages.kwok.x-k8s.io "$@"
  return 0
}

# all_nodes_ready KUBECTL...: whether there are nodes and all are Ready, in
# one read (kubectl wait reads a node at a time: seconds for 50). A node
# without a Ready condition yet reads as "name=".
all_nodes_ready() {
  local ready
  ready=$("$@" get nodes --request-timeout 10s \
    -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null) || return 1
  [[ -n ${ready} ]] && ! grep -qv '=True$' <<<"${ready}"
}

# nudge RESOURCE KUBECTL...: annotates every object of RESOURCE, so that its
# watchers see it changed; a failure is logged, not fatal.
nudge() {
  local resource=$1
  shift
  "$@" annotate "${resource}" --all --overwrite --request-timeout 10s "jobplane.dev/nudged=$(date +%s%N)" >/dev/null ||
    log "nudging ${resource} failed"
}
