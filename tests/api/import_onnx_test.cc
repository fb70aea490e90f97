// ONNX models imported through the public APIs (Model::import_onnx, tessera_model_import_onnx*,
// and the C program tests/api/c_import_main.c), sized per input. The model is built here with
// the protobuf API: images[N,3,height,width] -> Conv 3x3 (pad 1) -> Relu -> * mask[N,1,height,
// width]; its oracle is a direct loop nest at the set shape.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "api/internal.h"
#include "api/tessera.h"
#include "api/tessera_c.h"
#include "graph/layer_graph.h"
#include "onnx/onnx_pb.h"

namespace tessera {
namespace {

constexpr int kOut = 4;  // conv output channels

struct Weights {
  std::vector<float> w;  // [kOut, 3, 3, 3]
  std::vector<float> b;  // [kOut]
};

Weights make_weights() {
  std::mt19937 rng(26);
  std::uniform_real_distribution<float> d(-0.5f, 0.5f);
  Weights w;
  for (int i = 0; i < kOut * 3 * 3 * 3; ++i) w.w.push_back(d(rng));
  for (int i = 0; i < kOut; ++i) w.b.push_back(d(rng));
  return w;
}

void symbolic_input(onnx::GraphProto* g, const std::string& name, int channels) {
  onnx::ValueInfoProto* vi = g->add_input();
  vi->set_name(name);
  onnx::TypeProto::Tensor* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto* s = tt->mutable_shape();
  s->add_dim()->set_dim_param("N");
  s->add_dim()->set_dim_value(channels);
  s->add_dim()->set_dim_param("height");
  s->add_dim()->set_dim_param("width");
}

// The serialised model (opset 13).
std::string masked_conv_model(const Weights& w) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("import-onnx-test");
  onnx::OperatorSetIdProto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("masked_conv");
  symbolic_input(g, "images", 3);
  symbolic_input(g, "mask", 1);
  onnx::TensorProto* wt = g->add_initializer();
  wt->set_name("w");
  wt->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {kOut, 3, 3, 3}) wt->add_dims(d);
  for (float v : w.w) wt->add_float_data(v);
  onnx::TensorProto* bt = g->add_initializer();
  bt->set_name("b");
  bt->set_data_type(onnx::TensorProto::FLOAT);
  bt->add_dims(kOut);
  for (float v : w.b) bt->add_float_data(v);
  onnx::NodeProto* conv = g->add_node();
  conv->set_op_type("Conv");
  conv->set_name("conv");
  for (const char* i : {"images", "w", "b"}) conv->add_input(i);
  conv->add_output("c");
  onnx::AttributeProto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int k = 0; k < 4; ++k) pads->add_ints(1);
  onnx::NodeProto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->add_input("c");
  relu->add_output("r");
  onnx::NodeProto* mul = g->add_node();
  mul->set_op_type("Mul");
  mul->add_input("r");
  mul->add_input("mask");
  mul->add_output("y");
  g->add_output()->set_name("y");
  std::string bytes;
  EXPECT_TRUE(m.SerializeToString(&bytes));
  return bytes;
}

std::string write_file(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// relu(conv(images)) * mask at [n, 3, h, w], directly.
std::vector<float> oracle(const Weights& w, const std::vector<float>& images,
                          const std::vector<float>& mask, int n, int h, int wd) {
  std::vector<float> y(static_cast<size_t>(n) * kOut * h * wd);
  for (int b = 0; b < n; ++b) {
    for (int o = 0; o < kOut; ++o) {
      for (int i = 0; i < h; ++i) {
        for (int j = 0; j < wd; ++j) {
          double acc = w.b[o];
          for (int c = 0; c < 3; ++c) {
            for (int ki = 0; ki < 3; ++ki) {
              for (int kj = 0; kj < 3; ++kj) {
                const int ii = i + ki - 1, jj = j + kj - 1;
                if (ii < 0 || ii >= h || jj < 0 || jj >= wd) continue;
                acc += static_cast<double>(w.w[((o * 3 + c) * 3 + ki) * 3 + kj]) *
                       images[((static_cast<size_t>(b) * 3 + c) * h + ii) * wd + jj];
              }
            }
          }
          const double m = mask[(static_cast<size_t>(b) * h + i) * wd + j];
          y[((static_cast<size_t>(b) * kOut + o) * h + i) * wd + j] =
              static_cast<float>(std::max(acc, 0.0) * m);
        }
      }
    }
  }
  return y;
}

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, float tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol) << what << " element " << i;
  }
}

