#!/usr/bin/env bash
# Predicted against measured overhead of the five CPU examples.
# For each example, at 50 % of the store-all arena and at the smallest budget
# the planner reaches, one run of
#   train_X --cost measured --budget B --compare --pairs N --against roofline:v100
# profiles every op and variant on this machine, plans with the measured
# costs, plans again at the same budget with the V100 roofline, and runs
# store-all (each op's fastest variant), the measured-cost plan and the
# roofline plan interleaved (A B C A B C ..., N timed rounds after one
# warm-up round), so that the three are timed side by side in one process.
# Columns: the planner's predicted overhead with measured costs; the measured
# overhead (median step of the plan / median step of store-all - 1) and its
# spread (p75 - p25 of the per-round overheads); whether |measured -
# predicted| <= max(5 points, 25 % of measured); the roofline plan's measured
# overhead and what the roofline predicted for it; and which plan is faster
# beyond the noise (the larger of the two spreads). At the smallest budget
# the roofline plan may not reach the measured-cost plan's arena: it then
# runs at the smallest budget it reaches, and the row says how many bytes.
# Usage: bench/overhead_table.sh [BUILD_DIR] [ROUNDS]   (default build/, 15 rounds)
#        RENDER_ONLY=1 bench/overhead_table.sh [BUILD_DIR]: the table again from the last run's logs
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
rounds="${2:-15}"
logs="$build/overhead_table"
mkdir -p "$logs"
for e in mlp cnn resnet unet transformer; do
  [ -x "$build/bin/train_$e" ] || { echo "overhead_table: $build/bin/train_$e not built (bash cmake/setup.sh build)" >&2; exit 2; }
done

printf '| example | budget | arena bytes | predicted | measured (spread) | within max(5, 25 %%) | roofline plan: measured (its prediction) | measured-cost plan vs roofline plan |\n'
printf '|---|---|---:|---:|---:|---|---:|---|\n'
failures=0
for e in mlp cnn resnet unet transformer; do
  for b in 50% min; do
    log="$logs/${e}_${b%\%}.log"
    if [ -n "${RENDER_ONLY:-}" ] && [ -f "$log" ]; then :  # RENDER_ONLY=1: the table from the logs of the last run
    elif ! "$build/bin/train_$e" --cost measured --budget "$b" --compare --pairs "$rounds" --against roofline:v100 >"$log" 2>&1; then
      printf '| %s | %s | failed: see %s |\n' "$e" "$b" "$log"; failures=$((failures + 1)); continue
    fi
    awk -v e="$e" -v b="$b" '
      /^compare:/ { match($0, /measured overhead [-+0-9.]+ %/); m = substr($0, RSTART + 17, RLENGTH - 19) + 0
                    match($0, /p75 - p25: [0-9.]+ points/); ms = substr($0, RSTART + 11, RLENGTH - 18) + 0
                    match($0, /predicted [-+0-9.]+ %/); p = substr($0, RSTART + 10, RLENGTH - 12) + 0 }
      /^against:/ { match($0, /measured overhead [-+0-9.]+ %/); rm = substr($0, RSTART + 17, RLENGTH - 19) + 0
                    match($0, /arena [0-9]+ bytes/); ra = substr($0, RSTART + 6, RLENGTH - 12) + 0
                    match($0, /spread [0-9.]+ points/); rs = substr($0, RSTART + 7, RLENGTH - 14) + 0
                    match($0, /predicted [-+0-9.]+ %/); rp = substr($0, RSTART + 10, RLENGTH - 12) + 0 }
      /^loss / { for (i = 1; i < NF; ++i) { if ($i == "arena_bytes") arena = $(i + 1) + 0; if ($i == "budget_bytes") budget = $(i + 1) + 0 } }
      END {
        d = m - p; if (d < 0) d = -d
        tol = 0.25 * (m < 0 ? -m : m); if (tol < 5) tol = 5
        noise = ms > rs ? ms : rs
        verdict = (m < rm - noise) ? "faster" : (m > rm + noise) ? "SLOWER" : "same within noise"
        if (ra > budget) verdict = "roofline plan misses the budget: its smallest arena is " ra " bytes; measured-cost plan " verdict
        printf "| %s | %s | %s | %+.1f %% | %+.1f %% (%.1f) | %s (%.1f points) | %+.1f %% (%+.1f %%) | %s (%+.1f points, noise %.1f) |\n",
               e, b, arena, p, m, ms, d <= tol ? "yes" : "NO", d, rm, rp, verdict, m - rm, noise
      }' "$log"
  done
done
echo
echo "logs: $logs/"
exit $((failures > 0))
