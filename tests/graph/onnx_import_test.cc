// Tests of the ONNX importer. Models are built in memory with the generated protobuf API, so the
// tests need neither Python nor fixture files.
#include "graph/onnx/onnx_import.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"
#include "tests/ops/op_test_util.h"

namespace tessera {
namespace {

using onnx::AttributeProto;
using onnx::GraphProto;
using onnx::ModelProto;
using onnx::NodeProto;
using onnx::TensorProto;

// ---- Model building helpers -------------------------------------------------------------------

ModelProto make_model(int64_t opset = 13, int64_t ir_version = 8) {
  ModelProto m;
  m.set_ir_version(ir_version);
  m.set_producer_name("onnx-import-test");
  m.set_producer_version("0.1");
  m.mutable_graph()->set_name("test_graph");
  onnx::OperatorSetIdProto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(opset);
  return m;
}

onnx::ValueInfoProto* add_input(GraphProto* g, const std::string& name, std::vector<int64_t> dims,
                                int32_t elem_type = TensorProto::FLOAT) {
  onnx::ValueInfoProto* vi = g->add_input();
  vi->set_name(name);
  onnx::TypeProto::Tensor* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  onnx::TensorShapeProto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  return vi;
}

void add_output(GraphProto* g, const std::string& name) {
  g->add_output()->set_name(name);
}

NodeProto* add_node(GraphProto* g, const std::string& op, std::vector<std::string> inputs,
                    std::vector<std::string> outputs, const std::string& name = "") {
  NodeProto* n = g->add_node();
  n->set_op_type(op);
  if (!name.empty()) n->set_name(name);
  for (const std::string& i : inputs) n->add_input(i);
  for (const std::string& o : outputs) n->add_output(o);
  return n;
}

AttributeProto* add_attr(NodeProto* n, const std::string& name, AttributeProto::AttributeType t) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(t);
  return a;
}
void set_int(NodeProto* n, const std::string& name, int64_t v) {
  add_attr(n, name, AttributeProto::INT)->set_i(v);
}
void set_float(NodeProto* n, const std::string& name, float v) {
  add_attr(n, name, AttributeProto::FLOAT)->set_f(v);
}

TensorProto* add_initializer(GraphProto* g, const std::string& name, int32_t dtype,
                             std::vector<int64_t> dims) {
  TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(dtype);
  for (int64_t d : dims) t->add_dims(d);
  return t;
}

template <typename T>
void set_raw(TensorProto* t, const std::vector<T>& values) {
  t->set_raw_data(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
}

void add_float_initializer(GraphProto* g, const std::string& name, std::vector<int64_t> dims,
                           const std::vector<float>& values) {
  TensorProto* t = add_initializer(g, name, TensorProto::FLOAT, std::move(dims));
  for (float v : values) t->add_float_data(v);
}

// x: f32[2, 3] -> Relu -> y
ModelProto relu_model(int64_t opset = 13) {
  ModelProto m = make_model(opset);
  add_input(m.mutable_graph(), "x", {2, 3});
  add_node(m.mutable_graph(), "Relu", {"x"}, {"y"}, "relu");
  add_output(m.mutable_graph(), "y");
  return m;
}

std::string serialize(const ModelProto& m) {
  std::string s;
  EXPECT_TRUE(m.SerializeToString(&s));
  return s;
}

Result<ImportedModel> import_bytes(const std::string& bytes, const ImportOptions& options = {}) {
  return import_onnx_from_memory(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
      options);
}

Result<ImportedModel> import_model(const ModelProto& m, const ImportOptions& options = {}) {
  return import_bytes(serialize(m), options);
}

// Expects failure with `code` and a message containing each of `parts`.
void expect_error(const Status& s, StatusCode code, std::vector<std::string> parts) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), code) << s.to_string();
  for (const std::string& p : parts) {
    EXPECT_NE(s.message().find(p), std::string::npos) << "'" << p << "' not in: " << s.message();
  }
}

const Value& value_named(const Graph& g, const std::string& name) {
  return g.value(g.find_value(name).value());
}

const Node* node_named(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes()) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

// Runs every node's reference kernel in graph order (the graph's shapes must be inferred).
Result<std::vector<Tensor>> run_graph(const Graph& g, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> vals(static_cast<size_t>(g.num_values()));
  for (size_t i = 0; i < inputs.size(); ++i) vals[static_cast<size_t>(g.inputs()[i])] = inputs[i];
  for (int v = 0; v < g.num_values(); ++v) {
    if (g.value(v).is_constant) vals[static_cast<size_t>(v)] = g.value(v).data;
  }
  for (const Node& n : g.nodes()) {
    std::vector<Tensor> ins;
    for (ValueId v : n.inputs)
      ins.push_back(v == kNoValue ? Tensor() : vals[static_cast<size_t>(v)]);
    std::vector<Tensor> outs;
    for (ValueId v : n.outputs) {
      ASSIGN_OR_RETURN(Tensor t, Tensor::create(g.value(v).info.dtype, g.value(v).info.shape));
      outs.push_back(std::move(t));
    }
    NodeContext nc(n, ins);
    RETURN_IF_ERROR(run_reference(nc.ctx(), ins, outs));
    for (size_t i = 0; i < outs.size(); ++i) vals[static_cast<size_t>(n.outputs[i])] = outs[i];
  }
  std::vector<Tensor> result;
  for (ValueId v : g.outputs()) result.push_back(vals[static_cast<size_t>(v)]);
  return result;
}

// ---- Header, opsets, malformed bytes ----------------------------------------------------------

TEST(OnnxImport, MinimalModelRecordsHeaderAndStructure) {
  auto r = import_model(relu_model(13));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->opset, 13);
  EXPECT_EQ(r->ir_version, 8);
  EXPECT_EQ(r->producer_name, "onnx-import-test");
  EXPECT_EQ(r->producer_version, "0.1");
  EXPECT_EQ(r->graph_name, "test_graph");
  EXPECT_TRUE(r->warnings.empty());
  const Graph& g = r->graph;
  ASSERT_EQ(g.num_nodes(), 1);
  EXPECT_EQ(g.node(0).name, "relu");
  EXPECT_EQ(g.node(0).kind, OpKind::kRelu);
  ASSERT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.value(g.inputs()[0]).name, "x");
  EXPECT_EQ(g.value(g.inputs()[0]).info, (TensorInfo{DType::kF32, Shape{2, 3}}));
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.value(g.outputs()[0]).name, "y");
  EXPECT_FALSE(g.value(g.outputs()[0]).has_info);  // phase 1 infers nothing

  ImportedModel m = std::move(r).value();
  ASSERT_TRUE(infer_onnx_shapes(m).ok());
  EXPECT_EQ(value_named(m.graph, "y").info, (TensorInfo{DType::kF32, Shape{2, 3}}));
}

TEST(OnnxImport, AcceptsOpsets11To21AndTheAiOnnxDomainName) {
  for (int64_t opset = kMinOnnxOpset; opset <= kMaxOnnxOpset; ++opset) {
    auto r = import_model(relu_model(opset));
    ASSERT_TRUE(r.ok()) << opset << ": " << r.status().to_string();
    EXPECT_EQ(r->opset, opset);
  }
  ModelProto m = relu_model();
  m.mutable_opset_import(0)->set_domain("ai.onnx");
  m.mutable_opset_import(0)->set_version(12);
  onnx::OperatorSetIdProto* ml = m.add_opset_import();  // imported but unused: harmless
  ml->set_domain("ai.onnx.ml");
  ml->set_version(3);
  auto r = import_model(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->opset, 12);
}

TEST(OnnxImport, RejectsUnsupportedOpsetsNamingThem) {
  for (int64_t opset : {1, 5, 22, 23}) {
    auto r = import_model(relu_model(opset));
    expect_error(r.status(), StatusCode::kUnimplemented,
                 {"opset " + std::to_string(opset), "11 to 21"});
  }
  // Below 11, a model is read as opset 11 when all its ops are defined there as at 11: Relu has
  // not changed since opset 6; Clip took its bounds as attributes until 11, Conv changed at 11.
  for (int64_t opset : {6, 7, 10}) {
    auto r = import_model(relu_model(opset));
    ASSERT_TRUE(r.ok()) << opset << ": " << r.status().to_string();
    EXPECT_EQ(r->opset, opset);
  }
  ModelProto legacy = relu_model(7);
  add_node(legacy.mutable_graph(), "Clip", {"y"}, {"z"}, "clip");
  add_node(legacy.mutable_graph(), "Clip", {"z"}, {"w"}, "clip2");
  expect_error(import_model(legacy).status(), StatusCode::kUnimplemented,
               {"opset 7", "Clip (version 6, changed at 11)", "version_converter"});
  EXPECT_EQ(import_model(legacy).status().message().find("Relu"), std::string::npos);
  ModelProto m = relu_model();
  m.mutable_opset_import(0)->set_domain("com.example");
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument, {"default ONNX domain"});

  m = relu_model();
  onnx::OperatorSetIdProto* twice = m.add_opset_import();
  twice->set_domain("ai.onnx");
  twice->set_version(12);
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument, {"twice", "13", "12"});
}

