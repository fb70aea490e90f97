#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan, coverage) in build-fuzz/ and runs one.
#
#   scripts/fuzz.sh [SECONDS] [TARGET]      (defaults: 120 s, unpack)
#
# Targets: unpack (the packing codec's unpacker, backends/remote/packing.h) and wire (the remote
# wire protocol's message decoder, backends/remote/wire.h). The corpus grows in
# build-fuzz/fuzz/corpus/TARGET (seeded with valid packed tensors of every policy); crashes land in
# build-fuzz/fuzz/artifacts/. Needs clang with compiler-rt (Debian: apt-get install clang).
# Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-120}"
target="${2:-unpack}"
build="${FUZZ_BUILD_DIR:-build-fuzz}"
jobs="${FUZZ_JOBS:-2}"

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (apt-get install clang)" >&2
  exit 1
fi

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DTESSERA_FUZZ=ON \
  -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target "tessera_fuzz_${target}" "tessera_fuzz_${target}_seeds"

corpus="$build/fuzz/corpus/$target"
artifacts="$build/fuzz/artifacts/"
mkdir -p "$corpus" "$artifacts"
"$build/fuzz/tessera_fuzz_${target}_seeds" "$corpus"
exec "$build/fuzz/tessera_fuzz_${target}" -max_total_time="$seconds" -print_final_stats=1 \
  -dict="fuzz/${target}.dict" -artifact_prefix="$artifacts" "$corpus"
