// The OpenCL differential harness: every op of the foundation set, one node at a time, on
// opencl:0 against the reference device, on odd shapes (13, 127: the tails of every tile and
// vector loop) and many attribute variants. A case passes when every output element is within
// tol * max(1, max|ref|) of the reference, and NaN / Inf appear exactly where the reference has
// them.
//
// Cases for ops whose reference kernel is not in this build are skipped (the tensor ops land
// separately); every case runs in CI, where the whole op set is built.
#ifdef TESSERA_HAVE_OPENCL  // the whole file: only builds with the OpenCL backend

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "backends/opencl/opencl_ops.h"
#include "backends/reference/reference_device.h"
#include "tests/backends/opencl_test_util.h"

namespace tessera::testing {
namespace {

using Ints = std::vector<int64_t>;

struct OpCase {
  std::string name;
  OpKind kind;
  Attributes attrs;
  std::vector<NodeInput> inputs;
  int num_outputs = 1;
  float tol = 1e-5f;
};

// gtest prints a case by its name.
void PrintTo(const OpCase& c, std::ostream* os) {
  *os << c.name;
}

Attributes attrs(std::initializer_list<std::pair<const char*, AttributeValue>> list) {
  Attributes a;
  for (const auto& [k, v] : list) a.set(k, v);
  return a;
}

Tensor rnd(const Shape& s, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t = Tensor::create(DType::kF32, s).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}

// A random tensor with NaN, +Inf and -Inf planted at fixed places.
Tensor with_specials(Tensor t) {
  float* p = t.data<float>();
  const int64_t n = t.numel();
  if (n > 3) {
    p[n / 3] = std::numeric_limits<float>::quiet_NaN();
    p[n / 2] = std::numeric_limits<float>::infinity();
    p[n - 1] = -std::numeric_limits<float>::infinity();
  }
  return t;
}

Tensor ints64(const Shape& s, std::vector<int64_t> v) {
  return Tensor::from_int64s(s, v);
}
Tensor ints64(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_int64s(Shape({n}), v);
}
Tensor scalar(float v) {
  return Tensor::scalar_f32(v);
}
Tensor floats(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_floats(Shape({n}), v);
}
Tensor typed(DType dtype, const Shape& s, uint32_t seed) {
  Tensor t = Tensor::create(dtype, s).value();
  std::mt19937 rng(seed);
  auto* bytes = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.byte_size(); ++i) bytes[i] = static_cast<unsigned char>(rng());
  return t;
}

std::vector<OpCase> conv_cases() {
  std::vector<OpCase> c;
  auto conv = [&](std::string name, Shape x, Shape w, bool bias, Attributes a, uint32_t seed) {
    std::vector<NodeInput> in = {activation(rnd(x, seed)), weight(rnd(w, seed + 1))};
    if (bias) in.push_back(weight(rnd(Shape({w[0]}), seed + 2)));
    c.push_back({"Conv_" + name, OpKind::kConv, std::move(a), std::move(in), 1, 1e-4f});
  };
  conv("3x3_pad1", Shape({2, 13, 13, 13}), Shape({17, 13, 3, 3}), true,
       attrs({{"pads", Ints{1, 1, 1, 1}}}), 1);
  conv("3x3_s2_relu", Shape({1, 16, 27, 29}), Shape({70, 16, 3, 3}), true,
       attrs({{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}, {"activation", "relu"}}), 2);
  conv("3x3_dilated_asym", Shape({1, 5, 19, 23}), Shape({7, 5, 3, 3}), false,
       attrs({{"pads", Ints{2, 0, 1, 3}}, {"dilations", Ints{2, 3}}}), 3);
  conv("1x1_fast", Shape({2, 127, 13, 13}), Shape({33, 127, 1, 1}), true,
       attrs({{"activation", "clip"}, {"activation_alpha", 0.f}, {"activation_beta", 0.5f}}), 4);
  conv("1x1_fast_no_bias", Shape({1, 64, 7, 7}), Shape({130, 64, 1, 1}), false, attrs({}), 5);
  conv("1x1_stride2", Shape({1, 24, 13, 13}), Shape({40, 24, 1, 1}), true,
       attrs({{"strides", Ints{2, 2}}}), 6);
  conv("depthwise_3x3", Shape({2, 13, 15, 17}), Shape({13, 1, 3, 3}), true,
       attrs({{"group", int64_t{13}}, {"pads", Ints{1, 1, 1, 1}}, {"activation", "hard_swish"}}),
       7);
  conv("depthwise_5x5_s2", Shape({1, 32, 29, 31}), Shape({32, 1, 5, 5}), true,
       attrs({{"group", int64_t{32}}, {"pads", Ints{2, 2, 2, 2}}, {"strides", Ints{2, 2}}}), 8);
  conv("depthwise_multiplier", Shape({1, 6, 11, 9}), Shape({12, 1, 3, 3}), false,
       attrs({{"group", int64_t{6}}, {"dilations", Ints{2, 1}}}), 9);
  conv("grouped", Shape({1, 12, 13, 13}), Shape({9, 4, 3, 3}), true,
       attrs({{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}}), 10);
  conv("stem_7x7_s2", Shape({1, 3, 61, 61}), Shape({64, 3, 7, 7}), true,
       attrs({{"pads", Ints{3, 3, 3, 3}}, {"strides", Ints{2, 2}}}), 11);
  conv("same_upper", Shape({1, 5, 12, 13}), Shape({6, 5, 4, 4}), true,
       attrs({{"auto_pad", "SAME_UPPER"}, {"strides", Ints{2, 2}}}), 12);
  conv("conv1d", Shape({2, 7, 127}), Shape({9, 7, 5}), true,
       attrs({{"pads", Ints{2, 2}}, {"strides", Ints{3}}}), 13);
  conv("conv3d", Shape({1, 3, 5, 9, 8}), Shape({4, 3, 3, 3, 3}), true,
       attrs({{"pads", Ints{1, 1, 1, 1, 1, 1}}}), 14);
  conv(
      "large_k", Shape({1, 96, 13, 13}), Shape({130, 96, 3, 3}), true,
      attrs({{"pads", Ints{1, 1, 1, 1}}, {"activation", "leaky_relu"}, {"activation_alpha", 0.1f}}),
      15);
  {
    Tensor x = with_specials(rnd(Shape({1, 4, 9, 9}), 16));
    c.push_back({"Conv_nan_inf",
                 OpKind::kConv,
                 attrs({{"pads", Ints{1, 1, 1, 1}}}),
                 {activation(x), weight(rnd(Shape({5, 4, 3, 3}), 17))},
                 1,
                 1e-4f});
  }
  auto convt = [&](std::string name, Shape x, Shape w, Attributes a, uint32_t seed) {
    const int64_t group = a.int_or("group", 1).value();
    std::vector<NodeInput> in = {activation(rnd(x, seed)), weight(rnd(w, seed + 1)),
                                 weight(rnd(Shape({w[1] * group}), seed + 2))};
    c.push_back(
        {"ConvTranspose_" + name, OpKind::kConvTranspose, std::move(a), std::move(in), 1, 1e-4f});
  };
  convt(
      "s2_p1_op1", Shape({1, 8, 7, 9}), Shape({8, 5, 3, 3}),
      attrs({{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"output_padding", Ints{1, 1}}}),
      20);
  convt("grouped_dilated", Shape({2, 6, 5, 5}), Shape({6, 2, 3, 3}),
        attrs({{"group", int64_t{3}}, {"dilations", Ints{2, 2}}, {"activation", "sigmoid"}}), 21);
  return c;
}

std::vector<OpCase> gemm_cases() {
  std::vector<OpCase> c;
  auto gemm = [&](std::string name, Shape a, Shape b, std::optional<Shape> cs, Attributes at,
                  uint32_t seed) {
    std::vector<NodeInput> in = {activation(rnd(a, seed)), weight(rnd(b, seed + 1))};
    if (cs) in.push_back(weight(rnd(*cs, seed + 2)));
    c.push_back({"Gemm_" + name, OpKind::kGemm, std::move(at), std::move(in), 1, 1e-4f});
  };
  gemm("plain", Shape({13, 127}), Shape({127, 33}), std::nullopt, attrs({}), 1);
  gemm("transA_transB_bias_n", Shape({127, 13}), Shape({70, 127}), Shape({70}),
       attrs({{"transA", int64_t{1}}, {"transB", int64_t{1}}}), 2);
  gemm("alpha_beta_mn", Shape({65, 17}), Shape({17, 66}), Shape({65, 66}),
       attrs({{"alpha", 0.5f}, {"beta", -2.f}}), 3);
  gemm("bias_m1", Shape({13, 9}), Shape({9, 5}), Shape({13, 1}), attrs({}), 4);
  gemm("bias_scalar_relu", Shape({7, 9}), Shape({9, 5}), Shape({}), attrs({{"activation", "relu"}}),
       5);
  gemm("fc_batch1_transB", Shape({1, 1000}), Shape({127, 1000}), Shape({127}),
       attrs({{"transB", int64_t{1}}}), 6);
  gemm("fc_batch3", Shape({3, 257}), Shape({257, 129}), Shape({1, 129}), attrs({}), 7);
  gemm("fc_batch2_transB_tanh", Shape({2, 300}), Shape({13, 300}), Shape({13}),
       attrs({{"transB", int64_t{1}}, {"activation", "tanh"}}), 8);
  // Four rows and a k tail (1027 = 4 * 256 + 3) through the float4 dot kernel; with transA the
  // rows of A are strided, which takes the scalar dot kernel.
  gemm("fc_batch4_transB_k_tail", Shape({4, 1027}), Shape({65, 1027}), Shape({65}),
       attrs({{"transB", int64_t{1}}}), 9);
  gemm("fc_batch3_transA_transB", Shape({127, 3}), Shape({13, 127}), Shape({13}),
       attrs({{"transA", int64_t{1}}, {"transB", int64_t{1}}}), 10);
  auto matmul = [&](std::string name, Shape a, Shape b, bool b_const, uint32_t seed) {
    c.push_back({"MatMul_" + name,
                 OpKind::kMatMul,
                 attrs({}),
                 {activation(rnd(a, seed)),
                  b_const ? weight(rnd(b, seed + 1)) : activation(rnd(b, seed + 1))},
                 1,
                 1e-4f});
  };
  matmul("2d", Shape({13, 127}), Shape({127, 33}), true, 10);
  matmul("batched_weight", Shape({2, 3, 13, 17}), Shape({17, 5}), true, 11);
  matmul("batched_both", Shape({4, 13, 17}), Shape({4, 17, 9}), false, 12);
  matmul("broadcast_a", Shape({1, 13, 17}), Shape({3, 17, 9}), false, 13);
  matmul("mixed_broadcast", Shape({2, 1, 4, 5}), Shape({3, 5, 6}), false, 14);
  matmul("vec_mat", Shape({127}), Shape({127, 13}), true, 15);
  matmul("mat_vec", Shape({13, 127}), Shape({127}), false, 16);
  return c;
}

std::vector<OpCase> pool_cases() {
  std::vector<OpCase> c;
  auto pool = [&](OpKind k, std::string name, Shape x, Attributes a, uint32_t seed,
                  bool specials = false) {
    Tensor t = rnd(x, seed);
    if (specials) t = with_specials(t);
    c.push_back({std::string(op_name(k)) + "_" + name, k, std::move(a), {activation(t)}});
  };
  pool(OpKind::kMaxPool, "3x3_s2_p1", Shape({2, 13, 15, 17}),
       attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
       1);
  pool(OpKind::kMaxPool, "ceil_dilated", Shape({1, 5, 14, 13}),
       attrs({{"kernel_shape", Ints{3, 2}},
              {"strides", Ints{2, 2}},
              {"ceil_mode", int64_t{1}},
              {"dilations", Ints{2, 1}}}),
       2);
  pool(OpKind::kMaxPool, "nan_inf", Shape({1, 3, 9, 9}),
       attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}), 3, true);
  pool(OpKind::kMaxPool, "1d", Shape({2, 3, 127}), attrs({{"kernel_shape", Ints{5}}}), 4);
  pool(OpKind::kAveragePool, "exclude_pad", Shape({2, 13, 15, 17}),
       attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
       5);
  pool(OpKind::kAveragePool, "include_pad_ceil", Shape({1, 7, 13, 12}),
       attrs({{"kernel_shape", Ints{3, 3}},
              {"strides", Ints{2, 2}},
              {"pads", Ints{1, 0, 1, 1}},
              {"count_include_pad", int64_t{1}},
              {"ceil_mode", int64_t{1}}}),
       6);
  pool(OpKind::kAveragePool, "3d", Shape({1, 2, 5, 6, 7}), attrs({{"kernel_shape", Ints{2, 3, 2}}}),
       7);
  pool(OpKind::kGlobalAveragePool, "odd", Shape({2, 13, 7, 9}), attrs({}), 8);
  pool(OpKind::kGlobalAveragePool, "large_plane", Shape({1, 3, 127, 129}), attrs({}), 9);
  pool(OpKind::kGlobalMaxPool, "odd", Shape({2, 13, 7, 9}), attrs({}), 10);
  pool(OpKind::kGlobalMaxPool, "nan_inf", Shape({1, 4, 13, 13}), attrs({}), 11, true);
  return c;
}