TEST(OnnxImport, RequiresIrVersionAndGraph) {
  ModelProto m = relu_model();
  m.clear_ir_version();
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument, {"ir_version"});
  m = relu_model();
  m.set_ir_version(2);
  expect_error(import_model(m).status(), StatusCode::kUnimplemented, {"IR version 2"});
  m = relu_model();
  m.clear_graph();
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument, {"no graph"});
}

TEST(OnnxImport, RejectsEmptyTruncatedAndGarbageBytes) {
  expect_error(import_bytes("").status(), StatusCode::kInvalidArgument, {"empty"});

  // Every strict prefix of a valid model must fail cleanly: inside a field the protobuf does not
  // parse, and on a field boundary something required (opset_import, serialised last) is missing.
  ModelProto m = relu_model();
  add_float_initializer(m.mutable_graph(), "unused", {3}, {1.f, 2.f, 3.f});
  const std::string bytes = serialize(m);
  ASSERT_TRUE(import_bytes(bytes).ok());
  for (size_t len = 1; len < bytes.size(); ++len) {
    auto r = import_bytes(bytes.substr(0, len));
    EXPECT_FALSE(r.ok()) << "prefix of " << len << " of " << bytes.size() << " bytes imported";
  }
  auto r = import_bytes(bytes.substr(0, bytes.size() / 2));
  expect_error(r.status(), StatusCode::kInvalidArgument, {"not a valid ONNX model"});

  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    std::string garbage(static_cast<size_t>(1 + rng() % 257), '\0');
    for (char& c : garbage) c = static_cast<char>(rng());
    EXPECT_FALSE(import_bytes(garbage).ok()) << "trial " << trial;
  }
  // Text is not a protobuf either.
  EXPECT_FALSE(import_bytes("ir_version: 8\ngraph { node { op_type: \"Relu\" } }").ok());
}

TEST(OnnxImport, CorruptedBytesFailCleanlyOrYieldAValidGraph) {
  // Random byte flips in a valid model: whatever survives parsing must either be rejected with a
  // message or import to a graph that passes validation. Run under the sanitizers in CI.
  ModelProto m = make_model(11);
  GraphProto* g = m.mutable_graph();
  add_input(g, "x", {2, 3});
  add_float_initializer(g, "lo", {}, {-1.f});
  set_raw(add_initializer(g, "hi", TensorProto::FLOAT, {}), std::vector<float>{1.f});
  add_node(g, "Clip", {"x", "lo", "hi"}, {"c"}, "clip");
  set_float(add_node(g, "LeakyRelu", {"c"}, {"y"}), "alpha", 0.5f);
  add_output(g, "y");
  const std::string bytes = serialize(m);
  std::mt19937 rng(99);
  int imported = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string corrupt = bytes;
    for (int flips = 1 + static_cast<int>(rng() % 3); flips > 0; --flips) {
      corrupt[rng() % corrupt.size()] = static_cast<char>(rng());
    }
    auto r = import_bytes(corrupt);
    if (r.ok()) {
      ++imported;
      EXPECT_TRUE(r->graph.validate().ok()) << "trial " << trial;
    } else {
      EXPECT_FALSE(r.status().message().empty()) << "trial " << trial;
    }
  }
  EXPECT_LT(imported, 2000);  // the corruption does reach the checks
}

TEST(OnnxImport, ImportsFromFileAndNamesBadPaths) {
  const std::string path = ::testing::TempDir() + "tessera_onnx_import_test.onnx";
  {
    std::ofstream f(path, std::ios::binary);
    f << serialize(relu_model());
  }
  auto r = import_onnx(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->graph.num_nodes(), 1);
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << "garbage that is not a model";
  }
  expect_error(import_onnx(path).status(), StatusCode::kInvalidArgument, {path});
  std::remove(path.c_str());
  expect_error(import_onnx(path).status(), StatusCode::kNotFound, {path});
  expect_error(import_onnx(::testing::TempDir()).status(), StatusCode::kIoError,
               {"not a regular file"});
}

// ---- Initializers -----------------------------------------------------------------------------

