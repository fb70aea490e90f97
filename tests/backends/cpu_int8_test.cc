// int8 on the cpu device (docs/precision.md): the f32 <-> int8 conversions against a brute-force
// oracle, oneDNN's and XNNPACK's int8 convolutions and oneDNN's matmuls against a scalar int8
// reference written here (quantise, integer accumulate, requantise), a residual network that
// stays int8 between its int8 layers (on either library's kernels), calibration (methods, the
// sidecar table's schema) and hostile calibration input.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string_view>

#include "backends/cpu/cpu_program.h"
#include "backends/cpu/gemv.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/layout.h"
#include "backends/cpu/onednn.h"
#include "backends/cpu/simd.h"
#include "backends/registry.h"
#include "scheduler/calibrate.h"
#include "scheduler/fidelity.h"
#include "tests/backends/backend_test_util.h"
#include "tests/backends/cpu_test_util.h"
#include "tests/scoped_env.h"

namespace tessera {
namespace {

using Ints = std::vector<int64_t>;
using cpu::QuantParam;
using testing::random_tensor;

// Round half to even, by brute force: the two integers around x and the distances to them.
double round_even(double x) {
  const double lo = std::floor(x), hi = lo + 1;
  if (x - lo < hi - x) return lo;
  if (hi - x < x - lo) return hi;
  return std::fmod(lo, 2.0) == 0 ? lo : hi;
}

// The oracle's quantisation: q = clamp(round_even(x * (1 / scale))) into u8 or s8, NaN -> 0
// (the product in f32, as the conversions compute it: x / scale may round differently at ties).
// ONNX's QuantizeLinear: round_even(x / scale) + zero_point, saturated; NaN (no int8 value) ->
// the zero point, a real 0.
int quantize_ref(float x, QuantParam q) {
  if (std::isnan(x)) return q.zero_point;
  const double lo = q.is_unsigned ? 0 : -128, hi = q.is_unsigned ? 255 : 127;
  const double r = round_even(static_cast<double>(x / q.scale)) + q.zero_point;
  return static_cast<int>(std::clamp(r, lo, hi));
}

TEST(Int8, QuantParamFromRange) {
  QuantParam u = QuantParam::from_range(0.f, 5.1f);
  EXPECT_TRUE(u.is_unsigned);
  EXPECT_FLOAT_EQ(u.scale, 5.1f / 255);
  QuantParam s = QuantParam::from_range(-2.f, 1.27f);
  EXPECT_FALSE(s.is_unsigned);
  EXPECT_FLOAT_EQ(s.scale, 2.f / 127);
  QuantParam z = QuantParam::from_range(0.f, 0.f);
  EXPECT_TRUE(z.valid());  // a tiny scale: everything quantises to 0
}

// canonical(): the same grid without a zero point where one exists; quantising into either
// form gives the same real values.
TEST(Int8, CanonicalQuantisationIsTheSameGrid) {
  EXPECT_EQ((QuantParam{0.5f, false, -128}.canonical()), (QuantParam{0.5f, true, 0}));
  EXPECT_EQ((QuantParam{0.5f, true, 128}.canonical()), (QuantParam{0.5f, false, 0}));
  EXPECT_EQ((QuantParam{0.5f, true, 127}.canonical()), (QuantParam{0.5f, true, 127}));
  EXPECT_EQ((QuantParam{0.5f, false, -5}.canonical()), (QuantParam{0.5f, false, -5}));
  for (QuantParam q : {QuantParam{0.031f, false, -128}, QuantParam{0.017f, true, 128}}) {
    const QuantParam c = q.canonical();
    for (float x = -9.f; x <= 9.f; x += 0.0037f) {
      const float a = q.scale * static_cast<float>(quantize_ref(x, q) - q.zero_point);
      const float b = c.scale * static_cast<float>(quantize_ref(x, c) - c.zero_point);
      ASSERT_EQ(a, b) << x;
    }
  }
}

TEST(Int8, ConversionsMatchBruteForce) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-3.f, 3.f);
  for (QuantParam q : {QuantParam{0.0123f, false}, QuantParam{0.0071f, true},
                       QuantParam{0.0123f, false, -7}, QuantParam{0.0071f, true, 131}}) {
    SCOPED_TRACE(std::to_string(q.is_unsigned) + " zp " + std::to_string(q.zero_point));
    const int64_t n = 70001;  // over the pool's split threshold, with a tail
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      x[static_cast<size_t>(i)] = d(rng);
      // Exact ties k + 1/2 steps (inside and outside the range), NaN, infinities.
      if (i % 5 == 0) x[static_cast<size_t>(i)] = q.scale * (static_cast<float>(i % 300) - 150.5f);
    }
    x[7] = std::numeric_limits<float>::quiet_NaN();
    x[11] = std::numeric_limits<float>::infinity();
    x[13] = -std::numeric_limits<float>::infinity();
    std::vector<uint8_t> buf(static_cast<size_t>(n));
    std::vector<float> back(static_cast<size_t>(n));
    auto pool = testing::cpu_pool_on_first_cores(1);
    ASSERT_NE(pool, nullptr);
    cpu::quantize_array(x.data(), buf.data(), n, q, pool.get());
    cpu::dequantize_array(buf.data(), back.data(), n, q, pool.get());
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      const int got = q.is_unsigned ? buf[k] : static_cast<int8_t>(buf[k]);
      ASSERT_EQ(got, quantize_ref(x[k], q)) << i << ": " << x[k];
      ASSERT_EQ(back[k], q.scale * static_cast<float>(got - q.zero_point)) << i;
    }
    // The transposing pair: NCHW f32 -> NHWC int8 -> NCHW f32 equals the plain round trip.
    const int64_t nn = 2, c = 13, hw = 7 * 5;
    const Tensor t = random_tensor(Shape{nn, c, 7, 5}, 4, -2.f, 2.f);
    std::vector<uint8_t> nhwc(static_cast<size_t>(t.numel()));
    std::vector<float> nchw(static_cast<size_t>(t.numel()));
    cpu::nchw_f32_to_nhwc_int8(t.data<float>(), nhwc.data(), nn, c, hw, q, pool.get());
    cpu::nhwc_int8_to_nchw_f32(nhwc.data(), nchw.data(), nn, c, hw, q, pool.get());
    for (int64_t img = 0; img < nn; ++img) {
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t p = 0; p < hw; ++p) {
          const size_t at = static_cast<size_t>((img * c + ch) * hw + p);
          const size_t at_nhwc = static_cast<size_t>((img * hw + p) * c + ch);
          const int want = quantize_ref(t.data<float>()[at], q);
          const int got = q.is_unsigned ? nhwc[at_nhwc] : static_cast<int8_t>(nhwc[at_nhwc]);
          ASSERT_EQ(got, want) << at;
          ASSERT_EQ(nchw[at], q.scale * static_cast<float>(want - q.zero_point));
        }
      }
    }
  }
}

// The tests below that name oneDNN's kernels skip where this build has none (aarch64); the
// XNNPACK int8 kernels run everywhere.

// A table with the given ranges.
std::shared_ptr<const CalibrationTable> table_of(
    std::initializer_list<std::pair<std::string, std::pair<float, float>>> r) {
  auto t = std::make_shared<CalibrationTable>();
  t->method = "minmax";
  for (const auto& [name, range] : r) t->ranges[name] = range;
  return t;
}

std::pair<float, float> range_of(const Tensor& t) {
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    lo = std::min(lo, t.data<float>()[i]);
    hi = std::max(hi, t.data<float>()[i]);
  }
  return {lo, hi};
}

std::vector<Tensor> run_program(Program& p, const std::vector<Tensor>& feeds) {
  std::vector<Tensor> out(p.output_values().size());
  Status st = p.run(feeds, out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return out;
}

// Per-output-channel s8 weights as the oracle makes them: s[oc] = max |w[oc]| / 127, q = w / s
// rounded to even, the division in f32 as the kernels make them (in double it may round
// differently at a tie).
void quantize_weights_ref(const float* w, int64_t rows, int64_t cols, std::vector<int>* wq,
                          std::vector<double>* s) {
  wq->assign(static_cast<size_t>(rows * cols), 0);
  s->assign(static_cast<size_t>(rows), 1.0);
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0;
    for (int64_t i = 0; i < cols; ++i) m = std::max(m, std::fabs(double{w[r * cols + i]}));
    const double sc = m > 0 ? static_cast<float>(m) / 127.f : 1.0;
    (*s)[static_cast<size_t>(r)] = sc;
    for (int64_t i = 0; i < cols; ++i) {
      (*wq)[static_cast<size_t>(r * cols + i)] = static_cast<int>(
          std::clamp(round_even(w[r * cols + i] / static_cast<float>(sc)), -127.0, 127.0));
    }
  }
}

double activate(double v, const std::string& act) {
  if (act == "relu") return std::max(v, 0.0);
  if (act == "clip") return std::clamp(v, 0.0, 6.0);
  if (act == "sigmoid") return 1 / (1 + std::exp(-v));
  return v;
}

struct ConvCase {
  Shape x;
  int64_t cout, k, stride, pad, group;
  std::string act;
  bool unsigned_input;  // x >= 0: a u8 input
};

