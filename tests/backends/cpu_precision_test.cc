// Reduced precision on the cpu device (docs/precision.md): bf16 rounding against a brute-force
// oracle, precision levels in device names, CompileOptions::precision, and a small network in
// bf16: its tensors stay bf16 between consecutive bf16 layers (conversions only at the edges)
// and its outputs stay within bf16's error of the reference device's.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "backends/cpu/cpu_program.h"
#include "backends/cpu/gemv.h"
#include "backends/cpu/layout.h"
#include "backends/cpu/onednn.h"
#include "backends/cpu/simd.h"
#include "backends/registry.h"
#include "graph/onnx/onnx_import.h"
#include "scheduler/fidelity.h"
#include "scheduler/plan.h"
#include "tests/backends/backend_test_util.h"
#include "tests/backends/cpu_test_util.h"
#include "tests/scoped_env.h"

namespace tessera {
namespace {

using Ints = std::vector<int64_t>;
using testing::random_tensor;

// The nearest bf16 to f (ties to the even mantissa), by comparing the two bf16 values around f.
uint16_t nearest_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t lo = static_cast<uint16_t>(u >> 16);
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  const double dl = std::fabs(static_cast<double>(f) - cpu::bf16_to_f32(lo));
  const double dh = std::fabs(static_cast<double>(f) - cpu::bf16_to_f32(hi));
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) == 0 ? lo : hi;
}

TEST(Bf16, RoundsToNearestEven) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u;  // exact ties
    float f;
    std::memcpy(&f, &u, 4);
    if (!std::isfinite(f) || std::fabs(f) >= 3.3e38f) continue;
    ASSERT_EQ(cpu::f32_to_bf16(f), nearest_bf16(f)) << std::hex << u;
  }
  EXPECT_TRUE(std::isnan(cpu::bf16_to_f32(cpu::f32_to_bf16(std::nanf("")))));
  EXPECT_EQ(cpu::bf16_to_f32(cpu::f32_to_bf16(-std::numeric_limits<float>::infinity())),
            -std::numeric_limits<float>::infinity());
  EXPECT_EQ(cpu::bf16_to_f32(cpu::f32_to_bf16(1.f)), 1.f);
}

TEST(Bf16, TransposingConversionsRoundTrip) {
  const int64_t n = 2, c = 13, hw = 7 * 5;
  const Tensor x = random_tensor(Shape{n, c, 7, 5}, 3);
  std::vector<uint16_t> nhwc(static_cast<size_t>(n * c * hw));
  std::vector<float> back(nhwc.size());
  cpu::nchw_f32_to_nhwc_bf16(x.data<float>(), nhwc.data(), n, c, hw, nullptr);
  cpu::nhwc_bf16_to_nchw_f32(nhwc.data(), back.data(), n, c, hw, nullptr);
  for (int64_t img = 0; img < n; ++img) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t p = 0; p < hw; ++p) {
        const float v = x.data<float>()[(img * c + ch) * hw + p];
        ASSERT_EQ(nhwc[static_cast<size_t>((img * hw + p) * c + ch)], cpu::f32_to_bf16(v));
        ASSERT_EQ(back[static_cast<size_t>((img * c + ch) * hw + p)],
                  cpu::bf16_to_f32(cpu::f32_to_bf16(v)));
      }
    }
  }
}