// Expects failure with `code` and a message containing each of `parts`.
void expect_error(const Status& s, StatusCode code, const std::vector<std::string>& parts) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), code) << s.to_string();
  for (const std::string& p : parts) {
    EXPECT_NE(s.message().find(p), std::string::npos) << "'" << p << "' not in: " << s.message();
  }
}

ImportOptions shapes_for(int n, int h, int w) {
  return import_options_for_shapes({{"images", {n, 3, h, w}}, {"mask", {n, 1, h, w}}});
}

// At several odd shapes the imported model has exactly those input shapes and, on the reference
// and CPU devices, the oracle's outputs; the file and the bytes import alike.
TEST(ImportOnnx, SizesEachInputAndMatchesTheOracleAtTheSetShape) {
  const Weights w = make_weights();
  const std::string bytes = masked_conv_model(w);
  const std::string path = write_file("masked_conv.onnx", bytes);
  struct Case {
    int n, h, wd;
  };
  uint32_t seed = 1;
  for (const Case& c : {Case{1, 7, 5}, Case{2, 13, 9}, Case{1, 1, 17}}) {
    const std::string what =
        std::to_string(c.n) + "x3x" + std::to_string(c.h) + "x" + std::to_string(c.wd);
    std::vector<std::string> warnings;
    auto model = Model::import_onnx(path, shapes_for(c.n, c.h, c.wd), &warnings);
    ASSERT_TRUE(model.ok()) << what << ": " << model.status().to_string();
    EXPECT_TRUE(warnings.empty()) << warnings[0];
    EXPECT_TRUE((*model)->hash().empty());
    ASSERT_EQ((*model)->inputs().size(), 2u);
    EXPECT_EQ((*model)->inputs()[0].shape, Shape({c.n, 3, c.h, c.wd}));
    EXPECT_EQ((*model)->inputs()[1].shape, Shape({c.n, 1, c.h, c.wd}));
    ASSERT_EQ((*model)->outputs().size(), 1u);
    EXPECT_EQ((*model)->outputs()[0].shape, Shape({c.n, kOut, c.h, c.wd}));

    const std::vector<float> images = random_values(size_t(c.n) * 3 * c.h * c.wd, seed++);
    const std::vector<float> mask = random_values(size_t(c.n) * c.h * c.wd, seed++);
    const std::vector<float> want = oracle(w, images, mask, c.n, c.h, c.wd);
    auto from_memory =
        Model::import_onnx_from_memory(bytes.data(), bytes.size(), shapes_for(c.n, c.h, c.wd));
    ASSERT_TRUE(from_memory.ok()) << from_memory.status().to_string();
    for (const auto& [m, device] : {std::pair{*model, "reference"}, std::pair{*model, "cpu"},
                                    std::pair{*from_memory, "reference"}}) {
      auto s = Session::create(m, device);
      ASSERT_TRUE(s.ok()) << s.status().to_string();
      auto out = (*s)->run({Tensor::from_floats(Shape{c.n, 3, c.h, c.wd}, images),
                            Tensor::from_floats(Shape{c.n, 1, c.h, c.wd}, mask)});
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      const Tensor& y = (*out)[0];
      ASSERT_EQ(y.shape(), Shape({c.n, kOut, c.h, c.wd}));
      expect_near_all(std::vector<float>(y.data<float>(), y.data<float>() + y.numel()), want, 1e-4f,
                      what + " on " + device);
    }
  }
  std::remove(path.c_str());
}