std::vector<OpCase> elementwise_cases() {
  std::vector<OpCase> c;
  const Shape odd({2, 13, 7, 9});
  auto unary = [&](OpKind k, std::string name, Attributes a, std::vector<NodeInput> extra = {}) {
    std::vector<NodeInput> in = {activation(with_specials(rnd(odd, 1, -8.f, 8.f)))};
    for (NodeInput& e : extra) in.push_back(std::move(e));
    c.push_back({std::string(op_name(k)) + "_" + name, k, std::move(a), std::move(in)});
  };
  unary(OpKind::kRelu, "nan_inf", attrs({}));
  unary(OpKind::kLeakyRelu, "alpha", attrs({{"alpha", 0.3f}}));
  unary(OpKind::kClip, "relu6", attrs({}), {weight(scalar(0.f)), weight(scalar(6.f))});
  unary(OpKind::kClip, "min_only", attrs({}), {weight(scalar(-0.5f))});
  unary(OpKind::kClip, "min_above_max", attrs({}), {weight(scalar(1.f)), weight(scalar(-1.f))});
  unary(OpKind::kSigmoid, "nan_inf", attrs({}));
  unary(OpKind::kHardSigmoid, "alpha_beta", attrs({{"alpha", 0.25f}, {"beta", 0.4f}}));
  unary(OpKind::kHardSwish, "nan_inf", attrs({}));
  unary(OpKind::kTanh, "nan_inf", attrs({}));
  {
    // A length that is not a multiple of the 4-wide vectors.
    c.push_back({"Relu_tail", OpKind::kRelu, attrs({}), {activation(rnd(Shape({127}), 2))}});
  }
  auto binary = [&](OpKind k, std::string name, Shape a, Shape b, Attributes at, uint32_t seed,
                    bool b_const = false) {
    Tensor tb = rnd(b, seed + 1, 0.5f, 2.f);
    c.push_back({std::string(op_name(k)) + "_" + name,
                 k,
                 std::move(at),
                 {activation(rnd(a, seed)), b_const ? weight(tb) : activation(tb)}});
  };
  for (OpKind k : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv}) {
    binary(k, "same", odd, odd, attrs({}), 1);
    binary(k, "channel", odd, Shape({1, 13, 1, 1}), attrs({}), 2, true);
    binary(k, "outer", Shape({13, 1}), Shape({1, 17}), attrs({}), 3);
    binary(k, "scalar_left", Shape({}), Shape({3, 127}), attrs({}), 4);
  }
  binary(OpKind::kAdd, "same_relu", odd, odd, attrs({{"activation", "relu"}}), 5);
  binary(OpKind::kMul, "se_gate", Shape({2, 13, 7, 9}), Shape({2, 13, 1, 1}), attrs({}), 6);
  binary(OpKind::kAdd, "row_bias", Shape({3, 5, 127}), Shape({127}), attrs({}), 7, true);
  // Shape arithmetic in i32 / i64: wrapping on random bits, broadcasting, and every Div corner
  // (negative operands truncate toward zero, MIN / -1 wraps).
  for (DType t : {DType::kI32, DType::kI64}) {
    const std::string ty = dtype_name(t);
    for (OpKind k : {OpKind::kAdd, OpKind::kSub, OpKind::kMul}) {
      c.push_back(
          {std::string(op_name(k)) + "_" + ty + "_wraps",
           k,
           attrs({}),
           {activation(typed(t, Shape({3, 13}), 50)), activation(typed(t, Shape({13}), 51))}});
    }
    const std::vector<int64_t> num = {7,
                                      -7,
                                      7,
                                      -7,
                                      0,
                                      100,
                                      std::numeric_limits<int64_t>::min(),
                                      std::numeric_limits<int32_t>::min(),
                                      5,
                                      -1,
                                      12,
                                      13};
    const std::vector<int64_t> den = {2, 2, -2, -2, 3, 7, -1, -1, 9, 1, -5, 4};
    Tensor a = Tensor::from_int64s(Shape({2, 6}), num), b = Tensor::from_int64s(Shape({2, 6}), den);
    if (t == DType::kI32) {
      Tensor a32 = Tensor::create(t, a.shape()).value(), b32 = Tensor::create(t, b.shape()).value();
      for (int64_t i = 0; i < a.numel(); ++i) {
        a32.data<int32_t>()[i] = static_cast<int32_t>(num[static_cast<size_t>(i)]);
        b32.data<int32_t>()[i] = static_cast<int32_t>(den[static_cast<size_t>(i)]);
      }
      a = a32;
      b = b32;
    }
    c.push_back(
        {"Div_" + ty + "_truncates", OpKind::kDiv, attrs({}), {activation(a), activation(b)}});
    c.push_back(
        {"Mul_" + ty + "_by_constant_row",
         OpKind::kMul,
         attrs({}),
         {activation(typed(t, Shape({4, 1, 3}), 52)), weight(typed(t, Shape({5, 1}), 53))}});
  }
  {
    Tensor a = with_specials(rnd(odd, 8));
    c.push_back({"Div_by_zero_nan",
                 OpKind::kDiv,
                 attrs({}),
                 {activation(a), activation(Tensor::create(DType::kF32, odd).value())}});
  }
  auto bn = [&](std::string name, Shape x, Attributes at, uint32_t seed) {
    const Shape ch({x[1]});
    c.push_back({"BatchNormalization_" + name,
                 OpKind::kBatchNormalization,
                 std::move(at),
                 {activation(rnd(x, seed)), weight(rnd(ch, seed + 1)), weight(rnd(ch, seed + 2)),
                  weight(rnd(ch, seed + 3)), weight(rnd(ch, seed + 4, 0.1f, 2.f))},
                 1,
                 1e-4f});
  };
  bn("odd", odd, attrs({{"epsilon", 1e-3f}}), 10);
  bn("relu_3d", Shape({1, 5, 3, 4, 7}), attrs({{"activation", "relu"}}), 11);
  bn("rank2", Shape({3, 127}), attrs({}), 12);
  {
    // Parameters fed at run time (training-style graphs, or a slice cut before them), a mean far
    // from the data to catch the folded form's cancellation.
    const Shape x({2, 13, 7, 9}), ch({13});
    c.push_back(
        {"BatchNormalization_runtime_params",
         OpKind::kBatchNormalization,
         attrs({{"epsilon", 1e-3f}, {"activation", "relu"}}),
         {activation(rnd(x, 13, 99.f, 101.f)), activation(rnd(ch, 14)), activation(rnd(ch, 15)),
          activation(rnd(ch, 16, 99.5f, 100.5f)), activation(rnd(ch, 17, 0.1f, 2.f))},
         1,
         1e-4f});
    c.push_back({"BatchNormalization_runtime_mean_only",
                 OpKind::kBatchNormalization,
                 attrs({}),
                 {activation(rnd(Shape({3, 127}), 18)), weight(rnd(Shape({127}), 19)),
                  weight(rnd(Shape({127}), 20)), activation(rnd(Shape({127}), 21)),
                  weight(rnd(Shape({127}), 22, 0.1f, 2.f))},
                 1,
                 1e-4f});
  }
  return c;
}