// One Conv against the scalar int8 reference: quantise x and w, accumulate in integers, add the
// bias and scale in double, activate, requantise into the output's int8 and dequantise. oneDNN
// computes the same in f32, so an element may differ by one step where f32 rounding moves a value
// across a rounding boundary; nearly all must be equal.
// The grouped case {1, 12, 9, 9} g3 runs on oneDNN's gemm int8 convolution, which needs a
// scratchpad: it once crashed through oneDNN's library-managed one (the kernels own theirs now).
TEST(Int8Conv, MatchesScalarInt8Reference) {
  // The int8 kernel is under test: measured choice could give these small layers their f32 one.
  testing::ScopedEnv rules("TESSERA_CPU_KERNELS", "rules");
  const std::vector<ConvCase> cases = {
      {{1, 5, 13, 11}, 8, 3, 1, 1, 1, "relu", false},    {{2, 7, 17, 13}, 9, 3, 2, 1, 1, "", false},
      {{1, 16, 13, 13}, 16, 3, 1, 1, 16, "clip", true},  {{1, 12, 9, 9}, 6, 3, 1, 0, 3, "", true},
      {{1, 33, 7, 7}, 13, 1, 1, 0, 1, "sigmoid", false},
  };
  uint32_t seed = 21;
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.x.to_string() + " k" + std::to_string(c.k) + " g" + std::to_string(c.group) +
                 " " + c.act);
    const int64_t cin = c.x[1], cin_g = cin / c.group, cout_g = c.cout / c.group;
    Graph g;
    const ValueId x = g.add_value("x", TensorInfo{DType::kF32, c.x});
    g.inputs().push_back(x);
    const Tensor w = random_tensor(Shape{c.cout, cin_g, c.k, c.k}, seed++, -0.5f, 0.5f);
    const Tensor b = random_tensor(Shape{c.cout}, seed++, -0.3f, 0.3f);
    Node n;
    n.name = "conv";
    n.kind = OpKind::kConv;
    n.attrs.set("pads", Ints{c.pad, c.pad, c.pad, c.pad});
    n.attrs.set("strides", Ints{c.stride, c.stride});
    n.attrs.set("group", c.group);
    testing::set_fused_activation(n.attrs, c.act, 0.f, 6.f);
    n.inputs = {x, g.add_constant("w", w), g.add_constant("b", b)};
    n.outputs = {g.add_value("y")};
    g.outputs() = {n.outputs[0]};
    const NodeId id = g.add_node(n);
    ASSERT_TRUE(g.infer_shapes().ok());
    const Tensor xin =
        random_tensor(c.x, seed++, c.unsigned_input ? 0.f : -1.5f, c.unsigned_input ? 2.f : 1.f);
    // The f32 output's range calibrates y.
    auto ref_dev = open_device("reference");
    ASSERT_TRUE(ref_dev.ok());
    std::vector<NodeId> layers = {id};
    auto ref = (*ref_dev)->compile(g, layers);
    ASSERT_TRUE(ref.ok());
    const Tensor yref = run_program(**ref, {xin})[0];
    CompileOptions o;
    o.calibration = table_of({{"x", range_of(xin)}, {"y", range_of(yref)}});
    const QuantParam qx = QuantParam::from_range(range_of(xin).first, range_of(xin).second);
    const QuantParam qy = QuantParam::from_range(range_of(yref).first, range_of(yref).second);
    EXPECT_EQ(qx.is_unsigned, c.unsigned_input);
    for (const char* device : {"cpu#int8", "cpu:0#int8", "cpu:0#int8 on xnnpack"}) {
      SCOPED_TRACE(device);
      // The last: XNNPACK's int8 convolution (s8 grids). It declines the sigmoid, which then
      // runs in f32 from end to end (no int8 layer quantises anything): not the oracle's case.
      const bool xnn = std::string_view(device).ends_with("xnnpack");
      if (!xnn && !cpu::onednn_available()) continue;
      std::optional<testing::ScopedEnv> env;
      if (xnn) env.emplace("TESSERA_CPU_INT8_KERNELS", "xnnpack");
      auto dev = open_device(xnn ? "cpu:0#int8" : device);
      ASSERT_TRUE(dev.ok()) << dev.status().to_string();
      auto p = (*dev)->compile(g, layers, o);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      if (xnn && c.act == "sigmoid") {
        EXPECT_EQ((*p)->describe().find("int8"), std::string::npos) << (*p)->describe();
        continue;
      }
      const char* kernel = xnn ? "xnnpack int8 conv" : "onednn int8 conv";
      ASSERT_NE((*p)->describe().find(kernel), std::string::npos) << (*p)->describe();
      const Tensor got = run_program(**p, {xin})[0];
      ASSERT_EQ(got.shape(), yref.shape());
      // The oracle.
      std::vector<int> wq;
      std::vector<double> ws;
      quantize_weights_ref(w.data<float>(), c.cout, cin_g * c.k * c.k, &wq, &ws);
      const int64_t oh = yref.dim(2), ow = yref.dim(3), ih = c.x[2], iw = c.x[3];
      int64_t off_by_one = 0;
      for (int64_t img = 0; img < c.x[0]; ++img) {
        for (int64_t oc = 0; oc < c.cout; ++oc) {
          const int64_t grp = oc / cout_g;
          for (int64_t oy = 0; oy < oh; ++oy) {
            for (int64_t ox = 0; ox < ow; ++ox) {
              int64_t acc = 0;
              for (int64_t ic = 0; ic < cin_g; ++ic) {
                for (int64_t ky = 0; ky < c.k; ++ky) {
                  for (int64_t kx = 0; kx < c.k; ++kx) {
                    const int64_t iy = oy * c.stride - c.pad + ky, ix = ox * c.stride - c.pad + kx;
                    if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) continue;
                    const int64_t ch = grp * cin_g + ic;
                    const float xv = xin.data<float>()[((img * cin + ch) * ih + iy) * iw + ix];
                    acc += static_cast<int64_t>(quantize_ref(xv, qx)) *
                           wq[static_cast<size_t>(((oc * cin_g + ic) * c.k + ky) * c.k + kx)];
                  }
                }
              }
              const double real = static_cast<double>(qx.scale) * ws[static_cast<size_t>(oc)] *
                                      static_cast<double>(acc) +
                                  b.data<float>()[oc];
              const int want = quantize_ref(static_cast<float>(activate(real, c.act)), qy);
              const float g_val = got.data<float>()[((img * c.cout + oc) * oh + oy) * ow + ox];
              const double steps = g_val / static_cast<double>(qy.scale) - want;
              ASSERT_LE(std::fabs(steps), 1.0 + 1e-3)
                  << "oc " << oc << " (" << oy << ", " << ox << "): " << g_val << " vs "
                  << want * qy.scale;
              off_by_one += std::fabs(steps) > 0.5 ? 1 : 0;
            }
          }
        }
      }
      EXPECT_LE(off_by_one, std::max<int64_t>(2, got.numel() / 50)) << got.numel();
    }
  }
}

// Gemm (transB, bias) and MatMul on an int8 input: s8 weights per output column, f32 output.
TEST(Int8MatMul, MatchesScalarInt8Reference) {
  if (!cpu::onednn_available()) GTEST_SKIP() << "no oneDNN in this build";
  testing::ScopedEnv rules("TESSERA_CPU_KERNELS", "rules");  // the int8 kernel under test
  for (const int64_t m : {3, 1}) {
    for (bool gemm : {true, false}) {
      SCOPED_TRACE(std::string(gemm ? "Gemm" : "MatMul") + " batch " + std::to_string(m));
      const int64_t k = 37, nn = 11;
      Graph g;
      const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{m, k}});
      g.inputs().push_back(x);
      // Gemm: W is [n, k] (transB); MatMul: W is [k, n].
      const Tensor w = random_tensor(gemm ? Shape{nn, k} : Shape{k, nn}, 5, -0.4f, 0.4f);
      const Tensor b = random_tensor(Shape{nn}, 6, -1.f, 1.f);
      Node n;
      n.name = "fc";
      n.kind = gemm ? OpKind::kGemm : OpKind::kMatMul;
      n.inputs = {x, g.add_constant("w", w)};
      if (gemm) {
        n.attrs.set("transB", int64_t{1});
        n.inputs.push_back(g.add_constant("b", b));
      }
      n.outputs = {g.add_value("y")};
      g.outputs() = {n.outputs[0]};
      const NodeId id = g.add_node(n);
      ASSERT_TRUE(g.infer_shapes().ok());
      const Tensor xin = random_tensor(Shape{m, k}, 7, -2.f, 1.f);
      CompileOptions o;
      o.calibration = table_of({{"x", range_of(xin)}, {"y", {-100.f, 100.f}}});
      const QuantParam qx = QuantParam::from_range(range_of(xin).first, range_of(xin).second);
      auto dev = open_device("cpu:0#int8");
      ASSERT_TRUE(dev.ok());
      std::vector<NodeId> layers = {id};
      auto p = (*dev)->compile(g, layers, o);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      // At batch 1 Tessera's int8 GEMV where the CPU has VNNI, else oneDNN's matmul.
      const bool gemv = m == 1 && cpu::has_avx512_vnni();
      ASSERT_NE((*p)->describe().find(gemv ? "tessera int8 gemv" : "onednn int8 matmul"),
                std::string::npos)
          << (*p)->describe();
      const Tensor got = run_program(**p, {xin})[0];
      // Weights as [n][k] rows for the oracle.
      std::vector<float> rows(static_cast<size_t>(nn * k));
      for (int64_t j = 0; j < nn; ++j) {
        for (int64_t i = 0; i < k; ++i) {
          rows[static_cast<size_t>(j * k + i)] =
              gemm ? w.data<float>()[j * k + i] : w.data<float>()[i * nn + j];
        }
      }
      std::vector<int> wq;
      std::vector<double> ws;
      quantize_weights_ref(rows.data(), nn, k, &wq, &ws);
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t j = 0; j < nn; ++j) {
          int64_t acc = 0;
          for (int64_t i = 0; i < k; ++i) {
            acc += static_cast<int64_t>(quantize_ref(xin.data<float>()[r * k + i], qx)) *
                   wq[static_cast<size_t>(j * k + i)];
          }
          const double want = static_cast<double>(qx.scale) * ws[static_cast<size_t>(j)] *
                                  static_cast<double>(acc) +
                              (gemm ? b.data<float>()[j] : 0.0);
          EXPECT_NEAR(got.data<float>()[r * nn + j], want, 1e-4 * (1 + std::fabs(want)))
              << r << ", " << j;
        }
      }
    }
  }
}

