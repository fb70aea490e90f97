#!/usr/bin/env bash
# Builds Tessera and runs every test:
#   1. a Release build with warnings as errors: unit tests, then the model tests (PyTorch
#      reference models exported into ~/.cache/tessera/models, or $TESSERA_MODEL_CACHE);
#   2. an AddressSanitizer + UndefinedBehaviorSanitizer build running the unit tests, which
#      include every bad-input test (malformed model files, ONNX files, .npy files, CLI misuse).
# Installs missing Debian packages first (scripts/install-deps.sh). Compilation goes through
# ccache when it is installed, so repeated runs on one machine rebuild only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${TESSERA_JOBS:-$(nproc)}

scripts/install-deps.sh

# Every backend whose packages install-deps.sh provides must run its tests here, not skip:
# Vulkan on lavapipe, OpenCL on PoCL's CPU device, the reference NPU driver built alongside.
export TESSERA_REQUIRE_VULKAN=1 TESSERA_REQUIRE_OPENCL=1 TESSERA_REQUIRE_NPU=1

launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  # Paths relative to the checkout, so every clone of the repository shares one cache.
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
fi

echo "== format check"
git ls-files '*.h' '*.cc' | xargs clang-format --dry-run --Werror

echo "== release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WERROR=ON "${launcher[@]}"
cmake --build build -j "$jobs"

echo "== sanitizer build"
# -O1 with line tables only: readable sanitizer reports at a fraction of a debug build's cost.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" \
  -DCMAKE_C_FLAGS="-O1 -g1" -DTESSERA_WERROR=ON -DTESSERA_SANITIZE=ON -DTESSERA_MODEL_TESTS=OFF \
  -DTESSERA_BUILD_BENCHMARKS=OFF "${launcher[@]}"
cmake --build build-asan -j "$jobs"

echo "== unit tests under ASan+UBSan"
# use_tls=0: LeakSanitizer (GCC 12) crashes in its tracer on a stale dynamic-TLS entry left by the
# GPU/NPU driver libraries that device probing loads; leaks are still checked, but pointers held
# only in thread-local storage do not count as roots.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS=use_tls=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -L unit --output-on-failure -j "$jobs"

echo "== all tests (release): unit and model"
ctest --test-dir build --output-on-failure -j "$jobs"
