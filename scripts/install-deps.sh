#!/usr/bin/env bash
# Installs the Debian packages Tessera needs to build, test and export its test models.
# Idempotent: packages already present are skipped by apt-get.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang-format ccache
  # core dependencies
  libflatbuffers-dev flatbuffers-compiler
  libonnx-dev libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libbenchmark-dev
  # cpu backend (OpenBLAS is loaded at run time, see backends/cpu/openblas.h) and the reference
  # NPU driver (backends/npu/reference_driver: XNNPACK fp16/int8 operators)
  libxnnpack-dev libpthreadpool-dev libcpuinfo-dev libopenblas-dev
  # cpu backend, reduced precision (bf16 kernels; optional, TESSERA_ONEDNN)
  libdnnl-dev
  # Vulkan backend: headers + loader, lavapipe (Vulkan on the CPU, for tests), glslc (shaders)
  libvulkan-dev mesa-vulkan-drivers glslc
  # OpenCL backend: headers, ICD loader, and PoCL (an OpenCL CPU device the tests run on)
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  # remote hops: the packing codec's LZ4 (backends/remote/packing.h)
  liblz4-dev
  # remote devices: the ZeroMQ transport with CURVE (backends/remote/zmq_transport.h)
  libzmq3-dev cppzmq-dev
  # platform, profile and plan JSON files
  nlohmann-json3-dev
  # model export (Debian's python: /usr/bin/python3)
  python3 python3-numpy python3-onnx python3-torch python3-torchvision
  # the Python package (python/: pybind11 module, `pip install .` into a venv, pytest)
  pybind11-dev python3-dev python3-venv python3-pytest
  # `tessera plot` tests render the SVG charts to PNG (rsvg-convert) and read them (python3-pil)
  librsvg2-bin python3-pil
  # the libFuzzer targets in fuzz/ (clang with compiler-rt: -fsanitize=fuzzer, ASan, UBSan)
  clang
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
