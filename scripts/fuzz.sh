#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan, coverage) in build-fuzz/ and runs them.
#
#   scripts/fuzz.sh [SECONDS] [TARGET|all]     (defaults: 120 s, all)
#   scripts/fuzz.sh --build-only               (every target, and the byte-flip sweep)
#
# Targets (fuzz/): tsr (the .tsr reader, then inference, a reference run and save -> load),
# onnx (the ONNX importer through conversion, the .tsr writer and reader, and a reference run),
# npy (the .npy reader), plan, profile, platform, cutprofile (the JSON readers), unpack (the
# packing codec's unpacker), wire (the remote wire protocol's decoder). `all` runs each for SECONDS (CI's
# smoke run: scripts/test.sh). For long runs
# give one target many seconds, e.g. `scripts/fuzz.sh 3600 onnx`; FUZZ_FORK=N runs N processes.
# Targets run FUZZ_JOBS (default: the core count) at a time.
#
# Each target's corpus grows in build-fuzz/fuzz/corpus/TARGET and is kept between runs; seeds
# (valid files written by fuzz/seeds.cc and fuzz/unpack_seeds.cc, the hostile files of
# tests/data/hostile/, the shipped platform files) are rewritten into build-fuzz/fuzz/seeds/.
# Crashes, leaks, timeouts (10 s per input) and out-of-memory inputs (2 GiB) land in
# build-fuzz/fuzz/artifacts/ and make the script fail. Needs clang with compiler-rt (Debian:
# apt-get install clang); uses ccache when installed.
set -euo pipefail
cd "$(dirname "$0")/.."

build_only=0
if [ "${1:-}" = --build-only ]; then
  build_only=1
  shift
fi
seconds="${1:-120}"
which_target="${2:-all}"
build="${FUZZ_BUILD_DIR:-build-fuzz}"
jobs="${FUZZ_JOBS:-$(nproc)}"
all_targets=(tsr onnx npy plan profile platform cutprofile unpack wire)

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (apt-get install clang)" >&2
  exit 1
fi
if [ "$which_target" = all ]; then
  targets=("${all_targets[@]}")
else
  targets=("$which_target")
fi

launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
fi
# -O1 with line tables: readable reports, and a third of the compile time of -O2 -g. No backend
# is built: the targets need core, ops, graph, the .tsr format and the ONNX importer only.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" \
  -DCMAKE_C_FLAGS="-O1 -g1" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DTESSERA_FUZZ=ON -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCHMARKS=OFF \
  -DTESSERA_VULKAN=OFF -DTESSERA_OPENCL=OFF -DTESSERA_NPU_REFERENCE=OFF "${launcher[@]}" >/dev/null
build_targets=(tessera_fuzz_seeds tessera_fuzz_unpack_seeds tessera_fuzz_wire_seeds)
for t in "${targets[@]}"; do build_targets+=("tessera_fuzz_$t"); done
if [ $build_only = 1 ]; then build_targets+=(tessera_byte_flip_sweep); fi
cmake --build "$build" -j "$jobs" --target "${build_targets[@]}"
if [ $build_only = 1 ]; then exit 0; fi

fuzz="$build/fuzz"
rm -rf "$fuzz/seeds"
mkdir -p "$fuzz/seeds/unpack" "$fuzz/seeds/wire" "$fuzz/seeds/platform" "$fuzz/artifacts"
"$fuzz/tessera_fuzz_seeds" "$fuzz/seeds" >/dev/null
"$fuzz/tessera_fuzz_unpack_seeds" "$fuzz/seeds/unpack" >/dev/null
"$fuzz/tessera_fuzz_wire_seeds" "$fuzz/seeds/wire" >/dev/null
cp energy/platforms/*.json "$fuzz/seeds/platform/"
for f in tests/data/hostile/*; do
  case "$f" in
    *.onnx) cp "$f" "$fuzz/seeds/onnx/" ;;
    *.tsr) cp "$f" "$fuzz/seeds/tsr/" ;;
    *.npy) cp "$f" "$fuzz/seeds/npy/" ;;
    *.plan.json) cp "$f" "$fuzz/seeds/plan/" ;;
    *.profile.json) cp "$f" "$fuzz/seeds/profile/" ;;
    *.platform.json) cp "$f" "$fuzz/seeds/platform/" ;;
  esac
done

failed=()
summary=()
# One target's run: its summary line in $fuzz/$t.result, and its findings on stderr.
run_target() {
  local t=$1 corpus="$fuzz/corpus/$1" log="$fuzz/$1.log"
  mkdir -p "$corpus"
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
              -artifact_prefix="$fuzz/artifacts/$t-")
  if [ -f "fuzz/$t.dict" ]; then args+=(-dict="fuzz/$t.dict"); fi
  if [ -n "${FUZZ_FORK:-}" ]; then args+=(-fork="$FUZZ_FORK" -ignore_crashes=0); fi
  if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$fuzz/tessera_fuzz_$t" "${args[@]}" "$corpus" "$fuzz/seeds/$t" >"$log" 2>&1; then
    local runs cov
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    echo "$t: ${runs:-?} executions, $cov, corpus $(ls "$corpus" | wc -l) files" >"$fuzz/$t.result"
  else
    grep -E 'ERROR|SUMMARY|==[0-9]+==|#[0-9]+ 0x|Test unit written' "$log" | head -40 >&2 || true
    echo "$t: FAILED (log: $log)" >"$fuzz/$t.result"
  fi
}
# Up to FUZZ_JOBS targets at once (each a single-process fuzzer), SECONDS each.
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  echo "== fuzz $t: $seconds s"
  rm -f "$fuzz/$t.result"
  run_target "$t" &
done
wait
for t in "${targets[@]}"; do
  line=$(cat "$fuzz/$t.result" 2>/dev/null || echo "$t: FAILED (no result)")
  summary+=("$line")
  case "$line" in *FAILED*) failed+=("$t") ;; esac
done
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in ${failed[*]}: inputs in $fuzz/artifacts/" >&2
  exit 1
fi
