#!/usr/bin/env bash
# Builds the CUDA programs here and packs them, with every shared library they
# need, into one folder that travels to a machine with a GPU and runs there
# (bench/gpu_check.sh --bundle DIR). Left out on purpose, since the GPU machine
# has its own and ours would not match its driver: the driver's libcuda, cuDNN,
# cuBLAS/cuBLASLt and NVRTC (gpu_check.sh finds them there, in the pip wheels
# of its Python or in the CUDA toolkit). Also left out: the C library itself
# (libc, libm, libdl, librt, libpthread, the loader), which every machine has.
#
# Layout of the bundle:
#   bin/NAME       a launcher: sets LD_LIBRARY_PATH to lib/ (before what the
#                  caller set) and runs libexec/NAME; use it as the program
#   libexec/NAME   the program, stripped
#   lib/           the shared libraries the programs need (libstdc++, cudart,
#                  GLPK and CBC for the memplan command, ...)
#   deps.tar.gz    the header-only dependencies (nlohmann JSON, doctest, Eigen,
#                  with their CMake files): gpu_check.sh builds from source
#                  with them when the programs cannot run there
#   MANIFEST       what was built, from which commit, on which machine
#
# Usage: bash bench/gpu_bundle.sh [--build DIR] [--out DIR] [--no-build]
#        bash bench/gpu_bundle.sh --verify DIR [--strict]
#   --build DIR   the CMake build folder (default: build, the README's; configured with CUDA when empty)
#   --out DIR     the bundle (default: BUILD/gpu-bundle; git-ignored)
#   --no-build    pack what BUILD already has (the test suite does this after its own build)
#   --verify DIR  ldd on every program and library of bundle DIR, with its lib/ first on the path:
#                 prints each dependency that resolves outside the bundle; fails when one is missing
#                 or comes from this machine's system folders, except the libraries the GPU machine
#                 provides, which may be missing (--strict: they must resolve too, as on the GPU
#                 machine once gpu_check.sh has set LD_LIBRARY_PATH)
# The bundle must stay under 48 MiB (it travels with the working tree, 64 MiB in all); the
# script fails, saying which files are largest, if it does not. Its last line is the bundle's path.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build"
out=""
do_build=1
verify=""
strict=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$(cd "$2" 2>/dev/null && pwd || echo "$2")"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --verify) verify="$2"; shift 2 ;;
    --strict) strict=1; shift ;;
    -h|--help) sed -n '2,36p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "gpu_bundle: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
out="${out:-$build/gpu-bundle}"
limit_mib=48

# The programs gpu_check.sh runs on the GPU (the memplan command for memplan_torch).
programs=(memplan memplan_cuda_tests memplan_cuda_host_tests memplan_cuda_recorded_tests bench_cuda_alloc
          train_resnet50_cuda train_cnn_cuda memplan_profile_cuda)
# Shared libraries the GPU machine provides (gpu_check.sh puts them on the path) and the C library.
provided_re='^(libcuda\.so|libcudnn[a-z_]*\.so|libcublas(Lt)?\.so|libnvrtc[a-z-]*\.so)'
system_re='^(linux-vdso\.so|ld-linux[a-z0-9_-]*\.so|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libutil\.so|libresolv\.so)'