TEST(PrecisionNames, ParseAndPrint) {
  for (Precision p : kAllPrecisions) {
    Result<Precision> back = parse_precision(precision_name(p));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, p);
  }
  Result<Precision> bad = parse_precision("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bf16"), std::string::npos);

  Result<DeviceName> d = parse_device_name("cpu:0-1#bf16@1800");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->kind, "cpu");
  EXPECT_EQ(d->spec, "0-1");
  EXPECT_EQ(d->mhz, 1800);
  EXPECT_EQ(d->precision, Precision::kBf16);
  EXPECT_EQ(d->to_string(), "cpu:0-1#bf16@1800");
  EXPECT_EQ(d->base(), "cpu:0-1@1800");
  EXPECT_EQ(parse_device_name("cpu#int8")->to_string(), "cpu#int8");
  EXPECT_EQ(parse_device_name("cpu#f32")->to_string(), "cpu");
  Result<DeviceName> wrong = parse_device_name("cpu#bf8");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("cpu#bf8"), std::string::npos);
  // Only cpu devices have precision levels; int8 everywhere (oneDNN or XNNPACK), bf16 only with
  // oneDNN.
  Result<std::unique_ptr<Device>> ref = open_device("reference#bf16");
  ASSERT_FALSE(ref.ok());
  EXPECT_EQ(ref.status().code(), StatusCode::kUnimplemented);
  Result<std::unique_ptr<Device>> int8 = open_device("cpu#int8");
  EXPECT_TRUE(int8.ok()) << int8.status().to_string();
  Result<std::unique_ptr<Device>> bf16 = open_device("cpu#bf16");
  EXPECT_EQ(bf16.ok(), cpu::onednn_available());
  if (!bf16.ok()) {
    EXPECT_EQ(bf16.status().code(), StatusCode::kUnimplemented);
  }
}

TEST(PrecisionNames, PlansCarryPrecisionLevels) {
  Result<Plan> p = parse_plan_notation("cpu#bf16[0] cpu[3] cpu:0#bf16@1800[5]", 8);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->stages.size(), 3u);
  EXPECT_EQ(p->stages[0].placement.devices[0].device, "cpu#bf16");
  EXPECT_EQ(p->stages[2].placement.devices[0].device, "cpu:0#bf16");
  EXPECT_EQ(p->stages[2].placement.devices[0].mhz, 1800);
  EXPECT_EQ(p->notation(), "cpu#bf16[0] cpu[3] cpu:0#bf16@1800[5]");
  Result<Plan> back = Plan::from_json_text(p->to_json_text(), "test");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->notation(), p->notation());
  // A streaming stage's actor suffix still parses after a precision level.
  Result<Plan> s = parse_plan_notation("cpu#bf16[0]#a0 cpu[4]", 8);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->stages[0].actor, 0);
  EXPECT_EQ(s->stages[0].placement.devices[0].device, "cpu#bf16");
}

TEST(Fidelity, CountsAgreementOverlapAndL2) {
  // Two rows of 6 classes: row 0 agrees on top-1 and shares 4 of the top 5; row 1 disagrees.
  const std::vector<float> r = {6, 5, 4, 3, 2, 1, 1, 2, 3, 4, 5, 6};
  const std::vector<float> y = {6, 5, 4, 3, 1, 2.5f, 1, 2, 3, 4, 6, 5};
  const Tensor ref = Tensor::from_floats(Shape{2, 6}, r);
  const Tensor out = Tensor::from_floats(Shape{2, 6}, y);
  FidelityMeter m;
  ASSERT_TRUE(m.add(std::vector<Tensor>{out}, std::vector<Tensor>{ref}).ok());
  const Fidelity f = m.result();
  EXPECT_EQ(f.rows, 2);
  EXPECT_DOUBLE_EQ(f.top1_agreement, 0.5);
  EXPECT_DOUBLE_EQ(f.top5_overlap, (4.0 / 5 + 1.0) / 2);
  double err2 = 0, ref2 = 0;
  for (int i = 0; i < 12; ++i) {
    err2 += std::pow(out.data<float>()[i] - ref.data<float>()[i], 2);
    ref2 += std::pow(ref.data<float>()[i], 2);
  }
  EXPECT_NEAR(f.relative_l2, std::sqrt(err2 / ref2), 1e-12);
  EXPECT_DOUBLE_EQ(f.max_abs_error, 1.5);
  FidelityMeter bad;
  EXPECT_FALSE(bad.add(std::vector<Tensor>{out}, std::vector<Tensor>{Tensor::from_floats(
                                                     Shape{12}, std::vector<float>(12, 0))})
                   .ok());
}

