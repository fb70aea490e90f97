// Helpers shared by the neural-network op tests (conv, gemm, pool, normalisation).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/ops/op_test_util.h"

namespace tessera::testing {

// Infers `kind` like run_op and returns node_cost for the inferred outputs.
inline Result<OpCost> op_cost(OpKind kind, const Attributes& attrs,
                              const std::vector<OpInput>& inputs, int num_outputs = 1) {
  Graph g = single_node_graph(kind, attrs, inputs, num_outputs);
  std::vector<TensorInfo> infos;
  NodeContext nc(g, g.node(0));
  RETURN_IF_ERROR(infer_node(nc.ctx(), num_outputs, &infos));
  return node_cost(nc.ctx(), infos);
}

// Runs the op expecting failure; returns the message ("" if it unexpectedly succeeded, which
// the caller's EXPECT on the message then reports).
inline std::string run_error(OpKind kind, const Attributes& attrs,
                             const std::vector<OpInput>& inputs, int num_outputs = 1) {
  Result<std::vector<Tensor>> r = run_op(kind, attrs, inputs, num_outputs);
  return r.ok() ? std::string() : r.status().message();
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A tensor holding `values` with the given shape.
inline Tensor tensor(const Shape& shape, std::vector<float> values) {
  return Tensor::from_floats(shape, values);
}

inline Tensor zeros(const Shape& shape) {
  return Tensor::create(DType::kF32, shape).value();
}

}  // namespace tessera::testing