// An imported model has no hash, so a plan that names one (as plans of the converted .tsr do)
// runs on it; a plan for another layer count does not.
TEST(ImportOnnx, PlanSessionsRunOnAnImportedModel) {
  const Weights w = make_weights();
  const std::string bytes = masked_conv_model(w);
  auto model = Model::import_onnx_from_memory(bytes.data(), bytes.size(), shapes_for(1, 6, 7));
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const int layers = LayerGraph::build(model_graph(**model)).value().num_layers();
  ASSERT_GE(layers, 2);
  SessionOptions options;
  options.plan = plan_from_slices(layers, {{0, "reference"}, {1, "cpu"}}).value();
  options.plan->model_hash = "0123456789abcdef";
  auto s = Session::create(*model, options);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const std::vector<float> images = random_values(3 * 6 * 7, 5), mask = random_values(6 * 7, 6);
  auto out = (*s)->run({Tensor::from_floats(Shape{1, 3, 6, 7}, images),
                        Tensor::from_floats(Shape{1, 1, 6, 7}, mask)});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0];
  expect_near_all(std::vector<float>(y.data<float>(), y.data<float>() + y.numel()),
                  oracle(w, images, mask, 1, 6, 7), 1e-4f, "plan session");
  options.plan = plan_from_slices(layers + 1, {{0, "reference"}}).value();
  EXPECT_FALSE(Session::create(*model, options).ok());
}

// Every way to get the sizes wrong is an error naming the input and the dimension.
TEST(ImportOnnx, WrongSizesAreErrorsNamingInputAndDimension) {
  const std::string bytes = masked_conv_model(make_weights());
  auto import = [&](const ImportOptions& options) {
    return Model::import_onnx_from_memory(bytes.data(), bytes.size(), options).status();
  };
  // Nothing sets the height: the batch alone has a default.
  expect_error(import({}), StatusCode::kInvalidArgument,
               {"graph input 'images' dimension 2 is symbolic ('height')", "no size was given",
                "--shape images=Nx3xD2xD3", "input shapes of import_onnx"});
  // A shape for one input only: the other's symbolic dims, its batch included, are named.
  expect_error(import(import_options_for_shapes({{"images", {1, 3, 8, 8}}})),
               StatusCode::kInvalidArgument,
               {"graph input 'mask' dimension 0 is symbolic ('N')", "no size was given"});
  // An input the model lacks; the message lists those it has.
  ImportOptions unknown = shapes_for(1, 8, 8);
  unknown.input_shapes["imagez"] = {1, 3, 8, 8};
  expect_error(import(unknown), StatusCode::kInvalidArgument,
               {"'imagez'", "not a graph input", "'images', 'mask'"});
  // The wrong rank.
  ImportOptions rank = shapes_for(1, 8, 8);
  rank.input_shapes["mask"] = {1, 8, 8};
  expect_error(import(rank), StatusCode::kInvalidArgument,
               {"graph input 'mask' has rank 4", "3 dimensions"});
  // Zero and negative sizes.
  ImportOptions zero = shapes_for(1, 8, 8);
  zero.input_shapes["images"][2] = 0;
  expect_error(import(zero), StatusCode::kInvalidArgument,
               {"graph input 'images'", "dimension 2 = 0", "not in 1.."});
  ImportOptions negative = shapes_for(1, 8, 8);
  negative.input_shapes["mask"][3] = -5;
  expect_error(import(negative), StatusCode::kInvalidArgument,
               {"graph input 'mask'", "dimension 3 = -5"});
  // A fixed dimension given another size.
  ImportOptions fixed = shapes_for(1, 8, 8);
  fixed.input_shapes["images"][1] = 4;
  expect_error(import(fixed), StatusCode::kInvalidArgument,
               {"graph input 'images' dimension 1 is 3 in the model, but 4 was given"});
  // A batch below 1.
  expect_error(import(import_options_for_shapes({}, 0)), StatusCode::kInvalidArgument,
               {"default_dim_value = 0"});
  // Shapes the model cannot run with: the node is named.
  ImportOptions mismatch = shapes_for(1, 8, 8);
  mismatch.input_shapes["mask"] = {1, 1, 8, 7};
  EXPECT_FALSE(import(mismatch).ok());
  // Not a model at all, and a missing file.
  const std::string junk = "definitely not a protobuf";
  EXPECT_FALSE(Model::import_onnx_from_memory(junk.data(), junk.size()).ok());
  EXPECT_EQ(Model::import_onnx("/nonexistent/model.onnx").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Model::import_onnx_from_memory(nullptr, 4).status().code(),
            StatusCode::kInvalidArgument);

  // By dimension name, with the batch defaulted: a warning says so.
  ImportOptions by_name;
  by_name.default_dim_value = 3;
  by_name.dim_params = {{"height", 6}, {"width", 5}};
  std::vector<std::string> warnings;
  auto m = Model::import_onnx_from_memory(bytes.data(), bytes.size(), by_name, &warnings);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)->inputs()[1].shape, Shape({3, 1, 6, 5}));
  ASSERT_FALSE(warnings.empty());
  EXPECT_EQ(warnings[0], "graph input 'images' dimension 0 is symbolic ('N'); using 3");
}

