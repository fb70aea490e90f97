// `tessera plot`: each chart is well-formed SVG that renders to a picture with content
// (scripts/check_svg.py: XML parse, rsvg-convert, pixel count), from a real profile, plan and
// trace made with the tool; bad input is refused by name; text is escaped.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "core/json.h"
#include "graph/format/model_file.h"
#include "graph/graph.h"
#include "tests/tools/cli_test_util.h"
#include "tools/plots.h"
#include "tools/svg.h"

namespace tessera::tools {
namespace {

using testing::CommandResult;
using testing::run_cli;

std::string temp(const std::string& name) {
  return ::testing::TempDir() + "plot_" + name;
}

// conv 3x3 -> relu -> conv 1x1 -> relu on f32[1, 4, 12, 12]: four layers to plan.
std::string write_model() {
  Graph g;
  ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 4, 12, 12}});
  g.inputs().push_back(x);
  std::vector<float> w1(8 * 4 * 9), w2(8 * 8);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = 0.01f * static_cast<float>(i % 7) - 0.03f;
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = 0.02f * static_cast<float>(i % 5) - 0.04f;
  ValueId k1 = g.add_constant("k1", Tensor::from_floats(Shape{8, 4, 3, 3}, w1));
  ValueId k2 = g.add_constant("k2", Tensor::from_floats(Shape{8, 8, 1, 1}, w2));
  ValueId c1 = g.add_value("c1"), r1 = g.add_value("r1"), c2 = g.add_value("c2"),
          y = g.add_value("y");
  Attributes pad;
  pad.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  g.add_node(Node{"conv1", OpKind::kConv, pad, {x, k1}, {c1}});
  g.add_node(Node{"relu1", OpKind::kRelu, {}, {c1}, {r1}});
  g.add_node(Node{"conv2", OpKind::kConv, {}, {r1, k2}, {c2}});
  g.add_node(Node{"relu2", OpKind::kRelu, {}, {c2}, {y}});
  g.outputs().push_back(y);
  EXPECT_TRUE(g.infer_shapes().ok());
  const std::string path = temp("model.tsr");
  EXPECT_TRUE(save_model(g, path, ModelMetadata{"plot_test", {}}).ok());
  return path;
}

void expect_draws(const std::string& svg_path, int min_colors, const char* min_ink) {
  const std::string cmd = std::string(TESSERA_CHECK_SVG) + " " + svg_path + " " +
                          std::to_string(min_colors) + " " + min_ink + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(Plot, ProfilePlanAndTraceChartsDraw) {
  const std::string model = write_model();
  const std::string profile = temp("profile.json"), plan = temp("plan.json"),
                    trace = temp("trace.json");
  CommandResult r = run_cli("profile " + model + " --devices cpu:0,reference --repeat 1 " +
                            "--calibration-slices 0 -q -o " + profile);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_cli("plan " + model + " --profile " + profile + " --planner pipeline --stages 2 -o " +
              plan);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_cli("run " + model + " --plan " + plan + " --stream 8 -q --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* kind : {"profile", "plan", "trace"}) {
    SCOPED_TRACE(kind);
    const std::string in = std::string(kind) == "profile" ? profile
                           : std::string(kind) == "plan"  ? plan
                                                          : trace;
    const std::string out = temp(std::string(kind) + ".svg");
    r = run_cli(std::string("plot ") + kind + " " + in + " -o " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // Two devices: two coloured series or rows at least; the trace colours its frames.
    if (std::string(kind) == "profile") expect_draws(out, 2, "0.003");
    if (std::string(kind) == "plan") expect_draws(out, 2, "0.01");
    if (std::string(kind) == "trace") expect_draws(out, 4, "0.01");
  }
}

TEST(Plot, RefusesWhatIsNotAChart) {
  const std::string bad = temp("bad.json");
  std::ofstream(bad) << R"({"traceEvents": [{"ph": "X", "tid": 0, "ts": "soon"}]})";
  CommandResult r = run_cli("plot trace " + bad + " -o " + temp("bad.svg"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("traceEvents[0]"), std::string::npos) << r.output;
  std::ofstream(bad) << R"([1, 2])";
  r = run_cli("plot trace " + bad + " -o " + temp("bad.svg"));
  EXPECT_NE(r.output.find("traceEvents"), std::string::npos) << r.output;
  r = run_cli("plot pie " + bad + " -o " + temp("bad.svg"));
  EXPECT_NE(r.output.find("unknown chart 'pie'"), std::string::npos) << r.output;
  r = run_cli("plot plan /nonexistent/plan.json -o " + temp("bad.svg"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(run_cli("plot plan x.json").exit_code, 2);  // no -o
}

TEST(Plot, EscapesTextAndDrawsEmptyInputsAsNotes) {
  Svg svg(100, 50);
  svg.text(1, 2, "a<b & \"c\" \x01");
  svg.rect(0, 0, -5, 10, "#fff", "t<");
  const std::string s = svg.str();
  EXPECT_NE(s.find("a&lt;b &amp; &quot;c&quot; "), std::string::npos) << s;
  EXPECT_EQ(s.find('\x01'), std::string::npos);
  EXPECT_NE(s.find("width=\"0.00\""), std::string::npos);  // negative sizes clamp to 0
  auto empty = trace_svg(json::Json{{"traceEvents", json::Json::array()}});
  ASSERT_TRUE(empty.ok());
  EXPECT_NE(empty->find("no step runs"), std::string::npos);
  EXPECT_NE(profile_svg(Profile{}).find("no layer times"), std::string::npos);
}

}  // namespace
}  // namespace tessera::tools