// Tessera's int8 GEMV (gemv.h) against a brute-force oracle: the exact integer sum of
// (q_x - zp_x) times the weights quantised per column (quantize_weights_ref), scaled, plus the
// bias, clamped; the kernel's f32 output within f32 rounding of it. Odd and tiny K (a last quad
// with missing bytes), N across panel widths and tails, W in both orders, u8 and s8 inputs with
// and without zero points, 1 and 2 threads; then the longest K at the extremes of the int32 sums.
TEST(Int8Gemv, MatchesBruteForce) {
  if (!cpu::has_avx512_vnni()) GTEST_SKIP() << "no AVX512_VNNI on this CPU";
  struct Case {
    int64_t k, n;
  };
  const Case cases[] = {{1, 1},   {3, 15},   {4, 16},     {5, 17},   {17, 64},
                        {33, 65}, {64, 200}, {1001, 130}, {4099, 77}};
  const QuantParam qs[] = {
      {0.05f, true, 0}, {0.03f, true, 7}, {0.02f, false, 0}, {0.04f, false, -5}};
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (const Case& c : cases) {
    for (const bool kxn : {false, true}) {
      const bool with_bias = kxn;
      SCOPED_TRACE("k " + std::to_string(c.k) + " n " + std::to_string(c.n) +
                   (kxn ? " kxn" : " nxk"));
      std::vector<float> w(static_cast<size_t>(c.k * c.n)), bias(static_cast<size_t>(c.n));
      for (float& v : w) v = u(rng);
      for (float& v : bias) v = u(rng);
      std::vector<float> rows(w.size());
      for (int64_t j = 0; j < c.n; ++j) {
        for (int64_t p = 0; p < c.k; ++p) {
          rows[static_cast<size_t>(j * c.k + p)] =
              w[static_cast<size_t>(kxn ? p * c.n + j : j * c.k + p)];
        }
      }
      std::vector<int> wq;
      std::vector<double> ws;
      quantize_weights_ref(rows.data(), c.n, c.k, &wq, &ws);
      cpu::SharedPacking<cpu::PackedGemvInt8> packed;
      packed.packed = std::make_shared<const cpu::PackedGemvInt8>(
          cpu::PackedGemvInt8::pack(w.data(), c.k, c.n, kxn, with_bias ? bias.data() : nullptr));
      for (const QuantParam& q : qs) {
        SCOPED_TRACE(std::string(q.is_unsigned ? "u8" : "s8") + " zp " +
                     std::to_string(q.zero_point));
        std::vector<uint8_t> x(static_cast<size_t>(c.k));
        for (uint8_t& v : x) v = static_cast<uint8_t>(rng());
        const auto real_q = [&](int64_t p) {
          const uint8_t b = x[static_cast<size_t>(p)];
          return (q.is_unsigned ? int64_t{b} : int64_t{static_cast<int8_t>(b)}) - q.zero_point;
        };
        for (const float lo : {-std::numeric_limits<float>::infinity(), 0.f}) {
          const float hi = lo == 0.f ? 0.5f : std::numeric_limits<float>::infinity();
          for (int threads : {1, 2}) {
            std::shared_ptr<cpu::ThreadPool> pool = testing::cpu_pool_on_first_cores(threads);
            if (pool == nullptr) continue;
            cpu::GemvInt8 gemv(packed, q.scale, q.zero_point, q.is_unsigned);
            gemv.bind(threads);
            std::vector<float> y(static_cast<size_t>(c.n), std::nanf(""));
            Status st = pool->run([&] { return gemv.run(*pool, x.data(), y.data(), lo, hi); });
            ASSERT_TRUE(st.ok()) << st.to_string();
            for (int64_t j = 0; j < c.n; ++j) {
              int64_t acc = 0;
              for (int64_t p = 0; p < c.k; ++p)
                acc += real_q(p) * wq[static_cast<size_t>(j * c.k + p)];
              const double sum =
                  double{q.scale} * ws[static_cast<size_t>(j)] * static_cast<double>(acc) +
                  (with_bias ? bias[static_cast<size_t>(j)] : 0.0);
              const double want = std::min<double>(std::max<double>(sum, lo), hi);
              ASSERT_NEAR(y[static_cast<size_t>(j)], want, 1e-6 * (1 + std::fabs(sum)))
                  << "column " << j;
            }
          }
        }
      }
    }
  }
  // The longest K at both ends of the int32 range: every product at its largest magnitude.
  const int64_t k = cpu::PackedGemvInt8::kMaxK, n = 17;
  std::vector<float> w(static_cast<size_t>(k * n));
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j) w[static_cast<size_t>(p * n + j)] = j % 2 == 0 ? 1.f : -1.f;
  }
  cpu::SharedPacking<cpu::PackedGemvInt8> packed;
  packed.packed = std::make_shared<const cpu::PackedGemvInt8>(
      cpu::PackedGemvInt8::pack(w.data(), k, n, true, nullptr));
  std::shared_ptr<cpu::ThreadPool> pool = testing::cpu_pool_on_first_cores(1);
  ASSERT_NE(pool, nullptr);
  struct Extreme {
    QuantParam q;
    uint8_t byte;
    int64_t real;  // q - zp
  };
  const Extreme extremes[] = {
      {{1.f, true, 0}, 255, 255}, {{1.f, false, 127}, 0x80, -255}, {{1.f, false, -128}, 0x7F, 255}};
  for (const Extreme& e : extremes) {
    std::vector<uint8_t> x(static_cast<size_t>(k), e.byte);
    cpu::GemvInt8 gemv(packed, e.q.scale, e.q.zero_point, e.q.is_unsigned);
    gemv.bind(1);
    std::vector<float> y(static_cast<size_t>(n));
    const float inf = std::numeric_limits<float>::infinity();
    Status st = pool->run([&] { return gemv.run(*pool, x.data(), y.data(), -inf, inf); });
    ASSERT_TRUE(st.ok()) << st.to_string();
    for (int64_t j = 0; j < n; ++j) {
      // w = +-1 quantises to +-127 with scale 1/127.
      const double want = static_cast<double>(e.real * k) * (j % 2 == 0 ? 1.0 : -1.0);
      ASSERT_NEAR(y[static_cast<size_t>(j)], want, 1e-6 * std::fabs(want)) << "column " << j;
    }
  }
}

// A ResNet-like network: conv+relu stem, maxpool, a residual block (conv+relu, conv, Add+relu),
// a depthwise conv with clip, global average pool, flatten, Gemm.
// Graph building for the int8 networks below: nodes with one output each, convolutions with
// random weights (on a per-channel s8 grid with `grid_weights`, as a QDQ model's folded weights).
struct NetBuilder {
  Graph g;
  std::vector<NodeId> layers;
  uint32_t seed = 31;
  bool grid_weights = false;

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
    Tensor w = random_tensor(Shape{cout, cin / group, k, k}, seed++, -scale, scale);
    if (grid_weights) {  // on a grid of max |w| / 127 per output channel
      const int64_t per = w.numel() / cout;
      for (int64_t oc = 0; oc < cout; ++oc) {
        float* row = w.data<float>() + oc * per;
        float m = 0;
        for (int64_t i = 0; i < per; ++i) m = std::max(m, std::fabs(row[i]));
        for (int64_t i = 0; i < per; ++i) row[i] = std::nearbyint(row[i] / (m / 127)) * (m / 127);
      }
    }
    return node(OpKind::kConv, name,
                {x, g.add_constant(name + ".w", w),
                 g.add_constant(name + ".b", random_tensor(Shape{cout}, seed++, -0.1f, 0.1f))},
                std::move(a));
  }
  // Flatten [N, 24, 1, 1] -> Gemm to 10 classes.
  ValueId classifier(ValueId pooled) {
    Attributes flat;
    flat.set("axis", int64_t{1});
    const ValueId f = node(OpKind::kFlatten, "flatten", {pooled}, flat);
    Attributes gemm;
    gemm.set("transB", int64_t{1});
    return node(OpKind::kGemm, "fc",
                {f, g.add_constant("fc.w", random_tensor(Shape{10, 24}, seed++, -0.3f, 0.3f)),
                 g.add_constant("fc.b", random_tensor(Shape{10}, seed++, -0.1f, 0.1f))},
                gemm);
  }
};

struct Net : NetBuilder {
  Net() {
    const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{2, 3, 29, 31}});
    g.inputs().push_back(x);
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
    const ValueId y = classifier(gap);
    g.outputs() = {y};
    EXPECT_TRUE(g.infer_shapes().ok());
  }
  std::vector<std::vector<Tensor>> inputs(int count, uint32_t first_seed) const {
    std::vector<std::vector<Tensor>> s;
    for (int i = 0; i < count; ++i) {
      s.push_back({random_tensor(Shape{2, 3, 29, 31}, first_seed + static_cast<uint32_t>(i))});
    }
    return s;
  }
};

