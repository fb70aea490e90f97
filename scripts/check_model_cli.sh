#!/usr/bin/env bash
# Converts and runs one exported model through the `tessera` command and compares the output
# with PyTorch's: max|tessera - torch| <= 1e-4 * max(1, max|torch|).
# usage: check_model_cli.sh TESSERA_BINARY MODEL_DIR MODEL_NAME [DEVICE]
set -euo pipefail
tessera=$1 dir=$2 name=$3 device=${4:-reference}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$tessera" convert "$dir/$name.onnx" -o "$work/$name.tsr"
"$tessera" info "$work/$name.tsr" > "$work/info.txt"
tail -n 1 "$work/info.txt"
"$tessera" run "$work/$name.tsr" --input "$dir/$name.input.npy" --output "$work/out.npy" \
  --device "$device" --top 5
/usr/bin/python3 - "$work/out.npy" "$dir/$name.output.npy" <<'PY'
import sys
import numpy as np
got, ref = np.load(sys.argv[1]), np.load(sys.argv[2])
assert got.shape == ref.shape, f"shape {got.shape} != {ref.shape}"
err = float(np.abs(got - ref).max())
tol = 1e-4 * max(1.0, float(np.abs(ref).max()))
print(f"max|err| {err:.3g} tolerance {tol:.3g}")
sys.exit(0 if err <= tol and np.isfinite(got).all() else 1)
PY
