// The public C++ and C APIs over a small graph on the reference device.
#include <gtest/gtest.h>

#include "backends/registry.h"
#include "core/tessera.h"
#include "core/tessera_c.h"
#include "graph/format/model_file.h"
#include "graph/graph.h"
#include "tests/ops/op_test_util.h"

namespace tessera {
namespace {

// y = relu(x) + x, z = sigmoid(x): two outputs.
Graph two_output_graph() {
  Graph g;
  ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{2, 3}});
  g.inputs().push_back(x);
  ValueId r = g.add_value("r"), y = g.add_value("y"), z = g.add_value("z");
  g.add_node(Node{"relu", OpKind::kRelu, {}, {x}, {r}});
  g.add_node(Node{"add", OpKind::kAdd, {}, {r, x}, {y}});
  g.add_node(Node{"sig", OpKind::kSigmoid, {}, {x}, {z}});
  g.outputs() = {y, z};
  return g;
}

TEST(Session, RunsPositionallyAndByName) {
  auto model = Model::from_graph(two_output_graph());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto s = Session::create(*model, "reference");
  ASSERT_TRUE(s.ok());
  const float xs[] = {-1, 2, -3, 4, 0, 0.5f};
  Tensor x = Tensor::from_floats(Shape{2, 3}, xs);
  auto out = (*s)->run({x});
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 2u);
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[0], -1.f);
  EXPECT_FLOAT_EQ((*out)[0].data<float>()[1], 4.f);
  EXPECT_NEAR((*out)[1].data<float>()[4], 0.5f, 1e-6f);

  ASSERT_TRUE((*s)->set_input("x", x).ok());
  ASSERT_TRUE((*s)->run().ok());
  EXPECT_FLOAT_EQ((*s)->output("y").value().data<float>()[3], 8.f);
}

TEST(Session, RejectsBadInputsClearly) {
  auto model = Model::from_graph(two_output_graph());
  auto s = Session::create(*model, "reference");
  Tensor wrong_shape = Tensor::create(DType::kF32, Shape{3, 2}).value();
  Status st = (*s)->set_input("x", wrong_shape);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("f32[2, 3]"), std::string::npos) << st.message();
  Tensor wrong_dtype = Tensor::create(DType::kI64, Shape{2, 3}).value();
  EXPECT_FALSE((*s)->set_input("x", wrong_dtype).ok());
  EXPECT_EQ((*s)->set_input("nope", wrong_shape).code(), StatusCode::kNotFound);
  EXPECT_EQ((*s)->run().code(), StatusCode::kFailedPrecondition);  // x never set
  EXPECT_FALSE((*s)->run(std::vector<Tensor>{}).ok());
  EXPECT_EQ((*s)->output("nope").status().code(), StatusCode::kNotFound);
}

TEST(Session, DeviceNames) {
  auto model = Model::from_graph(two_output_graph());
  EXPECT_EQ(Session::create(*model, "gpu").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Session::create(*model, "opencl:x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(parse_device_name("cpu:0-1@abc").ok());
  EXPECT_EQ(parse_device_name("cpu:4-7@1800").value().mhz, 1800);
  EXPECT_EQ(parse_device_name("remote:10.0.0.2:7000").value().spec, "10.0.0.2:7000");
  EXPECT_FALSE(parse_device_name("remote:host").ok());
  EXPECT_FALSE(list_devices().empty());
  EXPECT_EQ(list_devices()[0].name, "reference");
}

TEST(CApi, LoadsRunsAndReportsErrors) {
  const std::string path = ::testing::TempDir() + "capi.tsr";
  Graph g = two_output_graph();
  ASSERT_TRUE(g.infer_shapes().ok());
  ASSERT_TRUE(save_model(g, path, ModelMetadata{"test", {}}).ok());

  tessera_model* m = nullptr;
  EXPECT_NE(tessera_model_load("/nonexistent.tsr", &m), 0);
  EXPECT_NE(std::string(tessera_last_error()).find("nonexistent"), std::string::npos);
  ASSERT_EQ(tessera_model_load(path.c_str(), &m), 0) << tessera_last_error();
  EXPECT_EQ(tessera_model_num_inputs(m), 1u);
  EXPECT_EQ(tessera_model_num_outputs(m), 2u);
  EXPECT_STREQ(tessera_model_input_name(m, 0), "x");
  EXPECT_EQ(tessera_model_input_name(m, 5), nullptr);

  tessera_session* s = nullptr;
  EXPECT_NE(tessera_session_create(m, "warp-drive", &s), 0);
  ASSERT_EQ(tessera_session_create(m, "reference", &s), 0) << tessera_last_error();
  tessera_model_free(m);  // the session keeps what it needs

  const float xs[] = {-1, 2, -3, 4, 0, 0.5f};
  const int64_t shape[] = {2, 3};
  const int64_t bad_shape[] = {6};
  EXPECT_NE(tessera_session_set_input_f32(s, "x", xs, bad_shape, 1), 0);
  EXPECT_NE(tessera_session_run(s), 0);  // input not set yet
  ASSERT_EQ(tessera_session_set_input_f32(s, "x", xs, shape, 2), 0) << tessera_last_error();
  ASSERT_EQ(tessera_session_run(s), 0) << tessera_last_error();
  float y[6];
  size_t count = 0, rank = 0;
  int64_t dims[4];
  EXPECT_NE(tessera_session_get_output_f32(s, "y", y, 2, &count, dims, 4, &rank), 0);
  ASSERT_EQ(tessera_session_get_output_f32(s, "y", y, 6, &count, dims, 4, &rank), 0);
  EXPECT_EQ(count, 6u);
  EXPECT_EQ(rank, 2u);
  EXPECT_EQ(dims[1], 3);
  EXPECT_FLOAT_EQ(y[3], 8.f);
  tessera_session_free(s);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tessera