// Net calibrated (min/max) on 4 inputs (seeds 100..) on `cpu`, and compiled on the reference
// device: the oracle of the program tests, which measure on 2 other inputs (seeds 200..).
struct CalibratedNet {
  Net net;
  CalibrationTable table;
  std::unique_ptr<Program> ref;
};
void calibrated_net(CalibratedNet* c) {
  auto cpu = open_device("cpu");
  ASSERT_TRUE(cpu.ok());
  auto table = calibrate(c->net.g, **cpu, c->net.inputs(4, 100), CalibrationMethod::kMinMax);
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  c->table = std::move(*table);
  auto ref_dev = open_device("reference");
  ASSERT_TRUE(ref_dev.ok());
  auto ref = (*ref_dev)->compile(c->net.g, c->net.layers);
  ASSERT_TRUE(ref.ok());
  c->ref = std::move(*ref);
}

TEST(Int8Program, TensorsStayInt8BetweenInt8Layers) {
  if (!cpu::onednn_available()) GTEST_SKIP() << "no oneDNN in this build";
  CalibratedNet c;
  ASSERT_NO_FATAL_FAILURE(calibrated_net(&c));
  Net& net = c.net;
  const CalibrationTable* table = &c.table;
  // Every activation has a range containing 0; relu outputs are >= 0.
  EXPECT_EQ(table->ranges.size(), 10u);
  EXPECT_EQ(table->find("stem")->first, 0.f);
  EXPECT_LT(table->find("x")->first, 0.f);
  const std::unique_ptr<Program>& ref = c.ref;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    std::shared_ptr<cpu::ThreadPool> pool = testing::cpu_pool_on_first_cores(threads);
    if (pool == nullptr) GTEST_SKIP() << "fewer than " << threads << " cores";
    auto p = cpu::CpuProgram::compile(net.g, net.layers, pool, nullptr, cpu::KernelChoice::kRules,
                                      Precision::kInt8, &*table);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    const std::string d = (*p)->describe();
    // Every conv, both pools and the Gemm run in int8; the Add is fused into c2 (sum post-op).
    EXPECT_EQ((*p)->num_int8_layers(), 8) << d;
    EXPECT_NE(d.find("residual add fused into 'c2'"), std::string::npos) << d;
    EXPECT_NE(d.find("+residual"), std::string::npos) << d;
    EXPECT_NE(d.find("onednn int8 conv 3x3/1 depthwise +clip u8->u8"), std::string::npos) << d;
    // One conversion: the input into s8 NHWC (with the transpose); the Flatten is a view of the
    // pooled int8 vector, and the Gemm's output is f32.
    EXPECT_EQ((*p)->num_conversions(), 1) << d;
    EXPECT_NE(d.find("flatten: tessera int8 reshape (alias, no copy)"), std::string::npos) << d;
    EXPECT_NE(d.find("convert NCHW f32->NHWC s8"), std::string::npos) << d;
    for (const std::vector<Tensor>& in : net.inputs(2, 200)) {
      const std::vector<Tensor> want = run_program(*ref, in);
      for (int rep = 0; rep < 2; ++rep) {
        const std::vector<Tensor> got = run_program(**p, in);
        ASSERT_EQ(got.size(), 1u);
        FidelityMeter m;
        ASSERT_TRUE(m.add(got, want).ok());
        // Five int8 layers deep, each rounding to 1/255 of its range.
        EXPECT_LT(m.result().relative_l2, 5e-2);
        EXPECT_GT(m.result().relative_l2, 0.0) << "exact: not int8?";
      }
    }
  }
}

// The same network on XNNPACK's int8 operators (as a build without oneDNN runs it): every tensor
// is held s8 (the ReLU outputs' u8 grids with zero point -128), the convolutions, the pools and
// the Add run on XNNPACK (the Add unfused: XNNPACK's convolution takes no residual), the
// classifier in f32 after a conversion; as close to f32 as oneDNN's int8, and within a few steps
// of it.
TEST(Int8Program, XnnpackKernelsHoldEveryTensorSigned) {
  CalibratedNet c;
  ASSERT_NO_FATAL_FAILURE(calibrated_net(&c));
  Net& net = c.net;
  const CalibrationTable* table = &c.table;
  const std::unique_ptr<Program>& ref = c.ref;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    std::shared_ptr<cpu::ThreadPool> pool = testing::cpu_pool_on_first_cores(threads);
    if (pool == nullptr) GTEST_SKIP() << "fewer than " << threads << " cores";
    // The oneDNN program, where this build has oneDNN: the same network on the other library.
    Result<std::unique_ptr<cpu::CpuProgram>> onednn = unimplemented("no oneDNN in this build");
    if (cpu::onednn_available()) {
      onednn = cpu::CpuProgram::compile(net.g, net.layers, pool, nullptr, cpu::KernelChoice::kRules,
                                        Precision::kInt8, &*table);
      ASSERT_TRUE(onednn.ok()) << onednn.status().to_string();
    }
    testing::ScopedEnv xnn("TESSERA_CPU_INT8_KERNELS", "xnnpack");
    ASSERT_TRUE(cpu::use_xnnpack_int8().ok() && *cpu::use_xnnpack_int8());
    auto p = cpu::CpuProgram::compile(net.g, net.layers, pool, nullptr, cpu::KernelChoice::kRules,
                                      Precision::kInt8, &*table);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    const std::string d = (*p)->describe();
    EXPECT_EQ(d.find("onednn"), std::string::npos) << d;
    EXPECT_NE(d.find("xnnpack int8 conv 3x3/2 +relu s8->s8 zp -128"), std::string::npos) << d;
    EXPECT_NE(d.find("xnnpack int8 conv 3x3/1 depthwise +clip s8 zp -128->s8 zp -128"),
              std::string::npos)
        << d;
    EXPECT_NE(d.find("xnnpack int8 add +relu"), std::string::npos) << d;
    EXPECT_NE(d.find("xnnpack int8 global avgpool"), std::string::npos) << d;
    EXPECT_NE(d.find("xnnpack int8 maxpool 3x3/2 s8 zp -128"), std::string::npos) << d;
    // stem, pool, c1, c2, add, dw, gap, the Flatten (a view of the pooled vector); conversions:
    // the input into s8, the flattened vector into f32 for the classifier.
    EXPECT_EQ((*p)->num_int8_layers(), 8) << d;
    EXPECT_EQ((*p)->num_conversions(), 2) << d;
    for (const std::vector<Tensor>& in : net.inputs(2, 200)) {
      const std::vector<Tensor> want = run_program(*ref, in);
      const std::vector<Tensor> theirs = onednn.ok() ? run_program(**onednn, in) : want;
      for (int rep = 0; rep < 2; ++rep) {
        const std::vector<Tensor> got = run_program(**p, in);
        ASSERT_EQ(got.size(), 1u);
        FidelityMeter m, between;
        ASSERT_TRUE(m.add(got, want).ok());
        ASSERT_TRUE(between.add(got, theirs).ok());
        EXPECT_LT(m.result().relative_l2, 5e-2);
        EXPECT_GT(m.result().relative_l2, 0.0) << "exact: not int8?";
        EXPECT_LT(between.result().relative_l2, 5e-2);
      }
    }
  }
}

// `count` inputs of `shape` from random_tensor, seeds seed, seed + 1, ...
std::vector<std::vector<Tensor>> seeded_inputs(const Shape& shape, int count, uint32_t seed) {
  std::vector<std::vector<Tensor>> v;
  for (int i = 0; i < count; ++i)
    v.push_back({random_tensor(shape, seed + static_cast<uint32_t>(i))});
  return v;
}

// A one-input network's min/max calibration on 4 inputs of `shape` (seeds 100..) on `cpu`, and
// the reference device's program of it: the oracle of the tests below.
struct Oracle {
  CalibrationTable table;
  std::unique_ptr<Program> ref;
};
void calibrate_with_oracle(const NetBuilder& b, const Shape& shape, Oracle* o) {
  auto cpu_dev = open_device("cpu");
  ASSERT_TRUE(cpu_dev.ok());
  auto table = calibrate(b.g, **cpu_dev, seeded_inputs(shape, 4, 100), CalibrationMethod::kMinMax);
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  o->table = std::move(*table);
  auto ref_dev = open_device("reference");
  ASSERT_TRUE(ref_dev.ok());
  auto ref = (*ref_dev)->compile(b.g, b.layers);
  ASSERT_TRUE(ref.ok());
  o->ref = std::move(*ref);
}