TEST(OnnxImport, InitializerDtypesFromRawAndTypedData) {
  ModelProto m = relu_model();
  GraphProto* g = m.mutable_graph();
  add_float_initializer(g, "f32_typed", {2, 2}, {1.5f, -2.f, 0.f, 3.25f});
  set_raw(add_initializer(g, "f32_raw", TensorProto::FLOAT, {3}),
          std::vector<float>{7.f, -8.f, 9.5f});
  const std::vector<uint16_t> halves = {float_to_half(1.f), float_to_half(-0.5f),
                                        float_to_half(65504.f)};
  TensorProto* f16 = add_initializer(g, "f16_typed", TensorProto::FLOAT16, {3});
  for (uint16_t h : halves) f16->add_int32_data(h);
  set_raw(add_initializer(g, "f16_raw", TensorProto::FLOAT16, {3}), halves);
  TensorProto* i8 = add_initializer(g, "i8_typed", TensorProto::INT8, {3});
  for (int v : {-128, 0, 127}) i8->add_int32_data(v);
  set_raw(add_initializer(g, "i8_raw", TensorProto::INT8, {2}), std::vector<int8_t>{-5, 6});
  TensorProto* u8 = add_initializer(g, "u8_typed", TensorProto::UINT8, {2});
  for (int v : {0, 255}) u8->add_int32_data(v);
  set_raw(add_initializer(g, "u8_raw", TensorProto::UINT8, {2}), std::vector<uint8_t>{200, 1});
  TensorProto* i32 = add_initializer(g, "i32_typed", TensorProto::INT32, {2});
  for (int v : {-2147483647 - 1, 2147483647}) i32->add_int32_data(v);
  set_raw(add_initializer(g, "i32_raw", TensorProto::INT32, {2}), std::vector<int32_t>{-3, 4});
  TensorProto* i64 = add_initializer(g, "i64_typed", TensorProto::INT64, {2});
  for (int64_t v : {int64_t{-1} << 40, int64_t{5}}) i64->add_int64_data(v);
  set_raw(add_initializer(g, "i64_raw", TensorProto::INT64, {1, 2}), std::vector<int64_t>{9, -9});
  TensorProto* b = add_initializer(g, "bool_typed", TensorProto::BOOL, {3});
  for (int v : {1, 0, 1}) b->add_int32_data(v);
  set_raw(add_initializer(g, "bool_raw", TensorProto::BOOL, {2}), std::vector<uint8_t>{0, 1});
  add_float_initializer(g, "scalar", {}, {42.f});
  add_initializer(g, "empty", TensorProto::FLOAT, {0, 4});

  auto r = import_model(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Graph& gr = r->graph;
  auto data = [&](const std::string& name, DType dtype, const Shape& shape) -> const Tensor& {
    const Value& v = value_named(gr, name);
    EXPECT_TRUE(v.is_constant) << name;
    EXPECT_EQ(v.data.dtype(), dtype) << name;
    EXPECT_EQ(v.data.shape(), shape) << name;
    EXPECT_EQ(v.info, (TensorInfo{dtype, shape})) << name;
    return v.data;
  };
  const Tensor& ft = data("f32_typed", DType::kF32, Shape{2, 2});
  EXPECT_EQ(ft.data<float>()[0], 1.5f);
  EXPECT_EQ(ft.data<float>()[3], 3.25f);
  const Tensor& fr = data("f32_raw", DType::kF32, Shape{3});
  EXPECT_EQ(fr.data<float>()[1], -8.f);
  EXPECT_EQ(fr.data<float>()[2], 9.5f);
  for (const char* name : {"f16_typed", "f16_raw"}) {
    const Tensor& h = data(name, DType::kF16, Shape{3});
    EXPECT_EQ(h.float_at(0), 1.f) << name;
    EXPECT_EQ(h.float_at(1), -0.5f) << name;
    EXPECT_EQ(h.float_at(2), 65504.f) << name;
  }
  const Tensor& i8t = data("i8_typed", DType::kI8, Shape{3});
  EXPECT_EQ(i8t.data<int8_t>()[0], -128);
  EXPECT_EQ(i8t.data<int8_t>()[2], 127);
  EXPECT_EQ(data("i8_raw", DType::kI8, Shape{2}).data<int8_t>()[0], -5);
  EXPECT_EQ(data("u8_typed", DType::kU8, Shape{2}).data<uint8_t>()[1], 255);
  EXPECT_EQ(data("u8_raw", DType::kU8, Shape{2}).data<uint8_t>()[0], 200);
  EXPECT_EQ(data("i32_typed", DType::kI32, Shape{2}).data<int32_t>()[0], -2147483647 - 1);
  EXPECT_EQ(data("i32_raw", DType::kI32, Shape{2}).data<int32_t>()[1], 4);
  EXPECT_EQ(data("i64_typed", DType::kI64, Shape{2}).data<int64_t>()[0], int64_t{-1} << 40);
  EXPECT_EQ(data("i64_raw", DType::kI64, Shape({1, 2})).data<int64_t>()[1], -9);
  const Tensor& bt = data("bool_typed", DType::kBool, Shape{3});
  EXPECT_EQ(bt.data<uint8_t>()[0], 1);
  EXPECT_EQ(bt.data<uint8_t>()[1], 0);
  EXPECT_EQ(data("bool_raw", DType::kBool, Shape{2}).data<uint8_t>()[1], 1);
  EXPECT_EQ(data("scalar", DType::kF32, Shape{}).data<float>()[0], 42.f);
  EXPECT_EQ(data("empty", DType::kF32, Shape({0, 4})).numel(), 0);
  // Initializers are constants, never graph inputs.
  EXPECT_EQ(gr.inputs().size(), 1u);
  EXPECT_EQ(gr.parameter_count(), 4u + 3 + 3 + 3 + 3 + 2 + 2 + 2 + 2 + 2 + 2 + 2 + 3 + 2 + 1);
}

TEST(OnnxImport, RejectsUnsupportedInitializerTypesNamingTheTensor) {
  struct Case {
    int32_t dtype;
    StatusCode code;
    const char* part;
  };
  for (const Case& c :
       {Case{TensorProto::DOUBLE, StatusCode::kUnimplemented, "DOUBLE"},
        Case{TensorProto::STRING, StatusCode::kUnimplemented, "STRING"},
        Case{TensorProto::BFLOAT16, StatusCode::kUnimplemented, "BFLOAT16"},
        Case{TensorProto::UNDEFINED, StatusCode::kInvalidArgument, "no element type"},
        Case{99, StatusCode::kInvalidArgument, "invalid element type 99"}}) {
    ModelProto m = relu_model();
    add_initializer(m.mutable_graph(), "weights", c.dtype, {1});
    expect_error(import_model(m).status(), c.code, {"initializer 'weights'", c.part});
  }
}

TEST(OnnxImport, ExternalDataIsUnimplementedNamingTheTensor) {
  ModelProto m = relu_model();
  TensorProto* t = add_initializer(m.mutable_graph(), "big_weight", TensorProto::FLOAT, {1024});
  t->set_data_location(TensorProto::EXTERNAL);
  onnx::StringStringEntryProto* e = t->add_external_data();
  e->set_key("location");
  e->set_value("weights.bin");
  expect_error(import_model(m).status(), StatusCode::kUnimplemented,
               {"initializer 'big_weight'", "external"});
}

TEST(OnnxImport, RejectsPayloadSizeMismatches) {
  auto import_with = [](auto&& fill) {
    ModelProto m = relu_model();
    fill(m.mutable_graph());
    return import_model(m).status();
  };
  // raw_data one element short and one byte long.
  expect_error(
      import_with([](GraphProto* g) {
        set_raw(add_initializer(g, "w", TensorProto::FLOAT, {2, 3}), std::vector<float>(5));
      }),
      StatusCode::kInvalidArgument, {"initializer 'w'", "20 bytes of raw_data", "expected 24"});
  expect_error(import_with([](GraphProto* g) {
                 set_raw(add_initializer(g, "w", TensorProto::INT8, {4}), std::vector<int8_t>(5));
               }),
               StatusCode::kInvalidArgument, {"initializer 'w'", "5 bytes", "expected 4"});
  // Typed fields with the wrong count, or in the field another dtype uses.
  expect_error(import_with([](GraphProto* g) {
                 add_float_initializer(g, "w", {2, 2}, {1, 2, 3});
               }),
               StatusCode::kInvalidArgument,
               {"initializer 'w'", "3 values in float_data", "expected 4"});
  expect_error(import_with([](GraphProto* g) {
                 TensorProto* t = add_initializer(g, "w", TensorProto::INT64, {2});
                 t->add_int32_data(1);
                 t->add_int32_data(2);
               }),
               StatusCode::kInvalidArgument, {"0 values in int64_data", "expected 2"});
  // No data at all for a non-empty tensor.
  expect_error(import_with([](GraphProto* g) { add_initializer(g, "w", TensorProto::FLOAT, {3}); }),
               StatusCode::kInvalidArgument, {"initializer 'w'", "0 values"});
  // Both raw and typed data.
  expect_error(import_with([](GraphProto* g) {
                 TensorProto* t = add_initializer(g, "w", TensorProto::FLOAT, {1});
                 set_raw(t, std::vector<float>{1.f});
                 t->add_float_data(1.f);
               }),
               StatusCode::kInvalidArgument, {"both raw_data and typed data"});
  // Narrow types out of range in int32_data.
  expect_error(import_with([](GraphProto* g) {
                 TensorProto* t = add_initializer(g, "w", TensorProto::INT8, {2});
                 t->add_int32_data(1);
                 t->add_int32_data(300);
               }),
               StatusCode::kInvalidArgument, {"initializer 'w'", "int32_data[1] = 300", "i8"});
  expect_error(import_with([](GraphProto* g) {
                 add_initializer(g, "w", TensorProto::BOOL, {1})->add_int32_data(2);
               }),
               StatusCode::kInvalidArgument, {"int32_data[0] = 2", "bool"});
  // Absurd or overflowing shapes fail before anything is allocated or copied.
  expect_error(import_with([](GraphProto* g) {
                 set_raw(add_initializer(g, "w", TensorProto::FLOAT,
                                         {int64_t{1} << 31, int64_t{1} << 31, int64_t{1} << 31,
                                          int64_t{1} << 31}),
                         std::vector<float>(4));
               }),
               StatusCode::kOutOfRange, {"initializer 'w'"});
  expect_error(
      import_with([](GraphProto* g) {
        set_raw(add_initializer(g, "w", TensorProto::FLOAT, {4, -1}), std::vector<float>(4));
      }),
      StatusCode::kInvalidArgument, {"initializer 'w'", "negative dimension -1"});
  expect_error(import_with([](GraphProto* g) {
                 add_initializer(g, "w", TensorProto::FLOAT, {1, 1, 1, 1, 1, 1, 1, 1, 1})
                     ->add_float_data(1.f);
               }),
               StatusCode::kOutOfRange, {"initializer 'w'", "rank 9"});
  // Duplicate and unnamed initializers.
  expect_error(import_with([](GraphProto* g) {
                 add_float_initializer(g, "w", {1}, {1.f});
                 add_float_initializer(g, "w", {1}, {2.f});
               }),
               StatusCode::kInvalidArgument, {"initializer 'w' redefines tensor 'w'"});
  expect_error(import_with([](GraphProto* g) { add_float_initializer(g, "", {1}, {1.f}); }),
               StatusCode::kInvalidArgument, {"initializer has no name"});
  expect_error(import_with([](GraphProto* g) {
                 g->add_sparse_initializer()->mutable_values()->set_name("sparse_w");
               }),
               StatusCode::kUnimplemented, {"sparse initializer 'sparse_w'"});
}

TEST(OnnxImport, InitializerListedAsInputIsAConstant) {
  for (int64_t ir : {3, 8}) {
    ModelProto m = make_model(13, ir);
    GraphProto* g = m.mutable_graph();
    add_input(g, "x", {4});
    add_input(g, "lo", {});  // IR 3 lists every initializer as an input too
    add_float_initializer(g, "lo", {}, {-1.f});
    add_node(g, "Clip", {"x", "lo"}, {"y"}, "clip");
    add_output(g, "y");
    auto r = import_model(m);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->graph.inputs().size(), 1u) << "ir " << ir;
    EXPECT_EQ(r->graph.value(r->graph.inputs()[0]).name, "x");
    EXPECT_TRUE(value_named(r->graph, "lo").is_constant);
    if (ir == 3) {
      EXPECT_TRUE(r->warnings.empty());
    } else {
      ASSERT_EQ(r->warnings.size(), 1u);
      EXPECT_EQ(r->warnings[0],
                "1 graph inputs have initializers and are imported as constants ('lo')");
    }
    // Clip sees the constant min at shape-inference time.
    ImportedModel model = std::move(r).value();
    ASSERT_TRUE(infer_onnx_shapes(model).ok());
  }
}

// ---- Graph inputs -----------------------------------------------------------------------------

