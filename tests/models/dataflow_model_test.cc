// Random mappings of the foundation models as CSDF actors (scheduler/dataflow.h): per model and
// device set, TESSERA_DATAFLOW_MAPPINGS random mappings (default 2, what CI affords: a mapping
// takes seconds; TESSERA_DATAFLOW_MAPPINGS=1000 is the full run, hours; each layer uniform over
// the devices that support it), each repaired by build_csdf, turned into a streaming plan, and
// run for 20 frames at queue capacity 1 under a watchdog, every output equal byte for byte to
// the sequential run of the same plan. Device sets: {cpu:0, cpu:1} and {cpu:0, npu:0}.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "backends/registry.h"
#include "graph/layer_graph.h"
#include "graph/onnx/onnx_import.h"
#include "scheduler/dataflow.h"
#include "tests/scheduler/dataflow_test_util.h"

namespace tessera {
namespace {

struct DataflowCase {
  const char* model;
  const char* second;  // cpu:1 or npu:0
};

class DataflowModelTest : public ::testing::TestWithParam<DataflowCase> {};

TEST_P(DataflowModelTest, RandomMappingsStreamLikeTheSequentialRun) {
  const char* dir = std::getenv("TESSERA_MODEL_DIR");
  ASSERT_NE(dir, nullptr) << "TESSERA_MODEL_DIR is not set (run through ctest)";
  const std::string path = std::string(dir) + "/" + GetParam().model + ".onnx";
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing";
  const std::vector<std::string> devices = {"cpu:0", GetParam().second};
  std::vector<std::unique_ptr<Device>> devs;
  for (const std::string& d : devices) {
    auto dev = open_device(d);
    if (!dev.ok()) GTEST_SKIP() << d << " is not available";
    devs.push_back(std::move(*dev));
  }
  auto imported = convert_onnx(path);
  ASSERT_TRUE(imported.ok()) << imported.status().to_string();
  auto lg = LayerGraph::build(imported->graph);
  ASSERT_TRUE(lg.ok()) << lg.status().to_string();
  auto sdf = build_sdf(*lg);
  ASSERT_TRUE(sdf.ok()) << sdf.status().to_string();
  std::vector<std::vector<int>> can(static_cast<size_t>(lg->num_layers()));
  for (int l = 0; l < lg->num_layers(); ++l) {
    const Node& node = lg->graph().node(lg->layer(l).node);
    for (size_t p = 0; p < devs.size(); ++p) {
      if (devs[p]->capabilities(lg->graph(), node).supported) {
        can[static_cast<size_t>(l)].push_back(static_cast<int>(p));
      }
    }
    ASSERT_FALSE(can[static_cast<size_t>(l)].empty()) << "no device runs layer " << l;
  }
  const char* env = std::getenv("TESSERA_DATAFLOW_MAPPINGS");
  const int mappings = env ? std::atoi(env) : 2;
  std::mt19937 rng(77);
  int splits = 0;
  for (int trial = 0; trial < mappings; ++trial) {
    std::vector<int> mapping(static_cast<size_t>(lg->num_layers()));
    for (int l = 0; l < lg->num_layers(); ++l) {
      const auto& c = can[static_cast<size_t>(l)];
      mapping[static_cast<size_t>(l)] = c[rng() % c.size()];
    }
    auto csdf = build_csdf(*lg, *sdf, mapping, 2);
    ASSERT_TRUE(csdf.ok()) << csdf.status().to_string();
    splits += csdf->splits;
    auto plan = csdf_to_plan(*sdf, *csdf, devices, lg->num_layers());
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    plan->queue_capacity = 1;
    SCOPED_TRACE("mapping " + std::to_string(trial));
    testing::expect_stream_equals_sequential(*lg, *plan, 20, 600);
    if (HasFailure()) break;
  }
  std::printf("[ dataflow ] %s on cpu:0 + %s: %d random mappings, %d phases split\n",
              GetParam().model, GetParam().second, mappings, splits);
}

INSTANTIATE_TEST_SUITE_P(
    Foundation, DataflowModelTest,
    ::testing::Values(DataflowCase{"resnet18", "cpu:1"}, DataflowCase{"resnet18", "npu:0"},
                      DataflowCase{"googlenet", "cpu:1"}, DataflowCase{"googlenet", "npu:0"},
                      DataflowCase{"squeezenet1_1", "cpu:1"},
                      DataflowCase{"squeezenet1_1", "npu:0"}, DataflowCase{"densenet121", "cpu:1"},
                      DataflowCase{"densenet121", "npu:0"}),
    [](const ::testing::TestParamInfo<DataflowCase>& p) {
      std::string n = std::string(p.param.model) + "_" + p.param.second;
      for (char& c : n) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return n;
    });

}  // namespace
}  // namespace tessera
