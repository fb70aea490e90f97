#!/usr/bin/env bash
# The main job end to end on this machine's devices: install dependencies, build, export a
# MobileNetV2 with seeded random weights from PyTorch, convert it to .tsr, profile it on every
# device `tessera devices` finds, plan it for latency (seed 000 Algorithm 1), run it by the plan
# and print the plan, measured next to estimated latency, and the top-5 classes.
#
# Environment:
#   TESSERA_JOBS            build parallelism (default: nproc)
#   TESSERA_MODEL_CACHE     where exported models go (default ~/.cache/tessera/models)
#   TESSERA_DEVICES         comma-separated devices to use instead of the detected ones
#   TESSERA_DEMO_REPEAT     timed runs per layer while profiling (default 2: quick, noisy)
#   TESSERA_DEMO_OBJECTIVE  latency (default) or energy
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${TESSERA_JOBS:-$(nproc)}
models=${TESSERA_MODEL_CACHE:-$HOME/.cache/tessera/models}
repeat=${TESSERA_DEMO_REPEAT:-2}
objective=${TESSERA_DEMO_OBJECTIVE:-latency}
out=build/demo
tessera=build/tools/tessera

scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs" --target tessera
/usr/bin/python3 scripts/export_models.py --out "$models" --models mobilenet_v2 --demo

step() { printf '\n== %s\n' "$*"; }

step "convert"
mkdir -p "$out"
"$tessera" convert "$models/mobilenet_v2.onnx" -o "$out/mobilenet_v2.tsr"
"$tessera" info "$out/mobilenet_v2.tsr" | tail -n 1

step "devices"
"$tessera" devices
if [[ -n ${TESSERA_DEVICES:-} ]]; then
  devices=$TESSERA_DEVICES
else
  # Every detected device but the reference kernels (the oracle, too slow to be worth a
  # stage), unless they are all there is; remote devices need a server and are left out.
  devices=$("$tessera" devices | awk '$1 != "reference" && $1 !~ /^remote:/ {print $1}' |
    paste -sd, -)
  [[ -n $devices ]] || devices=reference
fi
echo "using: $devices"

step "profile ($repeat timed run(s) per layer)"
"$tessera" profile "$out/mobilenet_v2.tsr" -o "$out/profile.json" --devices "$devices" \
  --repeat "$repeat" --warmup 1 --statistic min

step "plan ($objective)"
"$tessera" plan "$out/mobilenet_v2.tsr" --profile "$out/profile.json" --objective "$objective" \
  -o "$out/plan.json"

step "run by the plan"
"$tessera" run "$out/mobilenet_v2.tsr" --plan "$out/plan.json" --input "$models/demo.input.npy" \
  --output "$out/mobilenet_v2.output.npy" --repeat 5 --top 5 --trace "$out/trace.json"
echo "(open $out/trace.json in https://ui.perfetto.dev to see what ran where)"
