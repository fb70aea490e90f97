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
#include "backends/cpu/onednn.h"
#include "backends/cpu/simd.h"
#include "backends/registry.h"
#include "scheduler/fidelity.h"
#include "tests/backends/cpu_test_util.h"
#include "tests/ops/op_test_util.h"
#include "tests/scoped_env.h"

namespace tessera {
namespace {

using Ints = std::vector<int64_t>;
using testing::cpu_pool_on_first_cores;

using testing::ScopedEnv;

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

// A convolution whose output a Concat takes in place: the candidates that write only dense output
// (oneDNN's) are charged the Concat's copy, under a key of their own; what is kept writes into
// the slice unless it wins with the copy charged.
TEST_F(KernelChoiceTest, MeasuredChoiceChargesTheConcatCopy) {
  if (!cpu::gemm_available()) GTEST_SKIP() << "one variant only without AVX-512";
  auto pool = cpu_pool_on_first_cores(1);
  ASSERT_NE(pool, nullptr);
  ConvGraph c = conv_graph(32, 32, 14, 3, false);
  ConvRequest plain(c, *pool), into(c, *pool);
  into.req.output_to_concat = true;
  const std::string key = cpu::kernel_choice_key(plain.req);
  const std::string concat_key = cpu::kernel_choice_key(into.req);
  EXPECT_NE(key, concat_key);
  EXPECT_NE(concat_key.find("to concat"), std::string::npos) << concat_key;

  std::vector<cpu::KernelTiming> t_plain, t_into;
  auto k_plain = cpu::build_measured_kernel(plain.req, &t_plain);
  ASSERT_TRUE(k_plain.ok()) << k_plain.status().to_string();
  auto k_into = cpu::build_measured_kernel(into.req, &t_into);
  ASSERT_TRUE(k_into.ok()) << k_into.status().to_string();
  ASSERT_NE(*k_into, nullptr);
  // Two decisions, one line each, the same candidates.
  EXPECT_EQ(cache_lines(path_).size(), 2u);
  ASSERT_EQ(t_plain.size(), t_into.size());
  // The kept kernel is the fastest with the charge, within the rules' margin.
  double fastest = INFINITY, kept = INFINITY;
  const std::string kept_desc = (*k_into)->describe();
  for (const cpu::KernelTiming& kt : t_into) fastest = std::min(fastest, kt.ms);
  for (const cpu::KernelTiming& kt : t_into) {
    auto k = cpu::build_kernel(into.req, kt.variant.c_str());
    ASSERT_TRUE(k.ok()) << kt.variant;
    if (*k != nullptr && (*k)->describe() == kept_desc) kept = std::min(kept, kt.ms);
  }
  EXPECT_LE(kept, fastest * 1.031) << kept_desc;
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

#ifdef TESSERA_HAVE_ONEDNN

// The reduced program of a one-convolution graph (x and y calibrated from their real ranges for
// int8), by measured choice.
Result<std::unique_ptr<cpu::CpuProgram>> reduced_program(ConvGraph& c,
                                                         std::shared_ptr<cpu::ThreadPool> pool,
                                                         Precision precision,
                                                         CalibrationTable* table) {
  auto ref_dev = open_device("reference");
  EXPECT_TRUE(ref_dev.ok());
  auto ref = (*ref_dev)->compile(c.g, c.layers);
  EXPECT_TRUE(ref.ok());
  std::vector<Tensor> y(1);
  EXPECT_TRUE((*ref)->run(c.feeds, y).ok());
  auto range = [](const Tensor& t) {
    std::pair<float, float> r{0.f, 0.f};
    for (int64_t i = 0; i < t.numel(); ++i) {
      r.first = std::min(r.first, t.data<float>()[i]);
      r.second = std::max(r.second, t.data<float>()[i]);
    }
    return r;
  };
  table->method = "minmax";
  table->ranges["x"] = range(c.feeds[0]);
  table->ranges["y"] = range(y[0]);
  return cpu::CpuProgram::compile(c.g, c.layers, std::move(pool), nullptr,
                                  cpu::KernelChoice::kMeasured, precision, table);
}

// Relative L2 of the program's output against the reference device's.
double relative_l2_to_reference(ConvGraph& c, cpu::CpuProgram& prog) {
  auto ref_dev = open_device("reference");
  auto ref = (*ref_dev)->compile(c.g, c.layers);
  std::vector<Tensor> got(1), want(1);
  EXPECT_TRUE(prog.run(c.feeds, got).ok());
  EXPECT_TRUE((*ref)->run(c.feeds, want).ok());
  FidelityMeter m;
  EXPECT_TRUE(m.add(got, want).ok());
  return m.result().relative_l2;
}

// The precision decision of a reduced program's layer is measured once, cached beside the kernel
// variants', and obeyed: "f32" gives the layer its f32 kernel (exact f32 outputs, no reduced
// layer left), "reduced" its bf16 / int8 kernel.
TEST_F(KernelChoiceTest, ReducedProgramsKeepF32WhereItMeasuresFaster) {
  for (Precision precision : {Precision::kBf16, Precision::kInt8}) {
    if (precision == Precision::kBf16 && !cpu::onednn_bf16_available()) continue;
    for (int threads : {1, 2}) {
      auto pool = cpu_pool_on_first_cores(threads);
      if (pool == nullptr) continue;
      SCOPED_TRACE(std::string(precision_name(precision)) + ", threads " + std::to_string(threads));
      cpu::clear_kernel_choices_in_process();
      std::filesystem::remove(path_);
      ConvGraph c = conv_graph(96, 64, 14, 1, false);
      CalibrationTable table;
      auto measured = reduced_program(c, pool, precision, &table);
      ASSERT_TRUE(measured.ok()) << measured.status().to_string();
      // One decision about the precision, with both timings.
      std::vector<std::string> lines;
      for (const std::string& l : cache_lines(path_)) {
        if (l.find("|precision ") != std::string::npos) lines.push_back(l);
      }
      ASSERT_EQ(lines.size(), 1u);
      EXPECT_NE(lines[0].find("reduced="), std::string::npos) << lines[0];
      EXPECT_NE(lines[0].find("f32="), std::string::npos) << lines[0];
      const size_t key_end = lines[0].find('\t', lines[0].find("|precision "));
      const size_t decision_end = lines[0].find('\t', key_end + 1);
      const std::string decision = lines[0].substr(key_end + 1, decision_end - key_end - 1);
      EXPECT_TRUE(decision == "f32" || decision == "reduced") << lines[0];
      EXPECT_EQ((*measured)->measured_f32_layers().size(), decision == "f32" ? 1u : 0u);

      for (const char* forced : {"f32", "reduced"}) {
        SCOPED_TRACE(forced);
        std::ofstream(path_, std::ios::trunc)
            << lines[0].substr(0, key_end + 1) << forced << "\t\n";
        cpu::clear_kernel_choices_in_process();
        auto p = reduced_program(c, pool, precision, &table);
        ASSERT_TRUE(p.ok()) << p.status().to_string();
        const std::string d = (*p)->describe();
        const int reduced_layers =
            precision == Precision::kBf16 ? (*p)->num_bf16_layers() : (*p)->num_int8_layers();
        const double l2 = relative_l2_to_reference(c, **p);
        if (std::string(forced) == "f32") {
          EXPECT_EQ((*p)->measured_f32_layers(), std::vector<NodeId>{c.layers[0]}) << d;
          EXPECT_EQ(reduced_layers, 0) << d;
          EXPECT_NE(d.find("measured faster than its reduced kernel"), std::string::npos) << d;
          EXPECT_LT(l2, 1e-5) << d;
        } else {
          EXPECT_TRUE((*p)->measured_f32_layers().empty()) << d;
          EXPECT_EQ(reduced_layers, 1) << d;
          EXPECT_GT(l2, 0.0) << d;
          EXPECT_LT(l2, precision == Precision::kBf16 ? 1e-2 : 5e-2) << d;
        }
      }
    }
  }
}

// Run by ctest with ONEDNN_MAX_CPU_ISA=AVX512_CORE (cpu_bf16_emulated_measured_choice): on an
// AVX-512 core without bf16 instructions oneDNN emulates bf16, and a 1x1 convolution measured
// 2.5-3x slower than in f32 (docs/precision.md); measured choice must keep it in f32.
TEST_F(KernelChoiceTest, EmulatedBf16GivesWayToF32) {
  if (std::getenv("TESSERA_TEST_EMULATED_BF16") == nullptr)
    GTEST_SKIP() << "run by ctest with ONEDNN_MAX_CPU_ISA=AVX512_CORE";
  if (cpu::onednn_note().find("bf16 emulated, int8 without VNNI") == std::string::npos)
    GTEST_SKIP() << "oneDNN does not emulate bf16 here: " << cpu::onednn_note();
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Tessera's f32 kernels are instrumented here and oneDNN's are not: the timing means nothing.
  GTEST_SKIP() << "a sanitizer build times instrumented f32 kernels against oneDNN's";
#endif
  auto pool = cpu_pool_on_first_cores(1);
  ASSERT_NE(pool, nullptr);
  ConvGraph c = conv_graph(96, 576, 14, 1, false);
  CalibrationTable table;
  auto p = reduced_program(c, pool, Precision::kBf16, &table);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ((*p)->measured_f32_layers(), std::vector<NodeId>{c.layers[0]})
      << (*p)->describe() << cache_lines(path_).back();
  EXPECT_LT(relative_l2_to_reference(c, **p), 1e-5);
}

#endif  // TESSERA_HAVE_ONEDNN

}  // namespace
}  // namespace tessera
