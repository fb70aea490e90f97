#!/usr/bin/env bash
# Tessera for 64-bit ARM (aarch64), cross-compiled on an x86-64 Debian 12 machine and run under
# qemu-aarch64 (user-mode emulation).
#
# Build folders: build-aarch64/ ($TESSERA_AARCH64_BUILD), build-aarch64-ci/ for `ci`.
#
#   scripts/aarch64.sh deps    install the arm64 dependencies (idempotent)
#   scripts/aarch64.sh build   deps, then cross-build the library, the `tessera` tool, the
#                              reference NPU driver, the unit tests and the benchmarks into
#                              build-aarch64/ (cmake/aarch64-linux-gnu.cmake)
#   scripts/aarch64.sh test    build, then every test of the unit label under qemu-aarch64
#   scripts/aarch64.sh ci      the CI subset (scripts/test.sh): deps, then only the device
#                              test program (tessera_device_tests: the unit tests of the
#                              reference kernels, core, the cpu device and the NPU reference
#                              driver, with the libraries and driver it needs), run under
#                              qemu-aarch64
#   scripts/aarch64.sh insns MODEL [DEVICE] [K]
#                              guest instructions per inference of MODEL (.onnx or .tsr) on
#                              DEVICE (default cpu) under qemu-aarch64: `tessera run` with 1 and
#                              1+K runs (K default 2), each counted from qemu's block log
#                              (scripts/qemu_insn_count.awk); the difference over K. Kernels
#                              by the rules (TESSERA_CPU_KERNELS=rules: timing kernels under an
#                              emulator would measure the emulator). An emulator's instruction
#                              count, a rough guide to the work per inference: not a
#                              performance figure.
# (no argument: build). Extra arguments after `test` / `ci` go to ctest (e.g. -R Conv).
#
# Dependencies: crossbuild-essential-arm64, qemu-user, and the arm64 multiarch packages of
# Tessera's libraries. XNNPACK, pthreadpool, cpuinfo's -dev and ONNX's -dev packages cannot be
# co-installed with their amd64 versions (Debian 12 does not mark them Multi-Arch: same;
# installing them would remove the host's XNNPACK and PyTorch), so their arm64 .debs are unpacked
# into $TESSERA_AARCH64_PREFIX (default /opt/tessera-aarch64) instead. apt-get runs with
# --no-remove: it never removes a host package. The OpenCL and Vulkan backends are off in this
# build (their loaders are not needed to test the cpu, reference and NPU paths, and PoCL /
# lavapipe do not run usefully under emulation).
#
# Generated code: flatc and protoc are the host's (same versions as the arm64 libraries).
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-build}
[ $# -gt 0 ] && shift
jobs=${TESSERA_JOBS:-$(nproc)}
prefix=${TESSERA_AARCH64_PREFIX:-/opt/tessera-aarch64}
build=${TESSERA_AARCH64_BUILD:-build-aarch64}

# Installed with apt (Multi-Arch: same or foreign, co-installable with the host's packages).
APT_PACKAGES=(
  crossbuild-essential-arm64 qemu-user libc6:arm64 libstdc++6:arm64
  libflatbuffers-dev:arm64 libprotobuf-dev:arm64 libonnx1:arm64 libcpuinfo0:arm64
  libgtest-dev:arm64 libgmock-dev:arm64 libbenchmark-dev:arm64
  libopenblas-dev:arm64 liblz4-dev:arm64 libzmq3-dev:arm64 cppzmq-dev:arm64 nlohmann-json3-dev
)
# Unpacked into $prefix (conflict with their amd64 versions).
UNPACKED=(libxnnpack0 libxnnpack-dev libpthreadpool0 libpthreadpool-dev libcpuinfo0 libcpuinfo-dev
          libonnx1 libonnx-dev libonnxifi)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

deps() {
  export DEBIAN_FRONTEND=noninteractive
  local updated=0
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
    $SUDO apt-get update -qq
    updated=1
  fi
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "aarch64: installing ${missing[*]}"
    [ "$updated" -eq 1 ] || $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends --no-remove "${missing[@]}"
  fi
  # The unpacked prefix: redone when any package's candidate version changes.
  local want=""
  for p in "${UNPACKED[@]}"; do
    want+="$p $(apt-cache policy "$p:arm64" | awk '/Candidate:/ {print $2}')"$'\n'
  done
  if [ -f "$prefix/.packages" ] && [ "$(cat "$prefix/.packages")" = "$want" ]; then
    echo "aarch64: all ${#APT_PACKAGES[@]} packages present, $prefix up to date"
    return
  fi
  echo "aarch64: unpacking ${UNPACKED[*]} (arm64) into $prefix"
  local tmp
  tmp=$(mktemp -d)
  local debs=()
  for p in "${UNPACKED[@]}"; do debs+=("$p:arm64"); done
  (cd "$tmp" && chmod 777 . && apt-get download -qq "${debs[@]}")
  $SUDO rm -rf "$prefix"
  $SUDO mkdir -p "$prefix"
  for d in "$tmp"/*.deb; do $SUDO dpkg -x "$d" "$prefix"; done
  rm -rf "$tmp"
  # pkg-config files point into the prefix.
  $SUDO find "$prefix" -name '*.pc' -exec sed -i "s|^prefix=/usr|prefix=$prefix/usr|" {} +
  printf '%s' "$want" | $SUDO tee "$prefix/.packages" >/dev/null
}

launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  # The test targets use precompiled headers (tests/CMakeLists.txt), which ccache caches only
  # with these sloppiness settings.
  export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
fi

configure() {
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_WERROR=ON \
    -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" \
    -DTESSERA_AARCH64_PREFIX="$prefix" -DTESSERA_OPENCL=OFF -DTESSERA_VULKAN=OFF \
    -DTESSERA_MODEL_TESTS=OFF "$@" "${launcher[@]}"
}

case "$cmd" in
  deps) deps ;;
  build)
    deps
    configure
    cmake --build "$build" -j "$jobs"
    ;;
  test)
    deps
    configure
    cmake --build "$build" -j "$jobs"
    ctest --test-dir "$build" -L unit -j "$jobs" --timeout 300 --output-on-failure "$@"
    ;;
  ci)
    # The device subset only (tests/CMakeLists.txt: tessera_device_tests), for the CI budget, in
    # a build folder of its own.
    build=${TESSERA_AARCH64_CI_BUILD:-build-aarch64-ci}
    deps
    configure -DTESSERA_BUILD_BENCHMARKS=OFF -DTESSERA_DEVICE_TESTS=ON
    cmake --build "$build" -j "$jobs" --target tessera_device_tests
    ctest --test-dir "$build" -L device -j "$jobs" --timeout 300 --output-on-failure "$@"
    ;;
  insns)
    [ $# -ge 1 ] || { echo "usage: scripts/aarch64.sh insns MODEL [DEVICE] [K]" >&2; exit 2; }
    model=$1 device=${2:-cpu} k=${3:-2}
    build=${TESSERA_AARCH64_CI_BUILD:-build-aarch64-ci}
    deps
    configure -DTESSERA_BUILD_BENCHMARKS=OFF -DTESSERA_DEVICE_TESTS=ON
    cmake --build "$build" -j "$jobs" --target tessera
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    qemu=(qemu-aarch64 -E "LD_LIBRARY_PATH=$prefix/usr/lib/aarch64-linux-gnu"
          -E TESSERA_CPU_KERNELS=rules)
    run=("$build/tools/tessera" run "$model" --device "$device" --warmup 0)
    count() {  # instructions of `tessera run ... --repeat $1`
      mkfifo "$work/log"
      awk -f scripts/qemu_insn_count.awk "$work/log" >"$work/count" &
      local awk_pid=$!
      "${qemu[@]}" -d in_asm,exec,nochain -D "$work/log" "${run[@]}" --repeat "$1" >/dev/null
      wait "$awk_pid"
      rm -f "$work/log"
      awk '$6 > 0 {print "aarch64.sh: " $6 " runs of blocks the log did not list" >"/dev/stderr"}
           {print $2}' "$work/count"
    }
    one=$(count 1)
    more=$(count $((k + 1)))
    echo "$model on $device (aarch64, qemu-aarch64 $(qemu-aarch64 --version | awk 'NR==1{print $3}')):"
    echo "  instructions: $one for 1 run, $more for $((k + 1)) runs"
    echo "  per inference: $(((more - one) / k)) (emulated count, not a performance figure)"
    ;;
  *)
    echo "usage: scripts/aarch64.sh [deps|build|test|ci|insns] [arguments]" >&2
    exit 2
    ;;
esac
