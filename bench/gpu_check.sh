#!/usr/bin/env bash
# memplan's GPU check: every figure memplan promises on a GPU, in one call of at most 8 minutes.
#
# On the lent GPU machine (the device tool of this workplace), after `bash bench/gpu_bundle.sh` here:
#   run(command = "bash bench/gpu_check.sh --bundle build/gpu-bundle --out $OUT",
#       carry = ["build/gpu-bundle"], timeout_s = 540)
# The machine has CUDA's nvcc, a python3 with PyTorch (cuDNN, cuBLAS and NVRTC as pip wheels) and no
# network; the bundle brings memplan's programs and the shared libraries they need. If they cannot run
# there, the script builds them from this checkout with the header-only dependencies the bundle carries.
# Rerun one part: --only tests,resnet50 (step names below). See the plan without a GPU: --dry-run.
#
# Steps, in order of value, each with a time budget (the plan is printed first; the budgets sum to at
# most --budget, 480 s by default). A step gets what is left of its budget and of the whole run, and is
# killed at its limit (one hang costs one row); a step that no longer fits is skipped, said so.
#   probe     GPU, driver, toolkit, where cuDNN/cuBLAS/NVRTC live, ldd of every bundled program
#   build     only when the bundle cannot run there: configure and build the CUDA programs from source
#   tests     each GPU test case in its own process with MEMPLAN_CUDA_SYNC=1 (the backend synchronises
#             after every op; a fault names its op): CPU-vs-GPU agreement per layer family and model
#   resnet50  ResNet-50, batch 184: store-all and a plan at 33 % of it, costs measured on this GPU
#             (every op and variant profiled first); arena, device memory (cudaMemGetInfo), ms/step,
#             predicted and measured overhead (the two run interleaved)
#   torch     memplan_torch on CUDA (bench/torch/gpu.py): ResNet-50 batch 32 and the tests' tiny GPT-2 at
#             store-all and 0.5: predicted peak vs torch.cuda max allocated/reserved, gradients
#   alloc     allocation per training step: one arena vs cudaMalloc/cudaFree vs the stream-ordered pool
#   profile   the measured profile of the small CNN (each op and variant's time on this GPU)
# Every row is printed the moment it is known. $OUT (--out) receives at most 4 files: summary.txt (the
# rows), probe.txt, logs.tar.gz (every log, the measured graphs, gpu.py's JSON) and plan.txt.
#
# Usage: bash bench/gpu_check.sh [--bundle DIR] [--out DIR] [--only STEPS] [--budget S] [--dry-run]
#   --bundle DIR  programs from bench/gpu_bundle.sh (default: BUILD/bin of --build, as built here)
#   --build DIR   where the fallback build goes, or whose bin/ to use without a bundle (default build-gpu)
#   --dry-run     run the control flow without a GPU: the probe, the plan, each program's presence and
#                 launch; every device step says "skipped: no device". Part of the test suite.
set -u

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle=""
build=""
out=""
only=""
total=480
dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle="$(cd "$2" 2>/dev/null && pwd || echo "$2")"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --only) only=",$2,"; shift 2 ;;
    --budget) total="$2"; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,36p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
build="${build:-$root/build-gpu}"
work="$(mktemp -d "${TMPDIR:-/tmp}/memplan-gpu-check.XXXXXX")"
logs="$work/logs"
mkdir -p "$logs"
start=$(date +%s)
status=0

# --- the plan ------------------------------------------------------------------------------------
steps=(probe tests resnet50 torch alloc profile)
declare -A budget=([probe]=20 [build]=200 [tests]=110 [resnet50]=150 [torch]=110 [alloc]=45 [profile]=25)
wanted() { [ -z "$only" ] || [ "$1" = probe ] || [[ "$only" == *",$1,"* ]]; }

summary="$logs/summary.txt"
row() { # step | result | figures: printed at once, kept for the summary
  local line
  line="$(printf '%-44s | %-9s | %s' "$1" "$2" "$3")"
  printf '%s\n' "$line"
  printf '%s\n' "$line" >>"$summary"
}
elapsed() { echo $(($(date +%s) - start)); }
left() { echo $((total - $(elapsed))); }
# The seconds a step may take now: its budget, or what is left of the run.
allow() { local l; l=$(left); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }

