#!/usr/bin/env bash
# The main job on a built-in default: install dependencies, build, export a MobileNetV2 with
# seeded random weights from PyTorch, convert it to .tsr, and run it: top-5 classes and latency.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${TESSERA_JOBS:-$(nproc)}
models=${TESSERA_MODEL_CACHE:-$HOME/.cache/tessera/models}
device=${TESSERA_DEVICE:-reference}

scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs" --target tessera
/usr/bin/python3 scripts/export_models.py --out "$models" --models mobilenet_v2 --demo

mkdir -p build/demo
build/tools/tessera convert "$models/mobilenet_v2.onnx" -o build/demo/mobilenet_v2.tsr
build/tools/tessera info build/demo/mobilenet_v2.tsr | tail -n 1
build/tools/tessera run build/demo/mobilenet_v2.tsr --input "$models/demo.input.npy" \
  --output build/demo/mobilenet_v2.output.npy --device "$device" --repeat 5 --top 5
