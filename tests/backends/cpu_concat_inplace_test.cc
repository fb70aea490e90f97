// Concat elimination in the cpu program (CpuProgram::place_concat_inputs): the producers of a
// channel Concat's inputs write straight into their channels of its NHWC output, and the Concat
// copies only what they could not write. Fire modules (SqueezeNet), inception blocks with pool
// branches (GoogLeNet), nested concats, odd channel counts and every convolution variant, on one
// and two threads, against the reference device; and the cases that must keep the copy: an input
// with another reader, a program input or output, an activation pass after the producer, a concat
// along H.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "backends/cpu/cpu_program.h"
#include "backends/cpu/kernel_table.h"
#include "backends/registry.h"
#include "graph/passes.h"
#include "tests/backends/cpu_test_util.h"
#include "tests/ops/op_test_util.h"

namespace tessera {
namespace {

using Ints = std::vector<int64_t>;
using testing::random_tensor;

// A small CNN under construction: every node's output channels are tracked so that weights get
// the right shapes before shape inference runs.
class Net {
 public:
  ValueId input(const Shape& s) {
    const ValueId x =
        g.add_value("x" + std::to_string(g.inputs().size()), TensorInfo{DType::kF32, s});
    g.inputs().push_back(x);
    channels(x) = s[1];
    return x;
  }
  // Conv k x k (same padding) with bias, then Relu (fused by optimize_graph) unless `relu` is
  // false; `activation` sets a fused activation directly instead.
  ValueId conv(ValueId x, int64_t cout, int64_t k, int64_t stride = 1, bool relu = true,
               const std::string& activation = "") {
    Attributes a;
    a.set("pads", Ints{k / 2, k / 2, k / 2, k / 2});
    a.set("strides", Ints{stride, stride});
    if (!activation.empty()) a.set("activation", activation);
    const ValueId w =
        g.add_constant("w" + std::to_string(seed_),
                       random_tensor(Shape{cout, channels(x), k, k}, seed_, -0.5f, 0.5f));
    const ValueId b = g.add_constant("b" + std::to_string(seed_),
                                     random_tensor(Shape{cout}, seed_ + 1, -0.5f, 0.5f));
    seed_ += 2;
    ValueId y = add(OpKind::kConv, {x, w, b}, a, cout);
    if (relu) y = add(OpKind::kRelu, {y}, {}, cout);
    return y;
  }
  ValueId pool(OpKind kind, ValueId x, int64_t k, int64_t stride, int64_t pad) {
    Attributes a;
    a.set("kernel_shape", Ints{k, k});
    a.set("strides", Ints{stride, stride});
    a.set("pads", Ints{pad, pad, pad, pad});
    return add(kind, {x}, a, channels(x));
  }
  ValueId concat(const std::vector<ValueId>& parts, int64_t axis = 1) {
    Attributes a;
    a.set("axis", axis);
    int64_t c = 0;
    for (ValueId p : parts) c += channels(p);
    return add(OpKind::kConcat, parts, a, axis == 1 || axis == -3 ? c : channels(parts[0]));
  }
  ValueId add(OpKind kind, std::vector<ValueId> inputs, const Attributes& a, int64_t cout) {
    Node n;
    n.name = std::string(op_name(kind)) + "_" + std::to_string(g.num_nodes());
    n.kind = kind;
    n.inputs = std::move(inputs);
    n.attrs = a;
    const ValueId y = g.add_value(n.name + "_out");
    n.outputs = {y};
    g.add_node(std::move(n));
    channels(y) = cout;
    return y;
  }
  void output(ValueId v) { g.outputs().push_back(v); }

  Graph g;

