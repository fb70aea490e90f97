// Element-wise maps over numpy-broadcast inputs of possibly different element types, for the ops
// whose inputs or output differ in type (comparisons give bool, Where selects by a bool, Pow
// takes an exponent of another type) or whose inputs are many (Min, Max, Sum). Walks the
// BroadcastPlan of ops/broadcast.h row by row, like broadcast_binary.
#pragma once

#include <span>

#include "core/tensor.h"
#include "ops/broadcast.h"

namespace tessera {

// y = fn(a, b) over the broadcast of a and b (a: TA, b: TB, y: TY elements). `y` may be `a`
// when a already has the output's shape.
template <typename TA, typename TB, typename TY, typename Fn>
void broadcast_map2(const Tensor& a, const Tensor& b, Tensor& y, Fn fn) {
  const Shape shapes[] = {a.shape(), b.shape()};
  const BroadcastPlan plan = plan_broadcast(y.shape(), shapes);
  const TA* pa = a.data<TA>();
  const TB* pb = b.data<TB>();
  TY* py = y.data<TY>();
  const int64_t sa = plan.inner_stride(0), sb = plan.inner_stride(1);
  for_each_broadcast_row(plan, [&](int64_t yo, const int64_t* xo, int64_t n) {
    const TA* ra = pa + xo[0];
    const TB* rb = pb + xo[1];
    TY* ry = py + yo;
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i) ry[i] = fn(ra[i], rb[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) ry[i] = fn(ra[i * sa], rb[i * sb]);
    }
  });
}

// y = fn(c, a, b) over the broadcast of three inputs.
template <typename TC, typename TA, typename TB, typename TY, typename Fn>
void broadcast_map3(const Tensor& c, const Tensor& a, const Tensor& b, Tensor& y, Fn fn) {
  const Shape shapes[] = {c.shape(), a.shape(), b.shape()};
  const BroadcastPlan plan = plan_broadcast(y.shape(), shapes);
  const TC* pc = c.data<TC>();
  const TA* pa = a.data<TA>();
  const TB* pb = b.data<TB>();
  TY* py = y.data<TY>();
  const int64_t sc = plan.inner_stride(0), sa = plan.inner_stride(1), sb = plan.inner_stride(2);
  for_each_broadcast_row(plan, [&](int64_t yo, const int64_t* xo, int64_t n) {
    const TC* rc = pc + xo[0];
    const TA* ra = pa + xo[1];
    const TB* rb = pb + xo[2];
    TY* ry = py + yo;
    for (int64_t i = 0; i < n; ++i) ry[i] = fn(rc[i * sc], ra[i * sa], rb[i * sb]);
  });
}

}  // namespace tessera