#ifdef TESSERA_HAVE_ONEDNN

// A ResNet-like network: conv+relu stem, maxpool, a residual block (conv+relu, conv, Add+relu),
// a depthwise conv with clip, global average pool, flatten, Gemm.
struct Net {
  Graph g;
  std::vector<NodeId> layers;
  std::vector<Tensor> feeds;
  uint32_t seed = 11;

  ValueId node(OpKind kind, const std::string& name, std::vector<ValueId> in, Attributes a = {}) {
    Node n;
    n.name = name;
    n.kind = kind;
    n.attrs = std::move(a);
    n.inputs = std::move(in);
    n.outputs = {g.add_value(name)};
    layers.push_back(g.add_node(n));
    return n.outputs[0];
  }
  ValueId conv(const std::string& name, ValueId x, int64_t cin, int64_t cout, int64_t k,
               int64_t stride, int64_t group, const std::string& act) {
    Attributes a;
    const int64_t p = k / 2;
    a.set("pads", Ints{p, p, p, p});
    a.set("strides", Ints{stride, stride});
    a.set("group", group);
    testing::set_fused_activation(a, act, 0.f, 6.f);
    const float scale = 1.5f / std::sqrt(static_cast<float>(cin / group * k * k));
    return node(OpKind::kConv, name,
                {x,
                 g.add_constant(name + ".w", random_tensor(Shape{cout, cin / group, k, k}, seed++,
                                                           -scale, scale)),
                 g.add_constant(name + ".b", random_tensor(Shape{cout}, seed++, -0.1f, 0.1f))},
                std::move(a));
  }

  Net() {
    const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{2, 3, 29, 31}});
    g.inputs().push_back(x);
    feeds.push_back(random_tensor(Shape{2, 3, 29, 31}, seed++));
    const ValueId stem = conv("stem", x, 3, 24, 3, 2, 1, "relu");
    Attributes pool;
    pool.set("kernel_shape", Ints{3, 3});
    pool.set("strides", Ints{2, 2});
    pool.set("pads", Ints{1, 1, 1, 1});
    const ValueId p = node(OpKind::kMaxPool, "pool", {stem}, pool);
    const ValueId c1 = conv("c1", p, 24, 24, 3, 1, 1, "relu");
    const ValueId c2 = conv("c2", c1, 24, 24, 3, 1, 1, "");
    Attributes relu;
    relu.set("activation", std::string("relu"));
    const ValueId sum = node(OpKind::kAdd, "add", {c2, p}, relu);
    const ValueId dw = conv("dw", sum, 24, 24, 3, 1, 24, "clip");
    const ValueId gap = node(OpKind::kGlobalAveragePool, "gap", {dw});
    Attributes flat;
    flat.set("axis", int64_t{1});
    const ValueId f = node(OpKind::kFlatten, "flatten", {gap}, flat);
    Attributes gemm;
    gemm.set("transB", int64_t{1});
    const ValueId y =
        node(OpKind::kGemm, "fc",
             {f, g.add_constant("fc.w", random_tensor(Shape{10, 24}, seed++, -0.3f, 0.3f)),
              g.add_constant("fc.b", random_tensor(Shape{10}, seed++, -0.1f, 0.1f))},
             gemm);
    g.outputs() = {y, dw};
    EXPECT_TRUE(g.infer_shapes().ok());
  }
};

