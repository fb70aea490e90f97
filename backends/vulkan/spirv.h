// The compute shaders of the Vulkan backend as SPIR-V, embedded at build time.
//
// Every backends/vulkan/shaders/<name>.comp is compiled by glslc into <name>.spv and written as
// a uint32 array into a generated file (backends/vulkan/embed_spirv.cmake). Kernels look their
// shader up by the file's base name, e.g. find_spirv_shader("conv2d_tiled").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace tessera {

struct SpirvShader {
  const char* name;      // the .comp file's base name
  const uint32_t* code;  // SPIR-V words
  size_t num_words;
};

// The shader named `name`, or null.
const SpirvShader* find_spirv_shader(std::string_view name);
// Every embedded shader (tests compile them all).
std::span<const SpirvShader> all_spirv_shaders();

}  // namespace tessera
