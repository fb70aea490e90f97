#!/usr/bin/env bash
# Cost-model accuracy benchmark: for each model, profile it on every device here and compare the
# cost model's predictions with measured runs of the whole model, random slices and random split
# plans (tessera profile --check). Prints one Markdown table per model and a summary line.
#
# usage: scripts/profile_accuracy.sh TESSERA_BINARY MODEL_DIR OUT_DIR [model...]
set -euo pipefail
tessera=$1
models_dir=$2
out=$3
shift 3
models=("$@")
if [ "${#models[@]}" -eq 0 ]; then
  models=(squeezenet1_1 mobilenet_v2 resnet18 shufflenet_v2_x0_5 mobilenet_v3_small googlenet
          efficientnet_b0 alexnet resnet50 densenet121 vgg16)
fi
mkdir -p "$out"
for m in "${models[@]}"; do
  [ -f "$out/$m.tsr" ] || "$tessera" convert "$models_dir/$m.onnx" -o "$out/$m.tsr" > /dev/null
  start=$(date +%s.%N)
  "$tessera" profile "$out/$m.tsr" -o "$out/$m.profile.json" --repeat "${REPEAT:-5}" --statistic "${STATISTIC:-median}" > "$out/$m.profile.txt"
  end=$(date +%s.%N)
  echo "### $m (profiled in $(echo "$end - $start" | bc) s)"
  echo
  "$tessera" profile "$out/$m.tsr" --check "$out/$m.profile.json" --slices "${SLICES:-5}" \
    --repeat "${REPEAT:-5}" --markdown
  echo
done