TEST(ImportOnnx, ParsesTheTextFormOfShapes) {
  std::map<std::string, std::vector<int64_t>> s;
  ASSERT_TRUE(parse_input_shapes(" images=1x3x640x480 ; mask=1x1x640x480;", &s).ok());
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(s["images"], (std::vector<int64_t>{1, 3, 640, 480}));
  EXPECT_EQ(s["mask"], (std::vector<int64_t>{1, 1, 640, 480}));
  s.clear();
  ASSERT_TRUE(parse_input_shapes("", &s).ok());
  ASSERT_TRUE(parse_input_shapes("a=b=7", &s).ok());  // the name runs to the last '='
  EXPECT_EQ(s["a=b"], std::vector<int64_t>{7});
  struct Bad {
    const char* text;
    const char* says;
  };
  for (const Bad& b :
       {Bad{"images", "expected NAME=DIMxDIMx"}, Bad{"=1x3", "expected NAME=DIMxDIMx"},
        Bad{"images=", "expected NAME=DIMxDIMx"},
        Bad{"images=1x3x0x4", "dimension 2 ('0') is not an integer in 1.."},
        Bad{"images=1x-3", "dimension 1 ('-3')"}, Bad{"images=1x3xHx4", "dimension 2 ('H')"},
        Bad{"images=1x3x", "dimension 2 ('')"}, Bad{"images=1x99999999999999999999", "dimension 1"},
        Bad{"images=1x2x3x4x5x6x7x8x9", "rank limit"}, Bad{"x=1;x=2", "'x' was already given"}}) {
    std::map<std::string, std::vector<int64_t>> out;
    expect_error(parse_input_shapes(b.text, &out), StatusCode::kInvalidArgument, {b.says});
  }
}

std::string last_error() {
  return tessera_last_error();
}

