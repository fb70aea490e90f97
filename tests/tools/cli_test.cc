// The `tessera` command on good and bad input: exit codes and messages. Runs the real binary.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/npy.h"
#include "graph/format/model_file.h"
#include "graph/graph.h"
#include "onnx/onnx_pb.h"
#include "tests/tools/cli_test_util.h"

namespace tessera {
namespace {

using testing::CommandResult;
using testing::run_cli;

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "cli_" + name;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// y = relu(x) on f32[1, 4].
std::string write_small_model() {
  Graph g;
  ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 4}});
  ValueId y = g.add_value("y");
  g.inputs().push_back(x);
  g.add_node(Node{"relu", OpKind::kRelu, {}, {x}, {y}});
  g.outputs().push_back(y);
  EXPECT_TRUE(g.infer_shapes().ok());
  const std::string path = temp_path("small.tsr");
  EXPECT_TRUE(save_model(g, path, ModelMetadata{"cli_test", {}}).ok());
  return path;
}

TEST(Cli, UsageAndUnknownCommands) {
  CommandResult r = run_cli("");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("usage"), std::string::npos);
  EXPECT_EQ(run_cli("--help").exit_code, 0);
  r = run_cli("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown command"), std::string::npos);
  for (const char* c : {"convert", "info", "run"}) {
    EXPECT_EQ(run_cli(std::string(c) + " --help").exit_code, 0) << c;
  }
}

TEST(Cli, DevicesListsReference) {
  CommandResult r = run_cli("devices");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("reference"), std::string::npos);
}

