// The cpu device's batch-1 fully connected kernel (Tessera's GEMV, backends/cpu/gemv.h) against
// the reference Gemm and MatMul: every K from 1 to 37 and N from 1 to 67 (vector and panel tails:
// N not a multiple of 16 or of the 64-wide panels, K odd for the two-row steps), larger layers
// with several panels split over the threads, W given [N, K] (transB) and [K, N], alpha and beta,
// bias or none, relu, clip and an activation the clamp cannot express, on one thread and two;
// and which kernel the device picks at batch 1 and above.
#include <string_view>

#include "backends/cpu/cpu_program.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/kernel_table.h"
#include "tests/backends/backend_test_util.h"
#include "tests/backends/cpu_test_util.h"

namespace tessera {
namespace {

using testing::random_tensor;

struct FcCase {
  int64_t k, n;
  bool trans_b = true;
  bool bias = true;
  std::string activation;  // "" for none
  float alpha = 1.f, beta = 1.f;
};

std::vector<FcCase> cases() {
  std::vector<FcCase> v;
  const char* const acts[] = {"", "relu", "clip", "sigmoid"};
  // Every K in 1..37 with N sweeping 1..67 (each N met at least once), alternating the layout of
  // W, the bias and the activation.
  for (int64_t k = 1; k <= 37; ++k) {
    for (int64_t n : {k, 68 - k, (k * 29) % 67 + 1}) {
      v.push_back({k, n, k % 2 == 0, k % 3 != 0, acts[(k + n) % 4]});
    }
  }
  // Several panels (uneven splits over two threads), a narrow last panel, larger K.
  v.push_back({300, 1000, true, true, "relu"});
  v.push_back({129, 200, false, false, ""});
  v.push_back({1000, 129, true, true, "clip", 0.5f, 2.f});
  v.push_back({64, 640, false, true, "sigmoid", -1.5f, 0.25f});
  v.push_back({77, 65, true, true, "relu"});
  return v;
}

Attributes attrs_of(const FcCase& c, bool gemm) {
  Attributes a;
  if (gemm) {
    a.set("transB", int64_t{c.trans_b ? 1 : 0});
    if (c.alpha != 1.f) a.set("alpha", c.alpha);
    if (c.beta != 1.f) a.set("beta", c.beta);
  }
  testing::set_fused_activation(a, c.activation, -0.2f, 0.7f);
  return a;
}

class CpuGemvTest : public ::testing::TestWithParam<int> {};

TEST_P(CpuGemvTest, MatchesReference) {
  if (!cpu::gemm_available()) GTEST_SKIP() << "no AVX-512F";
  const int threads = GetParam();
  std::shared_ptr<cpu::ThreadPool> shared = testing::cpu_pool_on_first_cores(threads);
  if (shared == nullptr) GTEST_SKIP() << "needs " << threads << " cores";
  auto compile = [&](const Graph& g,
                     std::span<const NodeId> layers) -> Result<std::unique_ptr<Program>> {
    ASSIGN_OR_RETURN(auto p, cpu::CpuProgram::compile(g, layers, shared, "tessera_gemv_f32"));
    return std::unique_ptr<Program>(std::move(p));
  };
  uint32_t seed = 1;
  for (const FcCase& c : cases()) {
    for (bool gemm : {true, false}) {
      // MatMul has no bias, alpha or transposed B.
      if (!gemm && (c.trans_b || c.bias || c.alpha != 1.f)) continue;
      SCOPED_TRACE(std::string(gemm ? "Gemm" : "MatMul") + " k " + std::to_string(c.k) + " n " +
                   std::to_string(c.n) + (c.trans_b ? " transB" : "") + (c.bias ? " bias " : " ") +
                   c.activation);
      const Shape w = c.trans_b ? Shape{c.n, c.k} : Shape{c.k, c.n};
      std::vector<DiffInput> in = {{random_tensor(Shape{1, c.k}, seed), false},
                                   {random_tensor(w, seed + 1, -0.5f, 0.5f), true}};
      if (c.bias) in.push_back({random_tensor(Shape{c.n}, seed + 2), true});
      seed += 3;
      DiffResult r = diff_op_with(compile, "tessera_gemv_f32",
                                  gemm ? OpKind::kGemm : OpKind::kMatMul, attrs_of(c, gemm), in);
      EXPECT_NE(r.kernel.find("tessera gemv"), std::string::npos) << r.kernel;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, CpuGemvTest, ::testing::Values(1, 2),
                         [](const auto& p) { return std::to_string(p.param) + "_threads"; });

// Dispatch: batch 1 runs on the GEMV, batch 2 on XNNPACK (both checked against the reference);
// the GEMV forced onto batch 2 is an error naming the node.
TEST(CpuGemvSelection, BatchOneOnly) {
  if (!cpu::gemm_available()) GTEST_SKIP() << "no AVX-512F";
  std::shared_ptr<cpu::ThreadPool> shared = testing::cpu_pool_on_first_cores(1);
  ASSERT_NE(shared, nullptr);
  for (int64_t m : {1, 2}) {
    auto compile = [&](const Graph& g,
                       std::span<const NodeId> layers) -> Result<std::unique_ptr<Program>> {
      if (m == 2) {
        auto forced = cpu::CpuProgram::compile(g, layers, shared, "tessera_gemv_f32");
        EXPECT_FALSE(forced.ok());
        if (!forced.ok()) {
          EXPECT_EQ(forced.status().code(), StatusCode::kUnimplemented);
          EXPECT_NE(forced.status().to_string().find(g.node(layers[0]).name), std::string::npos)
              << forced.status().to_string();
        }
      }
      // The rules (measured choice may pick XNNPACK for batch 1 on another CPU).
      ASSIGN_OR_RETURN(
          auto p, cpu::CpuProgram::compile(g, layers, shared, nullptr, cpu::KernelChoice::kRules));
      return std::unique_ptr<Program>(std::move(p));
    };
    Attributes attrs;
    attrs.set("transB", int64_t{1});
    DiffResult r = diff_op_with(
        compile, "cpu", OpKind::kGemm, attrs,
        {{random_tensor(Shape{m, 40}, 1), false}, {random_tensor(Shape{24, 40}, 2), true}});
    EXPECT_NE(r.kernel.find(m == 1 ? "tessera gemv 40->24" : "xnnpack fully connected 40->24"),
              std::string::npos)
        << r.kernel;
  }
}

}  // namespace
}  // namespace tessera
