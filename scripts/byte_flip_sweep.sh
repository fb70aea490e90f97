#!/usr/bin/env bash
# A byte-flip sweep of a model file under ASan + UBSan (fuzz/byte_flip_sweep.cc): every byte of
# the graph part flipped four ways, plus a sample of the weights, each loaded, inferred and, when
# small, run on the reference kernels. The unit tests sweep a small model the same way; this is
# for real ones, e.g. a converted SqueezeNet:
#
#   scripts/byte_flip_sweep.sh MODEL.tsr [--run-flops F]
#
# Builds in build-fuzz/ (as scripts/fuzz.sh does; needs clang). Fails on the first crash, sanitizer
# report or refusal without a message, printing the case.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
  echo "usage: scripts/byte_flip_sweep.sh MODEL.tsr [--run-flops F]" >&2
  exit 2
fi
build="${FUZZ_BUILD_DIR:-build-fuzz}"
scripts/fuzz.sh --build-only
ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
  "$build/fuzz/tessera_byte_flip_sweep" "$@"
