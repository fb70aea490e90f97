// The public C++ and C APIs over a small graph on the reference device.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "api/internal.h"
#include "api/tessera_c.h"
#include "backends/registry.h"
#include "graph/format/model_file.h"
#include "graph/graph.h"
#include "graph/layer_graph.h"
#include "scheduler/profile.h"
#include "tests/ops/op_test_util.h"
#include "tests/scheduler/profile_test_util.h"

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

// Names from the caller or the model reach messages through quote_name: control bytes are
// escaped, so a hostile name cannot rewrite the terminal or forge log lines.
TEST(Session, MessagesEscapeNames) {
  Graph g = two_output_graph();
  g.value(g.inputs()[0]).name = "x\n[forged]";
  auto model = Model::from_graph(std::move(g));
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto s = Session::create(*model, "reference");
  ASSERT_TRUE(s.ok());
  Tensor x = Tensor::create(DType::kF32, Shape{2, 3}).value();
  const Status st = (*s)->set_input("\x1b[2Jnope", x);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("'\\x1b[2Jnope'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'x\\n[forged]'"), std::string::npos) << st.message();
  for (char c : st.message()) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << st.message();
  const Status wrong =
      (*s)->set_input("x\n[forged]", Tensor::create(DType::kI64, Shape{2, 3}).value());
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.message().find('\n'), std::string::npos) << wrong.message();
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

// A session by a streaming plan: frames submitted and taken with next() give the device
// session's outputs, in order; the sequential run() goes through the same executor.
TEST(Session, PlanSessionStreamsTheDeviceSessionsOutputs) {
  auto model = Model::from_graph(testing::skip_graph());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto by_device = Session::create(*model, "reference");
  ASSERT_TRUE(by_device.ok()) << by_device.status().to_string();
  EXPECT_EQ((*by_device)->plan().stages.size(), 1u);

  SessionOptions opts;
  Plan plan = plan_from_slices(4, {{0, "reference"}, {2, "cpu"}}).value();
  plan.mode = PlanMode::kStreaming;
  opts.plan = plan;
  auto by_plan = Session::create(*model, opts);
  ASSERT_TRUE(by_plan.ok()) << by_plan.status().to_string();
  EXPECT_EQ((*by_plan)->device_name(), "reference[0] cpu[2]");
  // One block per step, each naming its device.
  const std::string d = (*by_plan)->describe();
  EXPECT_EQ(d.find("step 0 on reference:\n"), 0u) << d;
  EXPECT_NE(d.find("step 1 on cpu:\n"), std::string::npos) << d;

  std::vector<std::vector<Tensor>> inputs;
  for (int f = 0; f < 12; ++f) {
    Tensor x = Tensor::create(DType::kF32, Shape{4, 32}).value();
    float* p = x.data<float>();
    for (int i = 0; i < 128; ++i) p[i] = 0.01f * static_cast<float>((i * 7 + f * 13) % 50) - 0.2f;
    inputs.push_back({x});
  }
  for (int f = 0; f < 12; ++f) {
    auto id = (*by_plan)->submit(inputs[static_cast<size_t>(f)]);
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    if (f >= 2) {
      auto frame = (*by_plan)->next();
      ASSERT_TRUE(frame.ok()) << frame.status().to_string();
      EXPECT_EQ(frame->id, static_cast<uint64_t>(f - 2));
    }
  }
  for (int f = 10; f < 12; ++f) {
    auto frame = (*by_plan)->next();
    ASSERT_TRUE(frame.ok());
    ASSERT_TRUE(frame->status.ok()) << frame->status.to_string();
    auto expected = (*by_device)->run(inputs[static_cast<size_t>(f)]);
    ASSERT_TRUE(expected.ok());
    const auto a = frame->outputs[0].span<float>();
    const auto b = (*expected)[0].span<float>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5f) << "frame " << f;
  }
  (*by_plan)->close();
  EXPECT_EQ((*by_plan)->next().status().code(), StatusCode::kOutOfRange);
  // The sequential path runs the same plan.
  auto out = (*by_plan)->run(inputs[0]);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
}

TEST(Session, PlanForAnotherModelIsRefused) {
  const std::string path = ::testing::TempDir() + "plan_model.tsr";
  Graph g = testing::skip_graph();
  ASSERT_TRUE(g.infer_shapes().ok());
  ASSERT_TRUE(save_model(g, path, ModelMetadata{"skip", {}}).ok());
  auto model = Model::load(path);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_FALSE((*model)->hash().empty());
  SessionOptions opts;
  opts.plan = plan_from_slices(4, {{0, "reference"}}).value();
  opts.plan->model_hash = "0123456789abcdef";
  auto s = Session::create(*model, opts);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("the plan is for model 0123456789abcdef"), std::string::npos)
      << s.status().to_string();
  opts.plan->model_hash = (*model)->hash();
  EXPECT_TRUE(Session::create(*model, opts).ok());
  opts.plan_path = "/nonexistent/plan.json";
  EXPECT_FALSE(Session::create(*model, opts).ok());  // both a plan and a plan_path
  std::remove(path.c_str());
}

TEST(Session, PlanFileWithoutAModelHashIsRefusedUnlessAllowed) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "unhashed.tsr", plan_path = dir + "unhashed.plan.json";
  Graph g = testing::skip_graph();
  ASSERT_TRUE(g.infer_shapes().ok());
  ASSERT_TRUE(save_model(g, path, ModelMetadata{"skip", {}}).ok());
  auto model = Model::load(path);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  ASSERT_TRUE(plan_from_slices(4, {{0, "reference"}}).value().save(plan_path).ok());
  SessionOptions opts;
  opts.plan_path = plan_path;
  auto s = Session::create(*model, opts);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("the plan names no model hash"), std::string::npos)
      << s.status().to_string();
  opts.allow_unhashed_plan = true;
  EXPECT_TRUE(Session::create(*model, opts).ok());
  std::remove(path.c_str());
  std::remove(plan_path.c_str());
}