TEST(Cli, RunsAModelAndWritesOutput) {
  const std::string model = write_small_model();
  const std::string in = temp_path("x.npy"), out = temp_path("y.npy");
  const float xs[] = {-1, 2, -3, 4};
  ASSERT_TRUE(write_npy(in, Tensor::from_floats(Shape{1, 4}, xs)).ok());
  CommandResult r =
      run_cli("run " + model + " --input " + in + " --output " + out + " --repeat 3 --top 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("latency"), std::string::npos);
  EXPECT_NE(r.output.find("class 3"), std::string::npos) << r.output;
  Tensor y = read_npy(out).value();
  EXPECT_EQ(y.data<float>()[1], 2.f);
  EXPECT_EQ(y.data<float>()[2], 0.f);
  r = run_cli("info " + model);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Relu"), std::string::npos);
}

TEST(Cli, RunPrintsEveryTimedRunWithTimes) {
  const std::string model = write_small_model();
  const std::string out = temp_path("y0.npy");
  // No warm-up: the outputs still come from the timed runs.
  CommandResult r = run_cli("run " + model + " --repeat 4 --warmup 0 --times --output " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t at = r.output.find("times ms:");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
  int values = 0;
  for (size_t i = 0; i < line.size(); ++i) values += line[i] == ' ' ? 1 : 0;
  EXPECT_EQ(values, 1 + 4) << line;  // "times ms:" holds one space, then one per run
  EXPECT_EQ(read_npy(out).value().shape(), (Shape{1, 4}));
  EXPECT_EQ(run_cli("run " + model + " --repeat 2").output.find("times ms:"), std::string::npos);
  EXPECT_EQ(run_cli("run " + model + " --warmup -1").exit_code, 1);
}

TEST(Cli, RunDescribesWhatEachStepRuns) {
  const std::string model = write_small_model();
  CommandResult r = run_cli("run " + model + " --device cpu:0 --describe");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step 0 on cpu:0:"), std::string::npos) << r.output;
  // One line per layer of the small model (its node 'relu'), naming its kernel.
  EXPECT_NE(r.output.find("\nrelu: "), std::string::npos) << r.output;
  EXPECT_EQ(run_cli("run " + model + " --device cpu:0").output.find("step 0 on"),
            std::string::npos);
}

TEST(Cli, BenchReportsLatencyStreamMemoryAndOpTimes) {
  const std::string model = write_small_model();
  const std::string out = temp_path("bench.json");
  CommandResult r = run_cli(
      "bench " + model + " --devices reference,cpu:0 --runs 4 --warmup 1 --stream 5 --json " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("p99 ms"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("time per operator kind"), std::string::npos) << r.output;
  auto j = json::parse_file(out);
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  const json::Json& rows = (*j)["bench"];
  ASSERT_EQ(rows.size(), 2u) << j->dump();
  for (const json::Json& row : rows) {
    EXPECT_EQ(row["runs"].get<int>(), 4);
    const json::Json& lat = row["latency_ms"];
    EXPECT_LE(lat["min"].get<double>(), lat["p50"].get<double>());
    EXPECT_LE(lat["p50"].get<double>(), lat["p90"].get<double>());
    EXPECT_LE(lat["p90"].get<double>(), lat["p99"].get<double>());
    EXPECT_GT(row["stream_frames_per_s"].get<double>(), 0);
    EXPECT_GT(row["memory_mib"]["peak_rss"].get<double>(), 0);
    EXPECT_TRUE(row["op_ms"].contains("Relu")) << row.dump();
  }
  EXPECT_EQ(rows[0]["target"], "reference");
  EXPECT_EQ(rows[1]["target"], "cpu:0");
}

TEST(Cli, BenchListsTheSlowestLayers) {
  const std::string model = write_small_model();
  const std::string out = temp_path("bench_layers.json");
  CommandResult r =
      run_cli("bench " + model +
              " --devices cpu:0 --runs 3 --warmup 1 --stream 0 --top-layers 5 --json " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The small model's one layer (node 'relu'), with its op and share of the total.
  EXPECT_NE(r.output.find("the 1 slowest layers:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("%  Relu relu"), std::string::npos) << r.output;
  auto j = json::parse_file(out);
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  const json::Json& layers = (*j)["bench"][0]["layer_ms"];
  ASSERT_EQ(layers.size(), 1u) << j->dump();
  EXPECT_EQ(layers[0]["layer"], "Relu relu");
  EXPECT_GE(layers[0]["ms"].get<double>(), 0);
  EXPECT_EQ(run_cli("bench " + model + " --top-layers -1").exit_code, 1);
}

TEST(Cli, BenchNamesWhatCouldNotRun) {
  const std::string model = write_small_model();
  // A device that does not exist: the others are still measured, the command fails naming it.
  CommandResult r = run_cli("bench " + model + " --devices reference,bogus:3 --runs 2 --stream 0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("unknown device 'bogus:3'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reference"), std::string::npos) << r.output;
  // ONNX Runtime that cannot run (no ONNX file recorded): a note, not a failure.
  r = run_cli("bench " + model + " --devices reference --runs 2 --stream 0 --compare-ort");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("give --onnx"), std::string::npos) << r.output;
  r = run_cli("bench " + model + " --onnx a.onnx --onnx b.onnx --compare-ort");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("one file per model"), std::string::npos) << r.output;
  EXPECT_EQ(run_cli("bench " + model + " --runs 0").exit_code, 1);
  EXPECT_EQ(run_cli("bench").exit_code, 2);
}

// An ONNX model, opset 13, with input x: f32[1, 4], output `y` and the given nodes
// (op_type, inputs, outputs, name).
struct OnnxNode {
  std::string op;
  std::vector<std::string> inputs, outputs;
  std::string name;
};
std::string write_onnx(const std::string& file, const std::vector<OnnxNode>& nodes) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  onnx::OperatorSetIdProto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  onnx::ValueInfoProto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {1, 4})
    x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  onnx::TensorProto* target = g->add_initializer();  // Reshape target [-1]
  target->set_name("minus_one");
  target->set_data_type(onnx::TensorProto::INT64);
  target->add_dims(1);
  target->add_int64_data(-1);
  for (const OnnxNode& n : nodes) {
    onnx::NodeProto* p = g->add_node();
    p->set_op_type(n.op);
    p->set_name(n.name);
    for (const std::string& i : n.inputs) p->add_input(i);
    for (const std::string& o : n.outputs) p->add_output(o);
  }
  g->add_output()->set_name("y");
  const std::string path = temp_path(file);
  std::ofstream out(path, std::ios::binary);
  EXPECT_TRUE(m.SerializeToOstream(&out));
  return path;
}

TEST(Cli, ConvertPrintsWhatItDidToTheModel) {
  // Shape -> Reshape folds to a constant (the target of the last Reshape); Identity is removed;
  // Relu cannot be fused (no layer before it), so two layers remain: Relu and Reshape.
  const std::string onnx =
      write_onnx("passes.onnx", {{"Shape", {"x"}, {"s"}, "shape"},
                                 {"Reshape", {"s", "minus_one"}, {"t"}, "flat"},
                                 {"Identity", {"x"}, {"xi"}, "identity"},
                                 {"Relu", {"xi"}, {"r"}, "relu"},
                                 {"Reshape", {"r", "t"}, {"y"}, "reshape"}});
  CommandResult r = run_cli("convert " + onnx + " -o " + temp_path("passes.tsr"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("5 nodes -> 2 layers"), std::string::npos) << r.output;
  // Shape and Concat are folded while shapes are inferred, before the graph passes run.
  EXPECT_NE(r.output.find("folded 2 constant nodes, removed 1 identities"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("imported: Reshape x2, Shape x1, Identity x1, Relu x1"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("folded or fused away: Reshape x1, Shape x1, Identity x1"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("layers (2): Relu x1, Reshape x1"), std::string::npos) << r.output;
}

TEST(Cli, ConvertGroupsMissingOperatorsByType) {
  const std::string onnx = write_onnx("missing.onnx", {{"NonMaxSuppression", {"x"}, {"a"}, "nms_a"},
                                                       {"NonMaxSuppression", {"a"}, {"b"}, "nms_b"},
                                                       {"Scan", {"b", "b", "b"}, {"y"}, "scan_c"}});
  CommandResult r = run_cli("convert " + onnx + " -o " + temp_path("missing.tsr"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("NonMaxSuppression x2 (nodes 'nms_a', 'nms_b'), Scan x1 (node 'scan_c')"),
            std::string::npos)
      << r.output;
}

TEST(Cli, ConvertShapeSetsSymbolicInputDims) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  onnx::OperatorSetIdProto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  onnx::ValueInfoProto* x = g->add_input();
  x->set_name("images");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto* s = x->mutable_type()->mutable_tensor_type()->mutable_shape();
  s->add_dim()->set_dim_param("batch");
  s->add_dim()->set_dim_value(3);
  s->add_dim()->set_dim_param("height");
  s->add_dim()->set_dim_param("width");
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Relu");
  n->add_input("images");
  n->add_output("y");
  g->add_output()->set_name("y");
  const std::string onnx = temp_path("symbolic.onnx"), tsr = temp_path("symbolic.tsr");
  {
    std::ofstream out(onnx, std::ios::binary);
    ASSERT_TRUE(m.SerializeToOstream(&out));
  }
  CommandResult r = run_cli("convert " + onnx + " -o " + tsr + " --shape images=2x3x40x56");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("warning"), std::string::npos) << r.output;
  auto loaded = load_model(tsr);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->value(loaded->inputs()[0]).info.shape, Shape({2, 3, 40, 56}));
  // --batch sets the batch only: height and width left symbolic are named, not set to 1.
  r = run_cli("convert " + onnx + " -o " + tsr + " --batch 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("graph input 'images' dimension 2 is symbolic ('height')"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--shape images=Nx3xD2xD3"), std::string::npos) << r.output;
  // run converts an .onnx model in memory with the same flags.
  r = run_cli("run " + onnx + " --shape images=1x3x5x7 --top 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_cli("run " + onnx + " --batch 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("dimension 2 is symbolic ('height')"), std::string::npos) << r.output;
  r = run_cli("run " + tsr + " --shape images=1x3x5x7");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("shapes are fixed"), std::string::npos) << r.output;
  for (const char* bad : {"images=2x3x40", "images=2x3x0x56", "image=2x3x40x56", "2x3"}) {
    r = run_cli("convert " + onnx + " -o " + tsr + " --shape " + bad);
    EXPECT_EQ(r.exit_code, 1) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("error:"), std::string::npos) << bad << "\n" << r.output;
  }
}

TEST(Cli, RejectsBadModelFiles) {
  const std::string empty = temp_path("empty.tsr"), junk = temp_path("junk.tsr");
  write_bytes(empty, "");
  write_bytes(junk, std::string(1000, '\x5a'));
  for (const std::string& cmd : std::vector<std::string>{
           "run /nonexistent/model.tsr", "run " + empty, "run " + junk, "info " + junk,
           "convert " + junk + " -o " + temp_path("o.tsr"), "convert /nonexistent/model.onnx"}) {
    CommandResult r = run_cli(cmd);
    EXPECT_EQ(r.exit_code, 1) << cmd << "\n" << r.output;
    EXPECT_NE(r.output.find("error:"), std::string::npos) << cmd << "\n" << r.output;
  }
}

TEST(Cli, RejectsBadInputsAndOptions) {
  const std::string model = write_small_model();
  const std::string wrong = temp_path("wrong.npy");
  ASSERT_TRUE(write_npy(wrong, Tensor::create(DType::kF32, Shape{2, 4}).value()).ok());
  CommandResult r = run_cli("run " + model + " --input " + wrong);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("expects f32[1, 4]"), std::string::npos) << r.output;
  const std::string ints = temp_path("ints.npy");
  ASSERT_TRUE(write_npy(ints, Tensor::create(DType::kI64, Shape{1, 4}).value()).ok());
  EXPECT_EQ(run_cli("run " + model + " --input " + ints).exit_code, 1);
  EXPECT_EQ(run_cli("run " + model + " --input nope=" + wrong).exit_code, 1);
  EXPECT_EQ(run_cli("run " + model + " --device gpu").exit_code, 1);
  EXPECT_EQ(run_cli("run " + model + " --device opencl:999").exit_code, 1);  // no such device
  EXPECT_EQ(run_cli("run " + model + " --repeat abc").exit_code, 1);
  EXPECT_EQ(run_cli("run " + model + " --repeat 0").exit_code, 1);
  EXPECT_EQ(run_cli("run " + model + " --bogus").exit_code, 1);
  EXPECT_EQ(run_cli("run " + model + " --input").exit_code, 1);
}

TEST(Cli, RunHonoursMemoryAndWorkBudgets) {
  const std::string model = write_small_model();
  CommandResult r = run_cli("run " + model + " --memory-budget 8");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("over the memory budget of 8 B"), std::string::npos) << r.output;
  r = run_cli("run " + model + " --memory-budget lots");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--memory-budget"), std::string::npos) << r.output;
  r = run_cli("run " + model + " --max-gflops 1e-9");  // 1 FLOP: the Relu has 4
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("work budget"), std::string::npos) << r.output;
  r = run_cli("run " + model + " --memory-budget 1M --max-gflops 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace tessera
