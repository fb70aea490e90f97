// The composite split device (backends/split/split_device.h): one layer split over 2-4 member
// devices by every method, with equal and unequal ratios, against the unsplit reference kernel
// (tests/backends/backend_test_util.h), and a split stage run by the executor.
//
// Members are drawn from reference, cpu:0, cpu:1, opencl:0, vulkan:0 and npu:0 where they open
// here. The cross product (ops x methods x kernels x strides x paddings x pieces x ratios x
// members) is sampled with a seeded RNG to keep the unit run fast; the exhaustive small corners
// of the rules are in tests/ops/split_rule_test.cc. A sample with an npu:0 member runs within the
// NPU's fp16 precision (relative tolerance 2e-2), the others within 1e-4.
#include "backends/split/split_device.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "backends/registry.h"
#include "graph/layer_graph.h"
#include "scheduler/executor/executor.h"
#include "scheduler/plan.h"
#include "tests/backends/backend_test_util.h"

namespace tessera {
namespace {

using namespace tessera::testing;

std::vector<std::string> member_candidates() {
  std::vector<std::string> out;
  for (const char* name : {"reference", "cpu:0", "cpu:1", "opencl:0", "vulkan:0", "npu:0"}) {
    if (open_device(name).ok()) out.push_back(name);
  }
  return out;
}

struct LayerCase {
  OpKind kind;
  Attributes attrs;
  std::vector<DiffInput> inputs;
  std::vector<SplitMethod> methods;
  std::string what;
};

// A random layer: Conv (kernel 1/3/5/7/9, stride 1-3, same/valid/explicit padding, odd sizes),
// Gemm or MatMul (odd feature counts), or a pool.
LayerCase random_layer(std::mt19937& rng) {
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + static_cast<ptrdiff_t>(rng() % v.size()));
  };
  auto rnd = [&](Shape s, float lo = -1.f, float hi = 1.f) {
    return random_tensor(s, static_cast<uint32_t>(rng()), lo, hi);
  };
  LayerCase c;
  const int kind = static_cast<int>(rng() % 10);
  if (kind < 6) {
    const int64_t k = pick({1, 3, 5, 7, 9}), s = pick({1, 2, 3}), ci = pick({3, 4, 8, 13});
    const int64_t co = pick({4, 8, 13}), h = pick({13, 17}), w = pick({13, 127});
    c.kind = OpKind::kConv;
    c.attrs.set("kernel_shape", std::vector<int64_t>{k, k});
    c.attrs.set("strides", std::vector<int64_t>{s, s});
    const int pad = static_cast<int>(rng() % 3);
    if (pad == 0) c.attrs.set("auto_pad", std::string("SAME_UPPER"));
    if (pad == 1) c.attrs.set("auto_pad", std::string("VALID"));
    if (pad == 2) c.attrs.set("pads", std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2});
    if (rng() % 2) set_fused_activation(&c.attrs, Activation{ActivationKind::kRelu, 0, 0});
    const int64_t hin = pad == 1 ? h + k : h;
    c.inputs = {{rnd(Shape{1, ci, hin, w}), false},
                {rnd(Shape{co, ci, k, k}), true},
                {rnd(Shape{co}, -2.f, 2.f), true}};
    c.methods = {SplitMethod::kConvChannel, SplitMethod::kConvSpatial, SplitMethod::kConvFilter,
                 SplitMethod::kConvGrid};
    c.what = "Conv k" + std::to_string(k) + " s" + std::to_string(s) + " pad" +
             std::to_string(pad) + " " + std::to_string(ci) + "x" + std::to_string(hin) + "x" +
             std::to_string(w) + "->" + std::to_string(co);
  } else if (kind < 8) {
    const int64_t di = pick({13, 127, 200}), d_o = pick({13, 64, 127});
    c.kind = OpKind::kGemm;
    c.attrs.set("transB", int64_t{1});
    if (rng() % 2) set_fused_activation(&c.attrs, Activation{ActivationKind::kRelu, 0, 0});
    c.inputs = {{rnd(Shape{1, di}), false},
                {rnd(Shape{d_o, di}), true},
                {rnd(Shape{d_o}, -2.f, 2.f), true}};
    c.methods = {SplitMethod::kFcOut, SplitMethod::kFcIn};
    c.what = "Gemm " + std::to_string(di) + "->" + std::to_string(d_o);
  } else if (kind < 9) {
    c.kind = OpKind::kMatMul;
    c.inputs = {{rnd(Shape{3, 127}), false}, {rnd(Shape{127, 13}), true}};
    c.methods = {SplitMethod::kFcOut, SplitMethod::kFcIn};
    c.what = "MatMul";
  } else {
    c.kind = rng() % 2 ? OpKind::kMaxPool : OpKind::kAveragePool;
    const int64_t k = pick({2, 3}), s = pick({1, 2});
    c.attrs.set("kernel_shape", std::vector<int64_t>{k, k});
    c.attrs.set("strides", std::vector<int64_t>{s, s});
    c.inputs = {{rnd(Shape{1, 8, 13, 127}), false}};
    c.methods = {SplitMethod::kConvChannel, SplitMethod::kConvSpatial, SplitMethod::kConvGrid};
    c.what = std::string(op_name(c.kind)) + " k" + std::to_string(k) + " s" + std::to_string(s);
  }
  return c;
}

