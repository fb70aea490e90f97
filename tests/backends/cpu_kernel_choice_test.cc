// Measured kernel choice (backends/cpu/kernel_choice.h): the candidates, the decision, the cache
// file (including damaged ones), and programs compiled by it against the reference device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "backends/cpu/cpu_program.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/kernel_choice.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/simd.h"
#include "backends/registry.h"
#include "tests/backends/cpu_test_util.h"
#include "tests/ops/op_test_util.h"

namespace tessera {
namespace {

using Ints = std::vector<int64_t>;
using testing::cpu_pool_on_first_cores;

// Sets an environment variable for the scope of a test, restoring the previous value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name); old != nullptr) old_ = old;
    had_ = std::getenv(name) != nullptr;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// A fresh cache file for one test; decisions of earlier tests forgotten.
class KernelChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("tessera_kernel_choice_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".tsv"))
                .string();
    std::filesystem::remove(path_);
    env_ = std::make_unique<ScopedEnv>("TESSERA_CPU_KERNEL_CACHE", path_);
    cpu::clear_kernel_choices_in_process();
  }
  void TearDown() override {
    env_.reset();
    std::filesystem::remove(path_);
    cpu::clear_kernel_choices_in_process();
  }
  std::string path_;
  std::unique_ptr<ScopedEnv> env_;
};

// x [1, cin, hw, hw] -> Conv k x k (pad k / 2) -> y, optionally + r (a residual Add) -> z.
struct ConvGraph {
  Graph g;
  std::vector<NodeId> layers;
  std::vector<Tensor> feeds;
};

ConvGraph conv_graph(int64_t cin, int64_t cout, int64_t hw, int64_t k, bool residual) {
  ConvGraph c;
  // A graph input of shape [1, channels, hw, hw] and its random feed.
  auto input = [&](const char* name, int64_t channels, uint32_t seed) {
    const ValueId v = c.g.add_value(name, TensorInfo{DType::kF32, Shape{1, channels, hw, hw}});
    c.g.inputs().push_back(v);
    c.feeds.push_back(testing::random_tensor(Shape{1, channels, hw, hw}, seed));
    return v;
  };
  const ValueId x = input("x", cin, 1);
  Node n;
  n.name = "conv";
  n.kind = OpKind::kConv;
  n.attrs.set("pads", Ints{k / 2, k / 2, k / 2, k / 2});
  n.attrs.set("strides", Ints{1, 1});
  n.inputs = {x,
              c.g.add_constant("w", testing::random_tensor(Shape{cout, cin, k, k}, 2, -0.2f, 0.2f)),
              c.g.add_constant("b", testing::random_tensor(Shape{cout}, 3))};
  n.outputs = {c.g.add_value("y")};
  c.layers.push_back(c.g.add_node(n));
  if (residual) {
    const ValueId r = input("r", cout, 4);
    Node add;
    add.name = "add";
    add.kind = OpKind::kAdd;
    add.attrs.set("activation", std::string("relu"));
    add.inputs = {n.outputs[0], r};
    add.outputs = {c.g.add_value("z")};
    c.layers.push_back(c.g.add_node(add));
    c.g.outputs().push_back(add.outputs[0]);
  } else {
    c.g.outputs().push_back(n.outputs[0]);
  }
  EXPECT_TRUE(c.g.infer_shapes().ok());
  return c;
}

// Runs the cpu program and the reference device on the graph and compares (relative 1e-4).
void expect_matches_reference(ConvGraph& c, cpu::CpuProgram& prog) {
  auto ref_dev = open_device("reference");
  ASSERT_TRUE(ref_dev.ok());
  auto ref = (*ref_dev)->compile(c.g, c.layers);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  std::vector<Tensor> got(1), want(1);
  ASSERT_TRUE(prog.run(c.feeds, got).ok());
  ASSERT_TRUE((*ref)->run(c.feeds, want).ok());
  ASSERT_EQ(got[0].shape(), want[0].shape());
  int bad = 0;
  for (int64_t i = 0; i < got[0].numel(); ++i) {
    const float x = got[0].data<float>()[i], y = want[0].data<float>()[i];
    if (!(std::fabs(x - y) <= 1e-4f + 1e-4f * std::fabs(y)) && bad++ < 5)
      ADD_FAILURE() << "[" << i << "] cpu " << x << " vs reference " << y << "\n"
                    << prog.describe();
  }
}

// The kernel request for the graph's convolution (node 0) on `pool`, with its node context.
struct ConvRequest {
  ConvRequest(const ConvGraph& c, cpu::ThreadPool& pool)
      : nc(c.g, c.g.node(c.layers[0])), req{c.g, c.g.node(c.layers[0]), nc.ctx(), pool} {}
  NodeContext nc;
  cpu::KernelRequest req;
};

std::vector<std::string> cache_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  return lines;
}