std::vector<OpCase> normalization_cases() {
  std::vector<OpCase> c;
  c.push_back({"Softmax_last",
               OpKind::kSoftmax,
               attrs({}),
               {activation(rnd(Shape({3, 1000}), 1, -10.f, 10.f))}});
  c.push_back({"Softmax_axis1",
               OpKind::kSoftmax,
               attrs({{"axis", int64_t{1}}}),
               {activation(rnd(Shape({2, 13, 7}), 2, -5.f, 5.f))}});
  c.push_back({"Softmax_short_rows",
               OpKind::kSoftmax,
               attrs({{"axis", int64_t{-1}}}),
               {activation(rnd(Shape({5, 7, 3}), 3))}});
  c.push_back({"LRN_alexnet",
               OpKind::kLRN,
               attrs({{"size", int64_t{5}}, {"alpha", 1e-4f}, {"beta", 0.75f}, {"bias", 2.f}}),
               {activation(rnd(Shape({2, 13, 7, 9}), 4, -3.f, 3.f))}});
  c.push_back({"LRN_even_size",
               OpKind::kLRN,
               attrs({{"size", int64_t{4}}, {"alpha", 0.01f}}),
               {activation(rnd(Shape({1, 9, 5, 3}), 5))}});
  c.push_back({"ReduceMean_hw_keep",
               OpKind::kReduceMean,
               attrs({{"axes", Ints{2, 3}}}),
               {activation(rnd(Shape({2, 13, 7, 9}), 6))}});
  c.push_back({"ReduceMean_c_nokeep",
               OpKind::kReduceMean,
               attrs({{"axes", Ints{1}}, {"keepdims", int64_t{0}}}),
               {activation(rnd(Shape({2, 13, 7, 9}), 7))}});
  c.push_back({"ReduceMean_all",
               OpKind::kReduceMean,
               attrs({}),
               {activation(rnd(Shape({3, 5, 127}), 8))},
               1,
               1e-4f});
  c.push_back({"ReduceMean_outer_inner",
               OpKind::kReduceMean,
               attrs({{"axes", Ints{0, -1}}}),
               {activation(rnd(Shape({3, 5, 17}), 9))}});
  return c;
}

