#!/usr/bin/env bash
# Cost-model accuracy benchmark: for each model, profile it on the devices asked (default: every
# device here) and compare the cost model's predictions with measured runs of the whole model,
# random slices and random split plans (tessera profile --check). Prints one Markdown table per
# model, the profiling time and the load average around each step (the machine may be shared).
#
# The check compiles every configuration first and times them in REPEAT interleaved rounds (each
# round runs every configuration once, in a shuffled order); split plans run through the
# executor, with their sum of slices for comparison. Each checked slice follows a run of the
# whole model on the same device, as a plan's stage follows the other stages; HOT=1 times each
# slice right after a run of itself instead (--check --hot). Before each timed run, SETTLE
# (default 3) untimed rounds bring the configuration to its steady state (--settle). What does
# not fit MEMORY_BUDGET MiB
# of resident memory (default 4096) is timed one configuration at a time.
#
# usage: [DEVICES=reference,cpu] [PLATFORM=board.json] [REPEAT=5] [SLICES=5] [CALIBRATION=8] [STATISTIC=median] \
#        [HOT=1] [SETTLE=N] [MEMORY_BUDGET=MiB] scripts/profile_accuracy.sh TESSERA_BINARY MODEL_DIR OUT_DIR [model...]
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
devices=()
[ -n "${DEVICES:-}" ] && devices=(--devices "$DEVICES")
[ -n "${PLATFORM:-}" ] && devices+=(--platform "$PLATFORM")
check=()
[ -n "${HOT:-}" ] && check=(--hot)
[ -n "${SETTLE:-}" ] && check+=(--settle "$SETTLE")
[ -n "${MEMORY_BUDGET:-}" ] && check+=(--interleave-mib "$MEMORY_BUDGET")
load() { cut -d' ' -f1 /proc/loadavg; }
mkdir -p "$out"
for m in "${models[@]}"; do
  [ -f "$out/$m.tsr" ] || "$tessera" convert "$models_dir/$m.onnx" -o "$out/$m.tsr" > /dev/null
  load0=$(load)
  start=$(date +%s.%N)
  "$tessera" profile "$out/$m.tsr" -o "$out/$m.profile.json" "${devices[@]}" \
    --repeat "${REPEAT:-5}" --calibration-slices "${CALIBRATION:-8}" \
    --statistic "${STATISTIC:-median}" > "$out/$m.profile.txt"
  end=$(date +%s.%N)
  echo "### $m (profiled in $(echo "$end - $start" | bc) s, load average $load0 -> $(load))"
  echo
  "$tessera" profile "$out/$m.tsr" --check "$out/$m.profile.json" --slices "${SLICES:-5}" \
    --repeat "${REPEAT:-5}" --markdown "${check[@]}"
  echo "(load average after the check: $(load))"
  echo
done