std::vector<Tensor> run_on(Program& p, const std::vector<Tensor>& feeds) {
  std::vector<Tensor> out(p.output_values().size());
  Status st = p.run(feeds, out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return out;
}

// A bf16 convolution of few input channels (oneDNN 2.6's AMX kernel for it folds the window's
// columns into the reduction, so that an infinity or NaN times a zero weight turned outputs
// three columns away into NaN): an infinity or NaN anywhere in the input gives NaN exactly where
// the reference does, and the finite outputs within bf16's bound. Rules kernels (the bf16
// convolution itself, not a measured f32 one), 1 and 2 threads.
TEST(CpuBf16Program, NonFiniteInputsStayWhereTheyAre) {
  if (!cpu::onednn_bf16_available()) GTEST_SKIP() << "no bf16 oneDNN kernels on this CPU";
  // cin 8 with group 8: depthwise, which runs without the f32 fallback (no channels to fold).
  for (const int64_t cin : {3, 4, 8, -8}) {
    const int64_t group = cin < 0 ? -cin : 1;
    Graph g;
    const Shape shape{1, cin < 0 ? -cin : cin, 9, 11};
    const ValueId x = g.add_value("x", TensorInfo{DType::kF32, shape});
    g.inputs().push_back(x);
    Node conv;
    conv.name = "conv";
    conv.kind = OpKind::kConv;
    conv.attrs.set("pads", Ints{1, 1, 1, 1});
    conv.attrs.set("group", group);
    const int64_t cout = group > 1 ? group : 5;
    conv.inputs = {x, g.add_constant("w", random_tensor(Shape{cout, shape[1] / group, 3, 3}, 17))};
    conv.outputs = {g.add_value("y")};
    g.add_node(conv);
    g.outputs() = conv.outputs;
    ASSERT_TRUE(g.infer_shapes().ok());
    auto ref_dev = open_device("reference");
    ASSERT_TRUE(ref_dev.ok());
    const std::vector<NodeId> layers = {0};
    auto ref = (*ref_dev)->compile(g, layers);
    ASSERT_TRUE(ref.ok());
    for (int threads : {1, 2}) {
      std::shared_ptr<cpu::ThreadPool> pool = testing::cpu_pool_on_first_cores(threads);
      if (pool == nullptr) continue;
      auto p = cpu::CpuProgram::compile(g, layers, pool, nullptr, cpu::KernelChoice::kRules,
                                        Precision::kBf16);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      const float specials[] = {std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN()};
      const int64_t at[] = {0, shape.numel() - 1, shape.numel() / 2 + 5, 4 * 11 + 10};
      for (const float special : specials) {
        for (const int64_t where : at) {
          SCOPED_TRACE("cin " + std::to_string(cin) + " threads " + std::to_string(threads) +
                       " value " + std::to_string(special) + " at " + std::to_string(where));
          Tensor in = random_tensor(shape, 5);
          in.data<float>()[where] = special;
          const std::vector<Tensor> want = run_on(**ref, {in});
          const std::vector<Tensor> got = run_on(**p, {in});
          ASSERT_EQ(got.size(), 1u);
          for (int64_t i = 0; i < want[0].numel(); ++i) {
            const float w = want[0].data<float>()[i], v = got[0].data<float>()[i];
            ASSERT_EQ(std::isnan(v), std::isnan(w))
                << "output " << i << ": " << v << " vs " << w << "\n"
                << (*p)->describe();
            if (std::isfinite(w)) {
              ASSERT_NEAR(v, w, 2e-2 * (std::fabs(w) + 1)) << i;
            }
          }
        }
      }
    }
  }
}

// Tessera's bf16 GEMV (gemv.h) against a brute-force oracle: the sum in double of the bf16
// weights times the bf16 inputs, plus the f32 bias, clamped; the kernel's bf16 output within
// half a bf16 step of it (its rounding) plus f32 accumulation error. Odd and tiny K (the pair
// with a zero), N across panel widths and tails, W in both orders, 1 and 2 threads.
TEST(Bf16Gemv, MatchesBruteForce) {
  if (!cpu::has_avx512_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  struct Case {
    int64_t k, n;
  };
  const Case cases[] = {{1, 1},   {2, 15},   {3, 16},     {17, 64},
                        {33, 65}, {64, 200}, {1001, 130}, {4097, 77}};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (const Case& c : cases) {
    for (const bool kxn : {false, true}) {
      for (const bool with_bias : {false, true}) {
        SCOPED_TRACE("k " + std::to_string(c.k) + " n " + std::to_string(c.n) +
                     (kxn ? " kxn" : " nxk") + (with_bias ? " bias" : ""));
        std::vector<float> w(static_cast<size_t>(c.k * c.n)), bias(static_cast<size_t>(c.n));
        for (float& v : w) v = u(rng);
        for (float& v : bias) v = u(rng);
        std::vector<uint16_t> x(static_cast<size_t>(c.k));
        for (uint16_t& v : x) v = cpu::f32_to_bf16(u(rng));
        const auto weight = [&](int64_t p, int64_t j) {
          return cpu::bf16_to_f32(
              cpu::f32_to_bf16(w[static_cast<size_t>(kxn ? p * c.n + j : j * c.k + p)]));
        };
        cpu::SharedPacking<cpu::PackedGemvBf16> packed;
        packed.packed = std::make_shared<const cpu::PackedGemvBf16>(
            cpu::PackedGemvBf16::pack(w.data(), c.k, c.n, kxn, with_bias ? bias.data() : nullptr));
        for (const float lo : {-std::numeric_limits<float>::infinity(), 0.f}) {
          const float hi = lo == 0.f ? 0.5f : std::numeric_limits<float>::infinity();
          for (int threads : {1, 2}) {
            std::shared_ptr<cpu::ThreadPool> pool = testing::cpu_pool_on_first_cores(threads);
            if (pool == nullptr) continue;
            cpu::GemvBf16 gemv(packed);
            gemv.bind(threads);
            std::vector<uint16_t> y(static_cast<size_t>(c.n), 0xFFFF);
            Status st = pool->run([&] { return gemv.run(*pool, x.data(), y.data(), lo, hi); });
            ASSERT_TRUE(st.ok()) << st.to_string();
            for (int64_t j = 0; j < c.n; ++j) {
              double sum = with_bias ? bias[static_cast<size_t>(j)] : 0.0, mag = std::fabs(sum);
              for (int64_t p = 0; p < c.k; ++p) {
                const double t = double(weight(p, j)) * cpu::bf16_to_f32(x[static_cast<size_t>(p)]);
                sum += t;
                mag += std::fabs(t);
              }
              const double want = std::min<double>(std::max<double>(sum, lo), hi);
              const double got = cpu::bf16_to_f32(y[static_cast<size_t>(j)]);
              ASSERT_NEAR(got, want, std::ldexp(std::fabs(want), -8) + 1e-6 * mag)
                  << "column " << j;
            }
          }
        }
      }
    }
  }
}

TEST(CpuBf16Program, TensorsStayBf16BetweenBf16Layers) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    std::shared_ptr<cpu::ThreadPool> pool = testing::cpu_pool_on_first_cores(threads);
    if (pool == nullptr) GTEST_SKIP() << "fewer than " << threads << " cores";
    Net net;
    auto p = cpu::CpuProgram::compile(net.g, net.layers, pool, nullptr, cpu::KernelChoice::kRules,
                                      Precision::kBf16);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    const std::string d = (*p)->describe();
    // Every conv, the pools, the Flatten (a view) and the Gemm run in bf16; the Add is fused
    // into c2 (a sum post-op).
    EXPECT_EQ((*p)->num_bf16_layers(), 8) << d;
    EXPECT_NE(d.find("residual add fused into 'c2'"), std::string::npos) << d;
    EXPECT_NE(d.find("onednn bf16 conv 3x3/1 depthwise +clip"), std::string::npos) << d;
    EXPECT_NE(d.find("pool: tessera bf16 maxpool 3x3/2"), std::string::npos) << d;
    // One conversion: the input into bf16 NHWC (one pass, with the transpose); the pooled
    // vector reaches the Gemm through the Flatten's view in bf16.
    EXPECT_EQ((*p)->num_conversions(), 1) << d;
    EXPECT_NE(d.find("flatten: tessera bf16 reshape (alias, no copy)"), std::string::npos) << d;
    EXPECT_NE(d.find("convert NCHW f32->NHWC bf16"), std::string::npos) << d;

    auto ref_dev = open_device("reference");
    ASSERT_TRUE(ref_dev.ok());
    auto ref = (*ref_dev)->compile(net.g, net.layers);
    ASSERT_TRUE(ref.ok());
    const std::vector<Tensor> want = run_on(**ref, net.feeds);
    for (int rep = 0; rep < 2; ++rep) {
      const std::vector<Tensor> got = run_on(**p, net.feeds);
      ASSERT_EQ(got.size(), want.size());
      for (size_t o = 0; o < got.size(); ++o) {
        FidelityMeter m;
        ASSERT_TRUE(m.add(std::vector<Tensor>{got[o]}, std::vector<Tensor>{want[o]}).ok());
        // Six bf16 layers deep: each rounds its operands to 2^-9 relative.
        EXPECT_LT(m.result().relative_l2, 2e-2) << "output " << o;
        EXPECT_GT(m.result().relative_l2, 0.0) << "output " << o << " is exact: not bf16?";
      }
    }
  }
}