// The batch (dimension 0) takes default_dim_value with a warning; a named dimension takes its
// dim_params value; any other dimension left unset is an error naming it, never a silent 1.
TEST(OnnxImport, SymbolicAndUnknownInputDimsAreSubstitutedAndReported) {
  ModelProto m = make_model();
  GraphProto* g = m.mutable_graph();
  onnx::ValueInfoProto* x = add_input(g, "x", {});
  onnx::TensorShapeProto* s = x->mutable_type()->mutable_tensor_type()->mutable_shape();
  s->add_dim()->set_dim_param("N");
  s->add_dim()->set_dim_value(3);
  s->add_dim()->set_dim_param("batch");
  add_node(g, "Relu", {"x"}, {"y"});
  add_output(g, "y");

  // dimension 2 ('batch' by name, but not dimension 0) is set by nothing.
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument,
               {"graph input 'x' dimension 2 is symbolic ('batch')", "no size was given",
                "--shape x=Nx3xD2", "--batch sets only dimension 0"});

  ImportOptions options;
  options.default_dim_value = 7;
  options.dim_params["batch"] = 4;
  auto r = import_model(m, options);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(value_named(r->graph, "x").info.shape, Shape({7, 3, 4}));
  ASSERT_EQ(r->warnings.size(), 2u);
  EXPECT_EQ(r->warnings[0], "graph input 'x' dimension 0 is symbolic ('N'); using 7");
  EXPECT_EQ(r->warnings[1], "graph input 'x' dimension 2 is symbolic ('batch'); using 4");
  ImportedModel model = std::move(r).value();
  ASSERT_TRUE(infer_onnx_shapes(model).ok());
  EXPECT_EQ(value_named(model.graph, "y").info.shape, Shape({7, 3, 4}));

  // Unknown dimensions (neither value nor param, or -1 as some exporters write): the batch
  // takes the default, others are named.
  s->mutable_dim(0)->clear_dim_param();
  s->add_dim();
  r = import_model(m, options);
  expect_error(r.status(), StatusCode::kInvalidArgument,
               {"graph input 'x' dimension 3 is unknown", "no size was given"});
  s->mutable_dim(3)->set_dim_value(-1);
  expect_error(import_model(m, options).status(), StatusCode::kInvalidArgument,
               {"graph input 'x' dimension 3 is -1", "no size was given"});
  options.input_shapes["x"] = {2, 3, 5, 6};
  r = import_model(m, options);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(value_named(r->graph, "x").info.shape, Shape({2, 3, 5, 6}));
  EXPECT_TRUE(r->warnings.empty());
  options.input_shapes.clear();
  s->mutable_dim()->RemoveLast();
  r = import_model(m, options);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->warnings[0], "graph input 'x' dimension 0 is unknown; using 7");

  options.default_dim_value = 0;
  expect_error(import_model(m, options).status(), StatusCode::kInvalidArgument,
               {"default_dim_value = 0"});
  options.default_dim_value = 1;
  options.dim_params["batch"] = -2;
  expect_error(import_model(m, options).status(), StatusCode::kInvalidArgument,
               {"dim_params['batch'] = -2"});
}

// Per-input shapes set every symbolic dimension of that input; with require_all_dims a
// dimension left symbolic is an error naming it rather than a silent 1.
TEST(OnnxImport, InputShapesSetSymbolicDimsPerInput) {
  ModelProto m = make_model();
  GraphProto* g = m.mutable_graph();
  for (const char* name : {"image", "mask"}) {
    onnx::ValueInfoProto* x = add_input(g, name, {});
    onnx::TensorShapeProto* s = x->mutable_type()->mutable_tensor_type()->mutable_shape();
    s->add_dim()->set_dim_param("N");
    s->add_dim()->set_dim_value(3);
    s->add_dim()->set_dim_param("height");
    s->add_dim()->set_dim_param("width");
  }
  add_node(g, "Add", {"image", "mask"}, {"y"});
  add_output(g, "y");

  ImportOptions options;
  options.input_shapes["image"] = {1, 3, 64, 48};
  options.dim_params["height"] = 64;
  options.dim_params["width"] = 48;
  auto r = import_model(m, options);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(value_named(r->graph, "image").info.shape, Shape({1, 3, 64, 48}));
  EXPECT_EQ(value_named(r->graph, "mask").info.shape, Shape({1, 3, 64, 48}));
  EXPECT_EQ(r->warnings.size(), 3u);  // mask: N from the default, height and width by name

  // Required: mask's N is set by nothing.
  options.require_all_dims = true;
  options.dim_params.erase("width");
  expect_error(import_model(m, options).status(), StatusCode::kInvalidArgument,
               {"graph input 'mask' dimension 0 is symbolic ('N')", "no size was given"});
  options.input_shapes["mask"] = {1, 3, 64, 48};
  r = import_model(m, options);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->warnings.empty());

  // Shapes that disagree with the model, and inputs it lacks, are named.
  options.input_shapes["mask"] = {1, 3, 64};
  expect_error(import_model(m, options).status(), StatusCode::kInvalidArgument,
               {"graph input 'mask' has rank 4", "3 dimensions"});
  options.input_shapes["mask"] = {1, 4, 64, 48};
  expect_error(import_model(m, options).status(), StatusCode::kInvalidArgument,
               {"graph input 'mask' dimension 1 is 3 in the model, but 4 was given"});
  options.input_shapes["mask"] = {1, 3, 64, 48};
  options.input_shapes["images"] = {1, 3, 64, 48};
  expect_error(import_model(m, options).status(), StatusCode::kInvalidArgument,
               {"'images'", "not a graph input", "'image', 'mask'"});
  options.input_shapes.erase("images");
  options.input_shapes["mask"] = {1, 3, 0, 48};
  expect_error(import_model(m, options).status(), StatusCode::kInvalidArgument,
               {"graph input 'mask'", "dimension 2 = 0"});
}

TEST(OnnxImport, RejectsInputsWithoutStaticTensorTypes) {
  ModelProto m = relu_model();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  expect_error(import_model(m).status(), StatusCode::kUnimplemented,
               {"graph input 'x'", "unknown rank"});
  m = relu_model();
  m.mutable_graph()->mutable_input(0)->clear_type();
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument,
               {"graph input 'x' has no type"});
  m = relu_model();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_sequence_type();
  expect_error(import_model(m).status(), StatusCode::kUnimplemented,
               {"graph input 'x' is not a tensor"});
  m = relu_model();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      TensorProto::DOUBLE);
  expect_error(import_model(m).status(), StatusCode::kUnimplemented, {"graph input 'x'", "DOUBLE"});
  m = relu_model();
  add_input(m.mutable_graph(), "x", {2});
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument,
               {"graph input 'x' redefines tensor 'x'"});
}

// ---- Nodes and attributes ---------------------------------------------------------------------

