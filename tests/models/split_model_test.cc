// Split plans on the foundation models: every Conv and Gemm layer split over cpu:0 + cpu:1
// (ratios 0.6 / 0.4), the methods taken in turn (conv: spatial, channel, filter; fc: out, in),
// the other layers on cpu:0. The executor's output must match PyTorch's within the fp32 bound
// of plan_model_test.cc (max|err| <= 1e-3 * max(1, max|torch|)).
#include <gtest/gtest.h>

#include <cstdio>

#include "ops/split_rule.h"
#include "scheduler/executor/executor.h"
#include "scheduler/plan.h"
#include "tests/models/model_fixture.h"

namespace tessera {
namespace {

class SplitModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SplitModelTest, SplitPlanMatchesPyTorch) {
  auto m = testing::load_model(GetParam());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const LayerGraph* lg = m->lg.get();
  const Tensor* expected = &m->expected;

  const char* conv_methods[] = {"conv-spatial", "conv-channel", "conv-filter", "conv-grid"};
  const char* fc_methods[] = {"fc-out", "fc-in"};
  int convs = 0, fcs = 0;
  Plan plan;
  plan.num_layers = lg->num_layers();
  const Graph& g = lg->graph();
  for (int l = 0; l < lg->num_layers(); ++l) {
    const Node& node = g.node(lg->layer(l).node);
    std::string method;
    if (node.kind == OpKind::kConv) method = conv_methods[convs++ % 4];
    if (node.kind == OpKind::kGemm) method = fc_methods[fcs++ % 2];
    if (!method.empty()) {
      NodeContext nc(g, node);
      auto extent = split_extent(nc.ctx(), *parse_split_method(method));
      if (!extent.ok() || *extent < 2) method = node.kind == OpKind::kConv ? "conv-channel" : "";
    }
    if (method.empty()) {
      if (!plan.stages.empty() && plan.stages.back().placement.single()) {
        plan.stages.back().layers.push_back(l);
        continue;
      }
      Stage s;
      s.layers = {l};
      s.placement = Placement::on("cpu:0");
      plan.stages.push_back(s);
      continue;
    }
    Stage s;
    s.layers = {l};
    s.placement.devices = {DeviceShare{"cpu:0", 0, 0.6}, DeviceShare{"cpu:1", 0, 0.4}};
    s.placement.split = method;
    plan.stages.push_back(s);
  }
  ASSERT_GT(convs + fcs, 0);
  auto ex = Executor::create(*lg, plan);
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  std::vector<Tensor> out;
  Status s = (*ex)->run(std::vector<Tensor>{m->input}, &out);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].shape(), expected->shape());
  const testing::OutputError e = testing::compare_output(out[0], *expected);
  ASSERT_EQ(e.first_nonfinite, -1) << "non-finite output";
  std::printf("[ split ] %-10s %d conv + %d fc layers split: max|err| %.3g\n", GetParam(), convs,
              fcs, e.max_err);
  EXPECT_LE(e.max_err, 1e-3 * std::max(1.0, e.max_ref));
}

INSTANTIATE_TEST_SUITE_P(Foundation, SplitModelTest,
                         ::testing::Values("alexnet", "vgg16", "resnet18"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param);
                         });

}  // namespace
}  // namespace tessera
