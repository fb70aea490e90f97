// The one differential case list of Tessera's operators, and the one-node-graph builder every
// device test uses.
//
// A case is one node: op, attributes, inputs (each fed at run time, constant, or omitted; values
// seeded), number of outputs and tolerance. tests/backends/op_cases_test.cc runs every case on
// every device this build can open (cpu on all cores and on one, cpu#bf16, opencl:0, vulkan:0,
// npu:0, a split device) against the reference device, as ggml's test-backend-ops does: a device
// that declines a node by its own capability check is listed as "declined", not failed (except
// where a device is held to run an op, see op_cases_test.cc). Adding an op: add its cases to
// op_cases.cc (the test fails for a registered op without one).
//
// Thread rule: plain functions and values; the case list is built anew by each call.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/device.h"
#include "graph/graph.h"
#include "tests/ops/op_test_util.h"

namespace tessera::testing {

// One node's input, named for what it is to a device: an activation fed at run time, a weight
// known at compile time, or an omitted optional input.
using NodeInput = OpInput;
inline NodeInput activation(Tensor t) {
  return in(std::move(t));
}
inline NodeInput weight(Tensor t) {
  return constant(std::move(t));
}
inline NodeInput absent() {
  return omitted();
}

struct OpCase {
  std::string name;  // "<Op>_<variant>", unique in the list
  OpKind kind;
  Attributes attrs;
  std::vector<NodeInput> inputs;
  int num_outputs = 1;
  // Every f32 output element within tol * max(1, max|ref|) of the reference (the output's largest
  // finite |ref|); other dtypes match bit for bit. A device's own precision may loosen it
  // (op_cases_test.cc).
  float tol = 1e-5f;
  // Reduced-precision devices (cpu#bf16, npu:0) scale their bound by this: the magnitude of the
  // values the node computes with, where it exceeds its output's (a clip after a long sum).
  float precision_scale = 1.f;
};

// gtest prints a case by its name.
inline void PrintTo(const OpCase& c, std::ostream* os) {
  *os << c.name;
}

// Every case, in op-family order. Built on each call (cheap: small seeded tensors).
std::vector<OpCase> all_op_cases();

// The ops of the foundation set (the first 39 lines of ops/op_list.inc), which every
// general-purpose device backend (cpu, opencl, vulkan) implements; ops listed after them may be
// declined by a backend that has no kernel for them, and the planner places them elsewhere.
inline bool is_foundation_op(OpKind kind) {
  return static_cast<int>(kind) <= static_cast<int>(OpKind::kDropout);
}

// A graph holding one node of `kind` named "test_node" whose outputs are graph outputs, with
// shapes inferred. Inputs fed at run time are graph inputs; with `through_pad`, the first of them
// reaches the node through a Pad that pads nothing, so that a device which keeps rank-4 tensors in
// another layout between layers (the cpu device's NHWC) feeds the node in it; the Pad is node 0
// and the op node 1 then. Fails when shape inference does.
Result<Graph> one_node_graph(OpKind kind, const Attributes& attrs,
                             const std::vector<NodeInput>& inputs, int num_outputs,
                             bool through_pad = false);

// The graph inputs of a one_node_graph `g` with the tensors of `inputs` feeding them.
std::vector<std::pair<ValueId, Tensor>> graph_feeds(const Graph& g,
                                                    const std::vector<NodeInput>& inputs);

// Every node of `g` in order (what one_node_graph builds: the op, or the Pad and the op).
std::vector<NodeId> all_layers(const Graph& g);

// Compiles `layers` of `g` on `device` and runs them; `feed` maps every graph input ValueId to
// its tensor (only those the slice reads are passed). With `runs` > 1 the same program runs again
// and each run must give the same bytes (no state left in arenas between runs).
Result<std::vector<Tensor>> run_layers(Device& device, const Graph& g,
                                       const std::vector<NodeId>& layers,
                                       const std::vector<std::pair<ValueId, Tensor>>& feed,
                                       std::string* description = nullptr, int runs = 1,
                                       const CompileOptions& options = {});

// How a device's output is held to the reference's.
struct Tolerance {
  // Bound on |got - ref|: tol * max(1, max|ref|) + rel * |ref|, max|ref| over the finite
  // elements of the output (tol + rel * |ref| without `scale_by_max`).
  double tol = 1e-5;
  double rel = 0;
  // Where the reference is NaN, any value is accepted (XNNPACK's output clamps turn NaN into a
  // bound; docs/performance.md).
  bool nan_may_clamp = false;
  bool scale_by_max = true;
  // Where the reference is NaN or an infinity, any value is accepted: an int8 tensor holds
  // neither (NaN quantises to 0, an infinity saturates; docs/precision.md).
  bool nonfinite_may_saturate = false;
};

// Empty when `got` matches `ref` (same dtype and shape; f32 within `tol`, NaN where the
// reference has NaN, equal infinities, finite where it is finite; other dtypes bit for bit),
// else what differs (the first few elements). `max_abs_err` receives the largest finite error.
std::string compare_outputs(const Tensor& got, const Tensor& ref, const Tolerance& tol,
                            double* max_abs_err = nullptr);

}  // namespace tessera::testing