 private:
  int64_t& channels(ValueId v) {
    if (channels_.size() <= static_cast<size_t>(v)) channels_.resize(static_cast<size_t>(v) + 1);
    return channels_[static_cast<size_t>(v)];
  }
  std::vector<int64_t> channels_;
  uint32_t seed_ = 7;
};

struct Compiled {
  std::string describe;
  int in_place = 0;
};

using testing::cpu_pool_on_first_cores;

// Optimises the net, compiles `layers` (all nodes when empty) on the cpu device with `threads`
// threads and on the reference device, runs both twice on the same random inputs and compares
// every output. `variant` forces a kernel variant (see CpuProgram::compile).
Compiled check(Net& net, int threads, std::vector<NodeId> layers = {},
               const char* variant = nullptr) {
  Compiled c;
  Graph& g = net.g;
  Status st = optimize_graph(g);
  EXPECT_TRUE(st.ok()) << st.to_string();
  if (!st.ok()) return c;
  if (layers.empty()) {
    for (NodeId i = 0; i < g.num_nodes(); ++i) layers.push_back(i);
  }
  std::shared_ptr<cpu::ThreadPool> pool = cpu_pool_on_first_cores(threads);
  EXPECT_NE(pool, nullptr);
  if (pool == nullptr) return c;
  // The rules' kernels: which inputs go in place is then the placement's doing alone. Measured
  // choice may keep a kernel that writes only dense output where it wins by more than the copy
  // (MeasuredChoiceChargesTheConcatCopy).
  auto prog = cpu::CpuProgram::compile(g, layers, pool, variant, cpu::KernelChoice::kRules);
  EXPECT_TRUE(prog.ok()) << prog.status().to_string();
  if (!prog.ok()) return c;
  c.describe = (*prog)->describe();
  c.in_place = (*prog)->num_in_place_concat_inputs();
  auto ref_dev = open_device("reference");
  EXPECT_TRUE(ref_dev.ok());
  if (!ref_dev.ok()) return c;
  auto ref = (*ref_dev)->compile(g, layers);
  EXPECT_TRUE(ref.ok()) << ref.status().to_string();
  if (!ref.ok()) return c;

  std::vector<Tensor> feeds;
  uint32_t seed = 100;
  for (ValueId v : (*prog)->input_values()) {
    feeds.push_back(random_tensor(g.value(v).info.shape, seed++));
  }
  std::vector<Tensor> got((*prog)->output_values().size()), want(got.size());
  // Twice: results must not depend on what the previous run left in the arena.
  for (int rep = 0; rep < 2; ++rep) {
    Status rs = (*prog)->run(feeds, got);
    EXPECT_TRUE(rs.ok()) << rs.to_string();
    if (!rs.ok()) return c;
  }
  // The per-layer timing path runs the same steps.
  std::vector<Tensor> timed(got.size());
  std::vector<double> layer_ms;
  st = (*prog)->run(feeds, timed, RunOptions::timed(&layer_ms));
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(layer_ms.size(), layers.size());
  for (double ms : layer_ms) EXPECT_GE(ms, 0.0);
  st = (*ref)->run(feeds, want);
  EXPECT_TRUE(st.ok()) << st.to_string();
  if (!st.ok()) return c;
  for (size_t o = 0; o < got.size(); ++o) {
    SCOPED_TRACE("output " + std::to_string(o) + "\n" + c.describe);
    EXPECT_EQ(got[o].shape(), want[o].shape());
    EXPECT_EQ(timed[o].shape(), want[o].shape());
    if (got[o].shape() != want[o].shape() || timed[o].shape() != want[o].shape()) continue;
    float range = 0;
    for (float y : want[o].span<float>()) range = std::max(range, std::fabs(y));
    // Winograd F(4x4) loses about two digits more than direct convolution: relative to range.
    const float tol = 1e-4f + 5e-4f * range;
    int reported = 0;
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      const float x = got[o].data<float>()[i], t = timed[o].data<float>()[i],
                  y = want[o].data<float>()[i];
      if ((!(std::fabs(x - y) <= tol) || t != x) && reported++ < 5)
        ADD_FAILURE() << "[" << i << "]: cpu " << x << " (timed " << t << "), reference " << y;
    }
  }
  return c;
}

bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

class ConcatInPlaceTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (cpu_pool_on_first_cores(GetParam()) == nullptr)
      GTEST_SKIP() << "needs " << GetParam() << " cores";
  }
};