TEST(SplitDevice, SampledLayersMethodsAndMembersMatchTheUnsplitLayer) {
  const std::vector<std::string> members = member_candidates();
  ASSERT_GE(members.size(), 2u);
  std::mt19937 rng(404);
  int run = 0, skipped = 0;
  for (int trial = 0; trial < 60; ++trial) {
    LayerCase c = random_layer(rng);
    const SplitMethod m = c.methods[rng() % c.methods.size()];
    const size_t n = 2 + rng() % 3;
    std::vector<double> ratios(n, 1.0);
    if (rng() % 2) {
      for (double& r : ratios) r = 0.2 + static_cast<double>(rng() % 80) / 100.0;
    }
    SplitSpec spec;
    spec.method = m;
    spec.ratios = ratios;
    for (size_t i = 0; i < n; ++i) spec.devices.push_back(members[rng() % members.size()]);
    const std::string name = split_device_name(spec);
    SCOPED_TRACE(c.what + " on " + name);
    // Skip samples a member cannot run (the NPU's op list) or that the rule refuses (a piece
    // reading only padding); the capability answer must say why.
    auto dev = open_device(name);
    ASSERT_TRUE(dev.ok()) << dev.status().to_string();
    {
      std::vector<OpInput> ops;
      for (const DiffInput& d : c.inputs)
        ops.push_back(d.is_constant ? constant(d.value) : in(d.value));
      Graph g = single_node_graph(c.kind, c.attrs, ops, 1);
      ASSERT_TRUE(g.infer_shapes().ok());
      const Capability cap = (*dev)->capabilities(g, g.node(0));
      if (!cap.supported) {
        EXPECT_FALSE(cap.reason.empty());
        ++skipped;
        continue;
      }
    }
    bool npu = false;
    for (const std::string& d : spec.devices) npu = npu || d.rfind("npu", 0) == 0;
    const float tol = npu ? 2e-2f : 1e-4f;
    DiffResult r = diff_op(name, c.kind, c.attrs, c.inputs, 1, tol, tol, false, false);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "sample " << trial;
      return;
    }
    ++run;
    EXPECT_NE(r.kernel.find(std::string("split ") + split_method_name(m)), std::string::npos)
        << r.kernel;
  }
  EXPECT_EQ(run + skipped, 60);
  EXPECT_GE(run, 40) << skipped << " samples skipped as unsupported by a member";
}