TEST(OnnxImport, AllAttributeKinds) {
  ModelProto m = make_model();
  GraphProto* g = m.mutable_graph();
  add_input(g, "x", {1, 3, 8, 8});
  add_float_initializer(g, "w", {4, 3, 3, 3}, std::vector<float>(108, 0.5f));
  NodeProto* n = add_node(g, "Conv", {"x", "w"}, {"y"}, "conv");
  set_int(n, "group", 1);
  set_float(n, "some_float", 0.25f);
  add_attr(n, "auto_pad", AttributeProto::STRING)->set_s("NOTSET");
  AttributeProto* pads = add_attr(n, "pads", AttributeProto::INTS);
  for (int64_t p : {1, 1, 1, 1}) pads->add_ints(p);
  AttributeProto* fl = add_attr(n, "some_floats", AttributeProto::FLOATS);
  for (float f : {0.5f, -1.5f}) fl->add_floats(f);
  TensorProto* t = add_attr(n, "some_tensor", AttributeProto::TENSOR)->mutable_t();
  t->set_data_type(TensorProto::INT64);
  t->add_dims(2);
  set_raw(t, std::vector<int64_t>{3, -4});
  add_output(g, "y");

  auto r = import_model(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Node* conv = node_named(r->graph, "conv");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->kind, OpKind::kConv);
  const Attributes& a = conv->attrs;
  EXPECT_EQ(a.all().size(), 6u);
  EXPECT_EQ(a.get_int("group").value(), 1);
  EXPECT_EQ(a.get_float("some_float").value(), 0.25f);
  EXPECT_EQ(a.get_string("auto_pad").value(), "NOTSET");
  EXPECT_EQ(a.get_ints("pads").value(), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(a.get_floats("some_floats").value(), (std::vector<float>{0.5f, -1.5f}));
  Tensor at = a.get_tensor("some_tensor").value();
  EXPECT_EQ(at.dtype(), DType::kI64);
  EXPECT_EQ(at.shape(), Shape{2});
  EXPECT_EQ(at.data<int64_t>()[1], -4);
  EXPECT_EQ(conv->inputs.size(), 2u);
  EXPECT_TRUE(r->graph.value(conv->inputs[1]).is_constant);
}

TEST(OnnxImport, RejectsUnsupportedAndMalformedAttributes) {
  auto with_attr = [](auto&& fill) {
    ModelProto m = relu_model();
    fill(m.mutable_graph()->mutable_node(0));
    return import_model(m).status();
  };
  expect_error(with_attr([](NodeProto* n) {
                 add_attr(n, "body", AttributeProto::GRAPH)->mutable_g()->set_name("sub");
               }),
               StatusCode::kUnimplemented, {"node 'relu' (Relu)", "attribute 'body'", "subgraph"});
  expect_error(with_attr([](NodeProto* n) {
                 add_attr(n, "branches", AttributeProto::GRAPHS)->add_graphs();
               }),
               StatusCode::kUnimplemented, {"attribute 'branches'", "subgraph"});
  // A list of strings is kept as one string joined with ','; a ',' inside one is refused.
  expect_error(with_attr([](NodeProto* n) {
                 AttributeProto* a = add_attr(n, "names", AttributeProto::STRINGS);
                 a->add_strings("a");
                 a->add_strings("b,c");
               }),
               StatusCode::kUnimplemented,
               {"node 'relu' (Relu): attribute 'names' holds the string 'b,c'", "contains a ','"});
  expect_error(with_attr([](NodeProto* n) { n->add_attribute()->set_name("untyped"); }),
               StatusCode::kInvalidArgument, {"attribute 'untyped' has no type"});
  expect_error(with_attr([](NodeProto* n) {
                 set_int(n, "k", 1);
                 set_int(n, "k", 2);
               }),
               StatusCode::kInvalidArgument, {"node 'relu' (Relu) has attribute 'k' twice"});
  expect_error(with_attr([](NodeProto* n) {
                 AttributeProto* a = add_attr(n, "t", AttributeProto::TENSOR);
                 a->mutable_t()->set_data_type(TensorProto::FLOAT);
                 a->mutable_t()->add_dims(2);
                 a->mutable_t()->add_float_data(1.f);
               }),
               StatusCode::kInvalidArgument, {"node 'relu' (Relu): attribute 't'", "1 values"});
}

TEST(OnnxImport, ListsEveryUnsupportedOperatorInOneError) {
  ModelProto m = make_model();
  GraphProto* g = m.mutable_graph();
  add_input(g, "x", {4});
  add_node(g, "NonMaxSuppression", {"x"}, {"a"}, "foo");
  add_node(g, "Relu", {"a"}, {"b"}, "fine");
  add_node(g, "Loop", {"b"}, {"c"}, "bar");
  NodeProto* custom = add_node(g, "FusedConv", {"c"}, {"d"});  // unnamed, custom domain
  custom->set_domain("com.microsoft");
  NodeProto* relu_elsewhere = add_node(g, "Relu", {"d"}, {"e"}, "custom_relu");
  relu_elsewhere->set_domain("com.example");  // a known op_type in another domain is not ours
  add_output(g, "e");
  auto r = import_model(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(r.status().message(),
            "unsupported operators: NonMaxSuppression x1 (node 'foo'), Loop x1 (node 'bar'), "
            "com.microsoft:FusedConv x1 (node 'FusedConv_3'), com.example:Relu x1 (node "
            "'custom_relu'); Tessera has no kernel (not even a reference one) for these op types, "
            "so it can neither run nor constant-fold them, even where their inputs are constants");

  m = relu_model();
  m.mutable_graph()->mutable_node(0)->clear_op_type();
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument,
               {"node 'relu' ()", "no op_type"});
}

// Many nodes of one unsupported type make one entry with a count and a few names, not a list
// of every node; constant inputs do not make an unknown op foldable, and the error says why.
TEST(OnnxImport, GroupsUnsupportedOperatorsByType) {
  ModelProto m = make_model();
  GraphProto* g = m.mutable_graph();
  add_input(g, "x", {4});
  std::string prev = "x";
  for (int i = 0; i < 5; ++i) {
    const std::string out = "l" + std::to_string(i);
    add_node(g, "NonMaxSuppression", {prev}, {out}, "nms" + std::to_string(i));
    prev = out;
  }
  add_node(g, "Scan", {prev, prev, prev}, {"r"}, "scan");
  add_output(g, "r");
  auto r = import_model(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  const std::string& msg = r.status().message();
  EXPECT_NE(
      msg.find("NonMaxSuppression x5 (nodes 'nms0', 'nms1', 'nms2', ...), Scan x1 (node 'scan')"),
      std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("nms3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("neither run nor constant-fold"), std::string::npos) << msg;
}

TEST(OnnxImport, EmptyOptionalInputsAndOutputs) {
  ModelProto m = make_model();
  GraphProto* g = m.mutable_graph();
  add_input(g, "x", {13, 127});
  add_float_initializer(g, "hi", {}, {0.5f});
  add_node(g, "Clip", {"x", "", "hi"}, {"y"}, "clip");  // min omitted
  add_node(g, "Split", {"y"}, {"s0", "", "s2", "", ""}, "split");
  add_output(g, "y");
  add_output(g, "s2");
  auto r = import_model(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Graph& gr = r->graph;
  const Node* clip = node_named(gr, "clip");
  ASSERT_NE(clip, nullptr);
  ASSERT_EQ(clip->inputs.size(), 3u);
  EXPECT_EQ(clip->inputs[1], kNoValue);
  EXPECT_EQ(gr.value(clip->inputs[2]).name, "hi");
  const Node* split = node_named(gr, "split");
  ASSERT_NE(split, nullptr);
  // Trailing omitted outputs are dropped; the one in the middle is a placeholder.
  ASSERT_EQ(split->outputs.size(), 3u);
  EXPECT_EQ(gr.value(split->outputs[0]).name, "s0");
  EXPECT_EQ(gr.value(split->outputs[1]).name, "split:output1");
  EXPECT_EQ(gr.value(split->outputs[2]).name, "s2");
  EXPECT_EQ(gr.value(split->outputs[1]).producer, 1);
}

TEST(OnnxImport, UnnamedNodesGetUniqueGeneratedNames) {
  ModelProto m = make_model();
  GraphProto* g = m.mutable_graph();
  add_input(g, "x", {3});
  add_node(g, "Relu", {"x"}, {"a"});
  add_node(g, "Relu", {"a"}, {"b"});
  add_node(g, "Relu", {"b"}, {"c"}, "Relu_1");  // takes the name node 1 would get
  add_output(g, "c");
  auto r = import_model(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->graph.num_nodes(), 3);
  EXPECT_EQ(r->graph.node(0).name, "Relu_0");
  EXPECT_EQ(r->graph.node(1).name, "Relu_1_1");
  EXPECT_EQ(r->graph.node(2).name, "Relu_1");
}

TEST(OnnxImport, ConstantNodesBecomeConstants) {
  ModelProto m = make_model();
  GraphProto* g = m.mutable_graph();
  add_input(g, "x", {2, 6});
  NodeProto* c = add_node(g, "Constant", {}, {"shape"}, "const_shape");
  TensorProto* t = add_attr(c, "value", AttributeProto::TENSOR)->mutable_t();
  t->set_data_type(TensorProto::INT64);
  t->add_dims(2);
  t->add_int64_data(3);
  t->add_int64_data(4);
  add_node(g, "Reshape", {"x", "shape"}, {"y"}, "reshape");
  add_attr(add_node(g, "Constant", {}, {"f"}), "value_float", AttributeProto::FLOAT)->set_f(2.5f);
  AttributeProto* ints =
      add_attr(add_node(g, "Constant", {}, {"is"}), "value_ints", AttributeProto::INTS);
  ints->add_ints(7);
  ints->add_ints(8);
  add_output(g, "y");
  add_output(g, "f");  // a graph output may be a constant
  add_output(g, "is");
  auto r = import_model(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Graph& gr = r->graph;
  ASSERT_EQ(gr.num_nodes(), 1);
  EXPECT_EQ(gr.node(0).kind, OpKind::kReshape);
  const Value& shape = gr.value(gr.node(0).inputs[1]);
  EXPECT_TRUE(shape.is_constant);
  EXPECT_EQ(tensor_to_int64s(shape.data), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(value_named(gr, "f").data.float_at(0), 2.5f);
  EXPECT_EQ(value_named(gr, "f").data.shape(), Shape{});
  EXPECT_EQ(tensor_to_int64s(value_named(gr, "is").data), (std::vector<int64_t>{7, 8}));

  m = relu_model();
  NodeProto* bad = add_node(m.mutable_graph(), "Constant", {}, {"s"}, "strings");
  add_attr(bad, "value_string", AttributeProto::STRING)->set_s("hello");
  expect_error(import_model(m).status(), StatusCode::kUnimplemented,
               {"node 'strings' (Constant)", "value_string"});
}

// ---- Structure errors -------------------------------------------------------------------------

TEST(OnnxImport, MissingProducerNamesNodeAndTensor) {
  ModelProto m = relu_model();
  add_node(m.mutable_graph(), "Clip", {"y", "ghost"}, {"z"}, "clip");
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument,
               {"node 'clip' (Clip) input 1 'ghost' is not produced by any node"});
  m = relu_model();
  add_output(m.mutable_graph(), "nowhere");
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument,
               {"graph output 'nowhere' is not produced"});
  m = relu_model();
  m.mutable_graph()->clear_output();
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument, {"no outputs"});
}

TEST(OnnxImport, DuplicateOutputNamesAreRejected) {
  ModelProto m = relu_model();
  add_node(m.mutable_graph(), "Sigmoid", {"x"}, {"y"}, "sigmoid");
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument,
               {"node 'sigmoid' (Sigmoid) redefines tensor 'y'", "node 'relu' (Relu)"});
  m = relu_model();
  add_node(m.mutable_graph(), "Sigmoid", {"y"}, {"x"}, "overwrites_input");
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument,
               {"node 'overwrites_input' (Sigmoid) redefines tensor 'x'", "graph input 'x'"});
  m = relu_model();
  add_float_initializer(m.mutable_graph(), "w", {1}, {1.f});
  add_node(m.mutable_graph(), "Sigmoid", {"y"}, {"w"}, "overwrites_weight");
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument,
               {"redefines tensor 'w'", "initializer 'w'"});
  m = relu_model();
  add_output(m.mutable_graph(), "y");
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument,
               {"graph output 'y' is listed twice"});
}

