#!/usr/bin/env bash
# Does `--time-limit S` bound the whole command? Runs each long-running
# memplan command at S = 2 and 5 seconds and prints its wall time against
# S + 0.5 s (the promise in the README):
#   plan --order ilp        ResNet-18, batch 1 (order phase + allocation phase)
#   plan --budget 33%       ResNet-50, batch 184 (store-all, then rematerialization)
#   alloc                   the largest vendored trace (PanGu-2.6B, 18,692 buffers)
#   pareto --points 4       ResNet-18, batch 8 (bisection + every point)
# Usage: bench/time_limits.sh [BUILD_DIR]   (after `bash cmake/setup.sh build`)
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
memplan="$build/bin/memplan"
work="$build/time_limits"
mkdir -p "$work"
[ -x "$memplan" ] || { echo "time_limits: $memplan not built (bash cmake/setup.sh build)" >&2; exit 2; }

"$memplan" zoo resnet18 --batch 1 -o "$work/resnet18_b1.json" >/dev/null || exit 2
"$memplan" zoo resnet18 --batch 8 -o "$work/resnet18_b8.json" >/dev/null || exit 2
"$memplan" zoo resnet50 -o "$work/resnet50.json" >/dev/null || exit 2
trace="$root/data/large/pangu_2.6B.csv"

now() { date +%s.%N; }
failures=0
printf '%-44s %4s %9s %9s %s\n' "command" "S" "wall (s)" "limit" "verdict"
run() { # S label args...
  local s=$1 label=$2
  shift 2
  local t0 t1 wall rc
  t0=$(now)
  "$memplan" "$@" --time-limit "$s" >"$work/out.txt" 2>&1
  rc=$?
  t1=$(now)
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
  local verdict="ok"
  awk -v w="$wall" -v s="$s" 'BEGIN { exit !(w <= s + 0.5) }' || { verdict="OVER"; failures=$((failures + 1)); }
  [ "$rc" -le 1 ] || { verdict="$verdict (exit $rc: $(tail -1 "$work/out.txt"))"; failures=$((failures + 1)); }
  printf '%-44s %4s %9.2f %9.1f %s\n' "$label" "$s" "$wall" "$(awk -v s="$s" 'BEGIN { print s + 0.5 }')" "$verdict"
}
for s in 2 5; do
  run "$s" "plan --order ilp (resnet18, batch 1)" plan "$work/resnet18_b1.json" --order ilp -o "$work/p.json"
  run "$s" "plan --budget 33% (resnet50, batch 184)" plan "$work/resnet50.json" --budget 33% -o "$work/p.json"
  run "$s" "alloc (pangu_2.6B, 18,692 buffers)" alloc --input "$trace" --output "$work/o.csv"
  run "$s" "pareto --points 4 (resnet18, batch 8)" pareto "$work/resnet18_b8.json" --points 4 -o "$work/c.csv"
done
echo
[ "$failures" -eq 0 ] && echo "every command within S + 0.5 s" || echo "$failures over the limit or failed"
exit $((failures > 0))