std::vector<OpCase> tensor_cases() {
  std::vector<OpCase> c;
  c.push_back({"Concat_channels",
               OpKind::kConcat,
               attrs({{"axis", int64_t{1}}}),
               {activation(rnd(Shape({2, 13, 5, 7}), 1)), activation(rnd(Shape({2, 3, 5, 7}), 2)),
                weight(rnd(Shape({2, 1, 5, 7}), 3))}});
  c.push_back({"Concat_last_axis",
               OpKind::kConcat,
               attrs({{"axis", int64_t{-1}}}),
               {activation(rnd(Shape({3, 13}), 4)), activation(rnd(Shape({3, 127}), 5))}});
  c.push_back({"Concat_i64",
               OpKind::kConcat,
               attrs({{"axis", int64_t{0}}}),
               {activation(typed(DType::kI64, Shape({3, 5}), 6)),
                activation(typed(DType::kI64, Shape({2, 5}), 7))}});
  c.push_back({"Split_equal",
               OpKind::kSplit,
               attrs({{"axis", int64_t{1}}}),
               {activation(rnd(Shape({2, 12, 5, 3}), 8))},
               3});
  c.push_back({"Split_sizes",
               OpKind::kSplit,
               attrs({{"axis", int64_t{-1}}}),
               {activation(rnd(Shape({3, 127}), 9)), weight(ints64({100, 27}))},
               2});
  c.push_back({"Slice_steps",
               OpKind::kSlice,
               attrs({}),
               {activation(rnd(Shape({5, 13, 17}), 10)), weight(ints64({1, -2})),
                weight(ints64({100, 0})), weight(ints64({2, 1})), weight(ints64({2, 1}))}});
  c.push_back({"Slice_negative_step",
               OpKind::kSlice,
               attrs({}),
               {activation(rnd(Shape({4, 13}), 11)), weight(ints64({-1})),
                weight(ints64({std::numeric_limits<int64_t>::min()})), weight(ints64({1})),
                weight(ints64({-3}))}});
  c.push_back({"Transpose_nhwc",
               OpKind::kTranspose,
               attrs({{"perm", Ints{0, 2, 3, 1}}}),
               {activation(rnd(Shape({2, 13, 5, 7}), 12))}});
  c.push_back({"Transpose_default",
               OpKind::kTranspose,
               attrs({}),
               {activation(rnd(Shape({3, 13, 17}), 13))}});
  c.push_back({"Transpose_u8",
               OpKind::kTranspose,
               attrs({{"perm", Ints{1, 0}}}),
               {activation(typed(DType::kU8, Shape({13, 7}), 14))}});
  c.push_back({"Transpose_i64_shuffle",
               OpKind::kTranspose,
               attrs({{"perm", Ints{0, 2, 1, 3}}}),
               {activation(typed(DType::kI64, Shape({1, 2, 3, 5}), 15))}});
  c.push_back({"Pad_constant",
               OpKind::kPad,
               attrs({}),
               {activation(rnd(Shape({1, 3, 5, 7}), 16)), weight(ints64({0, 1, 2, -1, 0, 0, 1, 3})),
                weight(scalar(1.5f))}});
  {
    Tensor v = Tensor::create(DType::kU8, Shape({})).value();
    v.data<uint8_t>()[0] = 200;
    c.push_back({"Pad_u8_constant",
                 OpKind::kPad,
                 attrs({}),
                 {activation(typed(DType::kU8, Shape({3, 5}), 44)), weight(ints64({1, 0, 2, 3})),
                  weight(v)}});
  }
  {
    Tensor v = ints64(Shape({}), {-1234567890123});
    c.push_back({"Pad_i64_constant",
                 OpKind::kPad,
                 attrs({}),
                 {activation(typed(DType::kI64, Shape({2, 3}), 45)), weight(ints64({0, 2, 1, 1})),
                  weight(v)}});
  }
  c.push_back(
      {"Pad_reflect",
       OpKind::kPad,
       attrs({{"mode", "reflect"}}),
       {activation(rnd(Shape({1, 2, 5, 4}), 17)), weight(ints64({0, 0, 3, 5, 0, 0, 6, 2}))}});
  c.push_back({"Pad_edge",
               OpKind::kPad,
               attrs({{"mode", "edge"}}),
               {activation(rnd(Shape({2, 3, 4}), 18)), weight(ints64({0, 2, 1, 0, -1, 4}))}});
  c.push_back(
      {"Gather_axis0",
       OpKind::kGather,
       attrs({}),
       {activation(rnd(Shape({13, 5}), 19)), weight(ints64(Shape({2, 2}), {0, -1, 7, 3}))}});
  c.push_back({"Gather_axis1_scalar",
               OpKind::kGather,
               attrs({{"axis", int64_t{1}}}),
               {activation(rnd(Shape({3, 13, 5}), 20)), weight(ints64(Shape({}), {-2}))}});
  c.push_back({"Gather_runtime_i64_axis1",
               OpKind::kGather,
               attrs({{"axis", int64_t{1}}}),
               {activation(rnd(Shape({3, 13, 5}), 40)),
                activation(ints64(Shape({2, 3}), {0, -1, 12, 7, -13, 3}))}});
  {
    Tensor idx = Tensor::create(DType::kI32, Shape({4})).value();
    const int32_t v[] = {126, 0, -127, 64};
    std::memcpy(idx.raw(), v, sizeof(v));
    c.push_back({"Gather_runtime_i32_last_axis",
                 OpKind::kGather,
                 attrs({{"axis", int64_t{-1}}}),
                 {activation(rnd(Shape({2, 3, 127}), 41)), activation(idx)}});
  }
  c.push_back({"Gather_runtime_u8_data",
               OpKind::kGather,
               attrs({}),
               {activation(typed(DType::kU8, Shape({13, 7}), 42)),
                activation(ints64(Shape({3}), {12, 0, -2}))}});
  c.push_back(
      {"Gather_runtime_i64_data_scalar_index",
       OpKind::kGather,
       attrs({}),
       {activation(typed(DType::kI64, Shape({5, 3}), 43)), activation(ints64(Shape({}), {-5}))}});
  c.push_back(
      {"Resize_nearest_x2",
       OpKind::kResize,
       attrs({{"mode", "nearest"}}),
       {activation(rnd(Shape({1, 3, 5, 7}), 21)), absent(), weight(floats({1.f, 1.f, 2.f, 2.f}))}});
  c.push_back({"Resize_nearest_sizes_floor",
               OpKind::kResize,
               attrs({{"mode", "nearest"},
                      {"nearest_mode", "floor"},
                      {"coordinate_transformation_mode", "asymmetric"}}),
               {activation(rnd(Shape({1, 2, 13, 9}), 22)), absent(), absent(),
                weight(ints64({1, 2, 5, 20}))}});
  c.push_back({"Resize_linear_half_pixel",
               OpKind::kResize,
               attrs({{"mode", "linear"}}),
               {activation(rnd(Shape({1, 3, 5, 7}), 23)), absent(),
                weight(floats({1.f, 1.f, 2.5f, 1.5f}))}});
  c.push_back({"Resize_linear_align_corners",
               OpKind::kResize,
               attrs({{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}),
               {activation(rnd(Shape({2, 3, 13, 4}), 24)), absent(), absent(),
                weight(ints64({2, 3, 6, 9}))}});
  c.push_back({"Flatten",
               OpKind::kFlatten,
               attrs({{"axis", int64_t{1}}}),
               {activation(rnd(Shape({2, 13, 3, 3}), 25))}});
  c.push_back({"Reshape",
               OpKind::kReshape,
               attrs({}),
               {activation(rnd(Shape({2, 13, 3, 3}), 26)), weight(ints64({2, -1, 9}))}});
  c.push_back({"Squeeze",
               OpKind::kSqueeze,
               attrs({}),
               {activation(rnd(Shape({2, 1, 13, 1}), 27)), weight(ints64({1, 3}))}});
  c.push_back({"Unsqueeze",
               OpKind::kUnsqueeze,
               attrs({}),
               {activation(rnd(Shape({2, 13}), 28)), weight(ints64({0, 3}))}});
  c.push_back({"Identity", OpKind::kIdentity, attrs({}), {activation(rnd(Shape({127}), 29))}});
  c.push_back({"Dropout", OpKind::kDropout, attrs({}), {activation(rnd(Shape({3, 13}), 30))}});
  c.push_back({"Shape", OpKind::kShape, attrs({}), {activation(rnd(Shape({2, 13, 3}), 31))}});
  c.push_back({"Cast_same_type",
               OpKind::kCast,
               attrs({{"to", int64_t{1}}}),
               {activation(rnd(Shape({3, 13}), 32))}});
  // Every source dtype to every target dtype (ONNX TensorProto numbers). Float sources hold NaN,
  // infinities, values beyond every integer range and both signs of the truncation; integer
  // sources hold random bits, so narrowing wraps and bool sees bytes other than 0 and 1.
  {
    const std::pair<int64_t, DType> targets[] = {
        {1, DType::kF32}, {10, DType::kF16}, {3, DType::kI8},  {2, DType::kU8},
        {6, DType::kI32}, {7, DType::kI64},  {9, DType::kBool}};
    Tensor f = rnd(Shape({3, 43}), 33, -300.f, 300.f);
    float* p = f.data<float>();
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(),
                              3e9f,
                              -3e9f,
                              1e19f,
                              -1e19f,
                              -0.f,
                              -0.7f,
                              0.7f,
                              255.5f,
                              -128.9f,
                              65504.f,
                              1e-8f};
    for (size_t i = 0; i < std::size(specials); ++i) p[i * 3] = specials[i];
    for (const auto& [from_code, from] : targets) {
      Tensor src;
      if (from == DType::kF32) {
        src = f;
      } else if (from == DType::kF16) {
        // Halves of the f32 values (NaN excluded: its payload bits are not specified).
        src = Tensor::create(DType::kF16, f.shape()).value();
        for (int64_t i = 0; i < f.numel(); ++i) {
          const float v = std::isnan(p[i]) ? 1.f : p[i];
          src.data<uint16_t>()[i] = float_to_half(v);
        }
      } else {
        src = typed(from, f.shape(), 34 + static_cast<uint32_t>(from_code));
      }
      for (const auto& [to_code, to] : targets) {
        if (to == DType::kF16 && from == DType::kF32) continue;  // below, without NaN
        c.push_back({std::string("Cast_") + dtype_name(from) + "_to_" + dtype_name(to),
                     OpKind::kCast,
                     attrs({{"to", to_code}}),
                     {activation(src)}});
      }
    }
    Tensor no_nan = f.clone().value();
    no_nan.data<float>()[0] = 65520.f;  // rounds to +inf in f16
    c.push_back(
        {"Cast_f32_to_f16", OpKind::kCast, attrs({{"to", int64_t{10}}}), {activation(no_nan)}});
  }
  return c;
}