TEST(OnnxImport, CyclesAreRejectedAndOutOfOrderNodesSorted) {
  ModelProto m = make_model();
  GraphProto* g = m.mutable_graph();
  add_input(g, "x", {3});
  add_node(g, "Relu", {"b"}, {"a"}, "first");
  add_node(g, "Sigmoid", {"a"}, {"b"}, "second");
  add_output(g, "b");
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument, {"cycle", "node 'first'"});

  m = make_model();
  g = m.mutable_graph();
  add_input(g, "x", {3});
  add_node(g, "Sigmoid", {"a"}, {"b"}, "consumer");  // listed before its producer
  add_node(g, "Relu", {"x"}, {"a"}, "producer");
  add_output(g, "b");
  auto r = import_model(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->graph.node(0).name, "producer");
  EXPECT_EQ(r->graph.node(1).name, "consumer");
  EXPECT_EQ(value_named(r->graph, "b").producer, 1);

  m = relu_model();
  add_node(m.mutable_graph(), "Relu", {"self"}, {"self"}, "loop_on_itself");
  expect_error(import_model(m).status(), StatusCode::kInvalidArgument,
               {"cycle", "node 'loop_on_itself'"});
}

// ---- Shape inference and execution ------------------------------------------------------------

TEST(OnnxImport, ActivationChainInfersAndMatchesNaiveOracle) {
  // x -> Clip(lo, hi) -> LeakyRelu(alpha) -> HardSigmoid(alpha, beta) -> Tanh -> y, odd shape.
  ModelProto m = make_model(11);
  GraphProto* g = m.mutable_graph();
  add_input(g, "x", {13, 127});
  add_float_initializer(g, "lo", {}, {-2.5f});
  set_raw(add_initializer(g, "hi", TensorProto::FLOAT, {}), std::vector<float>{1.75f});
  add_node(g, "Clip", {"x", "lo", "hi"}, {"c"}, "clip");
  set_float(add_node(g, "LeakyRelu", {"c"}, {"l"}, "leaky"), "alpha", 0.3f);
  NodeProto* hs = add_node(g, "HardSigmoid", {"l"}, {"h"}, "hard_sigmoid");
  set_float(hs, "alpha", 0.25f);
  set_float(hs, "beta", 0.4f);
  add_node(g, "Tanh", {"h"}, {"y"}, "tanh");
  add_output(g, "y");
  auto r = import_model(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ImportedModel model = std::move(r).value();
  ASSERT_TRUE(infer_onnx_shapes(model).ok());
  EXPECT_EQ(value_named(model.graph, "y").info, (TensorInfo{DType::kF32, Shape{13, 127}}));

  const Tensor x = testing::random_tensor(Shape{13, 127}, 7, -4.f, 4.f);
  auto out = run_graph(model.graph, {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  Tensor want = Tensor::create(DType::kF32, Shape{13, 127}).value();
  for (int64_t i = 0; i < x.numel(); ++i) {
    float v = std::min(std::max(x.data<float>()[i], -2.5f), 1.75f);
    v = v < 0 ? 0.3f * v : v;
    v = std::min(1.f, std::max(0.f, 0.25f * v + 0.4f));
    want.data<float>()[i] = std::tanh(v);
  }
  testing::expect_near((*out)[0], want);
}

// Opset 18 turned attributes into inputs (ReduceMean's axes, Pad's axes; Split gained
// num_outputs) after opset 13 had done so for Squeeze/Unsqueeze/Split; opsets 19-21 changed
// none of these ops' semantics for the types Tessera imports. The same graph at 18 and 21,
// against loops over the input.
TEST(OnnxImport, Opset18InputsInsteadOfAttributes) {
  for (int64_t opset : {18, 21}) {
    ModelProto m = make_model(opset, 10);
    GraphProto* g = m.mutable_graph();
    add_input(g, "x", {2, 3, 4, 5});
    set_raw(add_initializer(g, "mean_axes", TensorProto::INT64, {2}), std::vector<int64_t>{2, -1});
    set_raw(add_initializer(g, "pads", TensorProto::INT64, {2}), std::vector<int64_t>{1, 2});
    set_raw(add_initializer(g, "pad_axes", TensorProto::INT64, {1}), std::vector<int64_t>{-1});
    set_raw(add_initializer(g, "squeeze_axes", TensorProto::INT64, {1}), std::vector<int64_t>{1});
    set_raw(add_initializer(g, "unsqueeze_axes", TensorProto::INT64, {1}), std::vector<int64_t>{0});
    add_node(g, "ReduceMean", {"x", "mean_axes"}, {"mean"}, "mean");
    add_node(g, "Pad", {"x", "pads", "", "pad_axes"}, {"padded"}, "pad");
    NodeProto* split = add_node(g, "Split", {"x"}, {"s0", "s1", "s2"}, "split");
    set_int(split, "axis", 1);
    set_int(split, "num_outputs", 3);
    add_node(g, "Squeeze", {"s1", "squeeze_axes"}, {"squeezed"}, "squeeze");
    add_node(g, "Unsqueeze", {"squeezed", "unsqueeze_axes"}, {"unsqueezed"}, "unsqueeze");
    for (const char* out : {"mean", "padded", "s2", "unsqueezed"}) add_output(g, out);
    auto r = import_model(m);
    ASSERT_TRUE(r.ok()) << opset << ": " << r.status().to_string();
    ImportedModel model = std::move(r).value();
    Status st = infer_onnx_shapes(model);
    ASSERT_TRUE(st.ok()) << opset << ": " << st.to_string();
    EXPECT_EQ(value_named(model.graph, "mean").info.shape, Shape({2, 3, 1, 1}));
    EXPECT_EQ(value_named(model.graph, "padded").info.shape, Shape({2, 3, 4, 8}));
    EXPECT_EQ(value_named(model.graph, "s2").info.shape, Shape({2, 1, 4, 5}));
    EXPECT_EQ(value_named(model.graph, "unsqueezed").info.shape, Shape({1, 2, 4, 5}));

    const Tensor x = testing::random_tensor(Shape{2, 3, 4, 5}, 11, -3.f, 3.f);
    auto out = run_graph(model.graph, {x});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const float* px = x.data<float>();
    auto at = [&](int64_t n, int64_t c, int64_t h, int64_t w) {
      return px[((n * 3 + c) * 4 + h) * 5 + w];
    };
    Tensor mean = Tensor::create(DType::kF32, Shape{2, 3, 1, 1}).value();
    Tensor padded = Tensor::create(DType::kF32, Shape{2, 3, 4, 8}).value();
    Tensor s2 = Tensor::create(DType::kF32, Shape{2, 1, 4, 5}).value();
    Tensor unsq = Tensor::create(DType::kF32, Shape{1, 2, 4, 5}).value();
    for (int64_t n = 0; n < 2; ++n) {
      for (int64_t c = 0; c < 3; ++c) {
        double sum = 0;
        for (int64_t h = 0; h < 4; ++h) {
          for (int64_t w = 0; w < 8; ++w) {
            padded.data<float>()[((n * 3 + c) * 4 + h) * 8 + w] =
                w >= 1 && w < 6 ? at(n, c, h, w - 1) : 0.f;
          }
          for (int64_t w = 0; w < 5; ++w) {
            sum += at(n, c, h, w);
            if (c == 2) s2.data<float>()[(n * 4 + h) * 5 + w] = at(n, c, h, w);
            if (c == 1) unsq.data<float>()[(n * 4 + h) * 5 + w] = at(n, c, h, w);
          }
        }
        mean.data<float>()[n * 3 + c] = static_cast<float>(sum / 20);
      }
    }
    testing::expect_near((*out)[0], mean);
    testing::expect_near((*out)[1], padded);
    testing::expect_near((*out)[2], s2);
    testing::expect_near((*out)[3], unsq);
  }
  // What opset 18 added beyond that is refused naming the node and the attribute.
  ModelProto m = make_model(18, 10);
  GraphProto* g = m.mutable_graph();
  add_input(g, "x", {1, 1, 2, 2});
  add_float_initializer(g, "scales", {2}, {2.f, 2.f});
  NodeProto* resize = add_node(g, "Resize", {"x", "", "scales"}, {"y"}, "up");
  AttributeProto* axes = add_attr(resize, "axes", AttributeProto::INTS);
  axes->add_ints(2);
  axes->add_ints(3);
  add_output(g, "y");
  auto r = import_model(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_error(infer_onnx_shapes(*r), StatusCode::kUnimplemented, {"node 'up' (Resize)", "'axes'"});
}

TEST(OnnxImport, InconsistentShapesNameTheNode) {
  ModelProto m = make_model();
  GraphProto* g = m.mutable_graph();
  add_input(g, "x", {4}, TensorProto::INT64);
  add_node(g, "Relu", {"x"}, {"y"}, "int_relu");
  add_output(g, "y");
  auto r = import_model(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();  // structure is fine; types are checked later
  ImportedModel model = std::move(r).value();
  expect_error(infer_onnx_shapes(model), StatusCode::kUnimplemented,
               {"node 'int_relu' (Relu)", "i64"});

  m = make_model();
  g = m.mutable_graph();
  add_input(g, "x", {4});
  add_float_initializer(g, "lo", {2}, {0.f, 1.f});  // Clip's min must be a scalar
  add_float_initializer(g, "hi", {}, {1.f});
  add_node(g, "Relu", {"x"}, {"r"}, "relu");
  add_node(g, "Clip", {"r", "lo", "hi"}, {"y"}, "bad_clip");
  add_output(g, "y");
  model = import_model(m).value();
  expect_error(infer_onnx_shapes(model), StatusCode::kInvalidArgument,
               {"node 'bad_clip' (Clip)", "scalar"});
}

// ---- Softmax before opset 13 ------------------------------------------------------------------

ModelProto softmax_model(int64_t opset, std::vector<int64_t> dims, std::optional<int64_t> axis) {
  ModelProto m = make_model(opset);
  GraphProto* g = m.mutable_graph();
  add_input(g, "x", std::move(dims));
  NodeProto* n = add_node(g, "Softmax", {"x"}, {"y"}, "softmax");
  if (axis) set_int(n, "axis", *axis);
  add_output(g, "y");
  return m;
}

TEST(OnnxImport, LegacySoftmaxIsLoweredToFlattenSoftmaxReshape) {
  auto r = import_model(softmax_model(11, {2, 3, 4}, std::nullopt));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ImportedModel model = std::move(r).value();
  // Import makes the opset-11 default axis explicit, since ops/ defaults to -1.
  ASSERT_EQ(model.graph.num_nodes(), 1);
  EXPECT_EQ(model.graph.node(0).attrs.get_int("axis").value(), 1);

  auto lowered = lower_legacy_softmax(model);
  ASSERT_TRUE(lowered.ok()) << lowered.status().to_string();
  EXPECT_EQ(*lowered, 1);
  const Graph& g = model.graph;
  ASSERT_TRUE(g.validate().ok());
  ASSERT_EQ(g.num_nodes(), 3);
  const Node& flatten = g.node(0);
  const Node& softmax = g.node(1);
  const Node& reshape = g.node(2);
  EXPECT_EQ(flatten.kind, OpKind::kFlatten);
  EXPECT_EQ(flatten.attrs.get_int("axis").value(), 1);
  EXPECT_EQ(flatten.inputs, (std::vector<ValueId>{g.find_value("x").value()}));
  EXPECT_EQ(softmax.kind, OpKind::kSoftmax);
  EXPECT_EQ(softmax.name, "softmax");
  EXPECT_EQ(softmax.attrs.get_int("axis").value(), -1);
  EXPECT_EQ(softmax.inputs, flatten.outputs);
  EXPECT_EQ(reshape.kind, OpKind::kReshape);
  EXPECT_FALSE(reshape.attrs.has("allowzero"));
  ASSERT_EQ(reshape.inputs.size(), 2u);
  EXPECT_EQ(reshape.inputs[0], softmax.outputs[0]);
  const Value& target = g.value(reshape.inputs[1]);
  EXPECT_TRUE(target.is_constant);
  EXPECT_EQ(tensor_to_int64s(target.data), (std::vector<int64_t>{2, 3, 4}));
  // The graph output is still the original tensor, now written by the Reshape.
  EXPECT_EQ(reshape.outputs, (std::vector<ValueId>{g.find_value("y").value()}));
  EXPECT_EQ(g.outputs(), reshape.outputs);
  EXPECT_EQ(g.value(g.outputs()[0]).producer, 2);

  // Idempotent: the rewritten Softmax normalises over the last axis.
  model.graph.value(softmax.inputs[0]).info = TensorInfo{DType::kF32, Shape{2, 12}};
  model.graph.value(softmax.inputs[0]).has_info = true;
  EXPECT_EQ(lower_legacy_softmax(model).value(), 0);
  EXPECT_EQ(model.graph.num_nodes(), 3);
}

TEST(OnnxImport, LegacySoftmaxOverTheLastAxisIsKept) {
  struct Case {
    int64_t opset;
    std::vector<int64_t> dims;
    std::optional<int64_t> axis;
  };
  for (const Case& c :
       {Case{11, {2, 3, 4}, -1}, Case{12, {2, 3, 4}, 2}, Case{11, {8, 10}, std::nullopt},
        Case{13, {2, 3, 4}, 1}, Case{13, {2, 3, 4}, std::nullopt}}) {
    ImportedModel model = import_model(softmax_model(c.opset, c.dims, c.axis)).value();
    auto lowered = lower_legacy_softmax(model);
    ASSERT_TRUE(lowered.ok()) << lowered.status().to_string();
    EXPECT_EQ(*lowered, 0) << "opset " << c.opset;
    ASSERT_EQ(model.graph.num_nodes(), 1);
    EXPECT_EQ(model.graph.node(0).kind, OpKind::kSoftmax);
  }
  // Opset 13 keeps its own default (absent axis = -1).
  ImportedModel m13 = import_model(softmax_model(13, {2, 3}, std::nullopt)).value();
  EXPECT_FALSE(m13.graph.node(0).attrs.has("axis"));
}

TEST(OnnxImport, LegacySoftmaxLoweringErrors) {
  ImportedModel model = import_model(softmax_model(11, {2, 3}, 5)).value();
  expect_error(lower_legacy_softmax(model).status(), StatusCode::kOutOfRange,
               {"node 'softmax' (Softmax)", "axis 5"});
  // A zero-sized dimension needs allowzero so the Reshape target keeps it.
  model = import_model(softmax_model(11, {2, 0, 3}, 0)).value();
  ASSERT_EQ(lower_legacy_softmax(model).value(), 1);
  EXPECT_EQ(node_named(model.graph, "softmax/reshape")->attrs.get_int("allowzero").value(), 1);
  // The input's shape must be known: here it comes from a node whose shapes are not inferred.
  ModelProto m = make_model(12);
  GraphProto* g = m.mutable_graph();
  add_input(g, "x", {2, 3, 4});
  add_node(g, "Relu", {"x"}, {"r"}, "relu");
  add_node(g, "Softmax", {"r"}, {"y"}, "softmax");
  add_output(g, "y");
  model = import_model(m).value();
  expect_error(lower_legacy_softmax(model).status(), StatusCode::kFailedPrecondition,
               {"node 'softmax' (Softmax)", "'r'"});
}

// Hostile models (issue 28): an input of [0, 2^31, 2^31, 2^31] holds no element but used to
// pass the element limit, after which Flatten and Softmax overflowed int64 multiplying some of
// its dimensions and Pad, Slice and Resize sized 2^31-entry maps per dimension. Each is now
// refused at the input, naming it.
TEST(OnnxImport, ZeroElementInputsWithHugeDimsAreRefused) {
  const int64_t big = int64_t{1} << 31;
  struct Case {
    const char* op;
    std::function<void(GraphProto*, NodeProto*)> build;
  };
  const std::vector<Case> cases = {
      {"Flatten", [](GraphProto*, NodeProto* n) { set_int(n, "axis", 1); }},
      {"Softmax", [](GraphProto*, NodeProto* n) { set_int(n, "axis", 1); }},
      {"Pad",
       [](GraphProto* g, NodeProto* n) {
         set_raw(add_initializer(g, "p", TensorProto::INT64, {8}), std::vector<int64_t>(8, 0));
         n->add_input("p");
       }},
      {"Slice",
       [](GraphProto* g, NodeProto* n) {
         for (const char* name : {"a", "b", "c", "d"}) {
           const int64_t v = name[0] == 'a' ? 1 : name[0] == 'b' ? int64_t{1} << 31 : 2;
           set_raw(add_initializer(g, name, TensorProto::INT64, {1}), std::vector<int64_t>{v});
           n->add_input(name);
         }
       }},
      {"Resize",
       [](GraphProto* g, NodeProto* n) {
         add_attr(n, "mode", AttributeProto::STRING)->set_s("nearest");
         set_raw(add_initializer(g, "s", TensorProto::FLOAT, {4}), std::vector<float>(4, 1.f));
         n->add_input("");
         n->add_input("s");
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    ModelProto m = make_model();
    add_input(m.mutable_graph(), "x", {0, big, big, big});
    c.build(m.mutable_graph(), add_node(m.mutable_graph(), c.op, {"x"}, {"y"}, "hostile"));
    add_output(m.mutable_graph(), "y");
    expect_error(import_model(m).status(), StatusCode::kOutOfRange,
                 {"'x'", "[0, 2147483648, 2147483648, 2147483648]", "exceeds the limit"});
  }
}

// pad_index_map_bomb4.onnx: pads of 2^31 - 2 on every dimension of a [1, 1, 1, 1] input. Shape
// inference used to build a 16 GiB index map for the first dimension before the element limit
// refused the output; now the limit is checked first and no map is built.
TEST(OnnxImport, PadBeyondTheElementLimitIsRefusedBeforeAnyMap) {
  ModelProto m = make_model();
  add_input(m.mutable_graph(), "x", {1, 1, 1, 1});
  std::vector<int64_t> pads(8, 0);
  for (size_t i = 4; i < 8; ++i) pads[i] = (int64_t{1} << 31) - 2;
  set_raw(add_initializer(m.mutable_graph(), "p", TensorProto::INT64, {8}), pads);
  add_node(m.mutable_graph(), "Pad", {"x", "p"}, {"y"}, "pad_bomb4");
  add_output(m.mutable_graph(), "y");
  Result<ImportedModel> imported = import_model(m);
  ASSERT_TRUE(imported.ok()) << imported.status().to_string();
  expect_error(infer_onnx_shapes(*imported), StatusCode::kInvalidArgument,
               {"pad_bomb4", "element count", "exceeds the limit"});
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Upsample (opsets 7-9) imports as Resize with asymmetric coordinates and floor rounding: scales
// from the attribute (opset 7) or from input 1 (opset 9), nearest and linear.
TEST(OnnxImport, UpsampleBecomesResizeMatchingItsFormula) {
  const Tensor x = testing::random_tensor(Shape{1, 2, 3, 5}, 3);
  for (bool scales_as_input : {false, true}) {
    for (const char* mode : {"nearest", "linear"}) {
      SCOPED_TRACE(std::string(mode) + (scales_as_input ? " (input)" : " (attribute)"));
      ModelProto m = make_model(11);
      GraphProto* g = m.mutable_graph();
      add_input(g, "x", {1, 2, 3, 5});
      const std::vector<float> scales = {1.f, 1.f, 2.f, 3.f};
      NodeProto* n;
      if (scales_as_input) {
        add_float_initializer(g, "scales", {4}, scales);
        n = add_node(g, "Upsample", {"x", "scales"}, {"y"}, "up");
      } else {
        n = add_node(g, "Upsample", {"x"}, {"y"}, "up");
        AttributeProto* a = add_attr(n, "scales", AttributeProto::FLOATS);
        for (float s : scales) a->add_floats(s);
      }
      AttributeProto* md = add_attr(n, "mode", AttributeProto::STRING);
      md->set_s(mode);
      add_output(g, "y");
      auto r = import_model(m);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      ImportedModel model = std::move(r).value();
      ASSERT_TRUE(infer_onnx_shapes(model).ok());
      ASSERT_EQ(node_named(model.graph, "up")->kind, OpKind::kResize);
      auto out = run_graph(model.graph, {x});
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      const Tensor& y = (*out)[0];
      ASSERT_EQ(y.shape(), (Shape{1, 2, 6, 15}));
      for (int64_t i = 0; i < y.numel(); ++i) {
        const int64_t ox = i % 15, oy = (i / 15) % 6, c = i / 90;
        const float* xc = x.data<float>() + c * 15;
        float want;
        if (std::string(mode) == "nearest") {
          want = xc[(oy / 2) * 5 + ox / 3];  // floor(o / scale)
        } else {
          // Asymmetric: in = o / scale, clamped to the last index; bilinear.
          const float fy = std::min(oy / 2.f, 2.f), fx = std::min(ox / 3.f, 4.f);
          const int y0 = static_cast<int>(fy), x0 = static_cast<int>(fx);
          const int y1 = std::min(y0 + 1, 2), x1 = std::min(x0 + 1, 4);
          const float wy = fy - y0, wx = fx - x0;
          want = (1 - wy) * ((1 - wx) * xc[y0 * 5 + x0] + wx * xc[y0 * 5 + x1]) +
                 wy * ((1 - wx) * xc[y1 * 5 + x0] + wx * xc[y1 * 5 + x1]);
        }
        ASSERT_NEAR(y.data<float>()[i], want, 1e-6) << "at " << i;
      }
    }
  }
  // Other modes are refused naming the node.
  ModelProto m = make_model(11);
  GraphProto* g = m.mutable_graph();
  add_input(g, "x", {1, 1, 2, 2});
  NodeProto* n = add_node(g, "Upsample", {"x"}, {"y"}, "up");
  add_attr(n, "mode", AttributeProto::STRING)->set_s("cubic");
  add_attr(n, "scales", AttributeProto::FLOATS)->add_floats(1.f);
  add_output(g, "y");
  expect_error(import_model(m).status(), StatusCode::kUnimplemented,
               {"node 'up' (Upsample)", "mode 'cubic'"});
}

// A QDQ weight (DequantizeLinear of an i8 constant) folds into an f32 constant at import, and the
// activation's QuantizeLinear -> DequantizeLinear pair stays, rounding to the u8 grid.
TEST(OnnxImport, QdqWeightsFoldAndActivationPairsRound) {
  ModelProto m = make_model(13);
  GraphProto* g = m.mutable_graph();
  add_input(g, "x", {1, 4});
  add_float_initializer(g, "xs", {}, {0.1f});
  set_raw(add_initializer(g, "xz", TensorProto::UINT8, {}), std::vector<uint8_t>{128});
  set_raw(add_initializer(g, "wq", TensorProto::INT8, {4, 3}),
          std::vector<int8_t>{1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12});
  add_float_initializer(g, "ws", {3}, {0.5f, 0.25f, 0.125f});
  set_raw(add_initializer(g, "wz", TensorProto::INT8, {3}), std::vector<int8_t>{0, 0, 0});
  add_node(g, "QuantizeLinear", {"x", "xs", "xz"}, {"xq"}, "q");
  add_node(g, "DequantizeLinear", {"xq", "xs", "xz"}, {"xd"}, "dq");
  set_int(add_node(g, "DequantizeLinear", {"wq", "ws", "wz"}, {"w"}, "wdq"), "axis", 1);
  add_node(g, "MatMul", {"xd", "w"}, {"y"}, "mm");
  add_output(g, "y");
  auto r = import_model(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ImportedModel model = std::move(r).value();
  ASSERT_TRUE(infer_onnx_shapes(model).ok());
  EXPECT_EQ(node_named(model.graph, "wdq"), nullptr);  // folded
  ASSERT_NE(node_named(model.graph, "q"), nullptr);
  const Value& w = value_named(model.graph, "w");
  ASSERT_TRUE(w.is_constant);
  EXPECT_FLOAT_EQ(w.data.data<float>()[4], 5 * 0.25f);
  const Tensor x = Tensor::from_floats(Shape{1, 4}, std::vector<float>{0.04f, 0.06f, -0.25f, 99.f});
  auto out = run_graph(model.graph, {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  // x on the grid: 0.04 -> 0.0 (0.4 rounds to 0), 0.06 -> 0.1, -0.25 -> -0.2 (tie to even),
  // 99 -> 12.7 (saturated at 255).
  const float xg[] = {0.f, 0.1f, -0.2f, 12.7f};
  const int8_t wv[] = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12};
  const float ws[] = {0.5f, 0.25f, 0.125f};
  for (int j = 0; j < 3; ++j) {
    double want = 0;
    for (int k = 0; k < 4; ++k) want += static_cast<double>(xg[k]) * wv[k * 3 + j] * ws[j];
    EXPECT_NEAR((*out)[0].data<float>()[j], want, 1e-5) << j;
  }
}

}  // namespace
}  // namespace tessera