// Every member kind this machine has, in turn as the slow second member of an unequal split.
TEST(SplitDevice, EveryMemberDeviceTakesAPiece) {
  for (const std::string& member : member_candidates()) {
    SCOPED_TRACE(member);
    const bool npu = member.rfind("npu", 0) == 0;
    const float tol = npu ? 2e-2f : 1e-4f;
    Attributes a;
    a.set("kernel_shape", std::vector<int64_t>{3, 3});
    a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    set_fused_activation(&a, Activation{ActivationKind::kRelu, 0, 0});
    const std::vector<DiffInput> ins = {{random_tensor(Shape{1, 8, 13, 127}, 1), false},
                                        {random_tensor(Shape{16, 8, 3, 3}, 2), true},
                                        {random_tensor(Shape{16}, 3, -2.f, 2.f), true}};
    // conv-grid over two members is a 1x2 grid: column bands, the halo along W.
    for (SplitMethod m : {SplitMethod::kConvChannel, SplitMethod::kConvSpatial,
                          SplitMethod::kConvFilter, SplitMethod::kConvGrid}) {
      SplitSpec spec{m, {"cpu:0", member}, {0.7, 0.3}};
      diff_op(split_device_name(spec), OpKind::kConv, a, ins, 1, tol, tol);
    }
  }
}

TEST(SplitDevice, NamesRoundTripAndBadNamesSayWhy) {
  SplitSpec spec{SplitMethod::kConvSpatial, {"cpu:0", "cpu:1", "reference"}, {0.25, 0.5, 0.25}};
  const std::string name = split_device_name(spec);
  EXPECT_EQ(name, "split:conv-spatial:cpu:0=0.25+cpu:1=0.5+reference=0.25");
  auto back = parse_split_device_name(name);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->devices, spec.devices);
  EXPECT_EQ(back->ratios, spec.ratios);
  auto dev = open_device(name);
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  EXPECT_EQ((*dev)->info().kind, DeviceKind::kSplit);
  EXPECT_EQ((*dev)->name(), name);
  for (const char* bad :
       {"split:rows:cpu:0=0.5+cpu:1=0.5", "split:fc-out:cpu:0=0.5", "split:fc-out:cpu:0+cpu:1",
        "split:fc-out:cpu:0=-1+cpu:1=2", "split:fc-out:cpu:0=0.5+nosuch:3=0.5",
        "split:fc-out:cpu:0=1+split:fc-in:cpu:0=1"}) {
    auto d = open_device(bad);
    EXPECT_FALSE(d.ok()) << bad;
  }
}

TEST(SplitDevice, RefusesWhatItCannotSplit) {
  auto dev = open_device("split:fc-out:cpu:0=0.5+cpu:1=0.5");
  ASSERT_TRUE(dev.ok());
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 4, 13, 13}});
  g.inputs().push_back(x);
  Node n;
  n.name = "pool";
  n.kind = OpKind::kMaxPool;
  n.attrs.set("kernel_shape", std::vector<int64_t>{2, 2});
  n.inputs = {x};
  n.outputs = {g.add_value("y")};
  g.outputs().push_back(n.outputs[0]);
  g.add_node(n);
  ASSERT_TRUE(g.infer_shapes().ok());
  const Capability c = (*dev)->capabilities(g, g.node(0));
  EXPECT_FALSE(c.supported);
  EXPECT_NE(c.reason.find("fc-out"), std::string::npos) << c.reason;
  const NodeId node = 0;
  auto prog = (*dev)->compile(g, std::span<const NodeId>(&node, 1));
  ASSERT_FALSE(prog.ok());
  EXPECT_NE(prog.status().message().find("pool"), std::string::npos) << prog.status().message();
}