pack() { # $OUT: at most 4 files
  [ -n "$out" ] || return 0
  mkdir -p "$out"
  cp "$summary" "$out/summary.txt" 2>/dev/null
  cp "$logs/probe.txt" "$out/probe.txt" 2>/dev/null
  cp "$logs/plan.txt" "$out/plan.txt" 2>/dev/null
  tar -C "$work" -czf "$out/logs.tar.gz" logs 2>/dev/null
}
trap 'pack; rm -rf "$work"' EXIT

{
  echo "memplan GPU check: plan ($( [ $dry = 1 ] && echo 'dry run, ')whole run at most $total s)"
  sum=0
  for s in "${steps[@]}"; do
    wanted "$s" || continue
    printf '  %-9s %4d s\n' "$s" "${budget[$s]}"
    sum=$((sum + budget[$s]))
  done
  printf '  %-9s %4d s  (of %d s)\n' total "$sum" "$total"
  echo "  build     ${budget[build]} s, only when the bundle cannot run there; then the last steps that no longer fit are skipped"
} | tee "$logs/plan.txt"
planned=0
for s in "${steps[@]}"; do wanted "$s" && planned=$((planned + budget[$s])); done
if [ "$planned" -gt "$total" ]; then
  echo "gpu_check: the steps' budgets sum to $planned s, over the run's $total s" >&2
  exit 1
fi
: >"$summary"