// The C API: the text form, the bytes, the structs; errors with the input and dimension named
// in tessera_last_error(); the import warnings.
TEST(CApi, ImportsOnnxSizedPerInput) {
  const Weights w = make_weights();
  const std::string bytes = masked_conv_model(w);
  const std::string path = write_file("c_masked_conv.onnx", bytes);
  tessera_model* m = nullptr;
  ASSERT_EQ(tessera_model_import_onnx(path.c_str(), "images=2x3x6x5; mask=2x1x6x5", &m), 0)
      << tessera_last_error();
  EXPECT_EQ(tessera_model_num_warnings(m), 0u);
  tessera_session* s = nullptr;
  ASSERT_EQ(tessera_session_create(m, "cpu", &s), 0) << tessera_last_error();
  const std::vector<float> images = random_values(2 * 3 * 6 * 5, 11);
  const std::vector<float> mask = random_values(2 * 6 * 5, 12);
  const int64_t ishape[] = {2, 3, 6, 5}, mshape[] = {2, 1, 6, 5};
  ASSERT_EQ(tessera_session_set_input_f32(s, "images", images.data(), ishape, 4), 0);
  ASSERT_EQ(tessera_session_set_input_f32(s, "mask", mask.data(), mshape, 4), 0);
  ASSERT_EQ(tessera_session_run(s), 0) << tessera_last_error();
  std::vector<float> y(2 * kOut * 6 * 5);
  size_t count = 0, rank = 0;
  int64_t dims[4];
  ASSERT_EQ(tessera_session_get_output_f32(s, "y", y.data(), y.size(), &count, dims, 4, &rank), 0)
      << tessera_last_error();
  expect_near_all(y, oracle(w, images, mask, 2, 6, 5), 1e-4f, "C API on cpu");
  tessera_session_free(s);
  tessera_model_free(m);

  // The bytes, and the structs with a batch for a symbolic dimension 0 no shape sets.
  ASSERT_EQ(tessera_model_import_onnx_memory(bytes.data(), bytes.size(),
                                             "images=1x3x4x4;mask=1x1x4x4", &m),
            0)
      << tessera_last_error();
  int32_t dtype = -1;
  ASSERT_EQ(tessera_model_input_desc(m, 1, &dtype, dims, 4, &rank), 0);
  EXPECT_EQ(dims[3], 4);
  tessera_model_free(m);
  const int64_t i_dims[] = {3, 3, 9, 7}, m_dims[] = {3, 1, 9, 7};
  const tessera_input_shape both[] = {{"images", i_dims, 4}, {"mask", m_dims, 4}};
  ASSERT_EQ(tessera_model_import_onnx_shapes(path.c_str(), both, 2, 1, &m), 0)
      << tessera_last_error();
  ASSERT_EQ(tessera_model_output_desc(m, 0, &dtype, dims, 4, &rank), 0);
  EXPECT_EQ(dims[0], 3);
  EXPECT_EQ(dims[2], 9);
  tessera_model_free(m);

  struct Bad {
    const char* shapes;
    std::vector<std::string> says;
  };
  for (const Bad& b : {
           Bad{nullptr, {"tessera_model_import_onnx", "'images' dimension 2", "('height')"}},
           Bad{"", {"'images' dimension 2 is symbolic ('height')"}},
           Bad{"images=1x3x8x8", {"'mask' dimension 0 is symbolic ('N')"}},
           Bad{"images=1x3x8x8;mask=1x1x8x8;labels=1x5", {"'labels'", "not a graph input"}},
           Bad{"images=1x3x8x8;mask=1x8x8", {"'mask' has rank 4", "3 dimensions"}},
           Bad{"images=1x3x0x8;mask=1x1x8x8", {"images=1x3x0x8", "dimension 2 ('0')"}},
           Bad{"images=1x3x8x8;mask=1x1x8x-8", {"dimension 3 ('-8')"}},
       }) {
    m = nullptr;
    EXPECT_NE(tessera_model_import_onnx(path.c_str(), b.shapes, &m), 0);
    EXPECT_EQ(m, nullptr);
    for (const std::string& part : b.says) {
      EXPECT_NE(last_error().find(part), std::string::npos)
          << "'" << part << "' not in: " << last_error();
    }
  }
  const int64_t zero[] = {1, 3, 0, 8};
  const tessera_input_shape bad_struct[] = {{"images", zero, 4}, {"mask", m_dims, 4}};
  EXPECT_NE(tessera_model_import_onnx_shapes(path.c_str(), bad_struct, 2, 1, &m), 0);
  EXPECT_NE(last_error().find("'images': dimension 2 = 0"), std::string::npos) << last_error();
  const tessera_input_shape twice[] = {{"mask", m_dims, 4}, {"mask", m_dims, 4}};
  EXPECT_NE(tessera_model_import_onnx_shapes(path.c_str(), twice, 2, 1, &m), 0);
  EXPECT_NE(last_error().find("'mask' was already given"), std::string::npos) << last_error();
  EXPECT_NE(tessera_model_import_onnx_shapes(path.c_str(), nullptr, 1, 1, &m), 0);
  EXPECT_NE(tessera_model_import_onnx_shapes(path.c_str(), nullptr, 0, 0, &m), 0);
  EXPECT_NE(last_error().find("default_dim_value = 0"), std::string::npos) << last_error();
  EXPECT_NE(tessera_model_import_onnx("/nonexistent/x.onnx", "", &m), 0);
  EXPECT_NE(last_error().find("/nonexistent/x.onnx"), std::string::npos) << last_error();
  EXPECT_NE(tessera_model_import_onnx(nullptr, "", &m), 0);

  // A model whose only symbolic dimension is the batch: without shapes it takes 1, and the
  // warning saying so is readable through the C API.
  onnx::ModelProto relu;
  relu.set_ir_version(8);
  relu.add_opset_import()->set_version(13);
  onnx::ValueInfoProto* x = relu.mutable_graph()->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto* xs = x->mutable_type()->mutable_tensor_type()->mutable_shape();
  xs->add_dim()->set_dim_param("batch");
  xs->add_dim()->set_dim_value(2);
  onnx::NodeProto* n = relu.mutable_graph()->add_node();
  n->set_op_type("Relu");
  n->add_input("x");
  n->add_output("y");
  relu.mutable_graph()->add_output()->set_name("y");
  const std::string relu_bytes = relu.SerializeAsString();
  ASSERT_EQ(tessera_model_import_onnx_memory(relu_bytes.data(), relu_bytes.size(), nullptr, &m), 0)
      << tessera_last_error();
  ASSERT_EQ(tessera_model_num_warnings(m), 1u);
  EXPECT_STREQ(tessera_model_warning(m, 0),
               "graph input 'x' dimension 0 is symbolic ('batch'); using 1");
  EXPECT_EQ(tessera_model_warning(m, 1), nullptr);
  tessera_model_free(m);
  const tessera_input_shape none[] = {{"x", nullptr, 0}};
  ASSERT_EQ(tessera_model_import_onnx_shapes(path.c_str(), none, 0, 1, &m), 1);  // H, W unset
  ASSERT_EQ(tessera_model_import_onnx_memory(relu_bytes.data(), relu_bytes.size(), "x=5x2", &m), 0)
      << tessera_last_error();
  EXPECT_EQ(tessera_model_num_warnings(m), 0u);
  tessera_model_free(m);
  std::remove(path.c_str());
}