// A DenseNet-style pre-activation (Concat, BatchNormalization + ReLU, conv) and a
// squeeze-and-excitation gate (GAP, two 1x1 convs, Sigmoid, Mul with the gate first): the
// BatchNormalization and the Mul run on bf16 tensors, and the tensors they read and write are
// never converted; as close to f32 as the other bf16 networks.
TEST(CpuBf16Program, BatchNormAndGateStayBf16) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    std::shared_ptr<cpu::ThreadPool> pool = testing::cpu_pool_on_first_cores(threads);
    if (pool == nullptr) GTEST_SKIP() << "fewer than " << threads << " cores";
    Net net;  // its layers, then these after them
    Net& b = net;
    b.g = Graph();
    b.layers.clear();
    b.feeds.clear();
    const ValueId x = b.g.add_value("x", TensorInfo{DType::kF32, Shape{2, 3, 15, 13}});
    b.g.inputs().push_back(x);
    b.feeds.push_back(random_tensor(Shape{2, 3, 15, 13}, 77));
    const ValueId stem = b.conv("stem", x, 3, 20, 3, 1, 1, "relu");
    const ValueId grow = b.conv("grow", stem, 20, 12, 3, 1, 1, "");
    const ValueId cat = b.node(OpKind::kConcat, "cat", {stem, grow}, [] {
      Attributes a;
      a.set("axis", int64_t{1});
      return a;
    }());
    const int64_t c = 32;
    Attributes bn;
    bn.set("epsilon", 1e-5f);
    bn.set("activation", std::string("relu"));
    const ValueId norm =
        b.node(OpKind::kBatchNormalization, "norm",
               {cat, b.g.add_constant("norm.gamma", random_tensor(Shape{c}, 5, 0.5f, 1.5f)),
                b.g.add_constant("norm.beta", random_tensor(Shape{c}, 6, -0.5f, 0.5f)),
                b.g.add_constant("norm.mean", random_tensor(Shape{c}, 7, -0.2f, 0.2f)),
                b.g.add_constant("norm.var", random_tensor(Shape{c}, 8, 0.5f, 1.5f))},
               bn);
    const ValueId body = b.conv("body", norm, c, c, 3, 1, 1, "relu");
    const ValueId sq = b.node(OpKind::kGlobalAveragePool, "squeeze", {body});
    const ValueId fc1 = b.conv("fc1", sq, c, 8, 1, 1, 1, "relu");
    const ValueId gate = b.node(OpKind::kSigmoid, "gate", {b.conv("fc2", fc1, 8, c, 1, 1, 1, "")});
    const ValueId excite = b.node(OpKind::kMul, "excite", {gate, body});
    b.g.outputs() = {b.conv("project", excite, c, 16, 1, 1, 1, "")};
    ASSERT_TRUE(b.g.infer_shapes().ok());
    auto p = cpu::CpuProgram::compile(b.g, b.layers, pool, nullptr, cpu::KernelChoice::kRules,
                                      Precision::kBf16);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    const std::string d = (*p)->describe();
    EXPECT_NE(d.find("norm: tessera bf16 batchnorm scale-shift +relu"), std::string::npos) << d;
    EXPECT_NE(d.find("excite: tessera bf16 mul by channel gate"), std::string::npos) << d;
    // No conversion right before the BatchNormalization, the Mul or the projection.
    for (const char* layer : {"\nnorm:", "\nexcite:", "\nproject:"}) {
      const size_t at = d.find(layer);
      ASSERT_NE(at, std::string::npos) << layer << "\n" << d;
      const size_t line = d.rfind('\n', at - 1);
      EXPECT_EQ(d.substr(line + 1, at - line - 1).find("convert"), std::string::npos)
          << layer << "\n"
          << d;
    }
    auto ref_dev = open_device("reference");
    ASSERT_TRUE(ref_dev.ok());
    auto ref = (*ref_dev)->compile(b.g, b.layers);
    ASSERT_TRUE(ref.ok());
    const std::vector<Tensor> want = run_on(**ref, b.feeds);
    const std::vector<Tensor> got = run_on(**p, b.feeds);
    ASSERT_EQ(got.size(), 1u);
    FidelityMeter m;
    ASSERT_TRUE(m.add(got, want).ok());
    EXPECT_LT(m.result().relative_l2, 2e-2) << d;
    EXPECT_GT(m.result().relative_l2, 0.0) << "exact: not bf16?";
  }
}

