# Shared by the scripts in hack/: paths and messages. Sourced, not run.

# Everything built or downloaded outside git lives here (Go binaries, cluster state).
JOBPLANE_CACHE=${JOBPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobplane}
export JOBPLANE_CACHE

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
