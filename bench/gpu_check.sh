#!/usr/bin/env bash
# The GPU check of memplan's CUDA backend, in one go (< 8 min on one H200):
#   1. configure + build the CUDA targets (build-gpu/, Release, -j$(nproc))
#   2. the GPU tests (memplan_cuda_tests: each layer vs the CPU reference,
#      planned vs naive training) and the recorded-profile tests
#   3. the allocation benchmarks (naive cudaMalloc / stream-ordered pool / arena)
#   4. the measured profile of the cnn example (memplan_profile_cuda)
#   5. ResNet-50 at batch 184 with plans at one third and one half of store-all
#      made with costs measured on the GPU: predicted vs measured overhead
#      (store-all and the plan interleaved, --compare)
# and prints ONE summary table. Without a GPU it says so and exits 0.
# Usage: bench/gpu_check.sh [BUILD_DIR]   (run from anywhere; logs in BUILD_DIR/gpu_check/)
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build-gpu}"
logs="$build/gpu_check"
mkdir -p "$logs"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU here (nvidia-smi finds none); nothing to check."
  exit 0
fi
gpu="$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)"
jobs="$(nproc)"
declare -a rows
row() { rows+=("$(printf '%-34s | %-8s | %s' "$1" "$2" "$3")"); }
stamp() { date +%s; }

t0=$(stamp)
if cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMPLAN_ENABLE_CUDA=ON \
     >"$logs/configure.log" 2>&1 &&
   cmake --build "$build" -j "$jobs" --target memplan_cuda_tests memplan_cuda_recorded_tests bench_cuda_alloc \
     memplan_profile_cuda train_resnet50_cuda train_cnn_cuda >"$logs/build.log" 2>&1; then
  row "build (CUDA targets)" "ok" "$(( $(stamp) - t0 )) s"
else
  row "build (CUDA targets)" "FAILED" "see $logs/build.log"
  printf '\nmemplan GPU check on %s\n' "$gpu"; printf '%s\n' "${rows[@]}"; exit 1
fi
bin="$build/bin"
status=0

t0=$(stamp)
timeout 180 "$bin/memplan_cuda_tests" >"$logs/gpu_tests.log" 2>&1; rc=$?
summary="$(grep -E '^\[doctest\] (test cases|assertions)' "$logs/gpu_tests.log" | sed 's/\[doctest\] //' | tr '\n' ' ')"
if [ $rc -eq 0 ]; then row "GPU tests" "ok" "$summary($(( $(stamp) - t0 )) s)"; else row "GPU tests" "FAILED" "rc $rc; $summary"; status=1; fi
# Per-model agreement with the CPU reference (cuda.layers.match_cpu_reference; limit 2e-3).
while read -r _ model rest; do
  row "  agreement ${model%:}" "" "$rest"
done < <(grep -E '^agreement ' "$logs/gpu_tests.log")
"$bin/memplan_cuda_recorded_tests" >"$logs/recorded_tests.log" 2>&1 && row "recorded-profile tests" "ok" "" || { row "recorded-profile tests" "FAILED" "see log"; status=1; }

timeout 150 "$bin/bench_cuda_alloc" --benchmark_min_time=0.2 --benchmark_format=console >"$logs/bench_alloc.log" 2>&1 ||
  { row "allocation benchmarks" "FAILED" "see $logs/bench_alloc.log"; status=1; }
# One row per benchmark: real time per step, allocations, peak device bytes.
while read -r name t unit _ _ _ rest; do
  allocs="$(sed -n 's/.*allocations_per_step=\([^ ]*\).*/\1/p' <<<"$rest")"
  peak="$(sed -n 's/.*peak_device_bytes=\([^ ]*\).*/\1/p' <<<"$rest")"
  row "alloc $name" "$t $unit" "allocations/step $allocs, peak device $peak"
done < <(grep -E '^(naive_malloc|stream_pool|arena)/' "$logs/bench_alloc.log")

timeout 120 "$bin/memplan_profile_cuda" --net cnn --out "$logs/profile_cnn.json" --table "$logs/profile_cnn_table.json" >"$logs/profile.log" 2>&1 &&
  row "profile cnn (cuDNN Find + timings)" "ok" "$(grep -E '^store-all' "$logs/profile.log")" ||
  { row "profile cnn" "FAILED" "see $logs/profile.log"; status=1; }

# ResNet-50 at batch 184 with plans made with costs measured on this GPU: the
# first run measures every op and convolution variant (--cost measured) and
# writes the measured graph, the second plans from that file; each runs the
# store-all plan (fastest measured variants) and the plan interleaved
# (--compare) and reports predicted and measured overhead.
measured="$logs/resnet50_measured.json"
for budget in 33.3 50; do
  t0=$(stamp)
  log="$logs/resnet50_$budget.log"
  if [ "$budget" = 33.3 ]; then cost=(--cost measured --profile "$measured"); else cost=(--cost "measured:$measured"); fi
  timeout 300 "$bin/train_resnet50_cuda" "${cost[@]}" --budget "$budget%" --compare --pairs 5 >"$log" 2>&1; rc=$?
  last="$(tail -1 "$log")"
  if [ $rc -eq 0 ]; then
    short="$(grep -o '[0-9]* workspace short' "$log" | head -1)"
    row "ResNet-50 b184 budget $budget% (measured costs)" "ok" "$(awk '{for (i = 1; i < NF; ++i) v[$i] = $(i + 1); printf "arena %.2f GiB budget %.2f GiB, %s ms/step; overhead predicted %+.1f %%, measured %+.1f %%", v["arena_bytes"]/2^30, v["budget_bytes"]/2^30, v["ms_per_step"], 100 * v["predicted_overhead"], 100 * v["measured_overhead"]}' <<<"$last"); $(grep -o 'spread of the per-round overheads, p75 - p25: [0-9.]* points' "$log" | head -1); conv fallbacks ${short:-?} ($(( $(stamp) - t0 )) s)"
  else
    row "ResNet-50 b184 budget $budget% (measured costs)" "FAILED" "rc $rc: $last"; status=1
  fi
done
grep -h -E '^device bytes in use' "$logs"/resnet50_*.log >"$logs/resnet50_device.txt" 2>/dev/null

printf '\nmemplan GPU check on %s (logs: %s)\n' "$gpu" "$logs"
printf '%-34s | %-8s | %s\n' "check" "result" "figures"
printf '%s\n' "-----------------------------------+----------+---------------------------------------------"
printf '%s\n' "${rows[@]}"
exit $status