TEST(CpuBf16Program, CompileOptionSelectsPrecision) {
  Net net;
  auto cpu = open_device("cpu:0");
  ASSERT_TRUE(cpu.ok());
  EXPECT_TRUE((*cpu)->has_precision(Precision::kBf16));
  EXPECT_TRUE((*cpu)->has_precision(Precision::kInt8));
  CompileOptions o;
  o.precision = Precision::kBf16;
  auto p = (*cpu)->compile(net.g, net.layers, o);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_NE((*p)->describe().find("onednn bf16"), std::string::npos);
  auto f32 = (*cpu)->compile(net.g, net.layers);
  ASSERT_TRUE(f32.ok());
  EXPECT_EQ((*f32)->describe().find("bf16"), std::string::npos);
  // A device without the precision says so.
  auto ref = open_device("reference");
  ASSERT_TRUE(ref.ok());
  auto r = (*ref)->compile(net.g, net.layers, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("bf16"), std::string::npos);
  // int8 needs calibrated ranges (cpu_int8_test.cc).
  o.precision = Precision::kInt8;
  EXPECT_EQ((*cpu)->compile(net.g, net.layers, o).status().code(), StatusCode::kFailedPrecondition);
  // A precision-level device compiles at its level whatever the options say.
  auto level = open_device("cpu:0#bf16");
  ASSERT_TRUE(level.ok());
  auto lp = (*level)->compile(net.g, net.layers);
  ASSERT_TRUE(lp.ok()) << lp.status().to_string();
  EXPECT_NE((*lp)->describe().find("onednn bf16"), std::string::npos);
}

