// The cpu device's residual-Add fusion (CpuProgram::fuse_residual_adds): an Add (with or without
// a fused relu/clip/other activation) of a convolution's output X and a tensor R that is ready
// before that convolution runs is done by the convolution's epilogue, which then writes the Add's
// output. Small residual graphs, each convolution variant forced, 1 and 2 threads, compared with
// the reference device; describe() tells whether the fusion happened where it should and nowhere
// else (X read by another layer or leaving the slice, a convolution with its own activation,
// XNNPACK convolutions). The exported ResNets' and MobileNetV2's residual Adds are checked to
// fuse where the models have been exported.
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string_view>

#include "backends/cpu/cpu_program.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/kernel_table.h"
#include "graph/onnx/onnx_import.h"
#include "tests/backends/backend_test_util.h"
#include "tests/backends/cpu_test_util.h"

namespace tessera {
namespace {

using Ints = std::vector<int64_t>;
using testing::random_tensor;

// Builds a graph layer by layer, in the order the program runs them.
struct GraphBuilder {
  Graph g;
  std::vector<NodeId> layers;
  std::vector<Tensor> feeds;
  uint32_t seed = 7;

  ValueId input(const std::string& name, const Shape& s) {
    const ValueId v = g.add_value(name, TensorInfo{DType::kF32, s});
    g.inputs().push_back(v);
    feeds.push_back(random_tensor(s, seed++));
    return v;
  }
  // A k x k convolution with bias, "same" padding, optional fused activation.
  ValueId conv(const std::string& name, ValueId x, int64_t cin, int64_t cout, int64_t k,
               int64_t stride = 1, const std::string& act = "") {
    Node n;
    n.name = name;
    n.kind = OpKind::kConv;
    const int64_t p = k / 2;
    n.attrs.set("pads", Ints{p, p, p, p});
    n.attrs.set("strides", Ints{stride, stride});
    if (!act.empty()) n.attrs.set("activation", act);
    n.inputs = {
        x, g.add_constant(name + ".w", random_tensor(Shape{cout, cin, k, k}, seed++, -0.3f, 0.3f)),
        g.add_constant(name + ".b", random_tensor(Shape{cout}, seed++))};
    n.outputs = {g.add_value(name)};
    layers.push_back(g.add_node(n));
    return n.outputs[0];
  }
  // Add(a, b) with a fused activation ("" none, relu, clip [-0.5, 0.8], sigmoid).
  ValueId add(const std::string& name, ValueId a, ValueId b, const std::string& act = "") {
    Node n;
    n.name = name;
    n.kind = OpKind::kAdd;
    if (act == "clip") {
      n.attrs.set("activation_alpha", -0.5f);
      n.attrs.set("activation_beta", 0.8f);
    }
    if (!act.empty()) n.attrs.set("activation", act);
    n.inputs = {a, b};
    n.outputs = {g.add_value(name)};
    layers.push_back(g.add_node(n));
    return n.outputs[0];
  }
  // A node of `kind` on `inputs` with one output (Sigmoid, Mul...).
  ValueId op(OpKind kind, const std::string& name, std::vector<ValueId> inputs) {
    Node n;
    n.name = name;
    n.kind = kind;
    n.inputs = std::move(inputs);
    n.outputs = {g.add_value(name)};
    layers.push_back(g.add_node(n));
    return n.outputs[0];
  }
  void output(ValueId v) { g.outputs().push_back(v); }
};

// A residual graph and where its Adds must fuse: {add, conv} pairs; every other Add must not.
struct Scenario {
  const char* name;
  // The convolution variants it is run with (forced onto every Conv node).
  std::vector<const char*> variants;
  std::function<void(GraphBuilder&)> build;
  std::vector<std::pair<std::string, std::string>> fused;
};

// The kernel description of each layer, from CpuProgram::describe() ("name: kernel" per step).
std::string kernel_of(const std::string& describe, const std::string& layer) {
  const std::string key = layer + ": ";
  for (size_t pos = 0; pos < describe.size();) {
    const size_t end = std::min(describe.find('\n', pos), describe.size());
    if (describe.compare(pos, key.size(), key) == 0)
      return describe.substr(pos + key.size(), end - pos - key.size());
    pos = end + 1;
  }
  return "";
}

using testing::cpu_pool_on_first_cores;

// Compiles `layers` of the builder's graph with `variant` on `threads` threads and on the
// reference device, runs both (twice on cpu: results must not depend on the arena's previous
// contents) and compares every output. Returns the cpu program's describe().
std::string run_and_compare(GraphBuilder& b, std::span<const NodeId> layers, const char* variant,
                            int threads) {
  std::shared_ptr<cpu::ThreadPool> pool = cpu_pool_on_first_cores(threads);
  EXPECT_NE(pool, nullptr);
  if (pool == nullptr) return "";
  auto prog = cpu::CpuProgram::compile(b.g, layers, pool, variant);
  EXPECT_TRUE(prog.ok()) << prog.status().to_string();
  if (!prog.ok()) return "";
  auto ref_dev = open_device("reference");
  EXPECT_TRUE(ref_dev.ok()) << ref_dev.status().to_string();
  if (!ref_dev.ok()) return "";
  auto ref = (*ref_dev)->compile(b.g, layers);
  EXPECT_TRUE(ref.ok()) << ref.status().to_string();
  if (!ref.ok()) return "";
  // The slice's inputs: the graph inputs are fed their tensors, others (a slice starting inside
  // the graph) come from running the reference on the whole graph.
  std::vector<Tensor> feeds;
  for (ValueId v : (*prog)->input_values()) {
    const auto in = std::find(b.g.inputs().begin(), b.g.inputs().end(), v);
    if (in != b.g.inputs().end()) {
      feeds.push_back(b.feeds[static_cast<size_t>(in - b.g.inputs().begin())]);
      continue;
    }
    // Produced inside the graph: run the reference up to it.
    const NodeId producer = b.g.value(v).producer;
    std::vector<NodeId> upto;
    for (NodeId n : b.layers) {
      upto.push_back(n);
      if (n == producer) break;
    }
    auto head = (*ref_dev)->compile(b.g, upto);
    EXPECT_TRUE(head.ok()) << head.status().to_string();
    if (!head.ok()) return "";
    std::vector<Tensor> head_out((*head)->output_values().size());
    EXPECT_TRUE((*head)->run(b.feeds, head_out).ok());
    const auto& hv = (*head)->output_values();
    feeds.push_back(head_out[static_cast<size_t>(std::find(hv.begin(), hv.end(), v) - hv.begin())]);
  }
  std::vector<Tensor> got((*prog)->output_values().size()), want(got.size());
  for (int rep = 0; rep < 2; ++rep) {
    const Status st = (*prog)->run(feeds, got);
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (!st.ok()) return "";
  }
  const Status st = (*ref)->run(feeds, want);
  EXPECT_TRUE(st.ok()) << st.to_string();
  if (!st.ok()) return "";
  const float tol =
      variant != nullptr && std::string_view(variant) == "winograd_f4x4_3x3" ? 5e-4f : 1e-4f;
  for (size_t o = 0; o < got.size(); ++o) {
    EXPECT_EQ(got[o].shape(), want[o].shape());
    if (got[o].shape() != want[o].shape()) continue;
    int reported = 0;
    for (int64_t i = 0; i < got[o].numel(); ++i) {
      const float x = got[o].data<float>()[i], y = want[o].data<float>()[i];
      if (!(std::fabs(x - y) <= tol + tol * std::fabs(y)) && reported++ < 5) {
        ADD_FAILURE() << "output " << o << " [" << i << "]: cpu " << x << " vs reference " << y
                      << "\n"
                      << (*prog)->describe();
      }
    }
  }
  return (*prog)->describe();
}

// Basic blocks as in ResNet-18: the skip comes from an earlier layer (or is the program input);
// odd channel counts (13, 33) exercise the masked edge tiles and vector tails.
void basic_block(GraphBuilder& b, int64_t c, int64_t h, int64_t w, int64_t batch = 1) {
  const ValueId x = b.input("x", Shape{batch, c, h, w});
  const ValueId a = b.conv("stem", x, c, c, 3, 1, "relu");
  const ValueId c1 = b.conv("conv1", a, c, c, 3, 1, "relu");
  const ValueId c2 = b.conv("conv2", c1, c, c, 3);
  const ValueId s1 = b.add("add1", c2, a, "relu");
  const ValueId c3 = b.conv("conv3", s1, c, c, 3);
  // Skip first, convolution second; no activation.
  b.output(b.add("add2", s1, c3));
}

// The skip is the program input itself; clip and sigmoid activations on the Add.
void input_skip(GraphBuilder& b, int64_t k, const std::string& act) {
  const ValueId x = b.input("x", Shape{1, 33, 10, 9});
  const ValueId c1 = b.conv("conv1", x, 33, 33, k);
  b.output(b.add("add1", c1, x, act));
}

// A bottleneck with a downsampling shortcut, in torchvision's export order: the shortcut
// convolution runs after the main branch, so the Add fuses into it (the main branch's output is
// ready before it), with a strided 1x1 convolution.
void downsample_block(GraphBuilder& b, int64_t cin, int64_t cout) {
  const ValueId x = b.input("x", Shape{2, cin, 11, 12});
  const ValueId r = b.conv("reduce", x, cin, 16, 1, 1, "relu");
  const ValueId m = b.conv("mid", r, 16, 16, 3, 2, "relu");
  const ValueId e = b.conv("expand", m, 16, cout, 1);
  const ValueId d = b.conv("downsample", x, cin, cout, 1, 2);
  b.output(b.add("add", e, d, "relu"));
}

const std::vector<const char*> kAllGemm = {"tessera_gemm_conv", "openblas_gemm_conv"};
const std::vector<const char*> k3x3 = {"winograd_f2x2_3x3", "winograd_f4x4_3x3",
                                       "tessera_gemm_conv", "openblas_gemm_conv"};

std::vector<Scenario> scenarios() {
  return {
      {"basic_block_13",
       k3x3,
       [](GraphBuilder& b) { basic_block(b, 13, 9, 11); },
       {{"add1", "conv2"}, {"add2", "conv3"}}},
      {"basic_block_33_batch2",
       k3x3,
       [](GraphBuilder& b) { basic_block(b, 33, 8, 7, 2); },
       {{"add1", "conv2"}, {"add2", "conv3"}}},
      {"input_skip_1x1_clip",
       kAllGemm,
       [](GraphBuilder& b) { input_skip(b, 1, "clip"); },
       {{"add1", "conv1"}}},
      {"input_skip_3x3_sigmoid",
       k3x3,
       [](GraphBuilder& b) { input_skip(b, 3, "sigmoid"); },
       {{"add1", "conv1"}}},
      {"downsample_order",
       kAllGemm,
       [](GraphBuilder& b) { downsample_block(b, 13, 33); },
       {{"add", "downsample"}}},
      {"conv_output_read_again",
       k3x3,
       [](GraphBuilder& b) {
         // conv1's output feeds add1 and conv2: add1 must not fuse into conv1.
         const ValueId x = b.input("x", Shape{1, 13, 9, 9});
         const ValueId c1 = b.conv("conv1", x, 13, 13, 3);
         const ValueId s = b.add("add1", c1, x, "relu");
         const ValueId c2 = b.conv("conv2", c1, 13, 13, 3);
         b.output(b.add("add2", s, c2));
       },
       {{"add2", "conv2"}}},
      {"conv_output_leaves_slice",
       kAllGemm,
       [](GraphBuilder& b) {
         const ValueId x = b.input("x", Shape{1, 13, 6, 5});
         const ValueId c1 = b.conv("conv1", x, 13, 13, 1);
         b.output(c1);
         b.output(b.add("add1", c1, x));
       },
       {}},
      {"conv_with_own_relu",
       k3x3,
       [](GraphBuilder& b) {
         // relu(conv) + R is not relu(conv + R): the Add stays separate.
         const ValueId x = b.input("x", Shape{1, 13, 9, 9});
         const ValueId c1 = b.conv("conv1", x, 13, 13, 3, 1, "relu");
         b.output(b.add("add1", c1, x, "relu"));
       },
       {}},
      {"skip_after_conv",
       kAllGemm,
       [](GraphBuilder& b) {
         // Both inputs are convolutions of this slice; the Add fuses into the later one, whose
         // residual (the earlier one's output) is then ready.
         const ValueId x = b.input("x", Shape{1, 13, 7, 8});
         const ValueId c1 = b.conv("conv1", x, 13, 33, 1);
         const ValueId c2 = b.conv("conv2", x, 13, 33, 3, 1);
         b.output(b.add("add1", c2, c1, "relu"));
       },
       {{"add1", "conv2"}}},
  };
}

class CpuResidualFusionTest
    : public ::testing::TestWithParam<std::tuple<int /*scenario*/, int /*threads*/>> {};

TEST_P(CpuResidualFusionTest, FusesWhereAllowedAndMatchesReference) {
  if (!cpu::gemm_available()) GTEST_SKIP() << "no AVX-512F (the fusing kernels need it)";
  const Scenario sc = scenarios()[static_cast<size_t>(std::get<0>(GetParam()))];
  const int threads = std::get<1>(GetParam());
  std::vector<const char*> variants = sc.variants;
  variants.push_back("xnnpack_conv2d_nhwc_f32");  // never fuses
  for (const char* variant : variants) {
    SCOPED_TRACE(std::string(sc.name) + " with " + variant);
    GraphBuilder b;
    sc.build(b);
    ASSERT_TRUE(b.g.infer_shapes().ok());
    const std::string desc = run_and_compare(b, b.layers, variant, threads);
    if (::testing::Test::HasFailure()) return;
    const bool fuses = std::string_view(variant) != "xnnpack_conv2d_nhwc_f32";
    for (NodeId id : b.layers) {
      const Node& n = b.g.node(id);
      const std::string kernel = kernel_of(desc, n.name);
      std::string into;
      for (const auto& [add, conv] : sc.fused) {
        if (add == n.name && fuses) into = conv;
      }
      if (n.kind == OpKind::kAdd) {
        if (!into.empty()) {
          EXPECT_EQ(kernel, "residual add fused into '" + into + "'") << desc;
        } else {
          EXPECT_EQ(kernel.find("fused into"), std::string::npos) << n.name << "\n" << desc;
        }
      } else {
        bool target = false;
        for (const auto& [add, conv] : sc.fused) target = target || (conv == n.name && fuses);
        EXPECT_EQ(kernel.find("+residual") != std::string::npos, target) << n.name << "\n" << desc;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cpu, CpuResidualFusionTest,
    ::testing::Combine(::testing::Range(0, static_cast<int>(scenarios().size())),
                       ::testing::Values(1, 2)),
    [](const auto& p) {
      return std::string(scenarios()[static_cast<size_t>(std::get<0>(p.param))].name) + "_" +
             std::to_string(std::get<1>(p.param)) + "_threads";
    });

// Slices cut between a convolution and its Add do not fuse: the Add alone, or the convolution
// alone, run as before; a slice holding both fuses.
TEST(CpuResidualFusion, SlicesCutBetweenConvAndAdd) {
  if (!cpu::gemm_available()) GTEST_SKIP() << "no AVX-512F";
  GraphBuilder b;
  basic_block(b, 33, 8, 8);
  ASSERT_TRUE(b.g.infer_shapes().ok());
  // Layers: stem conv1 conv2 add1 conv3 add2.
  const std::vector<NodeId> head(b.layers.begin(), b.layers.begin() + 3);
  const std::vector<NodeId> tail(b.layers.begin() + 3, b.layers.end());
  for (int threads : {1, 2}) {
    const std::string d_head = run_and_compare(b, head, "tessera_gemm_conv", threads);
    EXPECT_EQ(d_head.find("residual"), std::string::npos) << d_head;
    const std::string d_tail = run_and_compare(b, tail, "tessera_gemm_conv", threads);
    // add1 reads conv2 from outside the slice; add2 fuses into conv3 (its skip, add1's output,
    // is computed earlier in the slice).
    EXPECT_EQ(kernel_of(d_tail, "add1").find("fused"), std::string::npos) << d_tail;
    EXPECT_EQ(kernel_of(d_tail, "add2"), "residual add fused into 'conv3'") << d_tail;
  }
}

// The exported models' residual Adds all fuse on the default dispatch: ResNet-18 (8), ResNet-50
// (16, four into the shortcut convolutions) and MobileNetV2 (10, without activation). Needs the
// exported models (skipped without them); the model tests check their outputs.
TEST(CpuResidualFusion, ModelsFuseEveryResidualAdd) {
  if (!cpu::gemm_available()) GTEST_SKIP() << "no AVX-512F";
  // The exported models: TESSERA_MODEL_DIR, else the cache the model tests export into.
  const char* env = std::getenv("TESSERA_MODEL_DIR");
  const char* home = std::getenv("HOME");
  if (env == nullptr && home == nullptr) GTEST_SKIP() << "neither TESSERA_MODEL_DIR nor HOME set";
  const std::string dir = env != nullptr ? env : std::string(home) + "/.cache/tessera/models";
  const std::pair<const char*, int> models[] = {
      {"resnet18", 8}, {"resnet50", 16}, {"mobilenet_v2", 10}};
  std::shared_ptr<cpu::ThreadPool> pool = cpu_pool_on_first_cores(1);
  ASSERT_NE(pool, nullptr);
  for (const auto& [name, adds] : models) {
    const std::string path = dir + "/" + name + ".onnx";
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not exported";
    auto model = convert_onnx(path);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    const Graph* g = &model->graph;
    std::vector<NodeId> layers(static_cast<size_t>(g->num_nodes()));
    for (size_t i = 0; i < layers.size(); ++i) layers[i] = static_cast<NodeId>(i);
    auto prog = cpu::CpuProgram::compile(*g, layers, pool);
    ASSERT_TRUE(prog.ok()) << prog.status().to_string();
    const std::string desc = (*prog)->describe();
    int fused = 0, unfused = 0;
    for (NodeId id : layers) {
      if (g->node(id).kind != OpKind::kAdd) continue;
      const bool f = kernel_of(desc, g->node(id).name).starts_with("residual add fused into");
      fused += f ? 1 : 0;
      unfused += f ? 0 : 1;
    }
    EXPECT_EQ(fused, adds) << name << "\n" << desc;
    EXPECT_EQ(unfused, 0) << name << "\n" << desc;
  }
}

// ---- SiLU: Mul(x, Sigmoid(x)) in one kernel (cpu::fuse_silu) ----------------------------------

// Whether `layer` ran as the fused SiLU's Mul / as the Sigmoid's view.
bool runs_silu(const std::string& desc, const std::string& layer) {
  return kernel_of(desc, layer).starts_with("tessera silu");
}
bool sigmoid_fused(const std::string& desc, const std::string& layer) {
  return kernel_of(desc, layer).find("sigmoid, fused into") != std::string::npos;
}

TEST(CpuSiluFusion, FusesSigmoidTimesItsInputAndMatchesReference) {
  // (channels, height, width): above and below one 16384-value block, odd tails.
  const int64_t shapes[][3] = {{24, 67, 53}, {5, 3, 7}, {96, 28, 28}};
  for (int threads : {1, 2}) {
    for (const auto& [c, h, w] : shapes) {
      for (bool gate_first : {false, true}) {
        SCOPED_TRACE(std::to_string(threads) + " threads, " + std::to_string(c) + "x" +
                     std::to_string(h) + "x" + std::to_string(w) +
                     (gate_first ? ", Mul(sigmoid, x)" : ", Mul(x, sigmoid)"));
        GraphBuilder b;
        const ValueId x = b.input("x", Shape{1, 3, h, w});
        const ValueId c1 = b.conv("conv1", x, 3, c, 3);
        const ValueId sg = b.op(OpKind::kSigmoid, "sig", {c1});
        const ValueId y =
            b.op(OpKind::kMul, "mul", gate_first ? std::vector{sg, c1} : std::vector{c1, sg});
        b.output(b.conv("conv2", y, c, 4, 1));
        ASSERT_TRUE(b.g.infer_shapes().ok());
        const std::string desc = run_and_compare(b, b.layers, nullptr, threads);
        EXPECT_TRUE(runs_silu(desc, "mul")) << desc;
        EXPECT_TRUE(sigmoid_fused(desc, "sig")) << desc;
      }
    }
  }
}

TEST(CpuSiluFusion, OnTheProgramInput) {
  GraphBuilder b;
  const ValueId x = b.input("x", Shape{2, 7, 9, 11});
  const ValueId sg = b.op(OpKind::kSigmoid, "sig", {x});
  b.output(b.op(OpKind::kMul, "mul", {x, sg}));
  ASSERT_TRUE(b.g.infer_shapes().ok());
  for (int threads : {1, 2}) {
    const std::string desc = run_and_compare(b, b.layers, nullptr, threads);
    EXPECT_TRUE(runs_silu(desc, "mul")) << desc;
  }
}

TEST(CpuSiluFusion, LeavesOtherPatternsAlone) {
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant);
    GraphBuilder b;
    const ValueId x = b.input("x", Shape{1, 3, 12, 10});
    const ValueId c1 = b.conv("conv1", x, 3, 8, 3);
    const ValueId c2 = b.conv("conv2", x, 3, 8, 1);
    // 0: the sigmoid is also a program output; 1: it gates another tensor; 2: x * x;
    // 3: the sigmoid is read by a second layer.
    const ValueId sg = b.op(OpKind::kSigmoid, "sig", {c1});
    const ValueId other = variant == 1 ? c2 : variant == 2 ? c1 : sg;
    const ValueId y = b.op(OpKind::kMul, "mul", {c1, variant == 2 ? c1 : other});
    b.output(y);
    if (variant == 0) b.output(sg);
    if (variant == 3) b.output(b.op(OpKind::kAdd, "add", {sg, c2}));
    if (variant == 2) b.output(sg);
    ASSERT_TRUE(b.g.infer_shapes().ok());
    const std::string desc = run_and_compare(b, b.layers, nullptr, 2);
    EXPECT_FALSE(runs_silu(desc, "mul")) << desc;
    EXPECT_FALSE(sigmoid_fused(desc, "sig")) << desc;
  }
}

// A slice cut between the Sigmoid and the Mul runs them as they are; a slice holding both fuses.
TEST(CpuSiluFusion, SliceCutBetweenSigmoidAndMul) {
  GraphBuilder b;
  const ValueId x = b.input("x", Shape{1, 3, 12, 10});
  const ValueId c1 = b.conv("conv1", x, 3, 8, 3);
  const ValueId sg = b.op(OpKind::kSigmoid, "sig", {c1});
  b.output(b.op(OpKind::kMul, "mul", {c1, sg}));
  ASSERT_TRUE(b.g.infer_shapes().ok());
  const std::vector<NodeId> head(b.layers.begin(), b.layers.begin() + 2);
  const std::vector<NodeId> tail(b.layers.begin() + 2, b.layers.end());
  EXPECT_FALSE(sigmoid_fused(run_and_compare(b, head, nullptr, 2), "sig"));
  EXPECT_FALSE(runs_silu(run_and_compare(b, tail, nullptr, 2), "mul"));
  EXPECT_TRUE(runs_silu(run_and_compare(b, b.layers, nullptr, 2), "mul"));
}

}  // namespace
}  // namespace tessera