// A squeeze-and-excitation block: the gated tensor stays int8 through the Mul (the gate, from a
// Sigmoid in f32, is read in f32), with the gate as either operand (torchvision writes
// scale * input), on oneDNN's and on XNNPACK's kernels; as close to f32 as the plain network.
TEST(Int8Program, SqueezeExcitationGateKeepsItsInputInt8) {
  for (const bool gate_first : {true, false}) {
    for (const char* library : {"onednn", "xnnpack"}) {
      if (std::string(library) == "onednn" && !cpu::onednn_available()) continue;
      SCOPED_TRACE(std::string(library) + (gate_first ? ", gate first" : ", gate second"));
      testing::ScopedEnv env("TESSERA_CPU_INT8_KERNELS", library);
      NetBuilder b;
      const ValueId x = b.g.add_value("x", TensorInfo{DType::kF32, Shape{2, 3, 17, 19}});
      b.g.inputs().push_back(x);
      const ValueId stem = b.conv("stem", x, 3, 24, 3, 1, 1, "relu");
      const ValueId squeezed = b.node(OpKind::kGlobalAveragePool, "squeeze", {stem});
      const ValueId fc1 = b.conv("fc1", squeezed, 24, 8, 1, 1, 1, "relu");
      const ValueId fc2 = b.conv("fc2", fc1, 8, 24, 1, 1, 1, "");
      const ValueId gate = b.node(OpKind::kSigmoid, "gate", {fc2});
      const ValueId gated =
          b.node(OpKind::kMul, "excite",
                 gate_first ? std::vector<ValueId>{gate, stem} : std::vector<ValueId>{stem, gate});
      const ValueId c = b.conv("project", gated, 24, 24, 1, 1, 1, "");
      b.g.outputs() = {b.classifier(b.node(OpKind::kGlobalAveragePool, "gap", {c}))};
      ASSERT_TRUE(b.g.infer_shapes().ok());
      const Shape shape{2, 3, 17, 19};
      auto inputs = [&](int count, uint32_t seed) { return seeded_inputs(shape, count, seed); };
      Oracle o;
      ASSERT_NO_FATAL_FAILURE(calibrate_with_oracle(b, shape, &o));
      const CalibrationTable* table = &o.table;
      const std::unique_ptr<Program>* ref = &o.ref;
      std::shared_ptr<cpu::ThreadPool> pool = testing::cpu_pool_on_first_cores(1);
      ASSERT_NE(pool, nullptr);
      auto p = cpu::CpuProgram::compile(b.g, b.layers, pool, nullptr, cpu::KernelChoice::kRules,
                                        Precision::kInt8, &*table);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      const std::string d = (*p)->describe();
      EXPECT_NE(d.find("excite: tessera int8 mul by channel gate"), std::string::npos) << d;
      // The gated tensor is never converted: the stem's output reaches the Mul in int8, and the
      // Mul's output reaches the projection in int8.
      EXPECT_EQ(d.find("->NHWC f32\nexcite"), std::string::npos) << d;
      EXPECT_EQ(d.find("f32->NHWC s8\nproject"), std::string::npos) << d;
      EXPECT_EQ(d.find("f32->NHWC u8\nproject"), std::string::npos) << d;
      for (const std::vector<Tensor>& in : inputs(2, 200)) {
        const std::vector<Tensor> want = run_program(**ref, in);
        const std::vector<Tensor> got = run_program(**p, in);
        ASSERT_EQ(got.size(), 1u);
        FidelityMeter m;
        ASSERT_TRUE(m.add(got, want).ok());
        EXPECT_LT(m.result().relative_l2, 5e-2) << d;
        EXPECT_GT(m.result().relative_l2, 0.0) << "exact: not int8?";
      }
    }
  }
}

// A SiLU after a reduced-precision convolution, x * Sigmoid(x) with x the convolution's output
// (EfficientNet's activation, either operand order), runs inside the convolution as a oneDNN
// swish post-op: the Sigmoid and the Mul steps do nothing, and the convolution writes the Mul's
// output in int8 (its quantisation) or bf16. Where the Sigmoid has another reader the three run
// as they are. As close to f32 as the plain network, in int8 and in bf16.
TEST(Int8Program, SiluFusesIntoTheReducedConvolution) {
  if (!cpu::onednn_available()) GTEST_SKIP() << "no oneDNN in this build";
  for (const Precision precision : {Precision::kInt8, Precision::kBf16}) {
    if (precision == Precision::kBf16 && !cpu::onednn_bf16_available()) continue;
    for (int variant = 0; variant < 3; ++variant) {
      // 0: Mul(x, sigmoid); 1: Mul(sigmoid, x); 2: the sigmoid also read by a second Mul.
      SCOPED_TRACE(std::string(precision_name(precision)) + " variant " + std::to_string(variant));
      NetBuilder b;
      const ValueId x = b.g.add_value("x", TensorInfo{DType::kF32, Shape{2, 3, 19, 17}});
      b.g.inputs().push_back(x);
      const ValueId c = b.conv("expand", x, 3, 24, 3, 1, 1, "");
      const ValueId sig = b.node(OpKind::kSigmoid, "sig", {c});
      ValueId act =
          b.node(OpKind::kMul, "silu",
                 variant == 1 ? std::vector<ValueId>{sig, c} : std::vector<ValueId>{c, sig});
      if (variant == 2) act = b.node(OpKind::kMul, "twice", {act, sig});
      const ValueId dw = b.conv("dw", act, 24, 24, 3, 1, 24, "");
      b.g.outputs() = {b.classifier(b.node(OpKind::kGlobalAveragePool, "gap", {dw}))};
      ASSERT_TRUE(b.g.infer_shapes().ok());
      const Shape shape{2, 3, 19, 17};
      auto inputs = [&](int count, uint32_t seed) { return seeded_inputs(shape, count, seed); };
      Oracle o;
      ASSERT_NO_FATAL_FAILURE(calibrate_with_oracle(b, shape, &o));
      const CalibrationTable* table = &o.table;
      const std::unique_ptr<Program>* ref = &o.ref;
      for (int threads : {1, 2}) {
        std::shared_ptr<cpu::ThreadPool> pool = testing::cpu_pool_on_first_cores(threads);
        if (pool == nullptr) continue;
        auto p = cpu::CpuProgram::compile(b.g, b.layers, pool, nullptr, cpu::KernelChoice::kRules,
                                          precision, &*table);
        ASSERT_TRUE(p.ok()) << p.status().to_string();
        const std::string d = (*p)->describe();
        const bool fused = variant != 2;
        EXPECT_EQ(d.find("+silu") != std::string::npos, fused) << d;
        EXPECT_EQ(d.find("sig: sigmoid fused into 'expand' (silu)") != std::string::npos, fused)
            << d;
        EXPECT_EQ(d.find("silu: mul fused into 'expand' (silu)") != std::string::npos, fused) << d;
        for (const std::vector<Tensor>& in : inputs(2, 200)) {
          const std::vector<Tensor> want = run_program(**ref, in);
          for (int rep = 0; rep < 2; ++rep) {
            const std::vector<Tensor> got = run_program(**p, in);
            ASSERT_EQ(got.size(), 1u);
            FidelityMeter m;
            ASSERT_TRUE(m.add(got, want).ok());
            EXPECT_LT(m.result().relative_l2, 5e-2) << d;
            EXPECT_GT(m.result().relative_l2, 0.0) << "exact: not reduced?";
          }
        }
      }
    }
  }
}

