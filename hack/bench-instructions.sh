#!/usr/bin/env bash
# Counts the CPU instructions of one planner sync (engine.Sync) for Indexed
# Jobs of 100 to 100,000 pods, with valgrind's callgrind: unlike ns/op, the
# count does not depend on what else the machine runs, nor on cache misses,
# so its growth shows the algorithm's. Prints a markdown table.
#
#   hack/bench-instructions.sh [SIZES...]     (default: 100 1000 10000 100000)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
source "${root}/hack/lib.sh"
command -v valgrind >/dev/null || die "valgrind is needed (apt-get install valgrind)"

sizes=("$@")
((${#sizes[@]})) || sizes=(100 1000 10000 100000)
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
(cd "${root}/services/planner/internal/engine" && go test -c -o "${work}/engine.test" .)

# Instructions inside engine.Sync for a benchmark run of N iterations.
instructions() {
  local n=$1 iterations=$2
  # Callgrind cannot follow Go's preemption signals; one thread keeps the
  # count to the sync itself.
  GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 valgrind --tool=callgrind \
    --callgrind-out-file="${work}/cg.out" \
    --toggle-collect='github.com/jobplane/jobplane/services/planner/internal/engine.Sync' \
    "${work}/engine.test" -test.run '^$' -test.bench "BenchmarkSyncIndexed/pods=${n}\$" \
    -test.benchtime "${iterations}x" 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

echo "| pods | instructions per sync | per pod | growth vs previous size | n log n growth |"
echo "|---:|---:|---:|---:|---:|"
prev=""
prev_n=""
for n in "${sizes[@]}"; do
  # The difference between 3 and 2 iterations is one sync, without the setup.
  two=$(instructions "$n" 2)
  three=$(instructions "$n" 3)
  per=$((three - two))
  growth="" nlogn=""
  if [[ -n $prev ]]; then
    growth=$(awk -v a="$per" -v b="$prev" 'BEGIN{printf "%.1fx", a/b}')
    nlogn=$(awk -v n="$n" -v p="$prev_n" 'BEGIN{printf "%.1fx", (n*log(n))/(p*log(p))}')
  fi
  perpod=$(awk -v a="$per" -v n="$n" 'BEGIN{printf "%.0f", a/n}')
  printf '| %s | %s | %s | %s | %s |\n' "$n" "$per" "$perpod" "$growth" "$nlogn"
  prev=$per
  prev_n=$n
done
