// tessera_depthwise_conv (backends/cpu/conv_depthwise.cc) against the reference kernels: channel
// counts around the 16-lane blocks, kernels 1x1 to 7x7 (and non-square), strides 1-3, padding
// of every kind (asymmetric, wider than the kernel), batches, fused activations, 1 and 2
// threads, interior and edge tiles; and the configurations it must decline.
#include <gtest/gtest.h>

#include <string>

#include "backends/cpu/cpu_program.h"
#include "backends/cpu/simd.h"
#include "backends/registry.h"
#include "tests/backends/backend_test_util.h"
#include "tests/backends/cpu_test_util.h"
#include "tests/ops/op_test_util.h"

namespace tessera {
namespace {

using Ints = std::vector<int64_t>;
using testing::random_tensor;

struct DwCase {
  int64_t n, c, h, w, kh, kw, stride;
  Ints pads;  // top, left, bottom, right
  std::string activation;
  bool bias = true;
};

const DwCase kCases[] = {
    {1, 32, 112, 112, 3, 3, 1, {1, 1, 1, 1}, "clip"},  // MobileNetV2's first
    {1, 96, 112, 112, 3, 3, 2, {1, 1, 1, 1}, "clip"},  // its first stride-2
    {1, 144, 56, 56, 3, 3, 1, {1, 1, 1, 1}, "relu"},
    {1, 1, 9, 10, 3, 3, 1, {1, 1, 1, 1}, ""},
    {2, 7, 11, 13, 3, 3, 1, {0, 0, 0, 0}, "relu", false},
    {1, 17, 15, 9, 5, 5, 1, {2, 2, 2, 2}, "sigmoid"},
    {1, 33, 14, 14, 5, 5, 2, {1, 2, 2, 1}, "relu"},
    {1, 16, 7, 7, 7, 7, 1, {3, 3, 3, 3}, ""},
    {1, 48, 23, 21, 7, 7, 2, {3, 3, 3, 3}, "clip"},
    {2, 20, 9, 30, 3, 5, 1, {1, 2, 1, 2}, "leaky_relu"},
    {1, 24, 19, 17, 3, 3, 3, {1, 1, 1, 1}, "relu"},
    {1, 31, 6, 5, 3, 3, 1, {4, 3, 2, 4}, ""},  // padding wider than the kernel
    {1, 40, 8, 8, 1, 1, 1, {0, 0, 0, 0}, "relu"},
    {1, 18, 5, 40, 3, 3, 2, {0, 1, 1, 0}, ""},
    {1, 64, 2, 2, 3, 3, 1, {1, 1, 1, 1}, "relu"},
};

Attributes attrs_of(const DwCase& c, int64_t group, int64_t dilation = 1) {
  Attributes a;
  a.set("pads", c.pads);
  a.set("strides", Ints{c.stride, c.stride});
  a.set("dilations", Ints{dilation, dilation});
  a.set("group", group);
  testing::set_fused_activation(a, c.activation, 0.f, 6.f);
  return a;
}

class CpuDepthwiseTest : public ::testing::TestWithParam<int> {};

TEST_P(CpuDepthwiseTest, MatchesReference) {
  if (!cpu::has_avx512()) GTEST_SKIP() << "no AVX-512F";
  const int threads = GetParam();
  auto pool = testing::cpu_pool_on_first_cores(threads);
  if (pool == nullptr) GTEST_SKIP() << "needs " << threads << " cores";
  uint32_t seed = 1;
  for (const DwCase& c : kCases) {
    const Shape xs{c.n, c.c, c.h, c.w};
    SCOPED_TRACE("x " + xs.to_string() + " k " + std::to_string(c.kh) + "x" + std::to_string(c.kw) +
                 " stride " + std::to_string(c.stride) + " " + c.activation);
    std::vector<DiffInput> in = {{random_tensor(Shape{c.n, c.c, c.h, c.w}, seed), false},
                                 {random_tensor(Shape{c.c, 1, c.kh, c.kw}, seed + 1), true}};
    if (c.bias) in.push_back({random_tensor(Shape{c.c}, seed + 2), true});
    seed += 3;
    auto compile = [&](const Graph& g,
                       std::span<const NodeId> layers) -> Result<std::unique_ptr<Program>> {
      ASSIGN_OR_RETURN(auto p, cpu::CpuProgram::compile(g, layers, pool, "tessera_depthwise_conv"));
      return std::unique_ptr<Program>(std::move(p));
    };
    // Through a Pad: the input arrives in NHWC as it does between layers.
    DiffResult r = diff_op_with(compile, "tessera_depthwise_conv", OpKind::kConv, attrs_of(c, c.c),
                                in, 1, 1e-5f, 1e-5f, false, true);
    EXPECT_NE(r.kernel.find("tessera depthwise conv"), std::string::npos) << r.kernel;
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, CpuDepthwiseTest, ::testing::Values(1, 2),
                         [](const auto& p) { return std::to_string(p.param) + "_threads"; });

// Two depthwise convolutions feeding a channel Concat write straight into their slices of its
// output (a pixel stride wider than their channels), with an activation in registers (relu) and
// one applied after the tile (sigmoid).
TEST(CpuDepthwiseConcat, WritesItsSliceOfTheConcat) {
  if (!cpu::has_avx512()) GTEST_SKIP() << "no AVX-512F";
  for (int threads : {1, 2}) {
    auto pool = testing::cpu_pool_on_first_cores(threads);
    if (pool == nullptr) continue;
    for (const char* act : {"relu", "sigmoid"}) {
      SCOPED_TRACE(std::string(act) + " " + std::to_string(threads) + " threads");
      Graph g;
      const Shape xs{1, 20, 13, 17};
      const ValueId x = g.add_value("x", TensorInfo{DType::kF32, xs});
      g.inputs().push_back(x);
      std::vector<ValueId> parts;
      std::vector<NodeId> layers;
      for (int k = 0; k < 2; ++k) {
        Node n;
        n.name = "dw" + std::to_string(k);
        n.kind = OpKind::kConv;
        n.attrs = attrs_of(DwCase{1, 20, 13, 17, 3, 3, 1, {1, 1, 1, 1}, act}, 20);
        n.inputs = {
            x, g.add_constant("w" + std::to_string(k), random_tensor(Shape{20, 1, 3, 3}, 10 + k)),
            g.add_constant("b" + std::to_string(k), random_tensor(Shape{20}, 20 + k))};
        n.outputs = {g.add_value("y" + std::to_string(k))};
        parts.push_back(n.outputs[0]);
        layers.push_back(g.add_node(n));
      }
      Node cat;
      cat.name = "cat";
      cat.kind = OpKind::kConcat;
      cat.attrs.set("axis", int64_t{1});
      cat.inputs = parts;
      cat.outputs = {g.add_value("z")};
      g.outputs().push_back(cat.outputs[0]);
      layers.push_back(g.add_node(cat));
      ASSERT_TRUE(g.infer_shapes().ok());
      auto prog = cpu::CpuProgram::compile(g, layers, pool, "tessera_depthwise_conv");
      ASSERT_TRUE(prog.ok()) << prog.status().to_string();
      EXPECT_EQ((*prog)->num_in_place_concat_inputs(), 2) << (*prog)->describe();
      auto ref_dev = open_device("reference");
      ASSERT_TRUE(ref_dev.ok());
      auto ref = (*ref_dev)->compile(g, layers);
      ASSERT_TRUE(ref.ok());
      const std::vector<Tensor> in = {random_tensor(xs, 3)};
      std::vector<Tensor> got(1), want(1);
      ASSERT_TRUE((*prog)->run(in, got).ok());
      ASSERT_TRUE((*ref)->run(in, want).ok());
      ASSERT_EQ(got[0].shape(), want[0].shape());
      for (int64_t i = 0; i < got[0].numel(); ++i) {
        ASSERT_NEAR(got[0].data<float>()[i], want[0].data<float>()[i], 1e-5f) << i;
      }
    }
  }
}

// Dilation, a channel multiplier and grouped (not depthwise) convolutions are declined: forcing
// the variant onto them is an Unimplemented error naming the node.
TEST(CpuDepthwiseSelection, DeclinesWhatItDoesNotRun) {
  auto pool = testing::cpu_pool_on_first_cores(1);
  ASSERT_NE(pool, nullptr);
  struct Bad {
    Shape w;
    int64_t group, dilation;
  };
  for (const Bad& b : {Bad{{8, 1, 3, 3}, 8, 2}, Bad{{16, 1, 3, 3}, 8, 1}, Bad{{8, 2, 3, 3}, 4, 1},
                       Bad{{8, 8, 3, 3}, 1, 1}}) {
    Graph g = testing::single_node_graph(
        OpKind::kConv,
        attrs_of(DwCase{1, 8, 10, 10, 3, 3, 1, {1, 1, 1, 1}, ""}, b.group, b.dilation),
        {testing::in(random_tensor(Shape{1, 8, 10, 10}, 0)),
         testing::constant(random_tensor(b.w, 1))},
        1);
    g.node(0).name = "dw";
    g.outputs() = g.node(0).outputs;
    ASSERT_TRUE(g.infer_shapes().ok());
    const NodeId layers[] = {0};
    auto p = cpu::CpuProgram::compile(g, layers, pool, "tessera_depthwise_conv");
    ASSERT_FALSE(p.ok()) << b.w.to_string() << " group " << b.group;
    EXPECT_EQ(p.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(p.status().to_string().find("'dw'"), std::string::npos) << p.status().to_string();
  }
}

}  // namespace
}  // namespace tessera
