// The differential harness: builds a one-node graph, compiles it on a device and on the
// reference device, runs both on the same random inputs and compares with a per-op tolerance,
// checking that the device produced no NaN/Inf where the reference did not.
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
  Graph g;
  Node n;
  n.name = std::string("diff_") + op_name(kind);
  n.kind = kind;
  n.attrs = attrs;
  std::vector<NodeId> layers;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    if (inputs[i].is_constant) {
      n.inputs.push_back(g.add_constant(name, inputs[i].value));
    } else {
      const ValueId v =
          g.add_value(name, TensorInfo{inputs[i].value.dtype(), inputs[i].value.shape()});
      g.inputs().push_back(v);
      n.inputs.push_back(v);
      if (through_pad && layers.empty()) {
        Node pad;
        pad.name = "diff_feed";
        pad.kind = OpKind::kPad;
        const int rank = inputs[i].value.rank();
        pad.inputs = {
            v, g.add_constant(
                   "feed_pads",
                   Tensor::from_int64s(Shape{2 * rank},
                                       std::vector<int64_t>(static_cast<size_t>(2 * rank), 0)))};
        pad.outputs = {g.add_value("fed")};
        n.inputs.back() = pad.outputs[0];
        layers.push_back(g.add_node(pad));
      }
    }
  }
  for (int o = 0; o < num_outputs; ++o) {
    const ValueId v = g.add_value("out" + std::to_string(o));
    n.outputs.push_back(v);
    g.outputs().push_back(v);
  }
  layers.push_back(g.add_node(n));
  Status st = g.infer_shapes();
  EXPECT_TRUE(st.ok()) << st.to_string();
  if (!st.ok()) return r;
  std::vector<Tensor> feeds;
  for (const DiffInput& in : inputs) {
    if (!in.is_constant) feeds.push_back(in.value);
  }
  std::vector<Tensor> outs[2];
  const std::string devices[2] = {device, "reference"};
  std::unique_ptr<Device> ref;  // outlives its program
  for (int d = 0; d < 2; ++d) {
    Result<std::unique_ptr<Program>> prog = internal_error("not compiled");
    if (d == 0) {
      prog = compile(g, layers);
    } else {
      auto dev = open_device(devices[d]);
      EXPECT_TRUE(dev.ok()) << dev.status().to_string();
      if (!dev.ok()) return r;
      ref = std::move(*dev);
      prog = ref->compile(g, layers);
    }
    EXPECT_TRUE(prog.ok()) << prog.status().to_string();
    if (!prog.ok()) return r;
    if (d == 0) r.kernel = (*prog)->describe();
    outs[d].resize(static_cast<size_t>(num_outputs));
    // Run twice: results must not depend on arena contents left by the previous run.
    for (int rep = 0; rep < 2; ++rep) {
      Status rs = (*prog)->run(feeds, outs[d]);
      EXPECT_TRUE(rs.ok()) << rs.to_string();
      if (!rs.ok()) return r;
    }
  }
  // A reduced-precision device (cpu#bf16) is held to its precision's bound: bf16 rounds each
  // operand to 8 significant bits (relative 2^-9) and accumulates in f32, so an output may be off
  // by about 1% of its own magnitude plus 1% of the output's largest (cancellation in a sum).
  Result<DeviceName> parsed = parse_device_name(device);
  const bool bf16 = parsed.ok() && parsed->precision != Precision::kF32;
  const double reduced_tol =
      parsed.ok() && parsed->precision == Precision::kInt8 ? kInt8Tolerance : kBf16Tolerance;
  for (int o = 0; o < num_outputs; ++o) {
    const Tensor& a = outs[0][static_cast<size_t>(o)];
    const Tensor& b = outs[1][static_cast<size_t>(o)];
    EXPECT_EQ(a.shape(), b.shape());
    if (a.shape() != b.shape() || a.dtype() != DType::kF32) continue;
    if (bf16) {
      double max_ref = 0;
      for (int64_t i = 0; i < b.numel(); ++i) {
        if (std::isfinite(b.data<float>()[i]))
          max_ref = std::max(max_ref, static_cast<double>(std::fabs(b.data<float>()[i])));
      }
      atol = std::max(atol, static_cast<float>(reduced_tol * max_ref));
      rtol = std::max(rtol, static_cast<float>(reduced_tol));
    }
    int reported = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      const float x = a.data<float>()[i], y = b.data<float>()[i];
      // XNNPACK clamps every output to [min, max] (with +-inf when there is no activation) using
      // max/min instructions that turn NaN into the bound: callers that know a kernel does so
      // pass nan_may_clamp, and only the non-NaN elements must then match.
      if (std::isnan(y) && nan_may_clamp) continue;
      if (std::isnan(y) || std::isinf(y)) {
        EXPECT_TRUE(std::isnan(x) == std::isnan(y) && (std::isnan(y) || x == y))
            << "output " << o << " [" << i << "]: device " << x << ", reference " << y;
        continue;
      }
      EXPECT_TRUE(std::isfinite(x))
          << "output " << o << " [" << i << "] is " << x << " on " << device << ", reference " << y;
      const double err = std::fabs(static_cast<double>(x) - y);
      r.max_abs_err = std::max(r.max_abs_err, err);
      r.max_ref = std::max(r.max_ref, static_cast<double>(std::fabs(y)));
      if (err > atol + rtol * std::fabs(y) && reported++ < 5) {
        ADD_FAILURE() << op_name(kind) << " output " << o << " [" << i << "]: " << device << " "
                      << x << " vs reference " << y << " (kernel: " << r.kernel << ")";
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