std::vector<OpCase> all_cases() {
  std::vector<OpCase> all;
  for (auto family : {conv_cases(), gemm_cases(), pool_cases(), elementwise_cases(),
                      normalization_cases(), tensor_cases()}) {
    for (OpCase& c : family) all.push_back(std::move(c));
  }
  return all;
}

// Every output element of `got` within tol * max(1, max|ref|) of `ref`; NaN and infinities
// exactly where the reference has them. Bytes must match for non-float dtypes.
void expect_matches(const Tensor& got, const Tensor& ref, float tol, const std::string& what) {
  ASSERT_EQ(got.dtype(), ref.dtype()) << what;
  ASSERT_EQ(got.shape(), ref.shape()) << what;
  if (ref.dtype() != DType::kF32) {
    EXPECT_EQ(std::memcmp(got.raw(), ref.raw(), ref.byte_size()), 0) << what;
    return;
  }
  double max_ref = 0;
  for (float v : ref.span<float>()) {
    if (std::isfinite(v)) max_ref = std::max(max_ref, static_cast<double>(std::fabs(v)));
  }
  const double bound = tol * std::max(1.0, max_ref);
  int reported = 0;
  for (int64_t i = 0; i < ref.numel() && reported < 5; ++i) {
    const float g = got.data<float>()[i], r = ref.data<float>()[i];
    bool ok;
    if (std::isnan(r)) {
      ok = std::isnan(g);
    } else if (std::isinf(r)) {
      ok = g == r;
    } else {
      ok = std::isfinite(g) && std::fabs(static_cast<double>(g) - r) <= bound;
    }
    if (!ok) {
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", reference " << r << " (bound "
                    << bound << ")";
      ++reported;
    }
  }
}