TEST_F(KernelChoiceTest, MeasuresEveryAccurateCandidateAndCachesTheDecision) {
  if (!cpu::gemm_available()) GTEST_SKIP() << "one variant only without AVX-512";
  auto pool = cpu_pool_on_first_cores(1);
  ASSERT_NE(pool, nullptr);
  // A 3x3 convolution many variants run: direct (16 channels), Winograd, the GEMMs, XNNPACK.
  ConvGraph c = conv_graph(16, 64, 20, 3, false);
  ConvRequest cr(c, *pool);
  const cpu::KernelRequest& req = cr.req;
  std::vector<cpu::KernelTiming> t;
  auto k = cpu::build_measured_kernel(req, &t);
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  ASSERT_NE(*k, nullptr);
  ASSERT_GE(t.size(), 3u);
  double fastest = INFINITY;
  for (const cpu::KernelTiming& kt : t) {
    EXPECT_GT(kt.ms, 0) << kt.variant;
    EXPECT_NE(kt.variant, "winograd_f4x4_3x3");  // less accurate: never a measured candidate
    fastest = std::min(fastest, kt.ms);
  }
  // The decision is one line of the cache file naming a measured variant no slower than the
  // fastest by more than the rules' margin.
  const std::vector<std::string> lines = cache_lines(path_);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(cpu::kernel_choice_key(req)), std::string::npos) << lines[0];
  bool found = false;
  for (const cpu::KernelTiming& kt : t) {
    if (lines[0].find("\t" + kt.variant + "\t") == std::string::npos) continue;
    found = true;
    EXPECT_LE(kt.ms, fastest * 1.031) << kt.variant;
  }
  EXPECT_TRUE(found) << lines[0];

  // Another process (simulated: decisions forgotten) reads it back without measuring.
  cpu::clear_kernel_choices_in_process();
  auto again = cpu::build_measured_kernel(req, &t);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(t.empty());
  EXPECT_EQ((*again)->describe(), (*k)->describe());
  EXPECT_EQ(cache_lines(path_).size(), 1u);
}

TEST_F(KernelChoiceTest, DamagedOrForeignCacheLinesAreIgnored) {
  auto pool = cpu_pool_on_first_cores(1);
  ASSERT_NE(pool, nullptr);
  ConvGraph c = conv_graph(32, 32, 9, 1, false);
  ConvRequest cr(c, *pool);
  const cpu::KernelRequest& req = cr.req;
  const std::string key = cpu::kernel_choice_key(req);
  {
    std::ofstream f(path_, std::ios::binary);
    f << std::string("\0\xff\x01garbage", 10) << "\n"
      << "tessera-cpu-kernels-1\tno tabs after this\n"
      << "tessera-cpu-kernels-0\tsome cpu\t" << key << "\txnnpack_conv2d_nhwc_f32\n"
      << "tessera-cpu-kernels-1\tanother cpu model\t" << key << "\tno_such_variant\n"
      << std::string(100000, 'x') << "\n";
  }
  std::vector<cpu::KernelTiming> t;
  auto k = cpu::build_measured_kernel(req, &t);
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  ASSERT_NE(*k, nullptr);
  // None of the lines applied (wrong format version, another CPU): measured afresh where there
  // is more than one candidate, and one line appended.
  if (t.size() > 1) {
    EXPECT_EQ(cache_lines(path_).size(), 6u);
  }

  // A line for this CPU naming a variant this build does not have: measured again, not an error.
  const std::vector<std::string> lines = cache_lines(path_);
  if (t.size() > 1) {
    std::string ours = lines.back();
    const size_t v = ours.find(key) + key.size() + 1;
    ours = ours.substr(0, v) + "no_such_variant\t\n";
    std::ofstream(path_, std::ios::app) << ours;
    cpu::clear_kernel_choices_in_process();
    auto k2 = cpu::build_measured_kernel(req, &t);
    ASSERT_TRUE(k2.ok()) << k2.status().to_string();
    EXPECT_FALSE(t.empty());
  }
}