// CompileOptions::keep_reduced: a layer compiled alone at bf16 keeps its bf16 kernel even where
// the measured choice gives it to f32. A 1x1 convolution of 4 channels on a 2x2 map is all
// conversion: measured, f32 wins (cpu_program.cc times the bf16 kernel with its conversions;
// "f32: measured faster than its reduced kernel" on the AMX host).
TEST(CpuBf16Program, KeepReducedKeepsTheReducedKernel) {
  if (!cpu::onednn_bf16_available()) GTEST_SKIP() << "no oneDNN bf16 on this CPU";
  testing::ScopedEnv measured("TESSERA_CPU_KERNELS", "measured");
  testing::ScopedEnv no_cache("TESSERA_CPU_KERNEL_CACHE", "off");
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 4, 2, 2}});
  g.inputs().push_back(x);
  Node n;
  n.name = "conv";
  n.kind = OpKind::kConv;
  n.inputs = {x, g.add_constant("w", random_tensor(Shape{4, 4, 1, 1}, 3, -1.f, 1.f))};
  n.outputs = {g.add_value("y")};
  g.outputs() = {n.outputs[0]};
  const NodeId id = g.add_node(n);
  ASSERT_TRUE(g.infer_shapes().ok());
  auto dev = open_device("cpu:0#bf16");
  ASSERT_TRUE(dev.ok());
  const std::vector<NodeId> layers = {id};
  CompileOptions keep;
  keep.keep_reduced = true;
  for (int i = 0; i < 3; ++i) {
    auto p = (*dev)->compile(g, layers, keep);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_NE((*p)->describe().find("bf16 conv"), std::string::npos) << (*p)->describe();
  }
}

