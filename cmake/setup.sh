#!/usr/bin/env bash
# memplan's one-step set-up, used by the README's two commands and by CI.
#
#   bash cmake/setup.sh run    install what is missing, build, run the main job
#   bash cmake/setup.sh test   install what is missing, build, run the test suite
#
# Missing Debian packages are installed through apt (as root, or through sudo).
# Nothing else is downloaded. The build goes to ./build (programs in build/bin).
set -euo pipefail

mode=${1:-run}
case "$mode" in
  run|test|build) ;;
  *) echo "usage: bash cmake/setup.sh run|test|build" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

packages=(cmake ninja-build g++ pkg-config
          nlohmann-json3-dev doctest-dev libbenchmark-dev
          libglpk-dev coinor-libcbc-dev libeigen3-dev
          libjemalloc-dev libmimalloc-dev)
# The test suite fuzzes the readers with libFuzzer, which comes with clang.
# The PyTorch frontend's tests (python/) run in a virtual environment under build/.
if [ "$mode" = test ]; then packages+=(clang libclang-rt-14-dev python3-venv); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "memplan: installing ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then
    apt=(apt-get)
  elif command -v sudo >/dev/null 2>&1; then
    apt=(sudo apt-get)
  else
    echo "memplan: error: packages missing (${missing[*]}) and not root; run as root or install them" >&2
    exit 2
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${apt[@]}" update -qq
  "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}"
fi

# PyTorch and the test tools for the frontend, into build/venv (once; reused while it imports). The
# download (several GB with PyTorch's CUDA libraries) runs while the C++ side builds. The installed files are
# byte-compiled once (about 20 CPU s): a process that imports torch and transformers from source instead
# spends about 9 CPU s more, and the tests start many (bench/results/2026-12-03-export-speed.md).
venv_pid=
if [ "$mode" = test ]; then
  mkdir -p build
  if ! build/venv/bin/python -c "import torch, torchvision, transformers, pytest, numpy" 2>/dev/null; then
    echo "memplan: installing PyTorch, torchvision, transformers, pytest, numpy into build/venv (pip)"
    ( python3 -m venv build/venv &&
      build/venv/bin/pip install -q --disable-pip-version-check --no-compile torch torchvision transformers pytest numpy &&
      { build/venv/bin/python -m compileall -q -j 0 build/venv/lib > /dev/null || true; } ) \
      > build/venv-install.log 2>&1 &
    venv_pid=$!
  fi
fi

jobs=$(nproc 2>/dev/null || echo 2)
# Release at -O2 rather than CMake's -O3: 5 % less compile time, no slower (docs/architecture.md,
# "Build time").
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG"
if [ "$mode" = run ]; then
  # The main job runs two programs: build those (the tests, benchmarks and GPU programs are for `test` and `build`).
  cmake --build build -j "$jobs" --target memplan train_cnn
else
  cmake --build build -j "$jobs"
fi

case "$mode" in
  run)
    echo
    echo "== memplan: planning the example graphs"
    build/bin/memplan report --order greedy --alloc auto --time-limit 2 examples/graphs/*.json
    echo
    echo "== memplan: training graphs of zoo models (MONeT's batch sizes; forward, backward, SGD update)"
    mkdir -p build/zoo
    for model in resnet50 mobilenet_v2 bert_base; do
      build/bin/memplan zoo "$model" -o "build/zoo/$model.json" > /dev/null
    done
    build/bin/memplan report --order greedy --alloc auto --time-limit 5 build/zoo/*.json
    echo
    echo "== memplan: ResNet-50 (batch 184) in a third of its store-all arena: what to keep, recompute, which variant"
    build/bin/memplan plan build/zoo/resnet50.json --budget 33% --time-limit 10
    echo
    echo "== memplan: training a small CNN on the CPU in one arena, planned with costs measured on this machine (every op"
    echo "   and variant profiled first), at budgets in percent of its store-all arena (default variants; 130 % holds every"
    echo "   op's fastest variant): memory against running without reuse, overhead predicted and measured against"
    echo "   store-all with each op's fastest variant (the two run interleaved)"
    for budget in 130 110 100 80 50; do
      build/bin/train_cnn --budget "$budget%" --cost measured --compare --pairs 15 |
        awk -v b="$budget" '/^loss/ { for (i = 1; i < NF; i += 2) v[$i] = $(i + 1)
          printf "   budget %3d%%: arena %5.2f MiB (%2.0f %% less than without reuse), overhead predicted %+6.1f %%, measured %+6.1f %%\n",
                 b, v["arena_bytes"] / 1048576, 100 * (1 - v["arena_bytes"] / v["naive_bytes"]),
                 100 * v["predicted_overhead"], 100 * v["measured_overhead"] }'
    done
    ;;
  test)
    # Every public header must compile on its own (CMake's header-set check).
    cmake --build build -j "$jobs" --target all_verify_interface_header_sets
    ctest --test-dir build --output-on-failure -j "$jobs"
    # The unit and solver tests again under ASan + UBSan (build/asan).
    bash tests/sanitizers/run.sh
    # The PyTorch frontend (python/memplan_torch): installed with pip from the repository, tested with
    # pytest against the memplan command just built, while the readers are fuzzed with libFuzzer (ASan +
    # UBSan; the regression seeds, then 20 s of fuzzing each). The fuzzers run one at a time here, each
    # with a core to itself for its 20 s, and pytest has the other core (about as long: 210 s).
    if [ -n "$venv_pid" ] && ! wait "$venv_pid"; then
      cat build/venv-install.log >&2
      echo "memplan: error: installing PyTorch into build/venv failed" >&2
      exit 1
    fi
    build/venv/bin/pip install -q --disable-pip-version-check --no-deps ./python
    (cd python && MEMPLAN="$root/build/bin/memplan" "$root/build/venv/bin/python" -m pytest -q \
       -p no:cacheprovider tests) > build/pytest.log 2>&1 &
    pytest_pid=$!
    fuzz_status=0
    FUZZ_JOBS=1 bash tests/fuzz/run.sh 20 || fuzz_status=$?
    pytest_status=0
    wait "$pytest_pid" || pytest_status=$?
    echo "== memplan: the PyTorch frontend's tests (pytest)"
    cat build/pytest.log
    if [ "$fuzz_status" -ne 0 ] || [ "$pytest_status" -ne 0 ]; then
      echo "memplan: error: fuzzing exited $fuzz_status, pytest exited $pytest_status" >&2
      exit 1
    fi
    ;;
  build) ;;
esac