class OpenCLOpTest : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpenCLOpTest, MatchesReference) {
  const OpCase& c = GetParam();
  if (!op_is_registered(c.kind)) {
    GTEST_SKIP() << op_name(c.kind) << " has no reference kernel in this build";
  }
  Device* dev = nullptr;
  TESSERA_OPENCL_DEVICE_OR_SKIP(dev);
  Result<Graph> g = one_node_graph(c.kind, c.attrs, c.inputs, c.num_outputs);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const Capability cap = dev->capabilities(*g, g->node(0));
  ASSERT_TRUE(cap.supported) << cap.reason;
  std::vector<std::pair<ValueId, Tensor>> feed;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const ValueId v = g->node(0).inputs[i];
    if (v != kNoValue && !g->value(v).is_constant) feed.emplace_back(v, c.inputs[i].tensor);
  }
  ReferenceDevice ref;
  Result<std::vector<Tensor>> want = run_layers(ref, *g, {0}, feed);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  Result<std::vector<Tensor>> got = run_layers(*dev, *g, {0}, feed);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->size(), want->size());
  for (size_t o = 0; o < got->size(); ++o) {
    expect_matches((*got)[o], (*want)[o], c.tol, c.name + " output " + std::to_string(o));
  }
  // Running the same program twice gives the same result (buffers are not left dirty).
  Result<std::unique_ptr<Program>> p = dev->compile(*g, std::vector<NodeId>{0});
  ASSERT_TRUE(p.ok());
  std::vector<Tensor> ins;
  for (ValueId v : (*p)->input_values()) {
    for (const auto& [id, t] : feed) {
      if (id == v) ins.push_back(t);
    }
  }
  std::vector<Tensor> first((*p)->output_values().size()), second(first.size());
  ASSERT_TRUE((*p)->run(ins, first).ok());
  ASSERT_TRUE((*p)->run(ins, second).ok());
  for (size_t o = 0; o < first.size(); ++o) {
    EXPECT_EQ(std::memcmp(first[o].raw(), second[o].raw(), first[o].byte_size()), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpenCLOpTest, ::testing::ValuesIn(all_cases()),
                         [](const auto& p) { return p.param.name; });

// Every foundation op has an OpenCL entry, and the harness above covers every one of them.
TEST(OpenCLOpTable, EveryOpHasAnEntryAndAHarnessCase) {
  const std::vector<OpCase> cases = all_cases();
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    if (kind == OpKind::kConstant) continue;  // folded away before any device sees it
    // Issue 26's ops (normalisations, reductions, quantisation, recurrent layers) have no OpenCL
    // kernels yet; the planner places them on a device that runs them.
    if (kind >= OpKind::kLayerNormalization) continue;
    EXPECT_NE(opencl::find_opencl_op(kind), nullptr) << op_name(kind);
    bool covered = false;
    for (const OpCase& c : cases) covered = covered || c.kind == kind;
    EXPECT_TRUE(covered) << op_name(kind) << " has no case in the OpenCL harness";
  }
}

