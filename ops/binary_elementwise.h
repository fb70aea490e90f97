// Shared implementation of the broadcasting arithmetic ops Add, Sub, Mul and Div.
//
// Each op file (ops/add.cc, ...) defines its element function and schema; this header holds
// the inference (same dtype, f32/i32/i64, numpy broadcasting; a fused activation only for f32),
// the cost (one FLOP per output element) and the kernel driver, which walks the broadcast plan
// row by row so every inner loop is contiguous (see ops/broadcast.h).
//
// Integer arithmetic wraps around on overflow (two's complement) instead of being undefined.
#pragma once

#include <concepts>
#include <type_traits>

#include "ops/broadcast.h"
#include "ops/op.h"

namespace tessera {

Status infer_binary_elementwise(const OpContext& ctx, int num_outputs,
                                std::vector<TensorInfo>* outputs);
OpCost cost_binary_elementwise(const OpContext& ctx, std::span<const TensorInfo> outputs);

// Wrapping integer arithmetic (computed in the unsigned type, where overflow is defined).
template <std::signed_integral T>
T wrapping_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <std::signed_integral T>
T wrapping_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <std::signed_integral T>
T wrapping_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}

// y = fn(a, b) over the broadcast of a and b, both of element type T.
template <typename T, typename Fn>
void broadcast_binary(const Tensor& a, const Tensor& b, Tensor& y, Fn fn) {
  const Shape shapes[] = {a.shape(), b.shape()};
  const BroadcastPlan plan = plan_broadcast(y.shape(), shapes);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* py = y.data<T>();
  const bool a_moves = plan.inner_stride(0) == 1, b_moves = plan.inner_stride(1) == 1;
  for_each_broadcast_row(plan, [&](int64_t yo, const int64_t* xo, int64_t n) {
    const T* ra = pa + xo[0];
    const T* rb = pb + xo[1];
    T* ry = py + yo;
    if (a_moves && b_moves) {
      for (int64_t i = 0; i < n; ++i) ry[i] = fn(ra[i], rb[i]);
    } else if (a_moves) {
      const T vb = *rb;
      for (int64_t i = 0; i < n; ++i) ry[i] = fn(ra[i], vb);
    } else if (b_moves) {
      const T va = *ra;
      for (int64_t i = 0; i < n; ++i) ry[i] = fn(va, rb[i]);
    } else {
      const T v = fn(*ra, *rb);
      for (int64_t i = 0; i < n; ++i) ry[i] = v;
    }
  });
}

// Runs `Fn` (a function object callable on float, int32_t and int64_t pairs) on the dtype of
// the node's inputs, which infer_binary_elementwise has checked.
template <typename Fn>
Status reference_binary_elementwise(const OpContext& ctx, std::span<const Tensor> inputs,
                                    std::span<Tensor> outputs) {
  const Tensor& a = inputs[0];
  const Tensor& b = inputs[1];
  if (a.dtype() != b.dtype() || outputs[0].dtype() != a.dtype()) {
    return ctx.error("input and output dtypes differ");
  }
  switch (a.dtype()) {
    case DType::kF32:
      broadcast_binary<float>(a, b, outputs[0], Fn{});
      return Status();
    case DType::kI32:
      broadcast_binary<int32_t>(a, b, outputs[0], Fn{});
      return Status();
    case DType::kI64:
      broadcast_binary<int64_t>(a, b, outputs[0], Fn{});
      return Status();
    default:
      break;
  }
  return ctx.unsupported(std::string("dtype ") + dtype_name(a.dtype()));
}

}  // namespace tessera