// ShuffleNet's unit: a channel shuffle (Reshape, Transpose, Reshape) and two channel Slices
// between reduced-precision convolutions move the int8 (or bf16) bytes as held: no conversion
// between the stem and the head. The moves are exact: the first Slice, a model output, equals the
// stem's output (also an output) shuffled and sliced by hand, bit for bit. A move between f32
// neighbours only (a Transpose of the model input, itself an output) stays f32: reduced, it
// would only add conversions. On oneDNN's and XNNPACK's int8 kernels, and in bf16.
TEST(Int8Program, ChannelShuffleAndSlicesMoveReducedBytes) {
  struct Level {
    Precision precision;
    const char* library;
  };
  const Level levels[] = {
      {Precision::kInt8, "onednn"}, {Precision::kInt8, "xnnpack"}, {Precision::kBf16, "onednn"}};
  for (const Level& level : levels) {
    if (std::string(level.library) == "onednn" && !cpu::onednn_available()) continue;
    if (level.precision == Precision::kBf16 && !cpu::onednn_bf16_available()) continue;
    SCOPED_TRACE(std::string(precision_name(level.precision)) + " on " + level.library);
    testing::ScopedEnv env("TESSERA_CPU_INT8_KERNELS", level.library);
    NetBuilder b;
    const Shape shape{2, 3, 13, 11};
    const ValueId x = b.g.add_value("x", TensorInfo{DType::kF32, shape});
    b.g.inputs().push_back(x);
    const auto ints = [&](const std::string& name, Ints v) {
      const int64_t n = static_cast<int64_t>(v.size());
      return b.g.add_constant(name, Tensor::from_int64s(Shape{n}, std::move(v)));
    };
    Attributes perm;
    perm.set("perm", Ints{0, 1, 3, 2});
    const ValueId xt = b.node(OpKind::kTranspose, "input_t", {x}, perm);
    const ValueId stem = b.conv("stem", x, 3, 16, 3, 1, 1, "relu");
    const ValueId v1 = b.node(OpKind::kReshape, "view", {stem, ints("s5", {2, 2, 8, 13, 11})});
    Attributes swap;
    swap.set("perm", Ints{0, 2, 1, 3, 4});
    const ValueId v2 = b.node(OpKind::kTranspose, "swap", {v1}, swap);
    const ValueId shuffled = b.node(OpKind::kReshape, "back", {v2, ints("s4", {2, 16, 13, 11})});
    const ValueId left = b.node(OpKind::kSlice, "left",
                                {shuffled, ints("l0", {0}), ints("l1", {8}), ints("ax", {1})});
    const ValueId right = b.node(OpKind::kSlice, "right",
                                 {shuffled, ints("r0", {8}), ints("r1", {16}), ints("ax2", {1})});
    const ValueId branch = b.conv("branch", right, 8, 8, 3, 1, 8, "relu");
    Attributes axis;
    axis.set("axis", int64_t{1});
    const ValueId joined = b.node(OpKind::kConcat, "join", {left, branch}, axis);
    const ValueId head = b.conv("head", joined, 16, 24, 1, 1, 1, "relu");
    const ValueId y = b.classifier(b.node(OpKind::kGlobalAveragePool, "gap", {head}));
    b.g.outputs() = {stem, left, y, xt};
    ASSERT_TRUE(b.g.infer_shapes().ok());
    Oracle o;
    ASSERT_NO_FATAL_FAILURE(calibrate_with_oracle(b, shape, &o));
    for (int threads : {1, 2}) {
      std::shared_ptr<cpu::ThreadPool> pool = testing::cpu_pool_on_first_cores(threads);
      if (pool == nullptr) continue;
      auto p = cpu::CpuProgram::compile(b.g, b.layers, pool, nullptr, cpu::KernelChoice::kRules,
                                        level.precision, &o.table);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      const std::string d = (*p)->describe();
      const std::string held = precision_name(level.precision);
      EXPECT_NE(d.find("back: tessera " + held + " channel shuffle nhwc, 2 groups"),
                std::string::npos)
          << d;
      EXPECT_NE(d.find("left: tessera " + held + " slice (gather copy)"), std::string::npos) << d;
      EXPECT_NE(d.find("right: tessera " + held + " slice (gather copy)"), std::string::npos) << d;
      EXPECT_NE(d.find("input_t: tessera transpose (gather copy)"), std::string::npos) << d;
      // Nothing between the stem and the head is converted: no conversion step comes right
      // before one of these layers.
      std::vector<std::string> lines;
      for (size_t at = 0, end; at < d.size(); at = end + 1) {
        end = d.find('\n', at);
        if (end == std::string::npos) end = d.size();
        lines.push_back(d.substr(at, end - at));
      }
      for (size_t i = 1; i < lines.size(); ++i) {
        for (const char* layer :
             {"view:", "swap:", "back:", "left:", "right:", "branch:", "join:", "head:"}) {
          if (lines[i].rfind(layer, 0) == 0) {
            EXPECT_EQ(lines[i - 1].find("convert"), std::string::npos) << d;
          }
        }
      }
      for (const std::vector<Tensor>& in : seeded_inputs(shape, 2, 200)) {
        const std::vector<Tensor> want = run_program(*o.ref, in);
        const std::vector<Tensor> got = run_program(**p, in);
        // The slice's outputs in layer order: input_t, stem, left, the classifier.
        ASSERT_EQ(got.size(), 4u);
        // left[n, j, h, w] = stem[n, c, h, w] for shuffled channel j = c' < 8, c = (c' % 2) * 8
        // + c' / 2, both as the program outputs them.
        const float* s = got[1].data<float>();
        const float* l = got[2].data<float>();
        int64_t differ = 0;
        for (int64_t n = 0; n < 2; ++n) {
          for (int64_t j = 0; j < 8; ++j) {
            const int64_t c = (j % 2) * 8 + j / 2;
            for (int64_t q = 0; q < 13 * 11; ++q) {
              differ += std::memcmp(&l[(n * 8 + j) * 143 + q], &s[(n * 16 + c) * 143 + q], 4) != 0;
            }
          }
        }
        EXPECT_EQ(differ, 0);
        EXPECT_EQ(std::memcmp(got[0].raw(), want[0].raw(), got[0].byte_size()), 0);
        FidelityMeter m;
        ASSERT_TRUE(m.add(std::span(&got[3], 1), std::span(&want[3], 1)).ok());
        EXPECT_LT(m.result().relative_l2, 5e-2) << d;
        EXPECT_GT(m.result().relative_l2, 0.0) << "exact: not reduced?";
      }
    }
  }
}

// TESSERA_CPU_INT8_KERNELS picks the library; a value naming none, or oneDNN where the build has
// none, fails the int8 compile with a message naming the variable.
TEST(Int8Program, TheKernelLibraryComesFromTheEnvironment) {
  CalibratedNet c;
  ASSERT_NO_FATAL_FAILURE(calibrated_net(&c));
  CompileOptions o;
  o.calibration = std::make_shared<const CalibrationTable>(c.table);
  auto dev = open_device("cpu:0#int8");
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  {
    testing::ScopedEnv bad("TESSERA_CPU_INT8_KERNELS", "mkl");
    auto p = (*dev)->compile(c.net.g, c.net.layers, o);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find("TESSERA_CPU_INT8_KERNELS='mkl'"), std::string::npos)
        << p.status().message();
  }
  {
    testing::ScopedEnv want("TESSERA_CPU_INT8_KERNELS", "onednn");
    auto p = (*dev)->compile(c.net.g, c.net.layers, o);
    EXPECT_EQ(p.ok(), cpu::onednn_available()) << p.status().to_string();
    if (p.ok()) {
      EXPECT_NE((*p)->describe().find("onednn int8"), std::string::npos);
    }
  }
  for (const char* lib : {"xnnpack", ""}) {
    testing::ScopedEnv set("TESSERA_CPU_INT8_KERNELS", lib);
    auto p = (*dev)->compile(c.net.g, c.net.layers, o);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    const bool xnn = std::string_view(lib) == "xnnpack" || !cpu::onednn_available();
    EXPECT_NE((*p)->describe().find(xnn ? "xnnpack int8" : "onednn int8"), std::string::npos)
        << (*p)->describe();
  }
}

// The int8 Concat: each input requantised into the output's quantisation exactly as converting
// it to f32 and back would (a brute-force oracle of quantise -> dequantise -> quantise), an input
// of the output's own quantisation copied as is, along the NHWC channels and along another axis.
TEST(Int8Concat, RequantisesEachInputExactly) {
  if (!cpu::onednn_available()) GTEST_SKIP() << "no oneDNN in this build";
  testing::ScopedEnv rules("TESSERA_CPU_KERNELS", "rules");
  // Along the NHWC channels with 5 and with 150 channels per input (rows of 150 bytes: the
  // vector loop of the table lookup and its tail), and along W.
  for (auto [axis, channels] : {std::pair{1, 5}, std::pair{1, 150}, std::pair{3, 5}}) {
    SCOPED_TRACE("axis " + std::to_string(axis) + ", " + std::to_string(channels) + " channels");
    Graph g;
    const Shape s1{2, channels, 7, 3}, s2{2, channels, 7, 3};
    const ValueId a = g.add_value("a", TensorInfo{DType::kF32, s1});
    const ValueId b = g.add_value("b", TensorInfo{DType::kF32, s2});
    const ValueId c = g.add_value("c", TensorInfo{DType::kF32, s2});
    g.inputs() = {a, b, c};
    Node n;
    n.name = "cat";
    n.kind = OpKind::kConcat;
    n.attrs.set("axis", int64_t{axis});
    n.inputs = {a, b, c};
    n.outputs = {g.add_value("y")};
    g.outputs() = {n.outputs[0]};
    const NodeId id = g.add_node(n);
    ASSERT_TRUE(g.infer_shapes().ok());
    CompileOptions o;
    // a: s8 symmetric; b: u8; c: the output's own range (copied as is).
    o.calibration = table_of(
        {{"a", {-1.5f, 1.f}}, {"b", {0.f, 3.f}}, {"c", {-2.f, 2.5f}}, {"y", {-2.f, 2.5f}}});
    auto dev = open_device("cpu:0#int8");
    ASSERT_TRUE(dev.ok());
    std::vector<NodeId> layers = {id};
    auto p = (*dev)->compile(g, layers, o);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    const auto& prog = dynamic_cast<const cpu::CpuProgram&>(**p);
    EXPECT_NE(prog.describe().find("tessera int8 concat (2 of 3 inputs requantised)"),
              std::string::npos)
        << prog.describe();
    EXPECT_EQ(prog.num_int8_layers(), 1) << prog.describe();
    const std::vector<Tensor> feeds = {random_tensor(s1, 1, -2.f, 2.f),
                                       random_tensor(s2, 2, -1.f, 4.f),
                                       random_tensor(s2, 3, -3.f, 3.f)};
    const Tensor got = run_program(**p, feeds)[0];
    const QuantParam qy = QuantParam::from_range(-2.f, 2.5f);
    const QuantParam qs[3] = {QuantParam::from_range(-1.5f, 1.f), QuantParam::from_range(0.f, 3.f),
                              qy};
    // The oracle in logical order: each element through its input's grid, then the output's.
    auto through = [](float x, QuantParam q) {
      return q.scale * static_cast<float>(quantize_ref(x, q) - q.zero_point);
    };
    const int64_t inner = axis == 1 ? 7 * 3 : 1, outer = axis == 1 ? 2 : 2 * channels * 7;
    const int64_t len = axis == 1 ? channels : 3;
    int64_t at = 0;
    for (int64_t r = 0; r < outer; ++r) {
      for (int in = 0; in < 3; ++in) {
        for (int64_t i = 0; i < len * inner; ++i, ++at) {
          const float x = feeds[static_cast<size_t>(in)].data<float>()[r * len * inner + i];
          ASSERT_EQ(got.data<float>()[at], through(through(x, qs[in]), qy)) << at;
        }
      }
    }
  }
}