// The C program tests/api/c_stream_main.c streams frames through a plan session.
TEST(CApi, CProgramStreamsFramesThroughAPlanSession) {
  const std::string dir = ::testing::TempDir();
  const std::string model_path = dir + "c_stream.tsr", plan_path = dir + "c_stream.plan.json";
  Graph g = testing::skip_graph();
  ASSERT_TRUE(g.infer_shapes().ok());
  ASSERT_TRUE(save_model(g, model_path, ModelMetadata{"skip", {}}).ok());
  Plan plan = plan_from_slices(4, {{0, "reference"}, {1, "cpu"}, {3, "reference"}}).value();
  plan.mode = PlanMode::kStreaming;
  plan.model_hash = model_file_hash(model_path).value();  // a plan file must name its model
  ASSERT_TRUE(plan.save(plan_path).ok());
  const std::string out = dir + "c_stream.out";
  const std::string cmd = std::string(TESSERA_C_STREAM_PATH) + " " + model_path + " " + plan_path +
                          " 20 > " + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::string text;
  if (FILE* f = std::fopen(out.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, f)) text += buf;
    std::fclose(f);
  }
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("c stream: 20 frames ok"), std::string::npos) << text;
  std::remove(model_path.c_str());
  std::remove(plan_path.c_str());
  std::remove(out.c_str());
}

TEST(CApi, VersionsAndGenericTensors) {
  EXPECT_EQ(tessera_c_api_version(), TESSERA_C_API_VERSION);
  EXPECT_STREQ(tessera_version(), version_string());
  const std::string path = ::testing::TempDir() + "capi_generic.tsr";
  Graph g = two_output_graph();
  ASSERT_TRUE(g.infer_shapes().ok());
  ASSERT_TRUE(save_model(g, path, ModelMetadata{"test", {}}).ok());
  tessera_model* m = nullptr;
  ASSERT_EQ(tessera_model_load(path.c_str(), &m), 0) << tessera_last_error();
  tessera_session* s = nullptr;
  ASSERT_EQ(tessera_session_create(m, "reference", &s), 0) << tessera_last_error();
  // Descriptions of inputs and outputs.
  int32_t desc_dtype = -1;
  int64_t desc_dims[4] = {0, 0, 0, 0};
  size_t desc_rank = 0;
  ASSERT_EQ(tessera_model_input_desc(m, 0, &desc_dtype, desc_dims, 4, &desc_rank), 0)
      << tessera_last_error();
  EXPECT_EQ(desc_dtype, TESSERA_DTYPE_F32);
  ASSERT_EQ(desc_rank, 2u);
  EXPECT_EQ(desc_dims[0], 2);
  EXPECT_EQ(desc_dims[1], 3);
  ASSERT_EQ(tessera_model_output_desc(m, 1, &desc_dtype, desc_dims, 4, &desc_rank), 0)
      << tessera_last_error();
  EXPECT_EQ(tessera_model_input_desc(m, 1, &desc_dtype, desc_dims, 4, &desc_rank), 1);
  EXPECT_NE(std::string(tessera_last_error()).find("out of range (the model has 1 inputs)"),
            std::string::npos)
      << tessera_last_error();
  EXPECT_EQ(tessera_model_input_desc(m, 0, &desc_dtype, desc_dims, 1, &desc_rank), 1);
  EXPECT_NE(std::string(tessera_last_error()).find("more than max_rank 1"), std::string::npos)
      << tessera_last_error();
  EXPECT_EQ(tessera_model_input_desc(m, 0, nullptr, desc_dims, 4, &desc_rank), 1);

  const int32_t wrong[6] = {1, 2, 3, 4, 5, 6};
  const int64_t shape[] = {2, 3};
  EXPECT_NE(tessera_session_set_input(s, "x", TESSERA_DTYPE_I32, wrong, shape, 2), 0);
  EXPECT_NE(std::string(tessera_last_error()).find("expects f32"), std::string::npos)
      << tessera_last_error();
  EXPECT_NE(tessera_session_set_input(s, "x", 42, wrong, shape, 2), 0);
  const float xs[] = {-1, 2, -3, 4, 0, 0.5f};
  ASSERT_EQ(tessera_session_set_input(s, "x", TESSERA_DTYPE_F32, xs, shape, 2), 0);
  uint64_t frame = 0;
  EXPECT_NE(tessera_session_next(s, &frame), 0);  // nothing pending
  ASSERT_EQ(tessera_session_submit(s, &frame), 0) << tessera_last_error();
  EXPECT_EQ(frame, 0u);
  ASSERT_EQ(tessera_session_next(s, &frame), 0) << tessera_last_error();
  int32_t dt = -1;
  float y[6];
  size_t bytes = 0, rank = 0;
  int64_t dims[2];
  ASSERT_EQ(tessera_session_get_output(s, "y", &dt, y, sizeof y, &bytes, dims, 2, &rank), 0);
  EXPECT_EQ(dt, TESSERA_DTYPE_F32);
  EXPECT_EQ(bytes, sizeof y);
  EXPECT_FLOAT_EQ(y[3], 8.f);
  EXPECT_NE(tessera_session_get_output(s, "y", &dt, y, 4, &bytes, dims, 2, &rank), 0);
  tessera_session_close(s);
  tessera_session_free(s);
  tessera_model_free(m);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tessera