TEST_F(KernelChoiceTest, ProgramsMatchTheReferenceAndKeepResidualAddsFused) {
  for (int threads : {1, 2}) {
    auto pool = cpu_pool_on_first_cores(threads);
    if (pool == nullptr) continue;
    SCOPED_TRACE("threads " + std::to_string(threads));
    for (bool residual : {false, true}) {
      ConvGraph c = conv_graph(48, 32, 14, 1, residual);
      // Every variant that can run the convolution, as the cached decision: whichever wins,
      // outputs match and the residual Add stays fused where the rules' kernel fuses it.
      ConvRequest cr(c, *pool);
      const cpu::KernelRequest& req = cr.req;
      const std::string key = cpu::kernel_choice_key(req);
      auto rules =
          cpu::CpuProgram::compile(c.g, c.layers, pool, nullptr, cpu::KernelChoice::kRules);
      ASSERT_TRUE(rules.ok());
      const bool rules_fuse = (*rules)->describe().find("residual add fused") != std::string::npos;
      for (const cpu::KernelEntry& e : cpu::all_kernel_entries()) {
        if (e.op != OpKind::kConv || !e.measured_candidate) continue;
        // Measure once (the line names this CPU), then make the line name this variant.
        cpu::clear_kernel_choices_in_process();
        std::filesystem::remove(path_);
        std::vector<cpu::KernelTiming> t;
        ASSERT_TRUE(cpu::build_measured_kernel(req, &t).ok());
        std::vector<std::string> lines = cache_lines(path_);
        if (lines.empty()) continue;  // one candidate only: nothing to choose
        std::string line = lines.back();
        const size_t v = line.find(key) + key.size() + 1;
        line = line.substr(0, v) + e.variant + "\t\n";
        std::ofstream(path_, std::ios::trunc) << line;
        cpu::clear_kernel_choices_in_process();
        auto prog =
            cpu::CpuProgram::compile(c.g, c.layers, pool, nullptr, cpu::KernelChoice::kMeasured);
        ASSERT_TRUE(prog.ok()) << e.variant << ": " << prog.status().to_string();
        SCOPED_TRACE(std::string(e.variant) + "\n" + (*prog)->describe());
        expect_matches_reference(c, **prog);
        if (residual && rules_fuse) {
          EXPECT_NE((*prog)->describe().find("residual add fused"), std::string::npos);
        }
      }
    }
  }
}

TEST(KernelChoiceEnv, RulesByEnvironment) {
  {
    ScopedEnv env("TESSERA_CPU_KERNELS", "rules");
    EXPECT_EQ(cpu::default_kernel_choice(), cpu::KernelChoice::kRules);
  }
  {
    ScopedEnv env("TESSERA_CPU_KERNELS", "measured");
    EXPECT_EQ(cpu::default_kernel_choice(), cpu::KernelChoice::kMeasured);
  }
  {
    ScopedEnv env("TESSERA_CPU_KERNEL_CACHE", "off");
    EXPECT_EQ(cpu::kernel_choice_cache_path(), "");
  }
  {
    ScopedEnv env("TESSERA_CPU_KERNEL_CACHE", "/tmp/x.tsv");
    EXPECT_EQ(cpu::kernel_choice_cache_path(), "/tmp/x.tsv");
  }
}

// ---- The ISA table (kernel_table.h: KernelEntry::isa) ------------------------------------------