// The int8 BatchNormalization: within one step of the f32 round trip (dequantise, scale-shift,
// activation, quantise), for u8 and s8 in and out, zero points, ReLU and Clip folded into the
// bounds, 5 and 37 channels (the vector loop's tail and body), NHWC rank 4 and [N, C].
TEST(Int8BatchNorm, MatchesTheF32RoundTripWithinOneStep) {
  if (!cpu::onednn_available()) GTEST_SKIP() << "no oneDNN in this build";
  testing::ScopedEnv rules("TESSERA_CPU_KERNELS", "rules");
  uint32_t seed = 50;
  for (const char* act : {"", "relu", "clip"}) {
    for (int64_t c : {5, 37}) {
      for (bool rank4 : {true, false}) {
        for (int signs = 0; signs < 4; ++signs) {
          SCOPED_TRACE(std::string(act) + " c " + std::to_string(c) +
                       (rank4 ? " rank 4" : " [N, C]") + " signs " + std::to_string(signs));
          Graph g;
          const Shape xs = rank4 ? Shape{2, c, 5, 3} : Shape{6, c};
          const ValueId x = g.add_value("x", TensorInfo{DType::kF32, xs});
          g.inputs() = {x};
          Node n;
          n.name = "bn";
          n.kind = OpKind::kBatchNormalization;
          testing::set_fused_activation(n.attrs, act, -0.5f, 1.5f);
          n.inputs = {x};
          for (float lo : {0.5f, -0.5f, -0.5f, 0.1f}) {
            n.inputs.push_back(
                g.add_constant("p" + std::to_string(n.inputs.size()),
                               random_tensor(Shape{c}, seed++, lo, lo == 0.1f ? 2.f : 1.5f)));
          }
          n.outputs = {g.add_value("y")};
          g.outputs() = {n.outputs[0]};
          const NodeId id = g.add_node(n);
          ASSERT_TRUE(g.infer_shapes().ok());
          // x: u8 (with a zero point through the QDQ-like range) or s8; y: u8 or s8.
          const std::pair<float, float> rx =
              (signs & 1) ? std::pair{0.f, 2.f} : std::pair{-2.f, 2.f};
          const std::pair<float, float> ry =
              (signs & 2) ? std::pair{0.f, 3.f} : std::pair{-3.f, 3.f};
          CompileOptions o;
          o.calibration = table_of({{"x", rx}, {"y", ry}});
          auto dev = open_device("cpu:0#int8");
          ASSERT_TRUE(dev.ok());
          std::vector<NodeId> layers = {id};
          auto p = (*dev)->compile(g, layers, o);
          ASSERT_TRUE(p.ok()) << p.status().to_string();
          const auto& prog = dynamic_cast<const cpu::CpuProgram&>(**p);
          ASSERT_NE(prog.describe().find("tessera int8 batchnorm"), std::string::npos)
              << prog.describe();
          const Tensor xin = random_tensor(xs, seed++, rx.first, rx.second);
          const Tensor got = run_program(**p, {xin})[0];
          // The oracle: the reference device's f32 BatchNormalization on the dequantised input.
          const QuantParam qx = QuantParam::from_range(rx.first, rx.second);
          const QuantParam qy = QuantParam::from_range(ry.first, ry.second);
          Tensor xq = *xin.clone();
          for (int64_t i = 0; i < xq.numel(); ++i) {
            const float v = xin.data<float>()[i];
            xq.data<float>()[i] =
                qx.scale * static_cast<float>(quantize_ref(v, qx) - qx.zero_point);
          }
          auto ref_dev = open_device("reference");
          auto ref = (*ref_dev)->compile(g, layers);
          ASSERT_TRUE(ref.ok());
          const Tensor want = run_program(**ref, {xq})[0];
          int off = 0;
          for (int64_t i = 0; i < got.numel(); ++i) {
            const int w = quantize_ref(want.data<float>()[i], qy);
            const float step = qy.scale;
            const float diff =
                std::fabs(got.data<float>()[i] - qy.scale * static_cast<float>(w - qy.zero_point));
            ASSERT_LE(diff, step * 1.01f) << i;
            off += diff > step * 0.01f ? 1 : 0;
          }
          EXPECT_LT(off, got.numel() / 20 + 1) << off << " of " << got.numel();
        }
      }
    }
  }
}

// Net's layers as a QDQ model writes them: every activation through QuantizeLinear ->
// DequantizeLinear with its own scale and zero point (u8 and s8, zero points 0 and not, a residual
// with a zero point, a pool whose output keeps its input's pair), the convolution weights f32
// (folded). The output of c2 is also read through a pair that stays (its DequantizeLinear output is
// a graph output).
struct QdqNet : NetBuilder {
  int pairs = 0;

  // x -> QuantizeLinear(scale, zp) -> DequantizeLinear(scale, zp).
  ValueId qdq(ValueId x, float scale, int zp, bool is_unsigned) {
    const std::string name = g.value(x).name;
    const Tensor s = Tensor::scalar_f32(scale);
    Tensor z = *Tensor::create(is_unsigned ? DType::kU8 : DType::kI8, Shape{});
    if (is_unsigned) {
      z.data<uint8_t>()[0] = static_cast<uint8_t>(zp);
    } else {
      z.data<int8_t>()[0] = static_cast<int8_t>(zp);
    }
    const ValueId sv = g.add_constant(name + ".scale", s);
    const ValueId zv = g.add_constant(name + ".zp", z);
    const ValueId q = node(OpKind::kQuantizeLinear, name + ".q", {x, sv, zv});
    ++pairs;
    return node(OpKind::kDequantizeLinear, name + ".dq", {q, sv, zv});
  }

  QdqNet() {
    grid_weights = true;
    const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{2, 3, 29, 31}});
    g.inputs().push_back(x);
    const ValueId xq = qdq(x, 0.008f, 128, true);
    const ValueId stem = qdq(conv("stem", xq, 3, 24, 3, 2, 1, "relu"), 0.02f, 0, true);
    Attributes pool;
    pool.set("kernel_shape", Ints{3, 3});
    pool.set("strides", Ints{2, 2});
    pool.set("pads", Ints{1, 1, 1, 1});
    const ValueId p = node(OpKind::kMaxPool, "pool", {stem}, pool);
    const ValueId c1 = qdq(conv("c1", p, 24, 24, 3, 1, 1, "relu"), 0.025f, 3, true);
    const ValueId c2_raw = conv("c2", c1, 24, 24, 3, 1, 1, "");
    const ValueId c2 = qdq(c2_raw, 0.03f, -5, false);
    Attributes relu;
    relu.set("activation", std::string("relu"));
    const ValueId sum = qdq(node(OpKind::kAdd, "add", {c2, p}, relu), 0.03f, 0, true);
    const ValueId c3 = qdq(conv("c3", sum, 24, 24, 1, 1, 1, ""), 0.03f, 7, false);
    const ValueId sum2 = qdq(node(OpKind::kAdd, "add2", {c3, sum}), 0.035f, -2, false);
    const ValueId dw = qdq(conv("dw", sum2, 24, 24, 3, 1, 24, "clip"), 0.025f, 10, true);
    const ValueId gap = qdq(node(OpKind::kGlobalAveragePool, "gap", {dw}), 0.01f, 2, false);
    const ValueId y = classifier(gap);
    // c2 read once more through a pair of its own, to a graph output: that pair stays.
    const ValueId c2_out = qdq(c2_raw, 0.03f, -5, false);
    g.outputs() = {y, c2_out};
    EXPECT_TRUE(g.infer_shapes().ok());
  }
};

// A QDQ model runs on the int8 kernels with its own scales and zero points, no calibration
// table: the folded pairs vanish, the int8 tensors carry the pairs' quantisation, and the outputs
// are those of the reference device running the pairs as they are (ONNX Runtime's arithmetic)
// within a rounding step per layer.
TEST(Int8Qdq, RunsOnTheInt8KernelsWithItsOwnQuantisation) {
  if (!cpu::onednn_available()) GTEST_SKIP() << "no oneDNN in this build";
  testing::ScopedEnv rules("TESSERA_CPU_KERNELS", "rules");  // the int8 kernels under test
  QdqNet net;
  auto ref_dev = open_device("reference");
  ASSERT_TRUE(ref_dev.ok());
  auto ref = (*ref_dev)->compile(net.g, net.layers);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  for (const char* device : {"cpu:0#int8", "cpu#int8"}) {
    SCOPED_TRACE(device);
    auto dev = open_device(device);
    ASSERT_TRUE(dev.ok());
    auto p = (*dev)->compile(net.g, net.layers);  // no calibration table
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    const auto& prog = dynamic_cast<const cpu::CpuProgram&>(**p);
    const std::string d = prog.describe();
    // Every pair but the one read by a graph output.
    EXPECT_EQ(prog.num_qdq_pairs(), net.pairs - 1) << d;
    // stem, the pool, c1, c2, c3 (+add2), dw in int8: add is not fused (c2 has a second reader)
    // and gap runs in f32 (its pair differs from its input's: an int8 pool keeps its input's);
    // gap's pair is applied right away, and the Flatten views it in int8 for the classifier.
    EXPECT_EQ(prog.num_int8_layers(), 8) << d;
    EXPECT_NE(d.find("flatten: tessera int8 reshape (alias, no copy)\nfc: onednn int8 matmul"),
              std::string::npos)
        << d;
    // The stem reads x's pair, u8 with zero point 128: held as the same grid in s8 without one.
    EXPECT_NE(d.find("stem: onednn int8 conv 3x3/2 +relu s8->u8"), std::string::npos) << d;
    EXPECT_NE(d.find("u8 zp 3->s8 zp -5"), std::string::npos) << d;  // c2
    EXPECT_NE(d.find("residual add fused into 'c3'"), std::string::npos) << d;
    for (uint32_t seed : {1u, 2u, 3u}) {
      const std::vector<Tensor> feeds = {random_tensor(Shape{2, 3, 29, 31}, seed)};
      const std::vector<Tensor> want = run_program(**ref, feeds);
      const std::vector<Tensor> got = run_program(**p, feeds);
      ASSERT_EQ(got.size(), 2u);
      ASSERT_EQ((*p)->output_values(), (*ref)->output_values());
      const size_t y = (*p)->output_values()[0] == net.g.outputs()[0] ? 0 : 1, c2 = 1 - y;
      // c2 through its own pair: on the int8 grid of scale 0.03, nearly every element equal.
      int off = 0;
      for (int64_t i = 0; i < got[c2].numel(); ++i) {
        const float e = std::fabs(got[c2].data<float>()[i] - want[c2].data<float>()[i]);
        ASSERT_LE(e, 2 * 0.03f + 1e-5f) << "c2[" << i << "]";
        off += e > 1e-5f ? 1 : 0;
      }
      EXPECT_LT(off, got[c2].numel() / 50) << off << " of " << got[c2].numel() << " off the grid";
      FidelityMeter m;
      ASSERT_TRUE(m.add(std::vector<Tensor>{got[y]}, std::vector<Tensor>{want[y]}).ok());
      EXPECT_LT(m.result().relative_l2, 3e-2);
    }
  }
}

