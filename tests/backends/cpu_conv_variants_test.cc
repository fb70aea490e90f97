// Every convolution kernel variant of the cpu device (kConvKernels), forced onto layers it would
// not be chosen for, against the reference convolution: odd shapes and channel counts (3, 13,
// 127, 300: vector tails, several K blocks), padding, strides, dilation, batch > 1, tiles cut by
// the image edge, fused
// activations, on one thread and on two (work split over tiles or over output channels).
#include <string_view>

#include "backends/cpu/gemm.h"

#include "backends/cpu/cpu_program.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/onednn.h"
#include "tests/backends/backend_test_util.h"
#include "tests/backends/cpu_test_util.h"

namespace tessera {
namespace {

using Ints = std::vector<int64_t>;
using testing::random_tensor;

struct ConvCase {
  Shape x;
  Shape w;
  Ints pads;
  int64_t stride = 1;
  std::string activation;  // "" for none
  bool bias = true;
  int64_t dilation = 1;
};

// Shapes every variant meets: 3x3 stride-1 (Winograd's domain) with all kinds of edges, 1x1
// (direct GEMM) and strided or larger kernels (im2col).
const ConvCase kCases[] = {
    {{1, 3, 13, 13}, {8, 3, 3, 3}, {1, 1, 1, 1}},
    {{1, 13, 9, 11}, {13, 13, 3, 3}, {1, 1, 1, 1}, 1, "relu"},
    {{2, 127, 7, 7}, {13, 127, 3, 3}, {1, 1, 1, 1}},
    {{1, 16, 14, 14}, {33, 16, 3, 3}, {0, 0, 0, 0}, 1, "", false},
    {{1, 5, 17, 10}, {7, 5, 3, 3}, {0, 1, 2, 1}, 1, "leaky_relu"},
    {{1, 32, 15, 15}, {64, 32, 3, 3}, {1, 1, 1, 1}, 1, "clip"},
    {{3, 8, 6, 5}, {40, 8, 3, 3}, {1, 1, 1, 1}, 1, "sigmoid"},
    {{1, 64, 56, 56}, {64, 64, 3, 3}, {1, 1, 1, 1}, 1, "relu"},
    {{1, 127, 7, 7}, {13, 127, 1, 1}, {0, 0, 0, 0}},
    {{2, 13, 5, 9}, {127, 13, 1, 1}, {0, 0, 0, 0}, 1, "relu"},
    {{1, 64, 14, 14}, {256, 64, 1, 1}, {0, 0, 0, 0}, 2},
    {{1, 3, 23, 23}, {16, 3, 7, 7}, {3, 3, 3, 3}, 2, "relu"},
    {{1, 13, 12, 12}, {20, 13, 3, 3}, {1, 1, 1, 1}, 2},
    {{1, 13, 15, 14}, {20, 13, 3, 3}, {2, 2, 2, 2}, 1, "relu", true, 2},
    {{2, 127, 9, 9}, {33, 127, 3, 3}, {0, 1, 1, 0}, 2, "clip", true, 2},
    {{1, 127, 13, 13}, {31, 127, 1, 1}, {0, 0, 0, 0}, 2, "relu"},
    {{1, 3, 31, 29}, {13, 3, 5, 5}, {2, 1, 2, 1}, 3, "", false},
    {{1, 300, 9, 9}, {70, 300, 3, 3}, {1, 1, 1, 1}, 2, "relu"},
    // RGB stems (3 channels): the undilated gather copies whole kernel rows (kw * 3 floats),
    // cut by the padding on either side; odd widths, strides 1/2/4, kernels 3/7/11, padding on
    // all sides (also wider than the kernel: rows wholly in the padding), 11x11's K = 363 in two
    // K blocks that split a kernel row; dilation 2 takes the per-tap gather.
    {{1, 3, 29, 31}, {8, 3, 3, 3}, {1, 1, 1, 1}, 2, "relu"},
    {{1, 3, 17, 15}, {33, 3, 3, 3}, {0, 0, 0, 0}, 2, "clip"},
    {{1, 3, 9, 11}, {5, 3, 3, 3}, {1, 2, 1, 2}, 1},
    {{2, 3, 19, 21}, {13, 3, 7, 7}, {3, 2, 1, 3}, 2, "relu"},
    {{1, 3, 23, 25}, {64, 3, 7, 7}, {3, 3, 3, 3}, 2, "", false},
    {{1, 3, 27, 29}, {16, 3, 11, 11}, {2, 2, 2, 2}, 4, "relu"},
    {{1, 3, 13, 7}, {9, 3, 11, 11}, {5, 4, 3, 6}, 4},
    {{1, 3, 5, 5}, {4, 3, 3, 3}, {4, 3, 2, 4}, 1, "leaky_relu"},
    {{1, 3, 17, 15}, {8, 3, 3, 3}, {2, 2, 2, 2}, 1, "relu", true, 2},
    {{1, 3, 21, 19}, {16, 3, 7, 7}, {5, 6, 5, 6}, 2, "", true, 2},
};

Attributes attrs_of(const ConvCase& c) {
  Attributes a;
  a.set("pads", c.pads);
  a.set("strides", Ints{c.stride, c.stride});
  a.set("dilations", Ints{c.dilation, c.dilation});
  testing::set_fused_activation(a, c.activation, -0.2f, 0.7f);
  return a;
}

// Whether `variant` must accept the case (every variant may also take more).
bool must_run(std::string_view variant, const ConvCase& c) {
  const bool winograd = c.w[2] == 3 && c.w[3] == 3 && c.stride == 1 && c.dilation == 1;
  if (variant.starts_with("winograd")) return winograd;
  if (variant == "tessera_direct_conv") return c.x[1] <= 16 && c.dilation == 1;
  if (variant == "tessera_depthwise_conv") return false;  // depthwise only: its own test file
  if (variant.starts_with("onednn")) return cpu::onednn_available();
  return true;  // tessera/openblas_gemm_conv and xnnpack take every dense 2-D convolution
}

class CpuConvVariantTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CpuConvVariantTest, MatchesReference) {
  const cpu::KernelEntry& entry = cpu::kConvKernels[std::get<0>(GetParam())];
  const int threads = std::get<1>(GetParam());
  // A variant whose ISA this build or CPU lacks is never offered a node (kernel_table.h).
  if (!cpu::entry_available(entry)) GTEST_SKIP() << cpu::isa_unavailable(entry.isa).to_string();
  std::shared_ptr<cpu::ThreadPool> shared = testing::cpu_pool_on_first_cores(threads);
  if (shared == nullptr) GTEST_SKIP() << "needs " << threads << " cores";
  uint32_t seed = 1;
  for (const ConvCase& c : kCases) {
    SCOPED_TRACE(std::string(entry.variant) + ": " + c.x.to_string() + " * " + c.w.to_string() +
                 " stride " + std::to_string(c.stride) + " dilation " + std::to_string(c.dilation) +
                 " " + c.activation);
    std::vector<DiffInput> in = {{random_tensor(c.x, seed), false},
                                 {random_tensor(c.w, seed + 1, -0.5f, 0.5f), true}};
    if (c.bias) in.push_back({random_tensor(Shape{c.w[0]}, seed + 2), true});
    seed += 3;
    bool declined = false;
    auto compile = [&](const Graph& g,
                       std::span<const NodeId> layers) -> Result<std::unique_ptr<Program>> {
      auto p = cpu::CpuProgram::compile(g, layers, shared, entry.variant);
      if (!p.ok() && p.status().code() == StatusCode::kUnimplemented &&
          !must_run(entry.variant, c)) {
        declined = true;
        // Let the harness compare the dispatched kernel instead.
        p = cpu::CpuProgram::compile(g, layers, shared);
      }
      if (!p.ok()) return p.status();
      return std::unique_ptr<Program>(std::move(*p));
    };
    // Winograd F(4x4) loses about two decimal digits more than direct convolution on these
    // magnitudes (|y| up to ~20): the tolerance is relative to the output range.
    const float tol = std::string_view(entry.variant) == "winograd_f4x4_3x3" ? 5e-4f : 1e-4f;
    DiffResult r =
        diff_op_with(compile, entry.variant, OpKind::kConv, attrs_of(c), in, 1, tol, tol);
    if (!declined && !::testing::Test::HasFailure()) {
      // The kernel description starts with the variant's first word (winograd, tessera...).
      const std::string_view v(entry.variant);
      EXPECT_NE(r.kernel.find(v.substr(0, v.find('_'))), std::string::npos) << r.kernel;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cpu, CpuConvVariantTest,
    ::testing::Combine(::testing::Range(0, static_cast<int>(cpu::kNumConvKernels)),
                       ::testing::Values(1, 2)),
    [](const auto& p) {
      return std::string(cpu::kConvKernels[std::get<0>(p.param)].variant) + "_" +
             std::to_string(std::get<1>(p.param)) + "_threads";
    });

// A variant forced onto a node it cannot run is an error naming the node.
TEST(CpuConvVariantSelection, DispatchAndForcedErrors) {
  auto pool = cpu::ThreadPool::create(cpu::CoreSet({0}));
  ASSERT_TRUE(pool.ok()) << pool.status().to_string();
  std::shared_ptr<cpu::ThreadPool> shared = std::move(*pool);
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 8, 9, 9}});
  g.inputs().push_back(x);
  Node n;
  n.name = "conv5x5";
  n.kind = OpKind::kConv;
  n.inputs = {x, g.add_constant("w", random_tensor(Shape{4, 8, 5, 5}, 1))};
  n.outputs = {g.add_value("y")};
  g.outputs().push_back(n.outputs[0]);
  g.add_node(n);
  ASSERT_TRUE(g.infer_shapes().ok());
  const NodeId layers[] = {0};
  auto forced = cpu::CpuProgram::compile(g, layers, shared, "winograd_f2x2_3x3");
  ASSERT_FALSE(forced.ok());
  EXPECT_EQ(forced.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(forced.status().to_string().find("conv5x5"), std::string::npos)
      << forced.status().to_string();
}

// The default dispatch on an AVX-512 machine: Tessera's GEMM for 1x1 convolutions and for 3x3
// convolutions on 7x7 maps (>= 32 input channels), Winograd F(2x2) on Tessera's GEMM for 3x3 on
// larger maps; for RGB stems the direct kernel (any kernel size and stride), XNNPACK with
// dilation.
TEST(CpuConvVariantSelection, DefaultDispatch) {
  if (!cpu::gemm_available()) GTEST_SKIP() << "no AVX-512F";
  auto pool = cpu::ThreadPool::create(cpu::CoreSet({0}));
  ASSERT_TRUE(pool.ok()) << pool.status().to_string();
  std::shared_ptr<cpu::ThreadPool> shared = std::move(*pool);
  struct Want {
    Shape x, w;
    int64_t pad, stride;
    const char* kernel;
    int64_t dilation = 1;
  };
  const Want wants[] = {
      {{1, 64, 28, 28}, {256, 64, 1, 1}, 0, 1, "tessera gemm conv 1x1/1"},
      {{1, 64, 28, 28}, {128, 64, 1, 1}, 0, 2, "tessera im2col+gemm conv 1x1/2"},
      {{1, 128, 7, 7}, {128, 128, 3, 3}, 1, 1, "tessera im2col+gemm conv 3x3/1"},
      {{1, 64, 28, 28}, {64, 64, 3, 3}, 1, 1, "winograd F(2x2,3x3) 3x3/1 (tessera gemm)"},
      {{1, 3, 32, 32}, {16, 3, 7, 7}, 3, 2, "tessera direct conv 7x7/2"},
      {{1, 3, 32, 32}, {16, 3, 11, 11}, 2, 4, "tessera direct conv 11x11/4"},
      {{1, 3, 32, 32}, {16, 3, 3, 3}, 1, 2, "tessera direct conv 3x3/2"},
      {{1, 3, 32, 32}, {16, 3, 3, 3}, 1, 1, "tessera direct conv 3x3/1"},
      {{1, 3, 32, 32}, {16, 3, 1, 1}, 0, 1, "xnnpack conv 1x1/1"},
      {{1, 3, 32, 32}, {16, 3, 7, 7}, 3, 2, "xnnpack conv 7x7/2", 2},
  };
  for (const Want& want : wants) {
    Graph g;
    const ValueId x = g.add_value("x", TensorInfo{DType::kF32, want.x});
    g.inputs().push_back(x);
    Node n;
    n.name = "conv";
    n.kind = OpKind::kConv;
    n.attrs.set("pads", Ints{want.pad, want.pad, want.pad, want.pad});
    n.attrs.set("strides", Ints{want.stride, want.stride});
    n.attrs.set("dilations", Ints{want.dilation, want.dilation});
    n.inputs = {x, g.add_constant("w", random_tensor(want.w, 1))};
    n.outputs = {g.add_value("y")};
    g.outputs().push_back(n.outputs[0]);
    g.add_node(n);
    ASSERT_TRUE(g.infer_shapes().ok());
    const NodeId layers[] = {0};
    // The rules themselves (measured choice may pick another variant on another CPU).
    auto prog = cpu::CpuProgram::compile(g, layers, shared, nullptr, cpu::KernelChoice::kRules);
    ASSERT_TRUE(prog.ok()) << prog.status().to_string();
    EXPECT_NE((*prog)->describe().find(std::string("conv: ") + want.kernel), std::string::npos)
        << (*prog)->describe();
  }
}

}  // namespace
}  // namespace tessera
