// Saving and loading Tessera model files (.tsr).
//
// A .tsr file is a size-prefixed FlatBuffer (graph/format/tessera_model.fbs) describing a Graph,
// followed by a 64-byte-aligned weights section holding every constant's bytes at a 64-byte
// aligned offset (docs/model-format.md). Loading memory-maps the file and hands out constants
// as Tensor views into the mapping, so a model's weights are neither copied nor read until used.
//
// Loading never trusts the file. In order, before anything large is allocated:
//   1. envelope: the file is big enough, the identifier is "TSR1", the size prefix lies within
//      the file;
//   2. the format version: the major version must be kFormatMajor;
//   3. the FlatBuffers verifier (bounds, alignment, depth and table limits), and a bound on how
//      far tables shared between many offsets could inflate the graph;
//   4. a semantic validator: indices in range, valid dtypes and layouts, shapes within the
//      limits of core/shape.h, payload sizes equal to shape x dtype, payloads 64-byte aligned and
//      inside the weights section, known op types, well-formed attributes;
//   5. Graph::validate (single producers, no cycles).
// Every failure is a Status naming the value or node (index and name), the field, or the file
// offset at fault. A corrupt file never crashes the loader.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace tessera {

// The format version this Tessera writes. It reads every file with the same major version.
inline constexpr uint16_t kFormatMajor = 1;
inline constexpr uint16_t kFormatMinor = 0;
// Every payload offset, and the weights section itself, is a multiple of this.
inline constexpr uint64_t kWeightsAlignment = 64;

// Model-level information stored beside the graph.
struct ModelMetadata {
  // What wrote the file, e.g. "tessera 0.1.0".
  std::string producer;
  // Free-form key/value pairs, e.g. {"source", "resnet50.onnx"}, {"onnx_opset", "13"}.
  std::map<std::string, std::string> properties;

  bool operator==(const ModelMetadata& o) const {
    return producer == o.producer && properties == o.properties;
  }
};

// A loaded model file.
struct LoadedModel {
  Graph graph;
  ModelMetadata metadata;
  uint16_t format_major = 0;
  uint16_t format_minor = 0;
  // True when constants view a memory mapping of the file, false when the file was read into
  // an owned buffer (mmap unavailable or disabled, or loaded from memory).
  bool memory_mapped = false;
};

struct LoadOptions {
  // Map the file instead of reading it. Reading is the fallback when mapping fails.
  bool use_mmap = true;
};

// Serialises `graph` (which must pass Graph::validate, with every constant defined) into the
// bytes of a .tsr file.
Result<std::vector<uint8_t>> serialize_model(const Graph& graph, const ModelMetadata& metadata);

// Writes `graph` to `path` atomically: the file is written to a temporary name beside `path`,
// flushed, then renamed over `path`. On failure `path` is untouched.
Status save_model(const Graph& graph, const std::string& path, const ModelMetadata& metadata);

// Loads the model file at `path`; constants view the mapped file (see LoadedModel), and stay
// valid as long as any Tensor sharing their storage lives.
Result<LoadedModel> load_model_file(const std::string& path, const LoadOptions& options = {});
// The same for file bytes in memory (tests, fuzzing, network transfers). The bytes are copied
// into an aligned buffer the returned constants share; `bytes` need not outlive the call.
Result<LoadedModel> load_model_file_from_memory(std::span<const uint8_t> bytes);

// Shorthands returning only the graph.
Result<Graph> load_model(const std::string& path);
Result<Graph> load_model_from_memory(std::span<const uint8_t> bytes);

}  // namespace tessera
