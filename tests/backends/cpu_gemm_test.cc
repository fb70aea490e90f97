// Tessera's AVX-512 GEMM (backends/cpu/gemm.h) against a naive double-accumulated product:
// M, N, K over the microkernel edges (1, 7, 13, 31, 33, 127, 255, 1000), several K blocks, every
// epilogue (none, bias, relu, clip; with and without a fused residual), A read in place with a
// row stride and A gathered, on one thread and on two (rows or columns split); and the work
// split of small-M products.
#include "backends/cpu/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <random>

namespace tessera::cpu {
namespace {

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

enum class Epi { kNone, kBias, kRelu, kClip };

struct GemmCase {
  int64_t m, n, k;
  Epi epi;
  int64_t kc = 0;  // 0: the cache-derived default
};

const GemmCase kCases[] = {
    {1, 1, 1, Epi::kNone},
    {7, 13, 31, Epi::kBias},
    {13, 33, 7, Epi::kRelu},
    {31, 127, 33, Epi::kClip},
    {33, 7, 255, Epi::kBias},
    {127, 1000, 13, Epi::kRelu},
    {255, 31, 127, Epi::kNone},
    {1000, 33, 1, Epi::kClip},
    {14, 32, 64, Epi::kBias},
    {28, 64, 300, Epi::kRelu},
    {1, 1000, 1000, Epi::kBias},
    {1000, 1, 127, Epi::kRelu},
    {57, 95, 1000, Epi::kClip},
    {200, 256, 576, Epi::kRelu},
    {33, 127, 255, Epi::kBias, 64},
    {127, 33, 1000, Epi::kClip, 100},
    {7, 65, 13, Epi::kRelu, 5},
    // Small M, large N (13x13 and 7x7 maps): the threads split the columns or both dimensions.
    {169, 1000, 512, Epi::kBias},
    {49, 2048, 64, Epi::kRelu},
    {13, 1000, 40, Epi::kNone},
    {29, 600, 77, Epi::kClip},
    {98, 257, 300, Epi::kRelu},
    {49, 512, 1152, Epi::kClip},
    {196, 256, 200, Epi::kNone},
};

class CpuGemmTest : public ::testing::TestWithParam<int> {};

TEST_P(CpuGemmTest, MatchesNaiveProduct) {
  const int threads = GetParam();
  std::vector<int> cores;
  for (int c = 0; c < threads; ++c) cores.push_back(c);
  auto pool = ThreadPool::create(CoreSet(cores));
  if (!pool.ok()) GTEST_SKIP() << pool.status().to_string();
  uint32_t seed = 1;
  for (const GemmCase& t : kCases) {
    for (int variant = 0; variant < 4; ++variant) {
      const bool gathered = variant % 2 == 1, residual = variant >= 2;
      SCOPED_TRACE(std::to_string(t.m) + "x" + std::to_string(t.n) + "x" + std::to_string(t.k) +
                   " epilogue " + std::to_string(static_cast<int>(t.epi)) + " kc " +
                   std::to_string(t.kc) + (gathered ? " gathered" : " in place") +
                   (residual ? " +residual" : ""));
      // A with a row stride larger than K (as an NHWC tensor read at a channel offset).
      const int64_t lda = t.k + 3;
      const std::vector<float> a = random_floats(t.m * lda, seed++);
      const std::vector<float> b = random_floats(t.k * t.n, seed++);
      const std::vector<float> bias = random_floats(t.n, seed++);
      // The residual with its own row stride.
      const int64_t ldr = t.n + 2;
      const std::vector<float> res = random_floats(t.m * ldr, seed++);
      GemmEpilogue ep;
      if (t.epi != Epi::kNone) ep.bias = bias.data();
      if (residual) {
        ep.residual = res.data();
        ep.ldr = ldr;
      }
      if (t.epi == Epi::kRelu) {
        ep.clamp = true;
        ep.lo = 0.f;
        ep.hi = INFINITY;
      } else if (t.epi == Epi::kClip) {
        ep.clamp = true;
        ep.lo = -0.5f;
        ep.hi = 0.75f;
      }

      Gemm gemm(PackedB::pack(b.data(), t.k, t.n, t.n, t.kc));
      gemm.bind(t.m, threads, gathered);
      GemmA src;
      if (gathered) {
        src.gather = [&](int64_t m0, int64_t mc, int64_t k0, int64_t kc, float* dst, int64_t ldd) {
          for (int64_t i = 0; i < mc; ++i) {
            for (int64_t p = 0; p < kc; ++p) dst[i * ldd + p] = a[(m0 + i) * lda + k0 + p];
          }
        };
      } else {
        src.data = a.data();
        src.ld = lda;
      }
      // C with a row stride larger than N; the padding must stay untouched.
      const int64_t ldc = t.n + 5;
      std::vector<float> c(static_cast<size_t>(t.m * ldc), 42.f);
      Status st = (*pool)->run([&] {
        gemm.run(**pool, src, c.data(), ldc, ep);
        return Status();
      });
      ASSERT_TRUE(st.ok()) << st.to_string();

      for (int64_t i = 0; i < t.m; ++i) {
        for (int64_t j = 0; j < ldc; ++j) {
          const float got = c[static_cast<size_t>(i * ldc + j)];
          if (j >= t.n) {
            ASSERT_EQ(got, 42.f) << "wrote past column " << t.n << " in row " << i;
            continue;
          }
          double want = ep.bias != nullptr ? bias[static_cast<size_t>(j)] : 0.0;
          for (int64_t p = 0; p < t.k; ++p) {
            want += static_cast<double>(a[static_cast<size_t>(i * lda + p)]) *
                    b[static_cast<size_t>(p * t.n + j)];
          }
          if (residual) want += res[static_cast<size_t>(i * ldr + j)];
          if (ep.clamp) want = std::min<double>(std::max<double>(want, ep.lo), ep.hi);
          ASSERT_NEAR(got, want, 1e-5 * (1.0 + std::sqrt(static_cast<double>(t.k))))
              << "C[" << i << "][" << j << "]";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, CpuGemmTest, ::testing::Values(1, 2),
                         [](const auto& p) { return std::to_string(p.param) + "_threads"; });

// Small M on two threads: the items cover C exactly once, there are at least 4 per thread (a
// thread slowed by the rest of the machine is made up for), and none is much larger than an
// even share (SqueezeNet's 169 x 1000 classifier as 2 row blocks of 98 + 71 rows was 58/42).
TEST(CpuGemmSplit, SmallMCoversCOnceInBalancedItems) {
  auto pool = ThreadPool::create(CoreSet({0, 1}));
  if (!pool.ok()) GTEST_SKIP() << pool.status().to_string();
  struct Shape3 {
    int64_t m, n, k;
  };
  const Shape3 shapes[] = {
      {169, 1000, 512}, {49, 2048, 512}, {196, 256, 2304}, {49, 512, 4608}, {13, 1000, 64}};
  for (const Shape3& t : shapes) {
    for (bool gathered : {false, true}) {
      SCOPED_TRACE(std::to_string(t.m) + "x" + std::to_string(t.n) + "x" + std::to_string(t.k) +
                   (gathered ? " gathered" : " in place"));
      const std::vector<float> a = random_floats(t.m * t.k, 1), b = random_floats(t.k * t.n, 2);
      Gemm gemm(PackedB::pack(b.data(), t.k, t.n, t.n));
      gemm.bind(t.m, 2, gathered);
      GemmA src;
      if (gathered) {
        src.gather = [&](int64_t m0, int64_t mc, int64_t k0, int64_t kc, float* dst, int64_t ldd) {
          for (int64_t i = 0; i < mc; ++i) {
            std::copy_n(a.data() + (m0 + i) * t.k + k0, kc, dst + i * ldd);
          }
        };
      } else {
        src.data = a.data();
        src.ld = t.k;
      }
      std::vector<float> c(static_cast<size_t>(t.m * t.n));
      std::vector<int> covered(c.size(), 0);
      std::vector<int64_t> areas;
      std::mutex mu;
      Status st = (*pool)->run([&] {
        gemm.run(**pool, src, c.data(), t.n, GemmEpilogue{},
                 [&](int64_t m0, int64_t mc, int64_t n0, int64_t nc) {
                   std::lock_guard<std::mutex> lock(mu);
                   areas.push_back(mc * nc);
                   for (int64_t i = m0; i < m0 + mc; ++i) {
                     for (int64_t j = n0; j < n0 + nc; ++j)
                       ++covered[static_cast<size_t>(i * t.n + j)];
                   }
                 });
        return Status();
      });
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ(std::count(covered.begin(), covered.end(), 1), static_cast<int64_t>(c.size()));
      const int64_t items = static_cast<int64_t>(areas.size());
      EXPECT_GE(items, 8);
      const double share = static_cast<double>(t.m * t.n) / static_cast<double>(items);
      EXPECT_LE(static_cast<double>(*std::max_element(areas.begin(), areas.end())), 1.25 * share)
          << items << " items";
    }
  }
}

// The packed layout: K blocks balanced, panels zero-padded past N.
TEST(CpuGemmPacking, BlocksAndPadding) {
  const std::vector<float> b = random_floats(300 * 40, 9);
  PackedB p = PackedB::pack(b.data(), 300, 40, 40, 256);
  EXPECT_EQ(p.k_blocks(), 2);
  EXPECT_EQ(p.kc(), 150);
  EXPECT_EQ(p.panels(), 2);
  EXPECT_EQ(p.block_rows(1), 150);
  EXPECT_EQ(p.panel(1, 1)[3 * kGemmNR + 7], b[(150 + 3) * 40 + 32 + 7]);
  EXPECT_EQ(p.panel(1, 1)[3 * kGemmNR + 8], 0.f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p.panel(0, 0)) % 64, 0u);
  PackedB empty = PackedB::pack(nullptr, 0, 0, 0);
  EXPECT_EQ(empty.k_blocks(), 0);
  EXPECT_EQ(empty.bytes(), 0u);
}

}  // namespace
}  // namespace tessera::cpu