// Where opencl:0 may refuse a node the reference runs: genuine limits of an OpenCL device, each
// matched by a fragment of the refusal reason. Empty today: every registered op runs with
// every input fed at run time wherever shapes still infer.
struct DeviceLimit {
  OpKind kind;
  const char* reason;  // a fragment of Capability::reason
};
constexpr std::array<DeviceLimit, 0> kDeviceLimits{};

bool is_device_limit(OpKind kind, const std::string& reason) {
  for (const DeviceLimit& l : kDeviceLimits) {
    if (l.kind == kind && reason.find(l.reason) != std::string::npos) return true;
  }
  return false;
}

// Walks every registered OpKind: each harness case of that kind, and the same node with every
// constant input fed at run time instead (a slice can be cut anywhere, so a device sees weights,
// indices, BatchNormalization statistics and shape tensors arrive as activations). Whenever shapes
// still infer and the reference runs the node, opencl:0 must accept it and match the reference,
// or refuse it for one of kDeviceLimits.
TEST(OpenCLCapabilities, EveryRegisteredOpRunsWithConstantOrRuntimeInputs) {
  Device* dev = nullptr;
  TESSERA_OPENCL_DEVICE_OR_SKIP(dev);
  const std::vector<OpCase> cases = all_cases();
  int checked = 0, runtime_variants = 0;
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    if (!op_is_registered(kind) || kind >= OpKind::kLayerNormalization) continue;
    bool seen = false;
    for (const OpCase& c : cases) {
      if (c.kind != kind) continue;
      seen = true;
      // Variant 0: as written; then each constant input alone at run time; then all of them.
      std::vector<std::vector<NodeInput>> variants = {c.inputs};
      std::vector<NodeInput> all_runtime = c.inputs;
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        if (!c.inputs[i].constant) continue;
        variants.push_back(c.inputs);
        variants.back()[i].constant = false;
        all_runtime[i].constant = false;
      }
      if (variants.size() > 2) variants.push_back(all_runtime);
      for (size_t variant = 0; variant < variants.size(); ++variant) {
        const std::vector<NodeInput>& inputs = variants[variant];
        const std::string what =
            c.name + (variant == 0 ? "" : " (variant " + std::to_string(variant) + ")");
        Result<Graph> g = one_node_graph(kind, c.attrs, inputs, c.num_outputs);
        if (!g.ok()) continue;  // shapes depend on the values: a graph question, not a device's
        std::vector<std::pair<ValueId, Tensor>> feed;
        for (size_t i = 0; i < inputs.size(); ++i) {
          const ValueId v = g->node(0).inputs[i];
          if (v != kNoValue && !g->value(v).is_constant) feed.emplace_back(v, inputs[i].tensor);
        }
        ReferenceDevice ref;
        Result<std::vector<Tensor>> want = run_layers(ref, *g, {0}, feed);
        if (!want.ok()) continue;  // the oracle itself needs these inputs constant
        ++checked;
        runtime_variants += variant > 0 ? 1 : 0;
        const Capability cap = dev->capabilities(*g, g->node(0));
        if (!cap.supported) {
          EXPECT_TRUE(is_device_limit(kind, cap.reason))
              << what << ": refused for a reason that is not a device limit: " << cap.reason;
          continue;
        }
        if (variant == 0) continue;  // the harness above runs the case as written
        Result<std::vector<Tensor>> got = run_layers(*dev, *g, {0}, feed);
        ASSERT_TRUE(got.ok()) << what << ": " << got.status().to_string();
        for (size_t o = 0; o < got->size(); ++o) {
          expect_matches((*got)[o], (*want)[o], c.tol, what + " output " + std::to_string(o));
        }
      }
    }
    EXPECT_TRUE(seen || kind == OpKind::kConstant) << op_name(kind) << " has no harness case";
  }
  EXPECT_GT(checked, 100);
  EXPECT_GT(runtime_variants, 20);
}

}  // namespace
}  // namespace tessera::testing

#endif  // TESSERA_HAVE_OPENCL
