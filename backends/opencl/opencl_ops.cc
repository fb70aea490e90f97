#include "backends/opencl/opencl_ops.h"

#include <limits>

namespace tessera::opencl {

LaunchBuilder& LaunchBuilder::i32(int64_t v) {
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    if (status_.ok()) {
      status_ = out_of_range(label_ + ": kernel argument " + std::to_string(next_) + " = " +
                             std::to_string(v) + " does not fit 32 bits");
    }
    ++next_;
    return *this;
  }
  const int32_t x = static_cast<int32_t>(v);
  return raw(sizeof(x), &x);
}

LaunchBuilder& LaunchBuilder::raw(size_t size, const void* value) {
  const cl_int err = clSetKernelArg(kernel_.get(), next_, size, value);
  if (err != CL_SUCCESS && status_.ok()) {
    status_ = cl_check(err, label_ + ": clSetKernelArg(" + std::to_string(next_) + ")");
  }
  ++next_;
  return *this;
}

Result<Launch> LaunchBuilder::finish(std::initializer_list<size_t> global,
                                     std::initializer_list<size_t> local) {
  RETURN_IF_ERROR(status_);
  cl_uint num_args = 0;
  RETURN_IF_ERROR(cl_check(
      clGetKernelInfo(kernel_.get(), CL_KERNEL_NUM_ARGS, sizeof(num_args), &num_args, nullptr),
      label_ + ": clGetKernelInfo"));
  if (num_args != next_) {
    return internal_error(label_ + ": kernel takes " + std::to_string(num_args) + " arguments, " +
                          std::to_string(next_) + " were bound");
  }
  Launch l;
  l.kernel = std::move(kernel_);
  l.label = std::move(label_);
  l.dims = static_cast<cl_uint>(global.size());
  size_t i = 0;
  for (size_t g : global) l.global[i++] = g;
  i = 0;
  for (size_t s : local) l.local[i++] = s;
  for (cl_uint d = 0; d < l.dims; ++d) {
    if (l.global[d] == 0) return internal_error(l.label + ": empty launch");
    if (l.has_local()) l.global[d] = (l.global[d] + l.local[d] - 1) / l.local[d] * l.local[d];
  }
  return l;
}

Result<cl_mem> Lowering::upload_ints(std::span<const int32_t> values) {
  ASSIGN_OR_RETURN(MemHandle m, rt_.create_buffer_from(values.data(), values.size_bytes()));
  aux_->push_back(std::move(m));
  return aux_->back().get();
}

Result<cl_mem> Lowering::upload_floats(std::span<const float> values) {
  ASSIGN_OR_RETURN(MemHandle m, rt_.create_buffer_from(values.data(), values.size_bytes()));
  aux_->push_back(std::move(m));
  return aux_->back().get();
}

Result<cl_mem> Lowering::scratch(size_t bytes) {
  ASSIGN_OR_RETURN(MemHandle m, rt_.create_buffer(bytes));
  aux_->push_back(std::move(m));
  return aux_->back().get();
}

Result<cl_mem> Lowering::run_check(const std::string& what) {
  ASSIGN_OR_RETURN(cl_mem flag, scratch(sizeof(cl_int)));
  checks_->push_back(
      RunCheck{flag, "node " + quote_name(node_.name) + " (" + op_name(node_.kind) + "): " + what});
  return flag;
}

Result<cl_mem> Lowering::dummy() {
  if (dummy_ == nullptr) {
    const float zero = 0.f;
    ASSIGN_OR_RETURN(dummy_, upload_floats(std::span<const float>(&zero, 1)));
  }
  return dummy_;
}

Result<LaunchBuilder> Lowering::kernel(const char* family, const char* kernel_name) {
  const std::string label =
      "node " + quote_name(node_.name) + " (" + op_name(node_.kind) + "): " + kernel_name;
  Result<KernelHandle> k = rt_.kernel(family, kernel_name);
  if (!k.ok()) return k.status().with_context(label);
  return LaunchBuilder(std::move(*k), label);
}

const OpenCLOp* find_opencl_op(OpKind kind) {
  for (auto family : {opencl_conv_ops(), opencl_gemm_ops(), opencl_pool_ops(),
                      opencl_elementwise_ops(), opencl_normalization_ops(), opencl_tensor_ops()}) {
    for (const OpenCLOp& op : family) {
      if (op.kind == kind) return &op;
    }
  }
  return nullptr;
}

Result<KernelActivation> kernel_activation(const OpContext& ctx) {
  Result<Activation> a = parse_fused_activation(ctx.attrs());
  if (!a.ok()) return ctx.wrap(a.status());
  return KernelActivation{static_cast<int>(a->kind), a->alpha, a->beta};
}

Capability require_f32_input(const OpContext& ctx, int i) {
  if (ctx.input(i).dtype == DType::kF32) return Capability::yes();
  return Capability::no("input " + std::to_string(i) + " is " + dtype_name(ctx.input(i).dtype) +
                        "; the OpenCL kernels compute in f32 only");
}

}  // namespace tessera::opencl