// SqueezeNet's fire module: squeeze 1x1, then expand 1x1 and expand 3x3 concatenated. Two of them
// in a row (XNNPACK expands from 16 squeeze channels, Tessera's GEMM and Winograd from 32).
TEST_P(ConcatInPlaceTest, FireModules) {
  Net net;
  ValueId x = net.input(Shape{1, 48, 15, 15});
  for (int64_t squeeze : {16, 32}) {
    const ValueId s = net.conv(x, squeeze, 1);
    x = net.concat({net.conv(s, 4 * squeeze, 1), net.conv(s, 4 * squeeze, 3)});
  }
  net.output(net.conv(x, 10, 1));
  const Compiled c = check(net, GetParam());
  EXPECT_EQ(c.in_place, 4) << c.describe;
  EXPECT_TRUE(contains(c.describe, "tessera concat (2 of 2 in place)")) << c.describe;
}

// An inception block: four branches (1x1; 1x1 -> 3x3; 1x1 -> 3x3; a pool alone or a pool -> 1x1),
// max and average pools writing in place too.
TEST_P(ConcatInPlaceTest, InceptionBlocks) {
  Net net;
  ValueId x = net.input(Shape{2, 40, 14, 14});
  for (int block = 0; block < 3; ++block) {
    const ValueId b1 = net.conv(x, 16, 1);
    const ValueId b2 = net.conv(net.conv(x, 24, 1), 32, 3);
    const ValueId b3 = net.conv(net.conv(x, 8, 1), 13, 3);
    ValueId b4 = net.pool(block == 1 ? OpKind::kAveragePool : OpKind::kMaxPool, x, 3, 1, 1);
    if (block == 2) b4 = net.conv(b4, 11, 1);
    x = net.concat({b1, b2, b3, b4});
  }
  net.output(net.pool(OpKind::kMaxPool, x, 3, 2, 0));
  const Compiled c = check(net, GetParam());
  EXPECT_EQ(c.in_place, 12) << c.describe;
  EXPECT_TRUE(contains(c.describe, "tessera concat (4 of 4 in place)")) << c.describe;
  EXPECT_TRUE(contains(c.describe, "maxpool")) << c.describe;
  EXPECT_TRUE(contains(c.describe, "avgpool")) << c.describe;
}

// Inputs that must keep the copy: one also read by another layer, one that is a program output,
// the program input itself. The others still go in place.
TEST_P(ConcatInPlaceTest, SharedInputsAndProgramInputsAreCopied) {
  Net net;
  const ValueId x = net.input(Shape{1, 24, 9, 11});
  const ValueId shared = net.conv(x, 16, 3);
  const ValueId leaves = net.conv(x, 8, 1);
  const ValueId alone = net.conv(x, 13, 3);
  const ValueId y = net.concat({x, shared, leaves, alone});
  net.output(net.conv(y, 6, 1));
  net.output(net.conv(shared, 5, 1));
  net.output(leaves);
  const Compiled c = check(net, GetParam());
  EXPECT_EQ(c.in_place, 1) << c.describe;
  EXPECT_TRUE(contains(c.describe, "tessera concat (1 of 4 in place)")) << c.describe;
}

// The same tensor twice in one concat, and an input read through a reshape, are copied.
TEST_P(ConcatInPlaceTest, RepeatedAndReshapedInputsAreCopied) {
  Net net;
  const ValueId x = net.input(Shape{1, 8, 7, 7});
  const ValueId a = net.conv(x, 13, 3);
  const ValueId b = net.conv(x, 3, 1);
  const ValueId flat = net.add(OpKind::kFlatten, {b}, {}, 0);
  net.output(net.concat({a, a, b}));
  net.output(flat);
  const Compiled c = check(net, GetParam());
  EXPECT_EQ(c.in_place, 0) << c.describe;
  EXPECT_TRUE(contains(c.describe, "tessera concat\n")) << c.describe;
}

