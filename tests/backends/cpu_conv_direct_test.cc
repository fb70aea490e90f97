// The cpu device's direct few-channel convolution (tessera_direct_conv, conv_direct.cc) against
// the reference convolution on odd shapes: 1-4 input channels (and 8/16), output channel counts
// that fill 1-4 vectors or leave a tail (8, 24, 32, 64, 67: two chunks), strides 1/2/4, padding
// 0-3 on each side independently, 3/5/7 kernels, tiny and odd maps (5x7: every tile is an edge
// tile), batch 2, no/relu/clip/leaky_relu activations, on 1 and 2 threads; and the kernel the
// default dispatch picks for the real stems.
#include <string_view>

#include "backends/cpu/cpu_program.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/kernel_table.h"
#include "tests/backends/backend_test_util.h"
#include "tests/backends/cpu_test_util.h"

namespace tessera {
namespace {

using Ints = std::vector<int64_t>;
using testing::random_tensor;

struct DirectCase {
  Shape x, w;
  Ints pads;  // top, left, bottom, right
  int64_t stride = 1;
  std::string activation;
  bool bias = true;
};

std::string to_string(const DirectCase& c) {
  std::string s =
      c.x.to_string() + " * " + c.w.to_string() + " stride " + std::to_string(c.stride) + " pads";
  for (int64_t p : c.pads) s += " " + std::to_string(p);
  return s + " " + c.activation + (c.bias ? "" : " no bias");
}

// A deterministic walk through the product of the dimensions: each case takes every dimension's
// values in turn at a different pace, so that each value meets many of the others'.
std::vector<DirectCase> direct_cases() {
  const int64_t cins[] = {1, 2, 3, 4, 3, 8, 16};
  const int64_t couts[] = {8, 24, 32, 64, 67};
  const int64_t strides[] = {1, 2, 4};
  const int64_t kernels[] = {3, 5, 7};
  const int64_t maps[][2] = {{5, 7}, {13, 11}, {17, 15}, {31, 29}, {8, 40}, {7, 5}};
  const char* acts[] = {"", "relu", "clip", "leaky_relu"};
  std::vector<DirectCase> cases;
  for (int i = 0; i < 84; ++i) {
    DirectCase c;
    const int64_t cin = cins[i % 7], cout = couts[i % 5], k = kernels[(i / 2) % 3];
    const int64_t* hw = maps[(i / 3) % 6];
    c.stride = strides[(i / 4) % 3];
    c.pads = {i % 4, (i / 5) % 4, (i / 7) % 4, (i + 1) % 4};
    if (hw[0] + c.pads[0] + c.pads[2] < k || hw[1] + c.pads[1] + c.pads[3] < k) {
      c.pads = {k / 2, k / 2, k / 2, k / 2};
    }
    c.x = Shape{i % 11 == 0 ? 2 : 1, cin, hw[0], hw[1]};
    c.w = Shape{cout, cin, k, k};
    c.activation = acts[i % 4];
    c.bias = i % 6 != 5;
    cases.push_back(c);
  }
  return cases;
}

Attributes attrs_of(const DirectCase& c) {
  Attributes a;
  a.set("pads", c.pads);
  a.set("strides", Ints{c.stride, c.stride});
  testing::set_fused_activation(a, c.activation, -0.2f, 0.7f);
  return a;
}

class CpuDirectConvTest : public ::testing::TestWithParam<int> {};

TEST_P(CpuDirectConvTest, MatchesReference) {
  if (!cpu::gemm_available()) GTEST_SKIP() << "no AVX-512F";
  const int threads = GetParam();
  std::shared_ptr<cpu::ThreadPool> pool = testing::cpu_pool_on_first_cores(threads);
  if (pool == nullptr) GTEST_SKIP() << "needs " << threads << " cores";
  uint32_t seed = 7;
  for (const DirectCase& c : direct_cases()) {
    SCOPED_TRACE(to_string(c));
    std::vector<DiffInput> in = {{random_tensor(c.x, seed), false},
                                 {random_tensor(c.w, seed + 1, -0.5f, 0.5f), true}};
    if (c.bias) in.push_back({random_tensor(Shape{c.w[0]}, seed + 2), true});
    seed += 3;
    auto compile = [&](const Graph& g,
                       std::span<const NodeId> layers) -> Result<std::unique_ptr<Program>> {
      auto p = cpu::CpuProgram::compile(g, layers, pool, "tessera_direct_conv");
      if (!p.ok()) return p.status();
      return std::unique_ptr<Program>(std::move(*p));
    };
    DiffResult r = diff_op_with(compile, "cpu", OpKind::kConv, attrs_of(c), in);
    if (::testing::Test::HasFailure()) return;
    EXPECT_NE(r.kernel.find("tessera direct conv"), std::string::npos) << r.kernel;
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, CpuDirectConvTest, ::testing::Values(1, 2),
                         [](const auto& p) { return std::to_string(p.param) + "_threads"; });

// The default dispatch on the real stems (224x224 RGB input): SqueezeNet 1.1's conv1 (3x3/2,
// 64 channels, no padding, relu), MobileNetV2's (3x3/2, 32 channels, padding 1, relu6),
// ResNet's 7x7/2, AlexNet's 11x11/4 and VGG's stride-1 3x3 run on the direct kernel, and so do
// SqueezeNet's 55x55 16->64 expand3x3s; GoogLeNet's 28x28 16->32 3x3 does not, nor does a
// 3x3/2 with 32 input channels.
TEST(CpuDirectConvSelection, RealStems) {
  if (!cpu::gemm_available()) GTEST_SKIP() << "no AVX-512F";
  std::shared_ptr<cpu::ThreadPool> pool = testing::cpu_pool_on_first_cores(1);
  ASSERT_NE(pool, nullptr);
  struct Want {
    const char* what;
    Shape x, w;
    int64_t pad, stride;
    const char* activation;
    const char* kernel;
  };
  const Want wants[] = {
      {"squeezenet1_1 conv1",
       {1, 3, 224, 224},
       {64, 3, 3, 3},
       0,
       2,
       "relu",
       "tessera direct conv 3x3/2 +relu"},
      {"mobilenet_v2 stem",
       {1, 3, 224, 224},
       {32, 3, 3, 3},
       1,
       2,
       "clip",
       "tessera direct conv 3x3/2 +clip"},
      {"resnet conv1",
       {1, 3, 224, 224},
       {64, 3, 7, 7},
       3,
       2,
       "relu",
       "tessera direct conv 7x7/2 +relu"},
      {"alexnet conv1",
       {1, 3, 224, 224},
       {64, 3, 11, 11},
       2,
       4,
       "relu",
       "tessera direct conv 11x11/4 +relu"},
      {"vgg16 conv1_1",
       {1, 3, 224, 224},
       {64, 3, 3, 3},
       1,
       1,
       "relu",
       "tessera direct conv 3x3/1 +relu"},
      {"squeezenet1_1 fire2 expand3x3",
       {1, 16, 55, 55},
       {64, 16, 3, 3},
       1,
       1,
       "relu",
       "tessera direct conv 3x3/1 +relu"},
      {"googlenet inception3a 3x3",
       {1, 16, 28, 28},
       {32, 16, 3, 3},
       1,
       1,
       "relu",
       "winograd F(2x2,3x3) 3x3/1"},
      {"32-channel 3x3/2",
       {1, 32, 56, 56},
       {64, 32, 3, 3},
       1,
       2,
       "relu",
       "tessera im2col+gemm conv 3x3/2"},
  };
  for (const Want& want : wants) {
    SCOPED_TRACE(want.what);
    Graph g;
    const ValueId x = g.add_value("x", TensorInfo{DType::kF32, want.x});
    g.inputs().push_back(x);
    Node n;
    n.name = "conv";
    n.kind = OpKind::kConv;
    n.attrs.set("pads", Ints{want.pad, want.pad, want.pad, want.pad});
    n.attrs.set("strides", Ints{want.stride, want.stride});
    n.attrs.set("activation", std::string(want.activation));
    if (std::string_view(want.activation) == "clip") {
      n.attrs.set("activation_alpha", 0.f);
      n.attrs.set("activation_beta", 6.f);
    }
    n.inputs = {x, g.add_constant("w", random_tensor(want.w, 1)),
                g.add_constant("b", random_tensor(Shape{want.w[0]}, 2))};
    n.outputs = {g.add_value("y")};
    g.outputs().push_back(n.outputs[0]);
    g.add_node(n);
    ASSERT_TRUE(g.infer_shapes().ok());
    const NodeId layers[] = {0};
    // The rules themselves (measured choice may pick another variant on another CPU).
    auto prog = cpu::CpuProgram::compile(g, layers, pool, nullptr, cpu::KernelChoice::kRules);
    ASSERT_TRUE(prog.ok()) << prog.status().to_string();
    EXPECT_NE((*prog)->describe().find(std::string("conv: ") + want.kernel), std::string::npos)
        << (*prog)->describe();
  }
}

}  // namespace
}  // namespace tessera