// Tessera's own AVX-512 variants say so; the library variants (XNNPACK, OpenBLAS pick their own
// kernels for the CPU) and the portable C++ ones need nothing.
TEST(CpuKernelIsa, TableStatesTheIsaOfTesserasOwnSimdKernels) {
  const std::set<std::string> avx512 = {"tessera_direct_conv", "tessera_depthwise_conv",
                                        "winograd_f4x4_3x3",   "winograd_f2x2_3x3",
                                        "tessera_gemm_conv",   "tessera_gemv_f32"};
  std::set<std::string> seen;
  for (const cpu::KernelEntry& e : cpu::all_kernel_entries()) {
    const std::string v = e.variant;
    SCOPED_TRACE(v);
    if (avx512.count(v) != 0) {
      EXPECT_EQ(e.isa, cpu::Isa::kAvx512f);
      seen.insert(v);
    } else {
      EXPECT_EQ(e.isa, cpu::Isa::kPortable);
    }
  }
  EXPECT_EQ(seen, avx512);
  EXPECT_STREQ(cpu::isa_name(cpu::Isa::kAvx512f), "avx512f");
  EXPECT_TRUE(cpu::isa_available(cpu::Isa::kPortable));
#if defined(__x86_64__)
  EXPECT_STREQ(cpu::build_arch(), "x86_64");
  EXPECT_EQ(cpu::isa_available(cpu::Isa::kAvx512f), cpu::has_avx512());
#else
  // Other architectures: the AVX-512 code is not in the build at all.
  EXPECT_FALSE(cpu::isa_available(cpu::Isa::kAvx512f));
  EXPECT_NE(cpu::isa_unavailable(cpu::Isa::kAvx512f).message().find("does not contain"),
            std::string::npos);
#endif
}

// Asked for by name, a variant whose ISA is unavailable is an Unimplemented error naming the
// variant and the ISA (never a silent fallback); dispatch and measured choice never offer it,
// and what they pick matches the reference device.
TEST_F(KernelChoiceTest, VariantsDeclineByTheirIsaNeverSilently) {
  auto pool = cpu_pool_on_first_cores(1);
  ASSERT_NE(pool, nullptr);
  ConvGraph c = conv_graph(32, 32, 14, 3, false);
  for (int i = 0; i < static_cast<int>(cpu::kNumConvKernels); ++i) {
    const cpu::KernelEntry& e = cpu::kConvKernels[i];
    SCOPED_TRACE(e.variant);
    auto p = cpu::CpuProgram::compile(c.g, c.layers, pool, e.variant);
    if (cpu::entry_available(e)) {
      if (p.ok()) expect_matches_reference(c, **p);
      continue;
    }
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(p.status().message().find(e.variant), std::string::npos) << p.status().to_string();
    EXPECT_NE(p.status().message().find(cpu::isa_name(e.isa)), std::string::npos)
        << p.status().to_string();
    ConvRequest cr(c, *pool);
    auto k = cpu::make_entry_kernel(e, cr.req, /*any_config=*/true);
    ASSERT_TRUE(k.ok());
    EXPECT_EQ(*k, nullptr);
  }
  ConvRequest cr(c, *pool);
  std::vector<cpu::KernelTiming> t;
  ASSERT_TRUE(cpu::build_measured_kernel(cr.req, &t).ok());
  for (const cpu::KernelTiming& m : t) {
    const cpu::KernelEntry* e = cpu::find_kernel_entry(OpKind::kConv, m.variant);
    ASSERT_NE(e, nullptr) << m.variant;
    EXPECT_TRUE(cpu::entry_available(*e)) << m.variant << " measured on a CPU that cannot run it";
  }
  for (cpu::KernelChoice choice : {cpu::KernelChoice::kRules, cpu::KernelChoice::kMeasured}) {
    auto prog = cpu::CpuProgram::compile(c.g, c.layers, pool, nullptr, choice);
    ASSERT_TRUE(prog.ok()) << prog.status().to_string();
    expect_matches_reference(c, **prog);
  }
}

}  // namespace
}  // namespace tessera