// A concat inside a concat: the inner one's output is itself a slice of the outer one's, so its
// producers write into the outer tensor at their combined offset and neither concat copies.
// When the inner result is also read elsewhere, only the inner concat works in place.
TEST_P(ConcatInPlaceTest, NestedConcats) {
  Net net;
  const ValueId x = net.input(Shape{1, 32, 10, 10});
  const ValueId inner = net.concat({net.conv(x, 3, 1), net.conv(x, 13, 3)});
  const ValueId outer = net.concat({net.conv(x, 33, 1), inner, net.conv(x, 5, 3)});
  net.output(net.conv(outer, 7, 1));
  const ValueId inner2 = net.concat({net.conv(x, 16, 3), net.conv(x, 16, 1)});
  const ValueId outer2 = net.concat({inner2, net.conv(x, 3, 3)});
  net.output(net.conv(outer2, 4, 1));
  net.output(inner2);
  const Compiled c = check(net, GetParam());
  // outer: 3 of 3; inner: 2 of 2; inner2: 2 of 2; outer2: its conv only.
  EXPECT_EQ(c.in_place, 3 + 2 + 2 + 1) << c.describe;
  EXPECT_TRUE(contains(c.describe, "tessera concat (3 of 3 in place)")) << c.describe;
  EXPECT_TRUE(contains(c.describe, "tessera concat (1 of 2 in place)")) << c.describe;
}

// Odd channel counts (vector tails of every store path), batch 2, odd map sizes. A one-channel
// input has the same bytes in both layouts and is kept dense (copied).
TEST_P(ConcatInPlaceTest, OddChannelCounts) {
  Net net;
  const ValueId x = net.input(Shape{2, 33, 9, 13});
  const ValueId y =
      net.concat({net.conv(x, 3, 1), net.conv(x, 13, 3), net.conv(x, 1, 3), net.conv(x, 33, 1)});
  net.output(net.conv(y, 13, 3));
  const Compiled c = check(net, GetParam());
  EXPECT_EQ(c.in_place, 3) << c.describe;
  EXPECT_TRUE(contains(c.describe, "tessera concat (3 of 4 in place)")) << c.describe;
}

// Along H the inputs are not channel slices: the concat copies (and still matches).
TEST_P(ConcatInPlaceTest, ConcatAlongHeightCopies) {
  Net net;
  const ValueId x = net.input(Shape{1, 16, 6, 7});
  const ValueId y = net.concat({net.conv(x, 8, 3), net.conv(x, 8, 1)}, 2);
  net.output(net.conv(y, 5, 3));
  const Compiled c = check(net, GetParam());
  EXPECT_EQ(c.in_place, 0) << c.describe;
  EXPECT_FALSE(contains(c.describe, "in place")) << c.describe;
}

// A slice of a model: the concat's inputs made outside the program arrive as program inputs and
// are copied; those made inside go in place.
TEST_P(ConcatInPlaceTest, SliceBoundary) {
  Net net;
  const ValueId x = net.input(Shape{1, 16, 12, 12});
  const ValueId a = net.conv(x, 8, 1);   // nodes 0 (conv, relu fused)
  const ValueId b = net.conv(x, 12, 3);  // 1
  const ValueId y = net.concat({a, b});  // 2
  net.output(net.conv(y, 4, 1));         // 3
  const Compiled c = check(net, GetParam(), {1, 2, 3});
  EXPECT_EQ(c.in_place, 1) << c.describe;
  EXPECT_TRUE(contains(c.describe, "tessera concat (1 of 2 in place)")) << c.describe;
}

INSTANTIATE_TEST_SUITE_P(Cpu, ConcatInPlaceTest, ::testing::Values(1, 2),
                         [](const auto& p) { return std::to_string(p.param) + "_threads"; });