# --- probe ---------------------------------------------------------------------------------------
probe="$logs/probe.txt"
have_gpu=0
if [ "$dry" = 0 ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then have_gpu=1; fi

# Where a library lives: the toolkit's folders, then every pip wheel under python3's site-packages
# (nvidia/*/lib, nvidia/cu13/lib), then the loader's cache. Prints the folder, or nothing.
site_dirs="$(timeout 10 python3 -c 'import site, sys; print("\n".join(site.getsitepackages() + [p for p in sys.path if p.endswith("site-packages")]))' 2>/dev/null | sort -u)"
find_lib() {
  local pattern="$1" d f
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib; do
    f="$(ls "$d"/$pattern 2>/dev/null | head -1)"; [ -n "$f" ] && { dirname "$f"; return; }
  done
  while read -r d; do
    [ -d "$d/nvidia" ] || continue
    f="$(find "$d/nvidia" -maxdepth 3 -name "$pattern" 2>/dev/null | head -1)"; [ -n "$f" ] && { dirname "$f"; return; }
  done <<<"$site_dirs"
  f="$(ldconfig -p 2>/dev/null | awk -v p="$pattern" '{ if (index($1, substr(p, 1, length(p) - 1)) == 1) { print $NF; exit } }')"
  [ -n "$f" ] && dirname "$f"
}
# cuDNN from its wheel first (the toolkit has none), cuBLAS and NVRTC from the toolkit nvcc belongs to.
find_cudnn() {
  local d f
  while read -r d; do
    f="$(find "$d/nvidia" -maxdepth 3 -name 'libcudnn.so.9' 2>/dev/null | head -1)"; [ -n "$f" ] && { dirname "$f"; return; }
  done <<<"$site_dirs"
  find_lib 'libcudnn.so.9'
}
libpath=""
add_path() { [ -n "$1" ] && [[ ":$libpath:" != *":$1:"* ]] && libpath="${libpath:+$libpath:}$1"; }
{
  echo "date        $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host        $(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 2^20}' /proc/meminfo) memory"
  echo "glibc       $(ldd --version 2>/dev/null | head -1)"
  if [ "$have_gpu" = 1 ]; then
    echo "gpu         $(timeout 10 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | head -1)"
  else
    echo "gpu         none$( [ $dry = 1 ] && echo ' (dry run: not looked for)')"
  fi
  echo "nvcc        $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')$(command -v nvcc >/dev/null || echo 'none on PATH')"
  echo "python3     $(timeout 15 python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "cudnn", torch.backends.cudnn.version())' 2>&1 | tail -1)"
  for lib in cudnn:libcudnn.so.9 cublas:libcublas.so.13 cublasLt:libcublasLt.so.13 nvrtc:'libnvrtc.so.13*' cuda:libcuda.so.1; do
    name="${lib%%:*}" pattern="${lib#*:}"
    if [ "$name" = cudnn ]; then d="$(find_cudnn)"; else d="$(find_lib "$pattern")"; fi
    add_path "$d"
    real="$( [ -n "$d" ] && readlink -f "$(ls "$d"/$pattern 2>/dev/null | head -1)")"
    printf '%-11s %s\n' "$name" "${real:-not found}"
  done
} >"$probe" 2>&1
export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "LD_LIBRARY_PATH $LD_LIBRARY_PATH" >>"$probe"

# Which programs: the bundle's launchers, or a build folder's bin/.
bin=""
usable=0
programs=(memplan memplan_cuda_tests bench_cuda_alloc train_resnet50_cuda memplan_profile_cuda)
if [ -n "$bundle" ]; then
  bin="$bundle/bin"
  echo "bundle      $bundle: $(head -2 "$bundle/MANIFEST" 2>/dev/null | tail -1)" >>"$probe"
  if [ -f "$root/bench/gpu_bundle.sh" ]; then
    { echo "--- ldd of the bundle (gpu_bundle.sh --verify$( [ $dry = 0 ] && echo ' --strict'))"
      bash "$root/bench/gpu_bundle.sh" --verify "$bundle" $( [ $dry = 0 ] && echo --strict ); } >>"$probe" 2>&1
  fi
elif [ -d "$build/bin" ]; then
  bin="$build/bin"
elif [ "$dry" = 1 ] && [ -d "$root/build/bin" ]; then
  bin="$root/build/bin"
fi
check_programs() { # every program there and launching (the command answers; the tests list their cases)
  local p
  for p in "${programs[@]}"; do [ -x "$bin/$p" ] || { echo "missing: $bin/$p"; return 1; }; done
  timeout 10 "$bin/memplan" zoo --list >/dev/null 2>&1 || { echo "cannot run $bin/memplan"; return 1; }
  timeout 10 "$bin/memplan_cuda_tests" --list-test-cases >"$logs/test_cases.txt" 2>&1 ||
    { echo "cannot list the GPU tests: $(tail -1 "$logs/test_cases.txt")"; return 1; }
}
if [ -n "$bin" ]; then
  # Usable when they launch; ldd's verdict (probe.txt) says why when they do not.
  why="$(check_programs 2>&1)" && usable=1
else
  why="no bundle and no build"
fi
probed() { sed -n "s/^$1 \{2,\}//p" "$probe" | head -1; } # a field of probe.txt
echo "programs    $( [ $usable = 1 ] && echo "usable, from $bin" || echo "not usable: $why")" >>"$probe"
row "probe" "$( [ $have_gpu = 1 ] && echo ok || echo 'no GPU')" \
  "$(probed gpu); cuDNN $(probed cudnn | xargs -r basename); $(probed python3 | cut -c1-80); programs $( [ $usable = 1 ] && echo usable || echo "NOT usable ($why)")"
cat "$probe"

# --- build (fallback) ----------------------------------------------------------------------------
if [ "$usable" = 0 ]; then
  if [ "$dry" = 1 ]; then
    row "build (fallback)" "skipped" "no device (dry run); would build in $build: ${budget[build]} s"
    [ -n "$bin" ] || status=1
  elif [ "$(left)" -lt 60 ]; then
    row "build (fallback)" "skipped" "$(left) s left"
    exit 1
  else
    t0=$(date +%s)
    deps="$work/deps"
    mkdir -p "$deps"
    [ -n "$bundle" ] && [ -f "$bundle/deps.tar.gz" ] && tar -xzf "$bundle/deps.tar.gz" -C "$deps"
    cudnn_lib="$(find_cudnn)" # a folder: the wheel's nvidia/cudnn/lib, its headers in nvidia/cudnn/include
    cudnn_inc="$(cd "$cudnn_lib/../include" 2>/dev/null && pwd -P)"
    [ -f "$cudnn_inc/cudnn.h" ] || cudnn_inc="$(dirname "$(timeout 15 find / -xdev -name cudnn.h -path '*include*' 2>/dev/null | head -1)")"
    echo "fallback build: cuDNN headers in $cudnn_inc, library in $cudnn_lib" >>"$probe"
    gen=(-G Ninja); command -v ninja >/dev/null || gen=()
    timeout -k 5 "$(allow ${budget[build]})" bash -c '
      cmake -S "$1" -B "$2" "${@:6}" -DCMAKE_BUILD_TYPE=Release -DMEMPLAN_ENABLE_CUDA=ON -DMEMPLAN_BUILD_BENCHMARKS=OFF \
        -DCMAKE_CUDA_ARCHITECTURES=90 "-DCMAKE_PREFIX_PATH=$3/usr" "-DCUDNN_INCLUDE_DIR=$4" "-DCUDNN_LIBRARY=$5/libcudnn.so.9" &&
      cmake --build "$2" -j "$(nproc)" --target memplan memplan_cuda_tests bench_cuda_alloc train_resnet50_cuda memplan_profile_cuda
    ' _ "$root" "$build" "$deps" "$cudnn_inc" "$cudnn_lib" "${gen[@]}" >"$logs/build.log" 2>&1
    rc=$?
    bin="$build/bin"
    if [ $rc = 0 ] && why="$(check_programs 2>&1)"; then
      row "build (fallback)" "ok" "$(($(date +%s) - t0)) s, programs in $bin"
    else
      row "build (fallback)" "FAILED" "rc $rc: $(tail -3 "$logs/build.log" | tr '\n' ' ' | cut -c1-300) $why"
      exit 1
    fi
  fi
fi

# --- the device steps ----------------------------------------------------------------------------
# step NAME: 0 when it should run now; prints the skip row otherwise.
step() {
  wanted "$1" || return 1
  if [ "$dry" = 1 ] || [ "$have_gpu" = 0 ]; then
    row "$1" "skipped" "no device$( [ $dry = 1 ] && echo ' (dry run)'); budget ${budget[$1]} s"
    return 1
  fi
  if [ "$(left)" -lt 10 ]; then
    row "$1" "skipped" "no time left ($(elapsed) s of $total s used)"
    return 1
  fi
  echo "== $1 ($(allow "${budget[$1]}") s allowed, $(elapsed) s used)"
  return 0
}
# Runs a command for at most S seconds (killed after), output to a log: run_for S LOG CMD...
run_for() { local s="$1" log="$2"; shift 2; timeout -k 5 "$s" "$@" >"$log" 2>&1; }

# tests: each case of memplan_cuda_tests alone, in the order it lists them (--order-by=name both times).
if step tests; then
  t_end=$(($(date +%s) + $(allow ${budget[tests]})))
  mapfile -t cases < <("$bin/memplan_cuda_tests" --list-test-cases --order-by=name 2>/dev/null |
                       grep -v -E '^(\[doctest\]|=+$|CUDA device|no CUDA device|$)')
  mkdir -p "$logs/tests"
  # k is a case's place in the name order (--first/--last select by it); the timing cases run last.
  order=()
  for i in "${!cases[@]}"; do [[ "${cases[$i]}" == *time* ]] || order+=("$i"); done
  for i in "${!cases[@]}"; do [[ "${cases[$i]}" == *time* ]] && order+=("$i"); done
  for i in "${order[@]}"; do
    name="${cases[$i]}"
    k=$((i + 1))
    now=$(date +%s)
    if [ "$now" -ge "$t_end" ]; then row "  test $name" "skipped" "the step's budget is spent"; continue; fi
    per=$((t_end - now)); [ "$per" -gt 60 ] && per=60
    log="$logs/tests/$k.log"
    t0=$(date +%s)
    MEMPLAN_CUDA_SYNC=1 run_for "$per" "$log" "$bin/memplan_cuda_tests" --order-by=name --first="$k" --last="$k"
    rc=$?
    res="$(grep -E '^\[doctest\] (test cases|assertions)' "$log" | sed 's/\[doctest\] //; s/  */ /g' | tr '\n' ' ')"
    if [ $rc = 0 ]; then row "  test $name" "ok" "$res($(($(date +%s) - t0)) s)"
    else row "  test $name" "FAILED" "rc $rc$( [ $rc = 124 ] && echo ' (timed out)'); $( (grep -m1 -E 'ERROR|error|what\(\)' "$log" || tail -1 "$log") | cut -c1-200)"; status=1; fi
    while IFS= read -r line; do
      if [[ "$line" == *": "* ]]; then row "    ${line%%: *}" "" "${line#*: }"; else row "    $line" "" ""; fi
    done < <(grep -E '^(agreement|variant_time) ' "$log")
  done
  [ ${#cases[@]} -gt 0 ] || { row "tests" "FAILED" "no test case listed"; status=1; }
fi

# resnet50: store-all (each op's fastest measured variant) and the plan at 33 %, interleaved.
if step resnet50; then
  t0=$(date +%s)
  log="$logs/resnet50.log"
  run_for "$(allow ${budget[resnet50]})" "$log" "$bin/train_resnet50_cuda" --cost measured \
    --profile "$logs/resnet50_measured.json" --budget 33% --compare --pairs 5
  rc=$?
  last="$(tail -1 "$log")"
  if [ $rc = 0 ]; then
    row "resnet50 b184, 33 % of store-all" "ok" "$(awk '{for (i = 1; i < NF; ++i) v[$i] = $(i + 1); printf "arena %.2f GiB (budget %.2f GiB), %s ms/step; overhead predicted %+.1f %%, measured %+.1f %%", v["arena_bytes"]/2^30, v["budget_bytes"]/2^30, v["ms_per_step"], 100 * v["predicted_overhead"], 100 * v["measured_overhead"]}' <<<"$last") ($(($(date +%s) - t0)) s)"
    while IFS= read -r line; do row "  resnet50" "" "$line"; done < <(grep -E '^(memory|compare|measured) ' "$log" | cut -c1-400)
  else
    row "resnet50 b184, 33 % of store-all" "FAILED" "rc $rc$( [ $rc = 124 ] && echo ' (timed out)'): $(tail -2 "$log" | tr '\n' ' ' | cut -c1-300)"; status=1
  fi
fi

# torch: memplan_torch on CUDA, with the bundle's memplan command.
if step torch; then
  log="$logs/torch.log"
  MEMPLAN="$bin/memplan" PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
    run_for "$(allow ${budget[torch]})" "$log" python3 "$root/bench/torch/gpu.py" --device cuda --out "$logs/torch"
  rc=$?
  while IFS= read -r line; do row "  ${line%%:*}" "" "${line#*: }"; done < <(grep -E '^torch ' "$log" | cut -c1-400)
  if [ $rc = 0 ]; then row "torch (memplan_torch on CUDA)" "ok" ""
  else row "torch (memplan_torch on CUDA)" "FAILED" "rc $rc$( [ $rc = 124 ] && echo ' (timed out)'): $(tail -1 "$log" | cut -c1-300)"; status=1; fi
fi

# alloc: the allocation bench, ResNet-50 batch 184's buffers.
if step alloc; then
  log="$logs/alloc.log"
  s=$(allow ${budget[alloc]})
  run_for "$s" "$log" "$bin/bench_cuda_alloc" --batch 184 --max-seconds $((s - 10))
  rc=$?
  while IFS= read -r line; do row "  ${line%%:*}" "" "${line#*: }"; done < <(grep -E '^alloc ' "$log" | cut -c1-400)
  [ $rc = 0 ] && row "alloc (arena vs cudaMalloc vs pool)" "ok" "" ||
    { row "alloc (arena vs cudaMalloc vs pool)" "FAILED" "rc $rc: $(tail -1 "$log" | cut -c1-300)"; status=1; }
fi

# profile: the small CNN's measured profile.
if step profile; then
  log="$logs/profile.log"
  run_for "$(allow ${budget[profile]})" "$log" "$bin/memplan_profile_cuda" --net cnn --out "$logs/profile_cnn.json" \
    --table "$logs/profile_cnn_table.json"
  rc=$?
  [ $rc = 0 ] && row "profile cnn (each op and variant)" "ok" "$(grep -m1 -E '^store-all' "$log" | cut -c1-300)" ||
    { row "profile cnn" "FAILED" "rc $rc: $(tail -1 "$log" | cut -c1-300)"; status=1; }
fi

# Dry run: the Python side of the torch step at least compiles, and every program launches.
if [ "$dry" = 1 ]; then
  if python3 -m py_compile "$root/bench/torch/gpu.py" 2>"$logs/py_compile.log"; then
    row "dry run: bench/torch/gpu.py" "ok" "compiles"
  else
    row "dry run: bench/torch/gpu.py" "FAILED" "$(tail -1 "$logs/py_compile.log")"; status=1
  fi
  if [ "$usable" = 1 ]; then row "dry run: programs" "ok" "${#programs[@]} programs launch from $bin"
  else row "dry run: programs" "FAILED" "$why"; status=1; fi
fi

echo
echo "memplan GPU check: $(elapsed) s of $total s; $( [ $status = 0 ] && echo 'every step passed' || echo 'FAILED rows above')"
exit $status
