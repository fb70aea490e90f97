#!/usr/bin/env bash
# Builds Tessera and runs every test:
#   1. a Release build with warnings as errors: unit tests, then the model tests (PyTorch
#      reference models exported into ~/.cache/tessera/models, or $TESSERA_MODEL_CACHE);
#   2. an AddressSanitizer + UndefinedBehaviorSanitizer build running the unit tests, which
#      include every bad-input test (malformed model files, ONNX files, .npy files, CLI misuse).
# Installs missing Debian packages first (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${TESSERA_JOBS:-$(nproc)}
# The Vulkan tests run on lavapipe (mesa-vulkan-drivers) and must not skip for want of a device.
export TESSERA_REQUIRE_VULKAN=1

scripts/install-deps.sh
# The OpenCL tests run on PoCL's CPU device; here they must run, not skip.
export TESSERA_REQUIRE_OPENCL=1

# The reference NPU driver is built here, so its tests must run rather than skip.
export TESSERA_REQUIRE_NPU=1

echo "== format check"
git ls-files '*.h' '*.cc' | xargs clang-format --dry-run --Werror

echo "== release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WERROR=ON
cmake --build build -j "$jobs"

echo "== sanitizer build"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_WERROR=ON \
  -DTESSERA_SANITIZE=ON -DTESSERA_MODEL_TESTS=OFF -DTESSERA_BUILD_BENCHMARKS=OFF
cmake --build build-asan -j "$jobs"

echo "== unit tests under ASan+UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -L unit --output-on-failure -j "$jobs"

echo "== all tests (release): unit and model"
ctest --test-dir build --output-on-failure -j "$jobs"
