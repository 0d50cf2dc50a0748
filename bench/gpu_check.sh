#!/usr/bin/env bash
# The GPU check of memplan's CUDA backend, in one go (< 8 min on one H200):
#   1. configure + build the CUDA targets (build-gpu/, Release, -j$(nproc))
#   2. the GPU tests (memplan_cuda_tests: each layer vs the CPU reference,
#      planned vs naive training) and the recorded-profile tests
#   3. the allocation benchmarks (naive cudaMalloc / stream-ordered pool / arena)
#   4. the measured profile of the cnn example (memplan_profile_cuda)
#   5. ResNet-50 at batch 184: store-all, then a budget of one third of store-all
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

timeout 120 "$bin/memplan_profile_cuda" --net cnn --out "$logs/profile_cnn.json" >"$logs/profile.log" 2>&1 &&
  row "profile cnn (cuDNN Find + timings)" "ok" "$(grep -E '^store-all' "$logs/profile.log")" ||
  { row "profile cnn" "FAILED" "see $logs/profile.log"; status=1; }

declare -A ms predicted
for budget in 100 33.3; do
  t0=$(stamp)
  log="$logs/resnet50_$budget.log"
  timeout 200 "$bin/train_resnet50_cuda" --steps 4 --interval 1 --budget "$budget%" >"$log" 2>&1; rc=$?
  last="$(tail -1 "$log")"
  if [ $rc -eq 0 ]; then
    short="$(grep -o '[0-9]* workspace short' "$log" | head -1)"
    peak="$(sed -n 's/.*; peak \([0-9]*\) (cudaMemGetInfo.*/\1/p' "$log" | head -1)"
    ms[$budget]="$(awk '{print $10}' <<<"$last")"
    predicted[$budget]="$(sed -n 's/.*predicted overhead \([-+0-9.]*\) %.*/\1/p' "$log" | head -1)"
    row "ResNet-50 b184 budget $budget%" "ok" "$(awk '{printf "loss %s arena %.2f GiB budget %.2f GiB %s ms/step", $2, $6/2^30, $8/2^30, $10}' <<<"$last"); peak device $(awk '{printf "%.2f GiB", $1/2^30}' <<<"${peak:-0}") (cudaMemGetInfo); conv fallbacks ${short:-?} ($(( $(stamp) - t0 )) s)"
  else
    row "ResNet-50 b184 budget $budget%" "FAILED" "rc $rc: $last"; status=1
  fi
done
# Recomputation overhead of one third against store-all: measured (ms/step) and
# predicted (the planner's costs; each run's prediction is against the default
# store-all schedule, so the ratio compares like with like).
if [ -n "${ms[100]:-}" ] && [ -n "${ms[33.3]:-}" ]; then
  row "ResNet-50 b184 overhead 33.3% vs 100%" "" "$(awk -v a="${ms[33.3]}" -v b="${ms[100]}" -v p="${predicted[33.3]:-0}" -v q="${predicted[100]:-0}" \
    'BEGIN { printf "measured %+.1f %%, predicted %+.1f %%", 100 * (a / b - 1), 100 * ((1 + p / 100) / (1 + q / 100) - 1) }')"
fi
grep -h -E '^device bytes in use' "$logs"/resnet50_*.log >"$logs/resnet50_device.txt" 2>/dev/null

printf '\nmemplan GPU check on %s (logs: %s)\n' "$gpu" "$logs"
printf '%-34s | %-8s | %s\n' "check" "result" "figures"
printf '%s\n' "-----------------------------------+----------+---------------------------------------------"
printf '%s\n' "${rows[@]}"
exit $status