// A C99 program imports by the text form, checks the structs and the error, and runs.
TEST(CApi, CProgramImportsOnnxSizedPerInput) {
  const Weights w = make_weights();
  const std::string path = write_file("c_prog_masked_conv.onnx", masked_conv_model(w));
  const std::string out = ::testing::TempDir() + "c_import.out";
  const std::string log = ::testing::TempDir() + "c_import.log";
  const int n = 1, h = 5, wd = 11;
  const std::string cmd = std::string(TESSERA_C_IMPORT_PATH) + " " + path +
                          " 'images=1x3x5x11;mask=1x1x5x11' " + out + " > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::string text;
  if (FILE* f = std::fopen(log.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, f)) text += buf;
    std::fclose(f);
  }
  ASSERT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("c import: ok"), std::string::npos) << text;
  // The program's inputs: element k of input i is ((37k + 11i) mod 101) / 50 - 1.
  auto pattern = [](size_t i, size_t count) {
    std::vector<float> v(count);
    for (size_t k = 0; k < count; ++k) {
      v[k] = static_cast<float>((k * 37 + i * 11) % 101) / 50.0f - 1.0f;
    }
    return v;
  };
  const std::vector<float> want =
      oracle(w, pattern(0, size_t(n) * 3 * h * wd), pattern(1, size_t(n) * h * wd), n, h, wd);
  std::vector<float> got;
  std::ifstream in(out);
  for (float v; in >> v;) got.push_back(v);
  expect_near_all(got, want, 1e-4f, "the C program's output");
  std::remove(path.c_str());
  std::remove(out.c_str());
  std::remove(log.c_str());
}

}  // namespace
}  // namespace tessera
