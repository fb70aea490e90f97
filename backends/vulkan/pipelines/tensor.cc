// Tensor manipulation.
//   Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout: aliases (the output shares the
//   input's buffer, no dispatch).
//   Concat, Split: one x32_copy_strided per input / output.
//   Transpose, Slice, Pad, nearest Resize, Gather with constant indices: x32_gather_flat with an
//   index table computed once at compile time by running the op's reference kernel on the
//   element indices (i32), so the index rules are exactly the reference's.
//   Gather with run-time indices: x32_gather_axis (bad indices fail the run with a Status).
//   Linear Resize of the two innermost dims: f32_resize_linear.
//   Cast: xx_cast between every pair of f32, f16, i8, u8, i32, i64, bool (a word copy when the
//   types match).
//   Shape, Constant: the output depends on no input value, so the reference kernel computes it
//   at compile time and each run copies it into the output buffer.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/vulkan/pipelines/kernel.h"
#include "ops/data_movement.h"

namespace tessera {

namespace {

// --- Aliases -------------------------------------------------------------------------------

Capability supports_alias(const Graph&, const Node& node, const VulkanGpu&) {
  if (node.kind == OpKind::kDropout && node.outputs.size() > 1) {
    return Capability::no("the mask output of Dropout is not supported");
  }
  return Capability::yes();
}

Status plan_alias(KernelBuilder&) {
  return Status();
}

// --- Concat / Split ------------------------------------------------------------------------

Result<int> axis_of(const Node& node, int rank, int64_t def) {
  ASSIGN_OR_RETURN(int64_t axis, node.attrs.int_or("axis", def));
  if (axis < -rank || axis >= rank) {
    return invalid_argument(with_node_prefix(
        node, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank)));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Capability supports_copy32(const Graph& g, const Node& node, const VulkanGpu&) {
  for (ValueId v : node.outputs) {
    if (dtype_size(g.value(v).info.dtype) != 4) return Capability::no("32-bit dtypes only");
  }
  return Capability::yes();
}

void copy_strided(KernelBuilder& b, BufferRef src, BufferRef dst, uint64_t rows, uint64_t len,
                  uint64_t src_stride, uint64_t src_off, uint64_t dst_stride, uint64_t dst_off) {
  if (rows * len == 0) return;
  Dispatch d;
  d.shader = "x32_copy_strided";
  d.spec = {256};
  d.bindings = {src, dst};
  d.writes = {1};
  d.push = {static_cast<uint32_t>(rows * len), static_cast<uint32_t>(len),
            static_cast<uint32_t>(src_stride), static_cast<uint32_t>(src_off),
            static_cast<uint32_t>(dst_stride), static_cast<uint32_t>(dst_off)};
  set_linear_groups(rows * len, 256, &d);
  b.dispatch(std::move(d));
}

Status plan_concat(KernelBuilder& b) {
  const Shape& out = b.output_info(0).shape;
  ASSIGN_OR_RETURN(int axis, axis_of(b.node(), out.rank(), 0));
  const int64_t outer = dims_product(out, 0, axis);
  const int64_t inner = dims_product(out, axis + 1, out.rank());
  const int64_t out_row = out[axis] * inner;
  int64_t offset = 0;
  for (size_t i = 0; i < b.node().inputs.size(); ++i) {
    const int64_t len = b.input_info(static_cast<int>(i)).shape[axis] * inner;
    ASSIGN_OR_RETURN(BufferRef src, b.input(static_cast<int>(i)));
    copy_strided(b, src, b.output(0), static_cast<uint64_t>(outer), static_cast<uint64_t>(len),
                 static_cast<uint64_t>(len), 0, static_cast<uint64_t>(out_row),
                 static_cast<uint64_t>(offset));
    offset += len;
  }
  return Status();
}

Status plan_split(KernelBuilder& b) {
  const Shape& in = b.input_info(0).shape;
  ASSIGN_OR_RETURN(int axis, axis_of(b.node(), in.rank(), 0));
  const int64_t outer = dims_product(in, 0, axis);
  const int64_t inner = dims_product(in, axis + 1, in.rank());
  const int64_t in_row = in[axis] * inner;
  ASSIGN_OR_RETURN(BufferRef src, b.input(0));
  int64_t offset = 0;
  for (size_t i = 0; i < b.node().outputs.size(); ++i) {
    const int64_t len = b.output_info(static_cast<int>(i)).shape[axis] * inner;
    copy_strided(b, src, b.output(static_cast<int>(i)), static_cast<uint64_t>(outer),
                 static_cast<uint64_t>(len), static_cast<uint64_t>(in_row),
                 static_cast<uint64_t>(offset), static_cast<uint64_t>(len), 0);
    offset += len;
  }
  return Status();
}

// --- Gathers through an index table --------------------------------------------------------

bool is_linear_resize(const Node& node) {
  Result<std::string> mode = node.attrs.string_or("mode", "nearest");
  return node.kind == OpKind::kResize && mode.ok() && *mode == "linear";
}

bool runtime_gather(const Graph& g, const Node& node) {
  return node.kind == OpKind::kGather && !g.value(node.inputs[1]).is_constant;
}

Capability supports_gather(const Graph& g, const Node& node, const VulkanGpu& gpu) {
  if (runtime_gather(g, node)) {
    const size_t bytes = dtype_size(g.value(node.outputs[0]).info.dtype);
    if (bytes != 4 && bytes != 8) {
      return Capability::no("Gather with run-time indices moves 32- or 64-bit elements only");
    }
    return Capability::yes();
  }
  Capability c = supports_copy32(g, node, gpu);
  if (!c.supported) return c;
  // Every input but the data must be constant: the table is built at compile time.
  for (size_t i = 1; i < node.inputs.size(); ++i) {
    const ValueId v = node.inputs[i];
    if (v != kNoValue && !g.value(v).is_constant) {
      return Capability::no("input " + std::to_string(i) + " must be a constant");
    }
  }
  if (is_linear_resize(node)) {
    const Shape& in = g.value(node.inputs[0]).info.shape;
    const Shape& out = g.value(node.outputs[0]).info.shape;
    if (in.rank() < 2) return Capability::no("linear Resize needs rank >= 2");
    for (int d = 0; d + 2 < in.rank(); ++d) {
      if (in[d] != out[d]) {
        return Capability::no("linear Resize only of the two innermost dimensions");
      }
    }
  }
  return Capability::yes();
}

// Runs the node's reference kernel on i32 element indices (and -1 as Pad's constant).
Result<Tensor> index_table(KernelBuilder& b) {
  const Node& n = b.node();
  const TensorInfo& in = b.input_info(0);
  ASSIGN_OR_RETURN(Tensor iota, Tensor::create(DType::kI32, in.shape));
  int32_t* p = iota.data<int32_t>();
  for (int64_t i = 0; i < iota.numel(); ++i) p[i] = static_cast<int32_t>(i);
  // Pad's constant becomes -1, so that padded positions are visible in the table.
  ASSIGN_OR_RETURN(Tensor fill, Tensor::create(DType::kI32, Shape(std::vector<int64_t>{})));
  fill.data<int32_t>()[0] = -1;
  Node copy = n;
  std::vector<Tensor> ins;
  ins.push_back(iota);
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (n.kind == OpKind::kPad && i == 2) {
      ins.push_back(fill);
      copy.inputs[i] = 0;  // present
    } else if (n.inputs[i] == kNoValue) {
      ins.emplace_back();
    } else {
      ins.push_back(*b.constant(static_cast<int>(i)));
    }
  }
  if (n.kind == OpKind::kPad && n.inputs.size() < 3) {
    ins.push_back(fill);
    copy.inputs.push_back(0);
  }
  ASSIGN_OR_RETURN(Tensor table, Tensor::create(DType::kI32, b.output_info(0).shape));
  NodeContext nc(copy, ins);
  Tensor outs[1] = {table};
  RETURN_IF_ERROR(run_reference(nc.ctx(), ins, outs));
  return table;
}

Status plan_resize_linear(KernelBuilder& b);

// Gather along `axis` with indices read on the device.
Status plan_gather_runtime(KernelBuilder& b) {
  const Shape& data = b.input_info(0).shape;
  ASSIGN_OR_RETURN(int axis, axis_of(b.node(), data.rank(), 0));
  const uint64_t words = dtype_size(b.input_info(0).dtype) / 4;
  const uint64_t inner = static_cast<uint64_t>(dims_product(data, axis + 1, data.rank())) * words;
  const uint64_t num_idx = static_cast<uint64_t>(b.input_info(1).shape.numel());
  const uint64_t total = static_cast<uint64_t>(b.output_info(0).shape.numel()) * words;
  if (total == 0) return Status();
  ASSIGN_OR_RETURN(BufferRef src, b.input(0));
  ASSIGN_OR_RETURN(BufferRef idx, b.input(1));
  ASSIGN_OR_RETURN(FaultSlot fault, b.fault("index out of range for axis " + std::to_string(axis) +
                                            " of size " + std::to_string(data[axis])));
  Dispatch d;
  d.shader = "x32_gather_axis";
  d.spec = {256, b.input_info(1).dtype == DType::kI64 ? 1u : 0u};
  d.bindings = {src, idx, b.output(0), fault.buffer};
  d.writes = {2};
  d.push = {static_cast<uint32_t>(total), static_cast<uint32_t>(inner),
            static_cast<uint32_t>(num_idx), static_cast<uint32_t>(data[axis]), fault.code};
  set_linear_groups(total, 256, &d);
  b.dispatch(std::move(d));
  return Status();
}

Status plan_gather(KernelBuilder& b) {
  if (is_linear_resize(b.node())) return plan_resize_linear(b);
  if (runtime_gather(b.graph(), b.node())) return plan_gather_runtime(b);
  ASSIGN_OR_RETURN(Tensor table, index_table(b));
  ASSIGN_OR_RETURN(BufferRef t, b.upload(table.raw(), table.byte_size()));
  ASSIGN_OR_RETURN(BufferRef src, b.input(0));
  uint32_t fill = 0;
  if (b.node().kind == OpKind::kPad && b.node().inputs.size() > 2 &&
      b.node().inputs[2] != kNoValue) {
    const Tensor* v = b.constant(2);
    if (v != nullptr && v->numel() > 0) std::memcpy(&fill, v->raw(), 4);
  }
  const uint64_t total = static_cast<uint64_t>(table.numel());
  if (total == 0) return Status();
  Dispatch d;
  d.shader = "x32_gather_flat";
  d.spec = {256};
  d.bindings = {src, t, b.output(0)};
  d.writes = {2};
  d.push = {static_cast<uint32_t>(total), fill};
  set_linear_groups(total, 256, &d);
  b.dispatch(std::move(d));
  return Status();
}

// The source coordinate rules of ops/resize.cc, for the linear taps.
float source_coordinate(const std::string& mode, int64_t x, float scale, int64_t in_len,
                        int64_t out_len) {
  const float xf = static_cast<float>(x);
  if (mode == "pytorch_half_pixel") return out_len > 1 ? (xf + 0.5f) / scale - 0.5f : 0.f;
  if (mode == "align_corners") {
    return out_len == 1 ? 0.f
                        : xf * static_cast<float>(in_len - 1) / static_cast<float>(out_len - 1);
  }
  if (mode == "asymmetric") return xf / scale;
  if (mode == "tf_half_pixel_for_nn") return (xf + 0.5f) / scale;
  return (xf + 0.5f) / scale - 0.5f;  // half_pixel
}

Status plan_resize_linear(KernelBuilder& b) {
  const Shape& in = b.input_info(0).shape;
  const Shape& out = b.output_info(0).shape;
  const int r = in.rank();
  ASSIGN_OR_RETURN(std::string coord,
                   b.node().attrs.string_or("coordinate_transformation_mode", "half_pixel"));
  // Scales as the reference uses them: from `scales`, or out / in with `sizes`.
  float scale[2];
  const Tensor* scales = b.node().inputs.size() > 2 ? b.constant(2) : nullptr;
  for (int k = 0; k < 2; ++k) {
    const int d = r - 2 + k;
    if (scales != nullptr && scales->numel() == r) {
      scale[k] = scales->data<float>()[d];
    } else {
      scale[k] = static_cast<float>(out[d]) / static_cast<float>(in[d]);
    }
  }
  std::vector<int32_t> idx;
  std::vector<float> wt;
  std::vector<int32_t> lo[2], hi[2];
  std::vector<float> w1[2];
  for (int k = 0; k < 2; ++k) {
    const int d = r - 2 + k;
    for (int64_t o = 0; o < out[d]; ++o) {
      float x = source_coordinate(coord, o, scale[k], in[d], out[d]);
      x = std::clamp(x, 0.f, static_cast<float>(in[d] - 1));
      const int64_t i0 = static_cast<int64_t>(x);
      lo[k].push_back(static_cast<int32_t>(i0));
      hi[k].push_back(static_cast<int32_t>(std::min(i0 + 1, in[d] - 1)));
      w1[k].push_back(x - static_cast<float>(i0));
    }
  }
  for (int k = 0; k < 2; ++k) {
    idx.insert(idx.end(), lo[k].begin(), lo[k].end());
    idx.insert(idx.end(), hi[k].begin(), hi[k].end());
    wt.insert(wt.end(), w1[k].begin(), w1[k].end());
  }
  ASSIGN_OR_RETURN(BufferRef ib, b.upload(idx.data(), idx.size() * 4));
  ASSIGN_OR_RETURN(BufferRef wb, b.upload(wt.data(), wt.size() * 4));
  ASSIGN_OR_RETURN(BufferRef x, b.input(0));
  const uint64_t total = static_cast<uint64_t>(out.numel());
  if (total == 0) return Status();
  Dispatch d;
  d.shader = "f32_resize_linear";
  d.spec = {256};
  d.bindings = {x, ib, wb, b.output(0)};
  d.writes = {3};
  d.push = {static_cast<uint32_t>(in[r - 2]), static_cast<uint32_t>(in[r - 1]),
            static_cast<uint32_t>(out[r - 2]), static_cast<uint32_t>(out[r - 1]),
            static_cast<uint32_t>(total)};
  set_linear_groups(total, 256, &d);
  b.dispatch(std::move(d));
  return Status();
}

// --- Cast ------------------------------------------------------------------------------------

Capability supports_cast(const Graph&, const Node&, const VulkanGpu&) {
  return Capability::yes();  // every dtype pair of ops/cast.cc
}

uint64_t words_of(const TensorInfo& t) {
  return (t.byte_size() + 3) / 4;
}

Status plan_cast(KernelBuilder& b) {
  const TensorInfo& in = b.input_info(0);
  const TensorInfo& out = b.output_info(0);
  ASSIGN_OR_RETURN(BufferRef src, b.input(0));
  if (in.dtype == out.dtype && in.dtype != DType::kBool) {
    const uint64_t words = words_of(out);
    copy_strided(b, src, b.output(0), 1, words, words, 0, words, 0);
    return Status();
  }
  const uint64_t numel = static_cast<uint64_t>(out.shape.numel());
  if (numel == 0) return Status();
  const uint64_t bytes = dtype_size(out.dtype);
  const uint64_t units = bytes >= 4 ? numel : (numel * bytes + 3) / 4;
  Dispatch d;
  d.shader = "xx_cast";
  d.spec = {256, static_cast<uint32_t>(in.dtype), static_cast<uint32_t>(out.dtype)};
  d.bindings = {src, b.output(0)};
  d.writes = {1};
  d.push = {static_cast<uint32_t>(numel), static_cast<uint32_t>(units)};
  set_linear_groups(units, 256, &d);
  b.dispatch(std::move(d));
  return Status();
}

// --- Outputs known at compile time (Shape, Constant) -------------------------------------------

Capability supports_host_constant(const Graph&, const Node&, const VulkanGpu&) {
  return Capability::yes();
}

Status plan_host_constant(KernelBuilder& b) {
  const Node& n = b.node();
  // The inputs' values are never read (Shape reads only shapes): zero tensors of their shapes.
  std::vector<Tensor> ins;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i] == kNoValue) {
      ins.emplace_back();
      continue;
    }
    const TensorInfo& info = b.input_info(static_cast<int>(i));
    ASSIGN_OR_RETURN(Tensor t, Tensor::create(info.dtype, info.shape));
    ins.push_back(std::move(t));
  }
  const TensorInfo& out_info = b.output_info(0);
  ASSIGN_OR_RETURN(Tensor out, Tensor::create(out_info.dtype, out_info.shape));
  NodeContext nc(n, ins);
  Tensor outs[1] = {out};
  RETURN_IF_ERROR(run_reference(nc.ctx(), ins, outs));
  if (out.byte_size() == 0) return Status();
  ASSIGN_OR_RETURN(BufferRef c, b.upload(out.raw(), out.byte_size()));
  const uint64_t words = words_of(out_info);
  copy_strided(b, c, b.output(0), 1, words, words, 0, words, 0);
  return Status();
}

}  // namespace

