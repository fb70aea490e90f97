// Helpers for per-op tests: build one node, infer its outputs and run its reference kernel.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "graph/graph.h"
#include "ops/op.h"

namespace tessera::testing {

// One input: a tensor, or omitted (for optional inputs), and whether it is a constant at
// shape-inference time (e.g. Reshape's shape). Constants are visible to `infer`.
struct OpInput {
  Tensor tensor;
  bool constant = false;
  bool omitted = false;
};

inline OpInput in(Tensor t) {
  return OpInput{std::move(t), false, false};
}
inline OpInput constant(Tensor t) {
  return OpInput{std::move(t), true, false};
}
inline OpInput omitted() {
  return OpInput{Tensor(), false, true};
}

// A graph holding one node of `kind` named "test_node"; non-constant inputs are graph inputs.
inline Graph single_node_graph(OpKind kind, const Attributes& attrs,
                               const std::vector<OpInput>& inputs, int num_outputs) {
  Graph g;
  Node n;
  n.name = "test_node";
  n.kind = kind;
  n.attrs = attrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].omitted) {
      n.inputs.push_back(kNoValue);
    } else if (inputs[i].constant) {
      n.inputs.push_back(g.add_constant("in" + std::to_string(i), inputs[i].tensor));
    } else {
      const Tensor& t = inputs[i].tensor;
      ValueId v = g.add_value("in" + std::to_string(i), TensorInfo{t.dtype(), t.shape()});
      g.inputs().push_back(v);
      n.inputs.push_back(v);
    }
  }
  for (int i = 0; i < num_outputs; ++i) n.outputs.push_back(g.add_value("out" + std::to_string(i)));
  g.add_node(n);
  return g;
}

// Infers and runs `kind` through the same entry points graph/ and backends use.
inline Result<std::vector<Tensor>> run_op(OpKind kind, const Attributes& attrs,
                                          const std::vector<OpInput>& inputs, int num_outputs = 1) {
  Graph g = single_node_graph(kind, attrs, inputs, num_outputs);
  std::vector<TensorInfo> infos;
  {
    NodeContext nc(g, g.node(0));
    RETURN_IF_ERROR(infer_node(nc.ctx(), num_outputs, &infos));
  }
  std::vector<Tensor> ins;
  for (const OpInput& i : inputs) ins.push_back(i.tensor);
  std::vector<Tensor> outs;
  for (const TensorInfo& info : infos) {
    ASSIGN_OR_RETURN(Tensor t, Tensor::create(info.dtype, info.shape));
    outs.push_back(std::move(t));
  }
  NodeContext rc(g.node(0), ins);
  RETURN_IF_ERROR(run_reference(rc.ctx(), ins, outs));
  return outs;
}

// Runs only the shape inference of `kind` itself on one input described by `info`, without the
// input validation infer_node does first: for checking that an op's own arithmetic is safe on
// any shape (no int64 overflow), not only on validated ones.
inline Status infer_unvalidated(OpKind kind, const Attributes& attrs, const TensorInfo& info,
                                std::vector<TensorInfo>* outputs) {
  Graph g;
  Node n;
  n.name = "test_node";
  n.kind = kind;
  n.attrs = attrs;
  const ValueId v = g.add_value("in0", info);
  g.inputs().push_back(v);
  n.inputs.push_back(v);
  n.outputs.push_back(g.add_value("out0"));
  g.add_node(n);
  NodeContext nc(g, g.node(0));
  return op_schema(kind).infer(nc.ctx(), 1, outputs);
}

// A tensor of seeded uniform values in [lo, hi).
inline Tensor random_tensor(const Shape& shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t = Tensor::create(DType::kF32, shape).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}

// Expects equal shapes and |a - b| <= atol + rtol * |b| element-wise, with no NaN in `a` unless
// `b` has one there.
inline void expect_near(const Tensor& a, const Tensor& b, float atol = 1e-5f, float rtol = 1e-5f) {
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.dtype(), b.dtype());
  for (int64_t i = 0; i < a.numel(); ++i) {
    const float x = a.float_at(i), y = b.float_at(i);
    if (std::isnan(y)) {
      EXPECT_TRUE(std::isnan(x)) << "at " << i;
      continue;
    }
    ASSERT_FALSE(std::isnan(x)) << "NaN at " << i;
    ASSERT_NEAR(x, y, atol + rtol * std::fabs(y)) << "at flat index " << i;
  }
}

}  // namespace tessera::testing
