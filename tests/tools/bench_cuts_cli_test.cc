// `tessera bench cuts` and `bench pack` on a small model: exit codes, the cut profile they
// write, and errors naming the bad option. Runs the real binary.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph/format/model_file.h"
#include "graph/graph.h"
#include "scheduler/cut_profile.h"
#include "tests/tools/cli_test_util.h"

namespace tessera {
namespace {

using testing::CommandResult;
using testing::run_cli;

// x[2, 8] -> MatMul -> Relu -> MatMul -> Sigmoid: four layers, one ReLU cut (2).
std::string write_chain_model() {
  Graph g;
  ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{2, 8}});
  g.inputs().push_back(x);
  std::vector<float> w(64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.05f * static_cast<float>(i % 9) - 0.2f;
  ValueId w0 = g.add_constant("w0", Tensor::from_floats(Shape{8, 8}, w));
  ValueId w1 = g.add_constant("w1", Tensor::from_floats(Shape{8, 8}, w));
  ValueId a = g.add_value("a"), b = g.add_value("b"), c = g.add_value("c"), y = g.add_value("y");
  g.add_node(Node{"mm0", OpKind::kMatMul, {}, {x, w0}, {a}});
  g.add_node(Node{"relu", OpKind::kRelu, {}, {a}, {b}});
  g.add_node(Node{"mm1", OpKind::kMatMul, {}, {b, w1}, {c}});
  g.add_node(Node{"sig", OpKind::kSigmoid, {}, {c}, {y}});
  g.outputs().push_back(y);
  EXPECT_TRUE(g.infer_shapes().ok());
  const std::string path = ::testing::TempDir() + "bench_cuts_chain.tsr";
  EXPECT_TRUE(save_model(g, path, ModelMetadata{"bench_cuts_test", {}}).ok());
  return path;
}

TEST(BenchCutsCli, WritesACutProfileAndRefusesBadOptions) {
  const std::string model = write_chain_model();
  const std::string out = ::testing::TempDir() + "bench_cuts_chain.cuts.json";
  CommandResult r =
      run_cli("bench cuts " + model + " --frames 4 --bits 4,8 --device reference -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 choose + 2 report frames"), std::string::npos) << r.output;
  auto prof = CutProfile::load(out);
  ASSERT_TRUE(prof.ok()) << prof.status().to_string();
  EXPECT_EQ(prof->num_layers, 4);
  EXPECT_EQ(prof->cuts, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(prof->bits, (std::vector<int>{4, 8}));
  EXPECT_EQ(prof->relu, (std::vector<char>{0, 0, 1, 0}));
  EXPECT_EQ(prof->model_name, "bench_cuts_chain");

  // The ReLU heuristic keeps cut 0 and the ReLU cut.
  r = run_cli("bench cuts " + model + " --frames 2 --bits 4 --cuts relu --device reference -o " +
              out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(CutProfile::load(out)->cuts, (std::vector<int>{0, 2}));

  r = run_cli("bench cuts " + model + " --bits 9");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--bits: '9'"), std::string::npos) << r.output;
  r = run_cli("bench cuts " + model + " --cuts 7");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--cuts: '7' is no cut (0..3)"), std::string::npos) << r.output;
  r = run_cli("bench cuts " + model + " --frames 1");
  EXPECT_NE(r.exit_code, 0);
  r = run_cli("bench cuts " + model + " --jitter 3");
  EXPECT_NE(r.output.find("--jitter"), std::string::npos) << r.output;

  // bench pack and bench hop share the model loading and the --cuts parser.
  r = run_cli("bench pack " + model + " --bits 4 --cuts 1,2 --device reference");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("median x fp32"), std::string::npos) << r.output;
  r = run_cli("bench pack " + model + " --bits 4 --cuts 1,x");
  EXPECT_NE(r.output.find("--cuts: 'x' is no cut (0..4)"), std::string::npos) << r.output;
  r = run_cli("bench hop " + model + " --device remote:127.0.0.1:1 --cuts 9");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--cuts: '9' is no cut (1..3)"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tessera