if [ -n "$verify" ]; then
  [ -d "$verify/libexec" ] && [ -d "$verify/lib" ] || { echo "gpu_bundle: '$verify' is not a bundle (no libexec/, lib/)" >&2; exit 2; }
  lib="$(cd "$verify/lib" && pwd)"
  bad=0
  for f in "$verify"/libexec/* "$verify"/lib/*; do
    while read -r name _ path _; do
      [ -n "$name" ] || continue
      [[ "$name" =~ $system_re ]] && continue
      case "$path" in "$lib"/*) continue ;; esac
      if [[ "$name" =~ $provided_re ]]; then
        if [ "$path" = "not" ]; then
          if [ "$strict" = 1 ]; then echo "MISSING  $(basename "$f"): $name (provided by the GPU machine, not found)"; bad=1; fi
        else
          echo "provided $(basename "$f"): $name => $path"
        fi
      elif [ "$path" = "not" ]; then
        echo "MISSING  $(basename "$f"): $name"; bad=1
      else
        echo "OUTSIDE  $(basename "$f"): $name => $path (not in the bundle: the GPU machine may not have it)"; bad=1
      fi
    done < <(LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$f" 2>&1 |
             sed -n 's/^[[:space:]]*\([^[:space:]]*\) => \(.*\)$/\1 => \2/p')
  done
  if [ "$bad" = 0 ]; then echo "gpu_bundle: verify: every dependency of $(ls "$verify/libexec" | wc -l) programs resolves in the bundle$([ "$strict" = 1 ] && echo ' or on this machine' || echo ' (or is provided by the GPU machine)')"; fi
  exit $bad
fi

if [ "$do_build" = 1 ]; then
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" \
      -DMEMPLAN_ENABLE_CUDA=ON
  fi
  grep -q '^MEMPLAN_ENABLE_CUDA:BOOL=ON' "$build/CMakeCache.txt" ||
    { echo "gpu_bundle: $build is configured without CUDA (MEMPLAN_ENABLE_CUDA); no CUDA compiler was found" >&2; exit 1; }
  cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target "${programs[@]}"
fi

missing=()
for p in "${programs[@]}"; do [ -x "$build/bin/$p" ] || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "gpu_bundle: not built in $build/bin: ${missing[*]} (CUDA and cuDNN found? see the CMake output)" >&2
  exit 1
fi

# Written beside the final folder, then moved into place: a failed run leaves the old bundle.
tmp="$(mktemp -d "${out%/}.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/libexec" "$tmp/lib"

for p in "${programs[@]}"; do
  cp "$build/bin/$p" "$tmp/libexec/$p"
  strip --strip-unneeded "$tmp/libexec/$p" 2>/dev/null || true
  cat >"$tmp/bin/$p" <<EOF
#!/bin/sh
# memplan bundle launcher: the bundle's libraries first, then what the caller set.
here="\$(cd "\$(dirname "\$0")/.." && pwd)"
LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/libexec/$p" "\$@"
EOF
  chmod +x "$tmp/bin/$p"
done

# Every library ldd resolves here, except those the GPU machine provides and the C library.
declare -A copied=()
for p in "${programs[@]}"; do
  while read -r name _ path _; do
    [ -n "$name" ] || continue
    if [[ "$name" =~ $provided_re || "$name" =~ $system_re ]]; then continue; fi
    if [ "$path" = "not" ] || [ ! -f "$path" ]; then
      echo "gpu_bundle: $p needs $name, which is not found here" >&2
      exit 1
    fi
    [ -n "${copied[$name]:-}" ] && continue
    cp -L "$path" "$tmp/lib/$name"
    strip --strip-unneeded "$tmp/lib/$name" 2>/dev/null || true
    copied[$name]=1
  done < <(ldd "$build/bin/$p" | sed -n 's/^[[:space:]]*\([^[:space:]]*\) => \(.*\)$/\1 => \2/p')
done

# Header-only dependencies with their CMake package files, for building there (paths as under /usr).
deps=()
for d in include/nlohmann include/doctest include/eigen3/Eigen include/eigen3/signature_of_eigen3_matrix_library \
         share/cmake/nlohmann_json lib/cmake/doctest share/eigen3/cmake; do
  [ -e "/usr/$d" ] && deps+=("usr/$d")
done
tar -C / -czf "$tmp/deps.tar.gz" "${deps[@]}"

{
  echo "memplan GPU bundle"
  echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), $(ldd --version | head -1)"
  echo "nvcc $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  grep -h -E '^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ' "$(grep '^CUDNN_INCLUDE_DIR:' "$build/CMakeCache.txt" | cut -d= -f2)/cudnn_version.h" 2>/dev/null |
    awk '{printf "%s%s", (NR > 1 ? "." : "cuDNN (headers) "), $3} END {print ""}'
  echo "programs ${programs[*]}"
  echo "expects on the GPU machine: libcuda (driver), libcudnn.so.9, libcublas.so.13, libcublasLt.so.13, libnvrtc (cuDNN loads it)"
} >"$tmp/MANIFEST"

size_kib=$(du -sk "$tmp" | cut -f1)
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
  echo "gpu_bundle: the bundle is $((size_kib / 1024)) MiB, over its $limit_mib MiB; largest files:" >&2
  find "$tmp" -type f -printf '%s %P\n' | sort -rn | head -8 >&2
  exit 1
fi

rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "gpu_bundle: ${#programs[@]} programs, ${#copied[@]} libraries, $((size_kib / 1024)) MiB"
echo "$out"
