// Packed weights shared between the nodes of a cpu program (backends/cpu/pack_cache.h): one
// constant read by several Conv nodes (same and other input sizes, strides, padding, bias) and by
// several Gemm/MatMul nodes is packed once per packing. Outputs are compared with the reference
// device, and the program's memory (CpuProgram::kernel_bytes, part of peak_memory_bytes) with
// the one-node program's: about one packed copy, not one per node. Nodes whose packed bytes
// differ (another alpha, bias, or transB) must not share.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/cpu_program.h"
#include "backends/cpu/gemm.h"
#include "tests/backends/backend_test_util.h"
#include "tests/backends/cpu_test_util.h"

namespace tessera {
namespace {

using Ints = std::vector<int64_t>;
using testing::random_tensor;

struct Built {
  Graph g;
  std::vector<NodeId> layers;
  std::vector<Tensor> feeds;
  uint32_t seed = 11;

  ValueId input(const std::string& name, const Shape& s) {
    const ValueId v = g.add_value(name, TensorInfo{DType::kF32, s});
    g.inputs().push_back(v);
    feeds.push_back(random_tensor(s, seed++));
    return v;
  }
  ValueId node(OpKind kind, const std::string& name, std::vector<ValueId> inputs,
               Attributes attrs = {}) {
    Node n;
    n.name = name;
    n.kind = kind;
    n.attrs = std::move(attrs);
    n.inputs = std::move(inputs);
    n.outputs = {g.add_value(name)};
    layers.push_back(g.add_node(n));
    return n.outputs[0];
  }
  ValueId conv(const std::string& name, ValueId x, ValueId w, ValueId b, int64_t k, int64_t stride,
               int64_t pad) {
    Attributes a;
    a.set("pads", Ints{pad, pad, pad, pad});
    a.set("strides", Ints{stride, stride});
    a.set("kernel_shape", Ints{k, k});
    std::vector<ValueId> in = {x, w};
    if (b != kNoValue) in.push_back(b);
    return node(OpKind::kConv, name, in, a);
  }
};

// Runs `layers` on cpu (variant forced when not null, 1 or 2 threads) and on the reference
// device and compares every output; returns the cpu program.
std::unique_ptr<cpu::CpuProgram> run_and_compare(Built& b, std::span<const NodeId> layers,
                                                 const char* variant, int threads) {
  std::shared_ptr<cpu::ThreadPool> pool = testing::cpu_pool_on_first_cores(threads);
  if (pool == nullptr) return nullptr;
  auto prog = cpu::CpuProgram::compile(b.g, layers, pool, variant);
  EXPECT_TRUE(prog.ok()) << prog.status().to_string();
  if (!prog.ok()) return nullptr;
  auto ref_dev = open_device("reference");
  EXPECT_TRUE(ref_dev.ok());
  auto ref = (*ref_dev)->compile(b.g, layers);
  EXPECT_TRUE(ref.ok()) << ref.status().to_string();
  if (!ref.ok()) return nullptr;
  std::vector<Tensor> feeds;
  for (ValueId v : (*prog)->input_values()) {
    const auto in = std::find(b.g.inputs().begin(), b.g.inputs().end(), v);
    EXPECT_NE(in, b.g.inputs().end()) << "slice input " << b.g.value(v).name;
    if (in == b.g.inputs().end()) return nullptr;
    feeds.push_back(b.feeds[static_cast<size_t>(in - b.g.inputs().begin())]);
  }
  std::vector<Tensor> got((*prog)->output_values().size()), want(got.size());
  EXPECT_TRUE((*prog)->run(feeds, got).ok());
  EXPECT_TRUE((*ref)->run(feeds, want).ok());
  for (size_t o = 0; o < got.size(); ++o) {
    EXPECT_EQ(got[o].shape(), want[o].shape());
    if (got[o].shape() != want[o].shape()) continue;
    int reported = 0;
    for (int64_t i = 0; i < got[o].numel(); ++i) {
      const float x = got[o].data<float>()[i], y = want[o].data<float>()[i];
      if (!(std::fabs(x - y) <= 2e-4f + 2e-4f * std::fabs(y)) && reported++ < 5) {
        ADD_FAILURE() << "output " << o << " [" << i << "]: cpu " << x << " vs reference " << y
                      << "\n"
                      << (*prog)->describe();
      }
    }
  }
  return std::move(*prog);
}

// Four convolutions with one weight tensor: chained (3x3/1, then 3x3/2 on its output), another
// input size without padding or bias, and one with another bias; a fifth with its own weights.
struct ConvCase {
  Built b;
  NodeId first = kNoNode;
  int sharing = 4;  // nodes that read the shared weight
};

void build_convs(ConvCase& c, int64_t ch) {
  Built& b = c.b;
  const ValueId x = b.input("x", Shape{1, ch, 12, 11});
  const ValueId x2 = b.input("x2", Shape{2, ch, 7, 5});
  const ValueId w = b.g.add_constant("w", random_tensor(Shape{ch, ch, 3, 3}, 3, -0.3f, 0.3f));
  const ValueId bias = b.g.add_constant("bias", random_tensor(Shape{ch}, 4));
  const ValueId bias2 = b.g.add_constant("bias2", random_tensor(Shape{ch}, 5));
  const ValueId own = b.g.add_constant("own", random_tensor(Shape{ch, ch, 3, 3}, 6, -0.3f, 0.3f));
  const ValueId y1 = b.conv("a", x, w, bias, 3, 1, 1);
  c.first = b.layers.back();
  const ValueId y2 = b.conv("b", y1, w, bias, 3, 2, 1);
  const ValueId y3 = b.conv("c", x2, w, kNoValue, 3, 1, 0);
  const ValueId y4 = b.conv("d", x, w, bias2, 3, 2, 0);
  const ValueId y5 = b.conv("e", x, own, bias, 3, 1, 1);
  for (ValueId v : {y2, y3, y4, y5}) b.g.outputs().push_back(v);
  ASSERT_TRUE(b.g.infer_shapes().ok());
}

class CpuSharedConvWeights : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(CpuSharedConvWeights, PackedOnceAndMatchReference) {
  const auto [variant, threads] = GetParam();
  if (!cpu::gemm_available()) GTEST_SKIP() << "no AVX-512";
  ConvCase c;
  build_convs(c, 33);
  if (::testing::Test::HasFatalFailure()) return;
  auto prog = run_and_compare(c.b, c.b.layers, variant, threads);
  if (prog == nullptr) GTEST_SKIP() << "fewer than " << threads << " cores";
  const NodeId one[] = {c.first};
  auto single = run_and_compare(c.b, one, variant, threads);
  ASSERT_NE(single, nullptr);
  const uint64_t packed = single->packs().bytes();
  ASSERT_GE(packed, 33u * 33 * 9 * sizeof(float));
  // Shared: the weight's packing once (4 readers), the own-weight node's once.
  EXPECT_EQ(prog->packs().hits(), c.sharing - 1) << prog->describe();
  EXPECT_EQ(prog->packs().bytes(), 2 * packed);
  // The rest of the kernels' memory is biases and the like: far below one more packed copy
  // (one copy per node would be 5 packed copies).
  EXPECT_LT(prog->kernel_bytes(), single->kernel_bytes() + packed + packed / 2);
  EXPECT_LT(prog->peak_memory_bytes(), prog->arena_bytes() + 2 * packed + packed / 2);
}

INSTANTIATE_TEST_SUITE_P(Variants, CpuSharedConvWeights,
                         ::testing::Values(std::make_tuple("tessera_gemm_conv", 1),
                                           std::make_tuple("tessera_gemm_conv", 2)));

// Winograd F(2x2): three stride-1 readers of one weight, other input sizes, bias or none.
TEST(CpuSharedWeights, WinogradPacksTransformedWeightsOnce) {
  Built b;
  const int64_t ch = 32;
  const ValueId x = b.input("x", Shape{1, ch, 14, 13});
  const ValueId x2 = b.input("x2", Shape{1, ch, 9, 16});
  const ValueId w = b.g.add_constant("w", random_tensor(Shape{ch, ch, 3, 3}, 3, -0.3f, 0.3f));
  const ValueId bias = b.g.add_constant("bias", random_tensor(Shape{ch}, 4));
  const ValueId y1 = b.conv("a", x, w, bias, 3, 1, 1);
  const ValueId y2 = b.conv("b", y1, w, bias, 3, 1, 1);
  const ValueId y3 = b.conv("c", x2, w, kNoValue, 3, 1, 0);
  b.g.outputs().push_back(y2);
  b.g.outputs().push_back(y3);
  ASSERT_TRUE(b.g.infer_shapes().ok());
  if (!cpu::gemm_available()) GTEST_SKIP() << "no AVX-512";
  auto prog = run_and_compare(b, b.layers, "winograd_f2x2_3x3", 1);
  ASSERT_NE(prog, nullptr);
  if (prog->describe().find("tessera gemm") == std::string::npos)
    GTEST_SKIP() << "Winograd runs on OpenBLAS here (no packed weights)";
  const NodeId one[] = {b.layers[0]};
  auto single = run_and_compare(b, one, "winograd_f2x2_3x3", 1);
  ASSERT_NE(single, nullptr);
  // 16 transformed matrices of C x K.
  EXPECT_GE(single->packs().bytes(), 16u * ch * ch * sizeof(float));
  EXPECT_EQ(prog->packs().hits(), 2);
  EXPECT_EQ(prog->packs().bytes(), single->packs().bytes());
  EXPECT_LT(prog->kernel_bytes(), single->kernel_bytes() + single->packs().bytes() / 2);
}

// Gemm and MatMul at batch 1 on Tessera's GEMV: the packed panels hold W (alpha folded in) and
// the bias, so they are shared between nodes with the same W, alpha, bias and beta; a MatMul
// shares with a Gemm without C. Others get their own packing and their own results.
TEST(CpuSharedWeights, GemvSharesPanelsOnlyWhereTheBytesAgree) {
  if (!cpu::gemm_available()) GTEST_SKIP() << "no AVX-512";
  Built b;
  const int64_t n = 57;
  const ValueId x = b.input("x", Shape{1, n});
  const ValueId w = b.g.add_constant("w", random_tensor(Shape{n, n}, 3, -0.2f, 0.2f));
  const ValueId c = b.g.add_constant("c", random_tensor(Shape{n}, 4));
  Attributes half;
  half.set("alpha", 0.5f);
  Attributes trans;
  trans.set("transB", int64_t{1});
  const ValueId h1 = b.node(OpKind::kGemm, "g1", {x, w, c});
  const ValueId h2 = b.node(OpKind::kGemm, "g2", {h1, w, c});         // shares g1's
  const ValueId h3 = b.node(OpKind::kGemm, "g3", {h2, w});            // no bias: its own
  const ValueId h4 = b.node(OpKind::kMatMul, "m4", {h3, w});          // shares g3's
  const ValueId h5 = b.node(OpKind::kGemm, "g5", {h4, w, c}, half);   // alpha: its own
  const ValueId h6 = b.node(OpKind::kGemm, "g6", {h5, w, c}, trans);  // W^T: its own
  b.g.outputs().push_back(h6);
  b.g.outputs().push_back(h2);
  ASSERT_TRUE(b.g.infer_shapes().ok());
  for (int threads : {1, 2}) {
    auto prog = run_and_compare(b, b.layers, "tessera_gemv_f32", threads);
    if (prog == nullptr) continue;
    const NodeId one[] = {b.layers[0]};
    auto single = run_and_compare(b, one, "tessera_gemv_f32", threads);
    ASSERT_NE(single, nullptr);
    const uint64_t packed = single->packs().bytes();
    ASSERT_GE(packed, static_cast<uint64_t>(n * n) * sizeof(float));
    EXPECT_EQ(prog->packs().hits(), 2) << prog->describe();
    // Four packings (g1+g2, g3+m4, g5, g6), g3's without the bias that the others hold.
    EXPECT_EQ(prog->packs().bytes(), 4 * packed - n * sizeof(float));
    EXPECT_EQ(prog->kernel_bytes(), prog->packs().bytes());  // GEMV kernels own nothing else
  }
}

// Without a program (a kernel built on its own, as benchmarks do) the packing is the kernel's:
// counted by its owned_bytes.
TEST(CpuSharedWeights, KernelWithoutCacheOwnsItsPacking) {
  cpu::Gemm own(cpu::PackedB::pack(std::vector<float>(24 * 40, 1.f).data(), 24, 40, 40));
  EXPECT_GE(own.owned_bytes(), 24u * 40 * sizeof(float));
  cpu::PackCache cache;
  int packed = 0;
  auto pack = [&] {
    ++packed;
    return cpu::PackedB::pack(std::vector<float>(24 * 40, 1.f).data(), 24, 40, 40);
  };
  {
    cpu::Gemm a(cpu::share_packing<cpu::PackedB>(&cache, 3, "p", pack));
    cpu::Gemm b2(cpu::share_packing<cpu::PackedB>(&cache, 3, "p", pack));
    cpu::Gemm other(cpu::share_packing<cpu::PackedB>(&cache, 3, "q", pack));
    EXPECT_EQ(&a.b(), &b2.b());
    EXPECT_NE(&a.b(), &other.b());
    EXPECT_EQ(a.owned_bytes(), 0u);
    EXPECT_EQ(cache.bytes(), 2 * own.b().bytes());
    EXPECT_EQ(packed, 2);
  }
  // No kernel holds them any more: freed, and not counted.
  EXPECT_EQ(cache.bytes(), 0u);
}

}  // namespace
}  // namespace tessera
