// Random plans over several devices on the foundation models: the executor's outputs match
// PyTorch's as a single-device run does.
//
// Per model, one or two seeded random contiguous plans of up to six stages, each stage on a
// device drawn from those that can run it, at least three distinct devices per plan (the second
// plan of a model leaves the NPU out). Small models
// draw from reference, cpu:0, npu:0, opencl:0 and vulkan:0; the big ones (resnet50, vgg16,
// alexnet) leave the slow reference kernels and lavapipe out. A stage holding more than 64 MB of
// weights goes to a cpu device (lavapipe's 128 MiB buffers and the NPU's 100 MB per program).
// Devices absent here are left out, unless TESSERA_REQUIRE_<KIND> is set.
//
// Tolerance: a plan with no NPU stage must give max|err| <= 1e-3 * max(1, max|torch|), the
// GPU backends' bound in model_test.cc; a plan with an NPU stage (fp16) must keep the relative L2
// error ||y - torch|| / ||torch|| <= 0.1, the fp16 bound of npu_precision_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "backends/registry.h"
#include "scheduler/executor/executor.h"
#include "scheduler/plan.h"
#include "tests/models/model_fixture.h"

namespace tessera {
namespace {

bool device_required(const std::string& device) {
  std::string kind = device.substr(0, device.find(':'));
  for (char& c : kind) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return std::getenv(("TESSERA_REQUIRE_" + kind).c_str()) != nullptr;
}

struct PlanCase {
  const char* model;
  bool big;   // leave reference and vulkan out
  int plans;  // random plans to run
};

class PlanModelTest : public ::testing::TestWithParam<PlanCase> {};

// The devices that open here (one Device each, for capability queries).
struct Candidates {
  std::vector<std::string> names;
  std::vector<std::unique_ptr<Device>> devices;
};

Candidates open_candidates(bool big) {
  std::vector<std::string> wanted = {"cpu:0", "npu:0", "opencl:0"};
  if (big) {
    wanted.push_back("cpu");
  } else {
    wanted.push_back("reference");
    wanted.push_back("vulkan:0");
  }
  Candidates c;
  for (const std::string& name : wanted) {
    auto d = open_device(name);
    if (!d.ok()) {
      EXPECT_FALSE(device_required(name)) << name << " is required: " << d.status().to_string();
      continue;
    }
    c.names.push_back(name);
    c.devices.push_back(std::move(*d));
  }
  return c;
}

// A random plan of contiguous stages; every stage on a device that supports all its layers.
Result<Plan> random_plan(const LayerGraph& lg, const Candidates& c, bool allow_npu,
                         std::mt19937& rng) {
  const int L = lg.num_layers();
  const int num_stages = std::min(L, 6);
  std::vector<int> cuts(static_cast<size_t>(L - 1));
  for (int i = 0; i < L - 1; ++i) cuts[static_cast<size_t>(i)] = i + 1;
  std::shuffle(cuts.begin(), cuts.end(), rng);
  cuts.resize(static_cast<size_t>(num_stages - 1));
  std::sort(cuts.begin(), cuts.end());
  cuts.insert(cuts.begin(), 0);
  cuts.push_back(L);
  std::vector<std::pair<int, std::string>> starts;
  std::vector<bool> used(c.names.size(), false);
  for (size_t s = 0; s + 1 < cuts.size(); ++s) {
    uint64_t weight_bytes = 0;
    std::vector<size_t> allowed;
    for (int l = cuts[s]; l < cuts[s + 1]; ++l) weight_bytes += lg.layer(l).parameter_count * 4;
    for (size_t d = 0; d < c.names.size(); ++d) {
      if (weight_bytes > 64u * 1000 * 1000 && c.names[d].rfind("cpu", 0) != 0) continue;
      if (!allow_npu && c.names[d].rfind("npu", 0) == 0) continue;
      bool ok = true;
      for (int l = cuts[s]; l < cuts[s + 1] && ok; ++l) {
        ok = c.devices[d]->capabilities(lg.graph(), lg.graph().node(lg.layer(l).node)).supported;
      }
      if (ok) allowed.push_back(d);
    }
    if (allowed.empty()) {
      return not_found("no device runs layers " + std::to_string(cuts[s]) + ".." +
                       std::to_string(cuts[s + 1] - 1));
    }
    // Devices not used yet first, so that the plan spreads over as many as it can.
    std::vector<size_t> fresh;
    for (size_t d : allowed) {
      if (!used[d]) fresh.push_back(d);
    }
    const std::vector<size_t>& pick = fresh.empty() ? allowed : fresh;
    const size_t d = pick[rng() % pick.size()];
    used[d] = true;
    starts.emplace_back(cuts[s], c.names[d]);
  }
  return plan_from_slices(L, starts);
}

TEST_P(PlanModelTest, RandomPlansMatchPyTorch) {
  auto m = testing::load_model(GetParam().model);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const LayerGraph* lg = m->lg.get();
  const Tensor* expected = &m->expected;

  const std::vector<Tensor> inputs = {m->input};
  Candidates c = open_candidates(GetParam().big);
  if (c.names.size() < 3) GTEST_SKIP() << "fewer than three devices open here";
  std::mt19937 rng(1234);
  for (int trial = 0; trial < GetParam().plans; ++trial) {
    // Every second plan leaves the NPU out, so that the fp32 bound is checked too.
    auto plan = random_plan(*lg, c, trial % 2 == 0, rng);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    std::vector<std::string> distinct;
    bool npu = false;
    for (const Stage& s : plan->stages) {
      const std::string& d = s.placement.devices[0].device;
      if (std::find(distinct.begin(), distinct.end(), d) == distinct.end()) distinct.push_back(d);
      npu = npu || d.rfind("npu", 0) == 0;
    }
    ASSERT_GE(distinct.size(), 3u) << plan->notation();
    auto ex = Executor::create(*lg, *plan);
    ASSERT_TRUE(ex.ok()) << plan->notation() << ": " << ex.status().to_string();
    std::vector<Tensor> out;
    Status s = (*ex)->run(inputs, &out);
    ASSERT_TRUE(s.ok()) << plan->notation() << ": " << s.to_string();
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].shape(), expected->shape());
    const testing::OutputError e = testing::compare_output(out[0], *expected);
    ASSERT_EQ(e.first_nonfinite, -1) << plan->notation() << ": non-finite output";
    std::printf("[ plan ] %-14s %-60s max|err| %.3g  rel L2 %.3g\n", GetParam().model,
                plan->notation().c_str(), e.max_err, e.rel_l2);
    if (npu) {
      EXPECT_LE(e.rel_l2, 0.1) << plan->notation();
    } else {
      EXPECT_LE(e.max_err, 1e-3 * std::max(1.0, e.max_ref)) << plan->notation();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Foundation, PlanModelTest,
    ::testing::Values(PlanCase{"mobilenet_v2", false, 2}, PlanCase{"resnet18", false, 2},
                      PlanCase{"squeezenet1_1", false, 2}, PlanCase{"resnet50", true, 1},
                      PlanCase{"vgg16", true, 1}, PlanCase{"alexnet", true, 1}),
    [](const ::testing::TestParamInfo<PlanCase>& p) { return std::string(p.param.model); });

}  // namespace
}  // namespace tessera
