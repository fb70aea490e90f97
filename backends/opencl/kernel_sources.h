// The OpenCL C sources of the kernel families (backends/opencl/kernels/*.cl), embedded at build
// time by cmake/EmbedOpenCLKernels.cmake into a generated opencl_kernel_sources.cc.
//
// "common" is not a program of its own: its text (activations, helpers) is prepended to every
// family's source when the family is built.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace tessera::opencl {

struct KernelFamilySource {
  const char* family;  // the file name without .cl: "conv", "gemm", ...
  const char* source;
};

// Every embedded .cl file, in file-name order.
std::span<const KernelFamilySource> kernel_family_sources();

// The source of `family`, or an empty view when there is no such file.
std::string_view kernel_family_source(std::string_view family);

}  // namespace tessera::opencl
