#!/usr/bin/env bash
# Installs a built Tessera into a fresh prefix and uses it as another project would:
#   1. `cmake --install BUILD --prefix P`, then moves P elsewhere (the tree must be relocatable);
#   2. the installed `tessera` finds its reference NPU driver and shipped platform files;
#   3. libtessera.so has its SONAME and exports only Tessera's symbols;
#   4. examples/ builds against it twice, with find_package(Tessera) from a separate CMake project
#      and with pkg-config from a plain Makefile, each also linked statically (libtessera.a), and
#      the programs stream a real model by a pipeline plan made with the installed tool, matching
#      the sequential outputs;
#   5. the C example imports ONNX models directly through the installed library (dynamic and
#      static): a model with symbolic height and width sized per input, and the real model, each
#      matching the reference device; a shape that does not fit is an error naming the dimension.
#
# usage: scripts/check_install.sh [BUILD_DIR]   (default build; run after the release build)
# Uses squeezenet1_1 from $TESSERA_MODEL_CACHE (default ~/.cache/tessera/models), exporting it
# with /usr/bin/python3 when absent.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
models=${TESSERA_MODEL_CACHE:-$HOME/.cache/tessera/models}
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-install.XXXXXX")
trap 'rm -rf "$work"' EXIT

step() { printf '== install check: %s\n' "$*"; }

step "install into a fresh prefix and move it"
cmake --install "$build" --prefix "$work/staged" >/dev/null
mv "$work/staged" "$work/prefix"
prefix=$work/prefix
libdir=$(dirname "$(find "$prefix" -name 'libtessera.so' -print -quit)")
[ -n "$libdir" ] || { echo "no libtessera.so installed" >&2; exit 1; }

step "the installed tool finds its driver and platform files"
"$prefix/bin/tessera" devices | tee "$work/devices.txt"
grep -q '^ *npu:0' "$work/devices.txt" || grep -q 'npu:0' "$work/devices.txt" ||
  { echo "the installed tool lists no npu:0 (reference driver not found)" >&2; exit 1; }
[ -f "$libdir/tessera/libtessera_npu_reference.so" ]
[ -f "$prefix/share/tessera/platforms/jetson_tx2.json" ]

step "SONAME and exported symbols"
soname=$(readelf -d "$libdir/libtessera.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libtessera.so.0" ] || { echo "SONAME is '$soname'" >&2; exit 1; }
# Every defined dynamic symbol is Tessera's (C API or the tessera namespace).
foreign=$(nm -D --defined-only "$libdir/libtessera.so" | awk '{print $3}' | c++filt |
  grep -v -E '^(tessera_|tessera::|typeinfo (name )?for tessera::|vtable for tessera::|TESSERA_0$)' || true)
if [ -n "$foreign" ]; then
  echo "libtessera.so exports symbols that are not Tessera's:" >&2
  echo "$foreign" | head -20 >&2
  exit 1
fi

step "a model and a pipeline plan with the installed tool"
if [ ! -f "$models/squeezenet1_1.onnx" ]; then
  mkdir -p "$models"
  /usr/bin/python3 scripts/export_models.py --out "$models" --models squeezenet1_1
fi
tessera=$prefix/bin/tessera
"$tessera" convert "$models/squeezenet1_1.onnx" -o "$work/model.tsr" >/dev/null
"$tessera" profile "$work/model.tsr" --devices cpu:0,cpu:1 --repeat 1 --calibration-slices 0 -q \
  -o "$work/profile.json" >/dev/null
"$tessera" plan "$work/model.tsr" --profile "$work/profile.json" --planner pipeline --stages 2 \
  -o "$work/plan.json" >/dev/null

step "examples with find_package(Tessera)"
cmake -S examples -B "$work/cmake-build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cmake-build" >/dev/null
"$work/cmake-build/stream_frames" "$work/model.tsr" "$work/plan.json" 6
"$work/cmake-build/stream_frames_c" "$work/model.tsr" "$work/plan.json" 6
# Statically linked against libtessera.a: no libtessera.so needed at run time.
if readelf -d "$work/cmake-build/stream_frames_c_static" | grep -q 'libtessera'; then
  echo "stream_frames_c_static needs libtessera.so" >&2
  exit 1
fi
"$work/cmake-build/stream_frames_c_static" "$work/model.tsr" "$work/plan.json" 3

step "ONNX import through the installed library"
/usr/bin/python3 - "$work/symbolic.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
w = np.random.default_rng(3).standard_normal((4, 3, 3, 3)).astype(np.float32)
graph = helper.make_graph(
    [helper.make_node("Conv", ["images", "w"], ["c"], pads=[1, 1, 1, 1]),
     helper.make_node("Relu", ["c"], ["y"])], "symbolic",
    [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, "height", "width"])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    [numpy_helper.from_array(w, "w")])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
for prog in import_onnx_c import_onnx_c_static; do
  "$work/cmake-build/$prog" "$work/symbolic.onnx" "images=2x3x19x11" | tee "$work/import.txt"
  grep -q '^input images: 2x3x19x11$' "$work/import.txt"
done
"$work/cmake-build/import_onnx_c" "$models/squeezenet1_1.onnx" "input=1x3x224x224"
if "$work/cmake-build/import_onnx_c" "$work/symbolic.onnx" "" 2>"$work/import.err"; then
  echo "import without shapes succeeded" >&2
  exit 1
fi
grep -q "'images' dimension 2 is symbolic ('height')" "$work/import.err" || {
  cat "$work/import.err" >&2
  exit 1
}

step "examples with pkg-config"
mkdir -p "$work/make-build"
cp examples/Makefile examples/stream_frames.cc examples/stream_frames_c.c examples/import_onnx_c.c \
  "$work/make-build/"
PKG_CONFIG_PATH=$libdir/pkgconfig make -s -C "$work/make-build" all static
"$work/make-build/stream_frames" "$work/model.tsr" "$work/plan.json" 4
"$work/make-build/stream_frames_c" "$work/model.tsr" "$work/plan.json" 4
"$work/make-build/import_onnx_c" "$work/symbolic.onnx" "images=1x3x7x9"
"$work/make-build/stream_frames_static" "$work/model.tsr" "$work/plan.json" 3
step "ok"
