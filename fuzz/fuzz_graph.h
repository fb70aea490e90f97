// What the model fuzz targets (tsr_fuzzer.cc, onnx_fuzzer.cc) do with a graph that loaded: run
// it on the reference kernels, within bounds, and check the refusals on the way.
//
// Fuzz-only code (built with -DTESSERA_FUZZ=ON). The bounds keep one input's work small enough
// for thousands of runs a second and far below libFuzzer's memory limit: a graph whose inferred
// activations, weights or FLOPs exceed them is not run (it is still loaded, inferred and
// serialised). Whatever a run does, every refusal must carry a message; a Status without one,
// a crash, an ASan or UBSan report, or a timeout is a finding.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/shape.h"
#include "core/status.h"
#include "graph/graph.h"

namespace tessera::fuzz {

struct RunBounds {
  uint64_t max_activation_bytes = uint64_t{16} << 20;  // all node outputs together
  uint64_t max_constant_bytes = uint64_t{16} << 20;
  double max_flops = 2e7;
  int max_nodes = 256;
};

// A refusal must say why.
inline void check_refusal(const Status& s) {
  if (!s.ok() && s.message().empty()) {
    std::fprintf(stderr, "a refusal without a message (code %d)\n", static_cast<int>(s.code()));
    __builtin_trap();
  }
}

// Deterministic small inputs: f32 in [-2, 2), integers in [-3, 3], booleans alternating.
inline Result<Tensor> fuzz_input(const TensorInfo& info) {
  ASSIGN_OR_RETURN(Tensor t, Tensor::create(info.dtype, info.shape));
  uint32_t state = 0x9e3779b9u;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  const size_t n = static_cast<size_t>(t.numel());
  uint8_t* raw = static_cast<uint8_t*>(t.raw());
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = next();
    switch (info.dtype) {
      case DType::kF32: {
        const float v = static_cast<float>(r % 4096) / 1024.0f - 2.0f;
        std::memcpy(raw + 4 * i, &v, 4);
        break;
      }
      case DType::kI32: {
        const int32_t v = static_cast<int32_t>(r % 7) - 3;
        std::memcpy(raw + 4 * i, &v, 4);
        break;
      }
      case DType::kI64: {
        const int64_t v = static_cast<int64_t>(r % 7) - 3;
        std::memcpy(raw + 8 * i, &v, 8);
        break;
      }
      case DType::kBool:
        raw[i] = static_cast<uint8_t>(i & 1);
        break;
      default:  // f16, i8, u8: any bit pattern is a value
        for (size_t b = 0; b < dtype_size(info.dtype); ++b) {
          raw[dtype_size(info.dtype) * i + b] = static_cast<uint8_t>(r >> (8 * b));
        }
        break;
    }
  }
  return t;
}

// True when `g` (shapes inferred) is within `bounds`.
inline bool within_bounds(const Graph& g, const RunBounds& bounds) {
  if (g.num_nodes() > bounds.max_nodes) return false;
  if (g.parameter_bytes() > bounds.max_constant_bytes) return false;
  uint64_t activations = 0;
  double flops = 0;
  // Sums byte sizes without wrapping: a shape whose size overflows counts as over the bound.
  auto add_bytes = [&](const TensorInfo& info) {
    const Result<uint64_t> bytes = checked_byte_size(info.shape, info.dtype);
    if (!bytes.ok() || *bytes > bounds.max_activation_bytes) return false;
    activations += *bytes;
    return activations <= bounds.max_activation_bytes;
  };
  // The inputs are allocated even when no node reads them (a graph of no nodes whose output is
  // its input), so they are bounded before the first node.
  for (ValueId v : g.inputs()) {
    if (!g.value(v).has_info || !add_bytes(g.value(v).info)) return false;
  }
  for (const Node& n : g.nodes()) {
    std::vector<TensorInfo> outs;
    for (ValueId v : n.outputs) {
      if (!g.value(v).has_info) return false;
      outs.push_back(g.value(v).info);
      if (!add_bytes(g.value(v).info)) return false;
    }
    NodeContext nc(g, n);
    flops += node_cost(nc.ctx(), outs).flops;
    if (activations > bounds.max_activation_bytes || flops > bounds.max_flops) return false;
  }
  return true;
}

// Runs every node of `g` (shapes inferred, nodes in topological order) with the reference
// kernels on fuzz_input() inputs; fills `outputs` with the graph outputs.
inline Status run_reference_graph(const Graph& g, std::vector<Tensor>* outputs) {
  std::vector<Tensor> table(static_cast<size_t>(g.num_values()));
  for (ValueId v : g.inputs()) {
    ASSIGN_OR_RETURN(table[static_cast<size_t>(v)], fuzz_input(g.value(v).info));
  }
  for (const Node& n : g.nodes()) {
    std::vector<Tensor> ins, outs;
    for (ValueId v : n.inputs) {
      if (v == kNoValue) {
        ins.emplace_back();
      } else {
        const Value& val = g.value(v);
        ins.push_back(val.is_constant ? val.data : table[static_cast<size_t>(v)]);
        if (!ins.back().defined())
          return invalid_argument("node '" + n.name + "' reads an undefined value");
      }
    }
    for (ValueId v : n.outputs) {
      const TensorInfo& info = g.value(v).info;
      ASSIGN_OR_RETURN(Tensor t, Tensor::create(info.dtype, info.shape));
      outs.push_back(std::move(t));
    }
    NodeContext rc(n, ins);
    RETURN_IF_ERROR(run_reference(rc.ctx(), ins, outs));
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      table[static_cast<size_t>(n.outputs[o])] = std::move(outs[o]);
    }
  }
  outputs->clear();
  for (ValueId v : g.outputs()) {
    const Value& val = g.value(v);
    outputs->push_back(val.is_constant ? val.data : table[static_cast<size_t>(v)]);
    // A graph output no node produces (and no input or constant holds): the engine refuses
    // such a model when it plans it; this runner must not hand back an empty tensor either.
    if (!outputs->back().defined()) {
      return invalid_argument("graph output '" + val.name + "' is produced by no node");
    }
  }
  return Status();
}

// Runs `g` when it is within bounds; refusals are checked. Returns whether it ran.
inline bool run_if_small(const Graph& g, const RunBounds& bounds, std::vector<Tensor>* outputs) {
  if (!within_bounds(g, bounds)) return false;
  const Status s = run_reference_graph(g, outputs);
  check_refusal(s);
  return s.ok();
}

// Bitwise equality of two runs' outputs (the same kernels on the same inputs).
inline bool same_outputs(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype() != b[i].dtype() || a[i].shape() != b[i].shape()) return false;
    if (a[i].byte_size() > 0 && std::memcmp(a[i].raw(), b[i].raw(), a[i].byte_size()) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace tessera::fuzz
