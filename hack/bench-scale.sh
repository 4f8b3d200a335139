#!/usr/bin/env bash
# The planner at scale, side by side with the reference, as the tables of
# BENCHMARKS.md ("Planner at scale"):
#   - jobplane: BenchmarkScale (services/planner/internal/svc), the executor's
#     whole round trip for one sync of scalestate's Indexed Job over a
#     loopback StreamPlanSync stream, full and delta (1%, 10% of the pods
#     changed), and the full snapshot by unary PlanSync, 1k/10k/100k pods;
#   - the reference: BenchmarkReferenceSyncJob (hack/refbench, its own module
#     requiring k8s.io/kubernetes v1.36.3), the Job controller's syncJob in
#     process on the same state, objects already in the informers' stores.
# Both run back to back in each of COUNT runs (default 3); ratios are taken
# within a run, and the median of them is printed.
#
#   COUNT=5 hack/bench-scale.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "${root}"
count=${COUNT:-3}
out=$(mktemp -d)
trap 'rm -rf "${out}"' EXIT

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# field FILE NAME FIELD: a field of a benchmark line.
field() { grep -E "^$2-[0-9]+ " "$1" | awk -v f="$3" '{ for (i = 1; i <= NF; i++) if ($(i) == f) print $(i - 1) }' | head -n 1; }

for run in $(seq "${count}"); do
  for size in 1000 10000 100000; do
    iters=20
    [[ $size == 100000 ]] && iters=3
    JOBPLANE_SCALE_SIZES=$size go test -run '^$' -bench "BenchmarkScale/pods=${size}/" -benchtime "${iters}x" -count 1 \
      ./services/planner/internal/svc/ >>"${out}/jobplane.${run}"
    (cd hack/refbench && GOWORK=off go test -run '^$' -bench "BenchmarkReferenceSyncJob/pods=${size}\$/" -benchtime "${iters}x" -count 1 .) \
      >>"${out}/reference.${run}"
  done
done

echo "### One sync at scale: jobplane's round trip vs the reference's in-process syncJob (median of ${count} runs)"
echo
echo "| pods | jobplane mode | jobplane ms/op | allocs/op | MB/op | request bytes | response bytes | reference ms/op | jobplane / reference | target |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for size in 1000 10000 100000; do
  for mode in full unary delta-1% delta-10%; do
    name="BenchmarkScale/pods=${size}/mode=${mode}"
    case $mode in
      full | unary) states="changed-1%" target="≤ 1" ;;
      delta-1%) states="steady changed-1%" target="≤ 0.25" ;;
      delta-10%) states="steady changed-10%" target="≤ 0.5" ;;
    esac
    : >"${out}/ratios" ; : >"${out}/ours" ; : >"${out}/ref"
    for run in $(seq "${count}"); do
      ours=$(field "${out}/jobplane.${run}" "${name}" ns/op)
      # A delta alternates between the two states: the reference is timed
      # on each, and compared with their mean.
      ref=0
      for st in $states; do
        r=$(field "${out}/reference.${run}" "BenchmarkReferenceSyncJob/pods=${size}/state=${st}" ns/op)
        ref=$(awk -v a="$ref" -v b="$r" 'BEGIN{print a + b}')
      done
      ref=$(awk -v a="$ref" -v n="$(wc -w <<<"$states")" 'BEGIN{print a / n}')
      echo "$ours" >>"${out}/ours"
      echo "$ref" >>"${out}/ref"
      awk -v a="$ours" -v b="$ref" 'BEGIN{print a / b}' >>"${out}/ratios"
    done
    printf '| %s | %s | %.1f | %s | %.1f | %s | %s | %.1f | %.2f | %s |\n' "$size" "$mode" \
      "$(median <"${out}/ours" | awk '{print $1/1e6}')" \
      "$(field "${out}/jobplane.1" "${name}" allocs/op)" \
      "$(field "${out}/jobplane.1" "${name}" B/op | awk '{print $1/1e6}')" \
      "$(field "${out}/jobplane.1" "${name}" req-bytes)" "$(field "${out}/jobplane.1" "${name}" resp-bytes)" \
      "$(median <"${out}/ref" | awk '{print $1/1e6}')" "$(median <"${out}/ratios")" "$target"
  done
done
echo
echo "### The reference's syncJob alone (run 1)"
echo
echo "| pods | state | ms/op | allocs/op | MB/op |"
echo "|---:|---|---:|---:|---:|"
for size in 1000 10000 100000; do
  for st in steady changed-1% changed-10%; do
    name="BenchmarkReferenceSyncJob/pods=${size}/state=${st}"
    printf '| %s | %s | %.1f | %s | %.1f |\n' "$size" "$st" "$(field "${out}/reference.1" "${name}" ns/op | awk '{print $1/1e6}')" \
      "$(field "${out}/reference.1" "${name}" allocs/op)" "$(field "${out}/reference.1" "${name}" B/op | awk '{print $1/1e6}')"
  done
done