extern const VulkanKernel kVulkanReshapeKernel = {OpKind::kReshape, true, -1, supports_alias,
                                                  plan_alias};
extern const VulkanKernel kVulkanFlattenKernel = {OpKind::kFlatten, true, -1, supports_alias,
                                                  plan_alias};
extern const VulkanKernel kVulkanSqueezeKernel = {OpKind::kSqueeze, true, -1, supports_alias,
                                                  plan_alias};
extern const VulkanKernel kVulkanUnsqueezeKernel = {OpKind::kUnsqueeze, true, -1, supports_alias,
                                                    plan_alias};
extern const VulkanKernel kVulkanIdentityKernel = {OpKind::kIdentity, true, -1, supports_alias,
                                                   plan_alias};
extern const VulkanKernel kVulkanDropoutKernel = {OpKind::kDropout, true, -1, supports_alias,
                                                  plan_alias};
extern const VulkanKernel kVulkanCastKernel = {OpKind::kCast, false,     -1,
                                               supports_cast, plan_cast, true};
extern const VulkanKernel kVulkanShapeKernel = {
    OpKind::kShape, false, -1, supports_host_constant, plan_host_constant, true};
extern const VulkanKernel kVulkanConstantKernel = {
    OpKind::kConstant, false, -1, supports_host_constant, plan_host_constant, true};
extern const VulkanKernel kVulkanConcatKernel = {OpKind::kConcat, false, -1, supports_copy32,
                                                 plan_concat};
extern const VulkanKernel kVulkanSplitKernel = {OpKind::kSplit, false, -1, supports_copy32,
                                                plan_split};
extern const VulkanKernel kVulkanTransposeKernel = {OpKind::kTranspose, false, -1, supports_gather,
                                                    plan_gather};
extern const VulkanKernel kVulkanSliceKernel = {OpKind::kSlice, false, -1, supports_gather,
                                                plan_gather};
extern const VulkanKernel kVulkanPadKernel = {OpKind::kPad, false, -1, supports_gather,
                                              plan_gather};
extern const VulkanKernel kVulkanResizeKernel = {OpKind::kResize, false, -1, supports_gather,
                                                 plan_gather};
extern const VulkanKernel kVulkanGatherKernel = {OpKind::kGather, false,       -1,
                                                 supports_gather, plan_gather, true};

}  // namespace tessera
