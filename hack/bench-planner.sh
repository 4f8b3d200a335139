#!/usr/bin/env bash
# The planner's benchmarks, as the tables of BENCHMARKS.md:
#   1. engine.Sync for Indexed Jobs of 100 to 100,000 pods (ns/op, allocs/op,
#      growth between sizes next to n log n);
#   2. PlanSync over loopback gRPC for a 10-pod Job, unary and streaming,
#      next to a no-op handler with the same message sizes, in the same run.
# Every figure is the median of COUNT runs (default 5).
#
#   COUNT=9 hack/bench-planner.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "${root}"
count=${COUNT:-5}
out=$(mktemp)
trap 'rm -f "${out}" "${out}.run" "${out}.ratios"' EXIT

# median NAME_REGEX FIELD: the median of a benchmark's field over the runs.
median() {
  grep -E "^$1-[0-9]+ " "${out}" | awk -v f="$2" '{ for (i = 1; i <= NF; i++) if ($(i) == f) print $(i - 1) }' |
    sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

go test -run '^$' -bench 'BenchmarkSyncIndexed' -benchtime 20x -count "${count}" ./services/planner/internal/engine/ >"${out}"
echo "### engine.Sync, Indexed Job (median of ${count} runs)"
echo
echo "| pods | ns/op | allocs/op | B/op | ns/op growth | n log n growth |"
echo "|---:|---:|---:|---:|---:|---:|"
prev="" prev_n=""
for n in 100 1000 10000 100000; do
  name="BenchmarkSyncIndexed/pods=${n}"
  ns=$(median "${name}" ns/op)
  growth="" nlogn=""
  if [[ -n $prev ]]; then
    growth=$(awk -v a="$ns" -v b="$prev" 'BEGIN{printf "%.1fx", a/b}')
    nlogn=$(awk -v n="$n" -v p="$prev_n" 'BEGIN{printf "%.1fx", (n*log(n))/(p*log(p))}')
  fi
  printf '| %s | %.0f | %s | %s | %s | %s |\n' "$n" "$ns" "$(median "${name}" allocs/op)" "$(median "${name}" B/op)" "$growth" "$nlogn"
  prev=$ns prev_n=$n
done

# The planner and the no-op handler run back to back in each of COUNT runs;
# the ratio is taken within each run, then the median of the ratios, so that
# a noisy neighbour slowing one run down does not tilt the comparison.
: >"${out}"
for _ in $(seq "${count}"); do
  go test -run '^$' -bench 'BenchmarkPlanSyncGRPC' -benchtime 2s -count 1 ./services/planner/internal/svc/ >"${out}.run"
  cat "${out}.run" >>"${out}"
  for mode in unary stream; do
    p=$(grep -E "^BenchmarkPlanSyncGRPC/handler=planner/mode=${mode}-" "${out}.run" | awk '{print $3}')
    n=$(grep -E "^BenchmarkPlanSyncGRPC/handler=noop/mode=${mode}-" "${out}.run" | awk '{print $3}')
    echo "${mode} $(awk -v p="$p" -v n="$n" 'BEGIN{print n/p}')" >>"${out}.ratios"
  done
done
rm -f "${out}.run"
echo
echo "### PlanSync over loopback gRPC, 10-pod Job (median of ${count} runs)"
echo
echo "| mode | planner plans/s | no-op plans/s | planner / no-op (median of per-run ratios) |"
echo "|---|---:|---:|---:|"
for mode in unary stream; do
  planner=$(median "BenchmarkPlanSyncGRPC/handler=planner/mode=${mode}" ns/op)
  noop=$(median "BenchmarkPlanSyncGRPC/handler=noop/mode=${mode}" ns/op)
  ratio=$(grep "^${mode} " "${out}.ratios" | awk '{print $2}' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  awk -v m="$mode" -v p="$planner" -v n="$noop" -v r="$ratio" 'BEGIN{printf "| %s | %.0f | %.0f | %.2f |\n", m, 1e9/p, 1e9/n, r}'
done
rm -f "${out}.ratios"
echo
echo "Request $(median 'BenchmarkPlanSyncGRPC/handler=planner/mode=unary' req-bytes) bytes, response $(median 'BenchmarkPlanSyncGRPC/handler=planner/mode=unary' resp-bytes) bytes, for both handlers."