// conv -> pool -> gemm, planned with a split stage each, run by the executor (sequential and
// streaming) against a reference run of the whole graph.
TEST(SplitDevice, ExecutorRunsSplitStagesLikeAnyOther) {
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 3, 13, 13}});
  g.inputs().push_back(x);
  Node conv;
  conv.name = "conv";
  conv.kind = OpKind::kConv;
  conv.attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  set_fused_activation(&conv.attrs, Activation{ActivationKind::kRelu, 0, 0});
  conv.inputs = {x, g.add_constant("w", random_tensor(Shape{8, 3, 3, 3}, 1)),
                 g.add_constant("b", random_tensor(Shape{8}, 2))};
  conv.outputs = {g.add_value("c")};
  g.add_node(conv);
  Node pool;
  pool.name = "pool";
  pool.kind = OpKind::kMaxPool;
  pool.attrs.set("kernel_shape", std::vector<int64_t>{3, 3});
  pool.attrs.set("strides", std::vector<int64_t>{2, 2});
  pool.attrs.set("ceil_mode", int64_t{1});
  pool.inputs = {conv.outputs[0]};
  pool.outputs = {g.add_value("p")};
  g.add_node(pool);
  Node flat;
  flat.name = "flat";
  flat.kind = OpKind::kFlatten;
  flat.inputs = {pool.outputs[0]};
  flat.outputs = {g.add_value("f")};
  g.add_node(flat);
  Node fc;
  fc.name = "fc";
  fc.kind = OpKind::kGemm;
  fc.attrs.set("transB", int64_t{1});
  fc.inputs = {flat.outputs[0], g.add_constant("fw", random_tensor(Shape{10, 8 * 6 * 6}, 3)),
               g.add_constant("fb", random_tensor(Shape{10}, 4))};
  fc.outputs = {g.add_value("y")};
  g.add_node(fc);
  g.outputs().push_back(fc.outputs[0]);
  ASSERT_TRUE(g.infer_shapes().ok());
  auto lg = LayerGraph::build(g);
  ASSERT_TRUE(lg.ok()) << lg.status().to_string();
  ASSERT_EQ(lg->num_layers(), 4);

  const Tensor input = random_tensor(Shape{1, 3, 13, 13}, 9);
  std::vector<Tensor> want;
  {
    auto plan = plan_from_slices(4, {{0, "reference"}});
    ASSERT_TRUE(plan.ok());
    auto ex = Executor::create(*lg, *plan);
    ASSERT_TRUE(ex.ok()) << ex.status().to_string();
    ASSERT_TRUE((*ex)->run(std::vector<Tensor>{input}, &want).ok());
  }
  for (const char* methods : {"conv-spatial conv-spatial fc-out", "conv-filter conv-channel fc-in",
                              "conv-channel conv-spatial fc-in"}) {
    SCOPED_TRACE(methods);
    std::istringstream ms(methods);
    std::string m[3];
    ms >> m[0] >> m[1] >> m[2];
    Plan plan;
    plan.num_layers = 4;
    auto split = [&](std::vector<int> layers, const std::string& method) {
      Stage s;
      s.layers = std::move(layers);
      s.placement.devices = {DeviceShare{"cpu:0", 0, 0.6}, DeviceShare{"cpu:1", 0, 0.4}};
      s.placement.split = method;
      return s;
    };
    plan.stages.push_back(split({0}, m[0]));
    plan.stages.push_back(split({1}, m[1]));
    Stage flat_stage;
    flat_stage.layers = {2};
    flat_stage.placement = Placement::on("cpu:0");
    plan.stages.push_back(flat_stage);
    plan.stages.push_back(split({3}, m[2]));
    for (PlanMode mode : {PlanMode::kSequential, PlanMode::kStreaming}) {
      plan.mode = mode;
      auto ex = Executor::create(*lg, plan);
      ASSERT_TRUE(ex.ok()) << plan.notation() << ": " << ex.status().to_string();
      for (int frame = 0; frame < 2; ++frame) {
        std::vector<Tensor> got;
        Status s = (*ex)->run(std::vector<Tensor>{input}, &got);
        ASSERT_TRUE(s.ok()) << s.to_string();
        ASSERT_EQ(got.size(), 1u);
        expect_near(got[0], want[0], 1e-4f, 1e-4f);
      }
    }
  }
}

}  // namespace
}  // namespace tessera
