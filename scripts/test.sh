#!/usr/bin/env bash
# Builds Tessera and runs every test:
#   1. a Release build with warnings as errors: unit tests, then the model tests (PyTorch
#      reference models exported into ~/.cache/tessera/models, or $TESSERA_MODEL_CACHE);
#   2. an AddressSanitizer + UndefinedBehaviorSanitizer build running the unit tests, which
#      include every bad-input test (malformed model files, ONNX files, .npy files, CLI misuse);
#   3. a ThreadSanitizer build of the executor's streaming, session and C API stream tests;
#   4. `cmake --install` into a fresh prefix, examples/ built against it with find_package and
#      with pkg-config, and run (scripts/check_install.sh);
#   5. `pip install .` into a fresh venv and the Python package's pytest suite
#      (scripts/check_python.sh);
#   6. the libFuzzer targets (fuzz/) built with clang, ASan and UBSan, each run for
#      $TESSERA_FUZZ_SMOKE_SECONDS (default 10) from its seeds (scripts/fuzz.sh).
#   7. with TESSERA_AARCH64=1: the aarch64 cross build (scripts/aarch64.sh ci: library, `tessera`,
#      the reference NPU driver, the device-test program) and the unit tests of the reference and
#      cpu devices and the NPU reference driver under qemu-aarch64.
# Installs missing Debian packages first (scripts/install-deps.sh). Compilation goes through
# ccache when it is installed, so repeated runs on one machine rebuild only what changed.
#
# Under CI=true every run is a fresh-machine run: the exported models, the cpu kernel-choice
# cache, Tessera's OpenCL program cache and PoCL's kernel cache all go to a new empty directory
# that is removed at the end (ccache alone stays shared). Each stage prints its wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${TESSERA_JOBS:-$(nproc)}

t_start=$SECONDS
t_stage=$SECONDS
stage() {
  local now=$SECONDS
  if [ -n "${stage_name:-}" ]; then echo "== ${stage_name}: $((now - t_stage)) s"; fi
  stage_name=$1
  t_stage=$now
  if [ -n "$1" ]; then echo "== $1"; fi
}
finish() {
  stage ""
  echo "== total: $((SECONDS - t_start)) s"
}

if [ "${CI:-}" = "true" ]; then
  fresh=$(mktemp -d "${TMPDIR:-/tmp}/tessera-ci-cache.XXXXXX")
  trap 'rm -rf "$fresh"' EXIT
  export XDG_CACHE_HOME=$fresh/xdg POCL_CACHE_DIR=$fresh/pocl
  export TESSERA_MODEL_CACHE=$fresh/models TESSERA_CPU_KERNEL_CACHE=$fresh/cpu-kernels.tsv
  mkdir -p "$XDG_CACHE_HOME" "$POCL_CACHE_DIR" "$TESSERA_MODEL_CACHE"
  echo "CI: fresh caches under $fresh"
fi

stage "install dependencies"
scripts/install-deps.sh

# Every backend whose packages install-deps.sh provides must run its tests here, not skip:
# Vulkan on lavapipe, OpenCL on PoCL's CPU device, the reference NPU driver built alongside.
export TESSERA_REQUIRE_VULKAN=1 TESSERA_REQUIRE_OPENCL=1 TESSERA_REQUIRE_NPU=1

launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # Paths relative to the checkout, so every clone of the repository shares one cache.
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  # The test targets use precompiled headers (tests/CMakeLists.txt), which ccache caches only
  # with these sloppiness settings.
  export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
fi

stage "format check"
git ls-files '*.h' '*.cc' | xargs clang-format --dry-run --Werror

stage "release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WERROR=ON "${launcher[@]}"
cmake --build build -j "$jobs"

stage "sanitizer build"
# -O1 with line tables only: readable sanitizer reports at a fraction of a debug build's cost.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" \
  -DCMAKE_C_FLAGS="-O1 -g1" -DTESSERA_WERROR=ON -DTESSERA_SANITIZE=ON -DTESSERA_MODEL_TESTS=OFF \
  -DTESSERA_BUILD_BENCHMARKS=OFF "${launcher[@]}"
cmake --build build-asan -j "$jobs"

stage "unit tests under ASan+UBSan"
# use_tls=0: LeakSanitizer (GCC 12) crashes in its tracer on a stale dynamic-TLS entry left by the
# GPU/NPU driver libraries that device probing loads; leaks are still checked, but pointers held
# only in thread-local storage do not count as roots. Leaks inside the GPU/OpenCL driver libraries
# themselves (PoCL, LLVM, lavapipe) are suppressed by library name in scripts/sanitizers/lsan.supp.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  LSAN_OPTIONS=use_tls=0:suppressions=$PWD/scripts/sanitizers/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -L unit --output-on-failure -j "$jobs"

stage "ThreadSanitizer build (executor, sessions, streams)"
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" \
  -DCMAKE_C_FLAGS="-O1 -g1" -DTESSERA_WERROR=ON -DTESSERA_TSAN=ON -DTESSERA_MODEL_TESTS=OFF \
  -DTESSERA_BUILD_BENCHMARKS=OFF -DTESSERA_NPU_REFERENCE=OFF "${launcher[@]}"
cmake --build build-tsan -j "$jobs" --target tessera_stream_tests tessera_c_stream

stage "streaming tests under TSan"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/sanitizers/tsan.supp \
  ctest --test-dir build-tsan -L tsan --output-on-failure -j "$jobs"

stage "all tests (release): unit and model"
ctest --test-dir build --output-on-failure -j "$jobs"

stage "install and use the installed tree (examples/, CMake package, pkg-config)"
scripts/check_install.sh build

stage "Python package: pip install . into a venv, pytest"
TESSERA_CMAKE_ARGS="-DTESSERA_WERROR=ON" TESSERA_JOBS=$jobs scripts/check_python.sh

stage "fuzz smoke: every libFuzzer target for ${TESSERA_FUZZ_SMOKE_SECONDS:-10} s (clang, ASan+UBSan)"
FUZZ_JOBS=$jobs scripts/fuzz.sh "${TESSERA_FUZZ_SMOKE_SECONDS:-10}" all

if [ "${TESSERA_AARCH64:-0}" = "1" ]; then
  stage "aarch64: cross build, unit tests (reference, cpu, NPU driver) under qemu-aarch64"
  TESSERA_JOBS=$jobs scripts/aarch64.sh ci
fi
finish