// Every convolution variant writes its slice with the output's pixel stride, including a fused
// activation the clamp cannot express (Tessera's GEMM runs it per item, Winograd per pixel);
// XNNPACK then applies it in a separate dense pass, so its output keeps the copy, and oneDNN's
// f32 kernel always writes densely.
class ConcatInPlaceVariantTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ConcatInPlaceVariantTest, EveryConvVariantWritesItsSlice) {
  const cpu::KernelEntry& entry = cpu::kConvKernels[std::get<0>(GetParam())];
  const int threads = std::get<1>(GetParam());
  if (cpu_pool_on_first_cores(threads) == nullptr) GTEST_SKIP() << "needs " << threads << " cores";
  for (const char* activation : {"relu", "sigmoid"}) {
    SCOPED_TRACE(std::string(entry.variant) + " " + activation);
    Net net;
    const ValueId x = net.input(Shape{1, 16, 14, 14});
    const ValueId y = net.concat(
        {net.conv(x, 13, 3, 1, false, activation), net.conv(x, 40, 3, 1, false, activation)});
    net.output(net.pool(OpKind::kMaxPool, y, 2, 2, 0));
    // Probe whether this machine has the variant (OpenBLAS, AVX-512).
    {
      Graph probe = net.g;
      ASSERT_TRUE(probe.infer_shapes().ok());
      const NodeId layers[] = {0, 1, 2, 3};
      auto p =
          cpu::CpuProgram::compile(probe, layers, cpu_pool_on_first_cores(threads), entry.variant);
      if (!p.ok() && p.status().code() == StatusCode::kUnimplemented)
        GTEST_SKIP() << p.status().to_string();
    }
    const Compiled c = check(net, threads, {}, entry.variant);
    const bool xnn_pass = std::string_view(entry.variant).starts_with("xnnpack") &&
                          std::string_view(activation) == "sigmoid";
    const bool dense_only = std::string_view(entry.variant).starts_with("onednn");
    EXPECT_EQ(c.in_place, xnn_pass || dense_only ? 0 : 2) << c.describe;
  }
}

// A convolution with a fused residual Add (and ReLU after it) writing into a Concat: the
// variants that write strided outputs add the residual to their slice; oneDNN's f32 kernel
// writes densely (a strided destination would run oneDNN's reference implementation) and the
// Concat copies.
TEST_P(ConcatInPlaceVariantTest, ResidualFusedConvWritesItsSlice) {
  const cpu::KernelEntry& entry = cpu::kConvKernels[std::get<0>(GetParam())];
  const int threads = std::get<1>(GetParam());
  if (cpu_pool_on_first_cores(threads) == nullptr) GTEST_SKIP() << "needs " << threads << " cores";
  SCOPED_TRACE(entry.variant);
  Net net;
  const ValueId x = net.input(Shape{1, 16, 14, 14});
  const ValueId a = net.conv(x, 16, 3, 1, /*relu=*/false);
  const ValueId r = net.add(OpKind::kRelu, {net.add(OpKind::kAdd, {a, x}, {}, 16)}, {}, 16);
  const ValueId y = net.concat({r, net.conv(x, 24, 3)});
  net.output(net.pool(OpKind::kMaxPool, y, 2, 2, 0));
  {
    Graph probe = net.g;
    ASSERT_TRUE(probe.infer_shapes().ok());
    std::vector<NodeId> layers;
    for (NodeId i = 0; i < probe.num_nodes(); ++i) layers.push_back(i);
    auto p =
        cpu::CpuProgram::compile(probe, layers, cpu_pool_on_first_cores(threads), entry.variant);
    if (!p.ok() && p.status().code() == StatusCode::kUnimplemented)
      GTEST_SKIP() << p.status().to_string();
  }
  const Compiled c = check(net, threads, {}, entry.variant);
  if (entry.variant == std::string_view("onednn_conv_f32")) {
    EXPECT_NE(c.describe.find("onednn f32 conv 3x3/1 +relu +residual"), std::string::npos)
        << c.describe;
    EXPECT_EQ(c.in_place, 0) << c.describe;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cpu, ConcatInPlaceVariantTest,
    ::testing::Combine(::testing::Range(0, static_cast<int>(cpu::kNumConvKernels)),
                       ::testing::Values(1, 2)),
    [](const auto& p) {
      return std::string(cpu::kConvKernels[std::get<0>(p.param)].variant) + "_" +
             std::to_string(std::get<1>(p.param)) + "_threads";
    });

}  // namespace
}  // namespace tessera
