// diff_op: one node on a device against the reference device, for tests of one backend's kernel
// choices (which kernel a node gets, NHWC feeds). It builds the graph and compares outputs with
// the differential harness's own functions (tests/backends/op_cases.h), which runs the op case
// list on every device.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "graph/graph.h"
#include "scheduler/calibrate.h"
#include "tests/backends/op_cases.h"
#include "tests/ops/op_test_util.h"

namespace tessera {

// The relative tolerance of a bf16 device in diff_op (of |ref| and of the output's max |ref|).
inline constexpr double kBf16Tolerance = 1.5e-2;
// The relative tolerance of an int8 device in diff_op, calibrated (min/max) on the case's own
// inputs: every activation is rounded to 1/254 of its range (half a step: 0.4% of the largest
// |value|) and every weight to 1/254 of its output channel's; a sum of K such products errs by
// about sqrt(K) half-steps, a few % of the output's largest |value| for the cases' K <= 1143.
inline constexpr double kInt8Tolerance = 6e-2;

struct DiffInput {
  Tensor value;
  bool is_constant = false;
};

struct DiffResult {
  double max_abs_err = 0;
  double max_ref = 0;
  std::string kernel;  // the device's description of the node's kernel
};

// Compiles the given nodes of the test graph for the device under test.
using CompileFn =
    std::function<Result<std::unique_ptr<Program>>(const Graph&, std::span<const NodeId>)>;

// diff_op with the device under test given as a compile function (`device` names it in
// messages): tests that build programs other than through open_device, e.g. one kernel variant.
// With `through_pad`, the first activation input reaches the op through a Pad node that pads
// nothing (the value is unchanged), so that a device which keeps rank-4 tensors in another layout
// between layers (the cpu device's NHWC) feeds the op in it.
inline DiffResult diff_op_with(const CompileFn& compile, const std::string& device, OpKind kind,
                               const Attributes& attrs, const std::vector<DiffInput>& inputs,
                               int num_outputs = 1, float atol = 1e-4f, float rtol = 1e-4f,
                               bool nan_may_clamp = false, bool through_pad = false) {
  DiffResult r;
  std::vector<testing::NodeInput> node_inputs;
  for (const DiffInput& in : inputs) {
    node_inputs.push_back(in.is_constant ? testing::weight(in.value)
                                         : testing::activation(in.value));
  }
  Result<Graph> g = testing::one_node_graph(kind, attrs, node_inputs, num_outputs, through_pad);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  if (!g.ok()) return r;
  const std::vector<NodeId> layers = testing::all_layers(*g);
  const auto feed = testing::graph_feeds(*g, node_inputs);
  Result<std::unique_ptr<Program>> prog = compile(*g, layers);
  EXPECT_TRUE(prog.ok()) << prog.status().to_string();
  if (!prog.ok()) return r;
  r.kernel = (*prog)->describe();
  auto run = [&](Program& p) -> Result<std::vector<Tensor>> {
    std::vector<Tensor> ins;
    for (ValueId v : p.input_values()) {
      for (const auto& [id, t] : feed) {
        if (id == v) ins.push_back(t);
      }
    }
    std::vector<Tensor> outs(p.output_values().size());
    // Run twice: results must not depend on arena contents left by the previous run.
    for (int rep = 0; rep < 2; ++rep) RETURN_IF_ERROR(p.run(ins, outs));
    return outs;
  };
  Result<std::vector<Tensor>> got = run(**prog);
  EXPECT_TRUE(got.ok()) << got.status().to_string();
  if (!got.ok()) return r;
  auto ref = open_device("reference");
  EXPECT_TRUE(ref.ok()) << ref.status().to_string();
  if (!ref.ok()) return r;
  Result<std::vector<Tensor>> want = testing::run_layers(**ref, *g, layers, feed);
  EXPECT_TRUE(want.ok()) << want.status().to_string();
  if (!want.ok()) return r;
  // A reduced-precision device (cpu#bf16) is held to its precision's bound: bf16 rounds each
  // operand to 8 significant bits (relative 2^-9) and accumulates in f32, so an output may be off
  // by about 1% of its own magnitude plus 1% of the output's largest (cancellation in a sum).
  Result<DeviceName> parsed = parse_device_name(device);
  const bool bf16 = parsed.ok() && parsed->precision != Precision::kF32;
  const double reduced_tol =
      parsed.ok() && parsed->precision == Precision::kInt8 ? kInt8Tolerance : kBf16Tolerance;
  for (int o = 0; o < num_outputs; ++o) {
    const Tensor& a = (*got)[static_cast<size_t>(o)];
    const Tensor& b = (*want)[static_cast<size_t>(o)];
    testing::Tolerance tol{atol, rtol, nan_may_clamp, /*scale_by_max=*/false};
    if (bf16) {
      tol = {reduced_tol, reduced_tol, nan_may_clamp, /*scale_by_max=*/true};
    }
    double err = 0;
    const std::string diff = testing::compare_outputs(a, b, tol, &err);
    EXPECT_TRUE(diff.empty()) << op_name(kind) << " output " << o << " on " << device << ": "
                              << diff << " (kernel: " << r.kernel << ")";
    r.max_abs_err = std::max(r.max_abs_err, err);
    if (b.dtype() == DType::kF32) {
      for (float v : b.span<float>()) {
        if (std::isfinite(v)) r.max_ref = std::max(r.max_ref, static_cast<double>(std::fabs(v)));
      }
    }
  }
  return r;
}

// Runs `kind` on `device` and on reference and compares every output elementwise:
// |dev - ref| <= atol + rtol * |ref|; where the reference is +-inf the device must match exactly,
// where it is NaN the device must give NaN (unless nan_may_clamp), and where the reference is
// finite the device must be finite. `through_pad` as for diff_op_with.
inline DiffResult diff_op(const std::string& device, OpKind kind, const Attributes& attrs,
                          const std::vector<DiffInput>& inputs, int num_outputs = 1,
                          float atol = 1e-4f, float rtol = 1e-4f, bool nan_may_clamp = false,
                          bool through_pad = false) {
  std::unique_ptr<Device> dev;  // outlives the program, which may refer to it
  auto compile = [&](const Graph& g,
                     std::span<const NodeId> layers) -> Result<std::unique_ptr<Program>> {
    ASSIGN_OR_RETURN(dev, open_device(device));
    CompileOptions options;
    const Result<DeviceName> name = parse_device_name(device);  // a split device is no name
    if (name.ok() && name->precision == Precision::kInt8) {
      // An int8 level is calibrated (min/max) on the case's own inputs, on the reference device
      // (NaN and infinities, which int8 cannot hold, calibrated as 0).
      std::vector<Tensor> sample;
      for (const DiffInput& in : inputs) {
        if (in.is_constant) continue;
        ASSIGN_OR_RETURN(Tensor t, in.value.clone());
        if (t.dtype() == DType::kF32) {
          for (int64_t i = 0; i < t.numel(); ++i) {
            if (!std::isfinite(t.data<float>()[i])) t.data<float>()[i] = 0;
          }
        }
        sample.push_back(std::move(t));
      }
      ASSIGN_OR_RETURN(std::unique_ptr<Device> ref, open_device("reference"));
      ASSIGN_OR_RETURN(CalibrationTable t,
                       calibrate(g, *ref, {sample}, CalibrationMethod::kMinMax));
      options.calibration = std::make_shared<const CalibrationTable>(std::move(t));
    }
    return dev->compile(g, layers, options);
  };
  return diff_op_with(compile, device, kind, attrs, inputs, num_outputs, atol, rtol, nan_may_clamp,
                      through_pad);
}

}  // namespace tessera
