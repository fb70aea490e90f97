// Shared by the OpenCL backend tests: opening opencl:0 (skipping when this machine has no OpenCL
// device, unless TESSERA_REQUIRE_OPENCL is set, as in CI) and running one-node graphs on a device.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backends/device.h"
#include "backends/registry.h"
#include "graph/graph.h"
#include "tests/ops/op_test_util.h"

namespace tessera::testing {

inline bool opencl_required() {
  const char* v = std::getenv("TESSERA_REQUIRE_OPENCL");
  return v != nullptr && v[0] != '\0' && std::string(v) != "0";
}

// opencl:0, or null with the reason in *why.
inline std::unique_ptr<Device> open_opencl_device(std::string* why) {
  Result<std::unique_ptr<Device>> d = open_device("opencl:0");
  if (!d.ok()) {
    *why = d.status().to_string();
    return nullptr;
  }
  return std::move(*d);
}

// In a test body: `Device* dev = ...; TESSERA_OPENCL_DEVICE_OR_SKIP(dev);`
#define TESSERA_OPENCL_DEVICE_OR_SKIP(dev)                                                      \
  std::string tessera_why_;                                                                     \
  std::unique_ptr<Device> tessera_dev_ = ::tessera::testing::open_opencl_device(&tessera_why_); \
  if (!tessera_dev_) {                                                                          \
    if (::tessera::testing::opencl_required()) {                                                \
      FAIL() << "TESSERA_REQUIRE_OPENCL is set but opencl:0 does not open: " << tessera_why_;   \
    }                                                                                           \
    GTEST_SKIP() << "no OpenCL device: " << tessera_why_;                                       \
  }                                                                                             \
  dev = tessera_dev_.get()

// One node's input (tests/ops/op_test_util.h), named for what it is to a device: an
// activation fed at run time, or a weight known at compile time.
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

// single_node_graph with its outputs as graph outputs and shapes inferred.
inline Result<Graph> one_node_graph(OpKind kind, const Attributes& attrs,
                                    const std::vector<NodeInput>& inputs, int num_outputs) {
  Graph g = single_node_graph(kind, attrs, inputs, num_outputs);
  g.outputs() = g.node(0).outputs;
  RETURN_IF_ERROR(g.infer_shapes());
  return g;
}

// Compiles `layers` of `g` on `device` and runs them; `feed` maps every graph input ValueId to
// its tensor (only those the slice reads are passed).
inline Result<std::vector<Tensor>> run_layers(Device& device, const Graph& g,
                                              const std::vector<NodeId>& layers,
                                              const std::vector<std::pair<ValueId, Tensor>>& feed) {
  ASSIGN_OR_RETURN(std::unique_ptr<Program> p, device.compile(g, layers));
  std::vector<Tensor> ins;
  for (ValueId v : p->input_values()) {
    bool found = false;
    for (const auto& [id, t] : feed) {
      if (id == v) {
        ins.push_back(t);
        found = true;
      }
    }
    if (!found) return not_found("no tensor fed for '" + g.value(v).name + "'");
  }
  std::vector<Tensor> outs(p->output_values().size());
  RETURN_IF_ERROR(p->run(ins, outs));
  return outs;
}

}  // namespace tessera::testing