// The exported ResNet-18 and MobileNetV2 (skipped where not exported; the model tests check their
// outputs): every convolution, pool, the Flatten (a view) and the classifier in bf16, every
// residual Add fused, and the only conversion the input's.
TEST(CpuBf16Program, ModelsStayBf16EndToEnd) {
  const char* env = std::getenv("TESSERA_MODEL_DIR");
  const char* home = std::getenv("HOME");
  if (env == nullptr && home == nullptr) GTEST_SKIP() << "neither TESSERA_MODEL_DIR nor HOME set";
  const std::string dir = env != nullptr ? env : std::string(home) + "/.cache/tessera/models";
  std::shared_ptr<cpu::ThreadPool> pool = testing::cpu_pool_on_first_cores(1);
  ASSERT_NE(pool, nullptr);
  for (const char* name : {"resnet18", "mobilenet_v2"}) {
    SCOPED_TRACE(name);
    const std::string path = dir + "/" + name + ".onnx";
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not exported";
    auto model = convert_onnx(path);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    const Graph& g = model->graph;
    std::vector<NodeId> layers(static_cast<size_t>(g.num_nodes()));
    int heavy = 0;
    for (size_t i = 0; i < layers.size(); ++i) {
      layers[i] = static_cast<NodeId>(i);
      const OpKind k = g.node(layers[i]).kind;
      heavy += k == OpKind::kConv || k == OpKind::kMaxPool || k == OpKind::kGlobalAveragePool ||
                       k == OpKind::kGemm || k == OpKind::kFlatten
                   ? 1
                   : 0;
    }
    auto p = cpu::CpuProgram::compile(g, layers, pool, nullptr, cpu::KernelChoice::kRules,
                                      Precision::kBf16);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    const std::string d = (*p)->describe();
    EXPECT_EQ((*p)->num_bf16_layers(), heavy) << d;
    // The input into bf16 only; the Flatten is a view of the pooled bf16 vector.
    EXPECT_EQ((*p)->num_conversions(), 1) << d;
    EXPECT_EQ(d.find("residual add fused") == std::string::npos, false) << d;
    EXPECT_EQ(d.find(": xnnpack"), std::string::npos) << d;
    // The classifier at batch 1 on Tessera's bf16 GEMV, where the CPU has AVX512_BF16.
    if (cpu::has_avx512_bf16()) {
      EXPECT_NE(d.find("tessera bf16 gemv"), std::string::npos) << d;
    }
  }
}

#endif  // TESSERA_HAVE_ONEDNN

}  // namespace
}  // namespace tessera
