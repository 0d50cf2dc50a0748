#!/usr/bin/env bash
# Builds memplan's libFuzzer harnesses in build/fuzz (clang, ASan + UBSan),
# replays the regression seeds, then fuzzes each reader for SECONDS (default
# 30) on a copy of tests/fuzz/corpus. Exits non-zero on any crash, timeout,
# leak or sanitizer report; exits 0 with a note when clang or libFuzzer is
# missing (CI runs it wherever it can). docs/architecture.md, "Fuzzing".
#
#   tests/fuzz/run.sh [SECONDS]
#   FUZZ_TARGETS="graph_json plan_json" tests/fuzz/run.sh 3600   # some readers, longer
#   FUZZ_SKIP_REGRESSIONS=1 tests/fuzz/run.sh                    # fuzz only
#   FUZZ_JOBS=1 tests/fuzz/run.sh                                # one harness at a time (default: one per core)
set -u

seconds=${1:-30}
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: tests/fuzz/run.sh [SECONDS] (a positive whole number of seconds per harness)" >&2
  exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$root/build/fuzz
targets=${FUZZ_TARGETS:-graph_json plan_json offset_csv checkmate_json}

skip() { echo "fuzz: skipped: $*"; exit 0; }
command -v clang >/dev/null && command -v clang++ >/dev/null || skip "clang/clang++ not found (Debian: apt-get install clang libclang-rt-14-dev)"
command -v cmake >/dev/null || skip "cmake not found"
mkdir -p "$build"
probe=$build/libfuzzer_probe
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' >"$probe.cpp"
clang++ -fsanitize=fuzzer,address,undefined "$probe.cpp" -o "$probe" >"$probe.log" 2>&1 ||
  skip "clang++ cannot link libFuzzer with ASan/UBSan (Debian: apt-get install libclang-rt-14-dev): $(head -c 300 "$probe.log")"

# --- build --------------------------------------------------------------------
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [[ ! -f $build/CMakeCache.txt ]]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${generator[@]}" "${launcher[@]}" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMPLAN_BUILD_FUZZERS=ON \
    -DMEMPLAN_BUILD_TESTS=OFF -DMEMPLAN_BUILD_CLI=OFF -DMEMPLAN_BUILD_EXAMPLES=OFF \
    -DMEMPLAN_BUILD_BENCHMARKS=OFF -DMEMPLAN_ENABLE_CUDA=OFF >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; echo "fuzz: FAILED: configuring $build" >&2; exit 1; }
fi
jobs=$(nproc 2>/dev/null || echo 2)
cmake --build "$build" -j "$jobs" --target $(printf 'fuzz_%s ' $targets) ||
  { echo "fuzz: FAILED: building the harnesses" >&2; exit 1; }

failures=0
logs=$build/logs
mkdir -p "$logs"

# --- regression seeds: each file once, so that every failing one is named ------
# Besides tests/fuzz/regressions/, inputs too big to commit are generated here:
# JSON nested 100000 levels deep (a stack overflow once).
deep() { # deep PREFIX SUFFIX: PREFIX, 100000 nested arrays, SUFFIX
  printf '%s' "$1"; printf '%*s' 100000 '' | tr ' ' '['; printf '%*s' 100000 '' | tr ' ' ']'; printf '%s\n' "$2"
}
gen=$build/generated-regressions
mkdir -p "$gen"/{graph_json,plan_json,checkmate_json}
deep '' '' >"$gen/graph_json/deep-100000-root.json"
deep '{"format": "memplan.graph", "version": 1, "name": "deep", "tensors": ' ', "ops": [], "outputs": []}' \
  >"$gen/graph_json/deep-100000-tensors.json"
deep '{"format": "memplan.graph", "version": 1, "name": ' ', "tensors": [], "ops": [], "outputs": []}' \
  >"$gen/graph_json/deep-100000-name.json"
deep '{"format": "memplan.plan", "version": 1, "graph": "mlp-train", "alignment": 256, "arena_bytes": 0, "steps": ' \
  ', "buffers": []}' >"$gen/plan_json/deep-100000-steps.json"
deep '{"directed": true, "graph": {}, "nodes": ' ', "links": []}' >"$gen/checkmate_json/deep-100000-nodes.json"

if [[ -z ${FUZZ_SKIP_REGRESSIONS:-} ]]; then
  for t in $targets; do
    passed=0 failed=0
    for seed in "$root/tests/fuzz/regressions/$t"/* "$gen/$t"/*; do
      [[ -f $seed ]] || continue
      log=$logs/regression-$t-$(basename "$seed").log
      if "$build/bin/fuzz_$t" -rss_limit_mb=2048 -timeout=10 "$seed" >"$log" 2>&1; then
        passed=$((passed + 1))
      else
        failed=$((failed + 1))
        echo "fuzz_$t: regression seed FAILED: ${seed#"$root"/} ($(grep -m1 -E 'ERROR:|terminate called|property failed|runtime error' "$log"); log: ${log#"$root"/})"
      fi
    done
    echo "fuzz_$t: regression seeds: $passed passed, $failed failed"
    failures=$((failures + failed))
  done
fi

# --- fuzzing: a working copy of the corpus; the repository's is never written -----
# The harnesses run FUZZ_JOBS at a time (default: one per core); each reports
# into its own summary file, printed in order once all are done.
fuzz_one() {
  local t=$1 corpus=$build/corpus/$1 artifacts=$build/artifacts/$1/ log=$logs/fuzz-$1.log summary=$logs/summary-$1
  mkdir -p "$corpus" "$artifacts"
  cp -n "$root/tests/fuzz/corpus/$t"/* "$corpus"/ 2>/dev/null
  local dict=()
  [[ -f $root/tests/fuzz/$t.dict ]] && dict=(-dict="$root/tests/fuzz/$t.dict")
  "$build/bin/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts" "${dict[@]}" "$corpus" >"$log" 2>&1
  local rc=$? done_line
  done_line=$(grep -E '^Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1)
  if [[ $rc -eq 0 && -n $done_line ]]; then
    local runs secs
    runs=$(sed -E 's/^Done ([0-9]+) runs in ([0-9]+) second.*/\1/' <<<"$done_line")
    secs=$(sed -E 's/^Done ([0-9]+) runs in ([0-9]+) second.*/\2/' <<<"$done_line")
    echo "fuzz_$t: ok: $runs runs in $secs s ($((runs / (secs > 0 ? secs : 1))) per second), corpus $(ls "$corpus" | wc -l) inputs" >"$summary"
    return 0
  fi
  {
    echo "fuzz_$t: FAILED (exit $rc): $(grep -m1 -E 'ERROR:|terminate called|property failed|runtime error|Timeout|out-of-memory' "$log")"
    echo "  input: $(grep -m1 -oE "Test unit written to [^ ]+" "$log" | sed 's/Test unit written to //'); log: ${log#"$root"/}"
    grep -E "^ *#[0-9]+ .* in (memplan|LLVMFuzzer)" "$log" | head -n 8 | cut -c1-240 | sed "s/^/  | /"
  } >"$summary"
  return 1
}

fuzz_jobs=${FUZZ_JOBS:-$jobs}
pids=()
for t in $targets; do
  while [[ $(jobs -rp | wc -l) -ge $fuzz_jobs ]]; do wait -n; done
  fuzz_one "$t" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || failures=$((failures + 1)); done
for t in $targets; do cat "$logs/summary-$t"; done

if [[ $failures -gt 0 ]]; then
  echo "fuzz: FAILED: $failures failure(s); reproduce one with build/fuzz/bin/fuzz_READER FILE"
  exit 1
fi
echo "fuzz: ok"