// A slice that cuts the pairs (as the profiler's single layers do) takes its edges'
// quantisation from the graph's pairs: a convolution alone runs on its int8 kernel with no
// calibration table, reading a DequantizeLinear output and writing a QuantizeLinear input.
TEST(Int8Qdq, ASliceCuttingThePairsUsesTheGraphsQuantisation) {
  if (!cpu::onednn_available()) GTEST_SKIP() << "no oneDNN in this build";
  testing::ScopedEnv rules("TESSERA_CPU_KERNELS", "rules");
  QdqNet net;
  NodeId c2 = kNoNode;
  for (NodeId id : net.layers) {
    if (net.g.node(id).name == "c2") c2 = id;
  }
  ASSERT_NE(c2, kNoNode);
  const std::vector<NodeId> alone = {c2};
  auto dev = open_device("cpu:0#int8");
  ASSERT_TRUE(dev.ok());
  auto p = (*dev)->compile(net.g, alone);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const auto& prog = dynamic_cast<const cpu::CpuProgram&>(**p);
  EXPECT_EQ(prog.num_qdq_pairs(), 0);
  EXPECT_NE(prog.describe().find("c2: onednn int8 conv 3x3/1 u8 zp 3->s8 zp -5"), std::string::npos)
      << prog.describe();
  // Its input on c1's grid (scale 0.025, zero point 3), against the reference device.
  const Shape xs = net.g.value(net.g.node(c2).inputs[0]).info.shape;
  Tensor x = random_tensor(xs, 9, 0.f, 2.f);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = 0.025f * std::nearbyint(x.data<float>()[i] / 0.025f);
  auto ref_dev = open_device("reference");
  auto ref = (*ref_dev)->compile(net.g, alone);
  ASSERT_TRUE(ref.ok());
  const Tensor want = run_program(**ref, {x})[0];
  const Tensor got = run_program(**p, {x})[0];
  // The output on c2's grid (scale 0.03, zero point -5: [-3.69, 3.96]) within one step.
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float w = std::min(std::max(want.data<float>()[i], -3.69f), 3.96f);
    ASSERT_LE(std::fabs(got.data<float>()[i] - w), 0.03f * 1.01f) << i;
  }
}

// Values without a calibrated range keep their layers in f32; a program without any table is
// refused with what to do.
TEST(Int8Program, NeedsCalibration) {
  if (!cpu::onednn_available()) GTEST_SKIP() << "no oneDNN in this build";
  // Every int8 kernel kept (measured choice may give a layer back to f32 on a loaded machine).
  testing::ScopedEnv rules("TESSERA_CPU_KERNELS", "rules");
  Net net;
  auto dev = open_device("cpu:0#int8");
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  EXPECT_TRUE((*dev)->has_precision(Precision::kInt8));
  auto refused = (*dev)->compile(net.g, net.layers);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("tessera calibrate"), std::string::npos);
  // Only the stem's input and output calibrated: the stem and the pool after it (which takes its
  // input's quantisation) run in int8.
  CompileOptions o;
  o.calibration = table_of({{"x", {-1.f, 1.f}}, {"stem", {0.f, 4.f}}});
  auto p = (*dev)->compile(net.g, net.layers, o);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const auto& cp = static_cast<const cpu::CpuProgram&>(**p);
  EXPECT_EQ(cp.num_int8_layers(), 2) << cp.describe();
}

TEST(Calibration, MethodsAndTableRoundTrip) {
  // A Relu (then a Sigmoid, the output) over N(0, 1) values with one outlier: min/max keeps it, the
  // percentile clips it.
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 1, 300, 300}});
  g.inputs().push_back(x);
  Node n;
  n.name = "r";
  n.kind = OpKind::kRelu;
  n.inputs = {x};
  n.outputs = {g.add_value("r")};
  Node n2 = n;
  n2.name = "s";
  n2.kind = OpKind::kSigmoid;
  n2.inputs = {n.outputs[0]};
  n2.outputs = {g.add_value("s")};
  g.add_node(n);
  g.add_node(n2);
  g.outputs() = {n2.outputs[0]};
  ASSERT_TRUE(g.infer_shapes().ok());
  Tensor t = Tensor::create(DType::kF32, Shape{1, 1, 300, 300}).value();
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal(rng);
  t.data<float>()[5] = 1000.f;
  auto dev = open_device("cpu:0");
  ASSERT_TRUE(dev.ok());
  auto mm = calibrate(g, **dev, {{t}}, CalibrationMethod::kMinMax);
  auto pc = calibrate(g, **dev, {{t}}, CalibrationMethod::kPercentile);
  auto mse = calibrate(g, **dev, {{t}}, CalibrationMethod::kMse);
  ASSERT_TRUE(mm.ok() && pc.ok() && mse.ok()) << mm.status().to_string();
  EXPECT_EQ(mm->find("r")->second, 1000.f);
  EXPECT_EQ(mm->find("r")->first, 0.f);
  EXPECT_LT(pc->find("r")->second, 1000.f);
  EXPECT_LE(mse->find("r")->second, 1000.f);
  EXPECT_EQ(pc->method, "percentile");
  // The sidecar file round trip.
  CalibrationTable t2 = *pc;
  t2.model_hash = "abc";
  auto back = CalibrationTable::from_json(t2.to_json(), "t.json");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->ranges, t2.ranges);
  EXPECT_EQ(back->model_hash, "abc");
  EXPECT_EQ(back->samples, 1);
}

TEST(Calibration, HostileInputIsRefused) {
  Net net;
  auto dev = open_device("cpu:0");
  ASSERT_TRUE(dev.ok());
  auto expect_refused = [&](const std::vector<std::vector<Tensor>>& s, const std::string& what) {
    auto r = calibrate(net.g, **dev, s, CalibrationMethod::kPercentile);
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().to_string();
  };
  expect_refused({}, "at least one input sample");
  std::vector<std::vector<Tensor>> s = net.inputs(2, 1);
  s[1][0].data<float>()[17] = std::numeric_limits<float>::quiet_NaN();
  expect_refused(s, "calibration sample 1, input 'x': element 17 is nan");
  s = net.inputs(1, 1);
  s[0][0].data<float>()[3] = -std::numeric_limits<float>::infinity();
  expect_refused(s, "element 3 is -inf");
  expect_refused({{random_tensor(Shape{2, 3, 29, 30}, 1)}}, "expects f32[2, 3, 29, 31]");
  expect_refused({{}}, "0 tensors, the model takes 1");
  // Tables: wrong format, version, ranges.
  auto bad = [](const std::string& text, const std::string& what) {
    auto r = CalibrationTable::from_json(text, "c.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().to_string();
  };
  bad(R"({"format": "tessera-plan", "version": 1, "ranges": {}})",
      "expected 'tessera-calibration'");
  bad(R"({"format": "tessera-calibration", "version": 2, "ranges": {}})", "version 2");
  bad(R"({"format": "tessera-calibration", "version": 1, "ranges": {"a": [0.5, 1]}})",
      "ranges.a: range");
  bad(R"({"format": "tessera-calibration", "version": 1, "ranges": {"a": [-1]}})",
      "ranges.a: expected [lo, hi]");
  bad(R"({"format": "tessera-calibration", "version": 1, "ranges": {"a": ["x", 1]}})",
      "ranges.a: expected");
  bad(R"({"format": "tessera-calibration", "version": 1)", "c.json");
  EXPECT_EQ(CalibrationTable::load("/nonexistent/c.json").status().code(), StatusCode::kNotFound);
}

TEST(Calibration, PerturbedSamplesAreSeeded) {
  const Tensor base = random_tensor(Shape{1, 3, 8, 8}, 2);
  auto a = perturbed_samples({base}, 3, 0.1f, 7);
  auto b = perturbed_samples({base}, 3, 0.1f, 7);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    double diff = 0;
    for (int64_t k = 0; k < base.numel(); ++k) {
      ASSERT_EQ((*a)[i][0].data<float>()[k], (*b)[i][0].data<float>()[k]);
      diff += std::fabs((*a)[i][0].data<float>()[k] - base.data<float>()[k]);
    }
    // Uniform(-1, 1) has sd 0.577: mean |noise| = 0.1 * 0.577 * sqrt(2 / pi) = 0.046.
    EXPECT_NEAR(diff / static_cast<double>(base.numel()), 0.046, 0.01) << i;
  }
  EXPECT_NE((*a)[0][0].data<float>()[0], (*a)[1][0].data<float>()[0]);
  EXPECT_FALSE(perturbed_samples({base}, 0, 0.1f, 1).ok());
  EXPECT_FALSE(perturbed_samples({base}, 2, std::nanf(""), 1).ok());
}

}  // namespace
}  // namespace tessera
