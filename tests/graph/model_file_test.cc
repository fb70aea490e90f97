// Tests of the .tsr model file: round trips (structure, attributes, constant bytes, alignment of
// mapped constants) and hostile input (truncation, bit flips, and files crafted with the
// FlatBuffers builder to break one rule each).
#include "graph/format/model_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "graph/format/schema_types.h"

namespace tessera {
namespace {

// ---- Sample graph and comparison -------------------------------------------------------------

Tensor filled(DType dtype, const Shape& shape, uint32_t seed, Layout layout = Layout::kNCHW) {
  Tensor t = Tensor::create(dtype, shape, layout).value();
  std::mt19937 rng(seed);
  auto* p = static_cast<uint8_t*>(t.raw());
  for (size_t i = 0; i < t.byte_size(); ++i) p[i] = static_cast<uint8_t>(rng());
  if (dtype == DType::kBool) {
    for (size_t i = 0; i < t.byte_size(); ++i) p[i] &= 1;
  }
  return t;
}

// A small graph with constants of every dtype (a scalar, an empty tensor, an NHWC tensor), an
// omitted optional input, a value without a known type, and every attribute kind.
Graph sample_graph() {
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 3, 5, 5}});
  g.inputs().push_back(x);
  const ValueId w = g.add_constant("conv.w", filled(DType::kF32, Shape{4, 3, 3, 3}, 1));
  const ValueId b = g.add_constant("conv.b", filled(DType::kF16, Shape{4}, 2));
  const ValueId conv = g.add_value("conv.out");  // type unknown until shape inference
  const ValueId lo = g.add_constant("clip.min", filled(DType::kF32, Shape{}, 3));
  const ValueId clipped = g.add_value("clipped", TensorInfo{DType::kF32, Shape{1, 4, 5, 5}});
  const ValueId shape =
      g.add_constant("shape", Tensor::from_int64s(Shape{2}, std::vector<int64_t>{1, -1}));
  const ValueId flat = g.add_value("flat");
  g.add_constant("q", filled(DType::kI8, Shape{7}, 4));
  g.add_constant("u", filled(DType::kU8, Shape{3, 3}, 5, Layout::kNHWC));
  g.add_constant("idx", filled(DType::kI32, Shape{2, 2}, 6));
  g.add_constant("mask", filled(DType::kBool, Shape{5}, 7));
  g.add_constant("empty", filled(DType::kF32, Shape{0, 3}, 8));
  g.outputs().push_back(flat);

  Node c;
  c.name = "conv";
  c.kind = OpKind::kConv;
  c.inputs = {x, w, b};
  c.outputs = {conv};
  c.attrs.set("group", int64_t{1});
  c.attrs.set("alpha", 0.25f);
  c.attrs.set("auto_pad", std::string("NOTSET"));
  c.attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  c.attrs.set("dilations", std::vector<int64_t>{});
  c.attrs.set("scales", std::vector<float>{1.5f, -2.f, NAN});
  c.attrs.set("value", filled(DType::kI64, Shape{3}, 9));
  c.attrs.set("table", filled(DType::kF16, Shape{2, 5}, 10));
  g.add_node(c);

  Node clip;
  clip.name = "clip";
  clip.kind = OpKind::kClip;
  clip.inputs = {conv, lo, kNoValue};  // omitted max
  clip.outputs = {clipped};
  g.add_node(clip);

  Node r;
  r.name = "reshape";
  r.kind = OpKind::kReshape;
  r.inputs = {clipped, shape};
  r.outputs = {flat};
  r.attrs.set("allowzero", int64_t{0});
  g.add_node(r);
  return g;
}

ModelMetadata sample_metadata() {
  ModelMetadata m;
  m.producer = "tessera test";
  m.properties = {{"source", "sample.onnx"}, {"onnx_opset", "13"}, {"empty", ""}};
  return m;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape() || a.layout() != b.layout()) return false;
  return a.byte_size() == 0 || std::memcmp(a.raw(), b.raw(), a.byte_size()) == 0;
}

bool same_attribute(const AttributeValue& a, const AttributeValue& b) {
  if (a.index() != b.index()) return false;
  if (const auto* t = std::get_if<Tensor>(&a)) return same_bytes(*t, std::get<Tensor>(b));
  if (const auto* f = std::get_if<float>(&a)) {  // bitwise, so NaN compares equal
    const float g = std::get<float>(b);
    return std::memcmp(f, &g, sizeof(float)) == 0;
  }
  if (const auto* f = std::get_if<std::vector<float>>(&a)) {
    const auto& g = std::get<std::vector<float>>(b);
    return f->size() == g.size() &&
           (f->empty() || std::memcmp(f->data(), g.data(), f->size() * sizeof(float)) == 0);
  }
  if (const auto* i = std::get_if<int64_t>(&a)) return *i == std::get<int64_t>(b);
  if (const auto* s = std::get_if<std::string>(&a)) return *s == std::get<std::string>(b);
  return std::get<std::vector<int64_t>>(a) == std::get<std::vector<int64_t>>(b);
}

void expect_same_graph(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.num_values(), b.num_values());
  for (int i = 0; i < a.num_values(); ++i) {
    const Value& x = a.value(i);
    const Value& y = b.value(i);
    SCOPED_TRACE("value " + std::to_string(i) + " " + x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.has_info, y.has_info);
    if (x.has_info) {
      EXPECT_EQ(x.info, y.info);
    }
    EXPECT_EQ(x.is_constant, y.is_constant);
    EXPECT_EQ(x.producer, y.producer);
    if (x.is_constant) {
      EXPECT_TRUE(same_bytes(x.data, y.data));
    }
  }
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  for (int i = 0; i < a.num_nodes(); ++i) {
    const Node& x = a.node(i);
    const Node& y = b.node(i);
    SCOPED_TRACE("node " + std::to_string(i) + " " + x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.inputs, y.inputs);
    EXPECT_EQ(x.outputs, y.outputs);
    ASSERT_EQ(x.attrs.all().size(), y.attrs.all().size());
    for (const auto& [name, v] : x.attrs.all()) {
      ASSERT_TRUE(y.attrs.has(name)) << name;
      EXPECT_TRUE(same_attribute(v, y.attrs.all().at(name))) << name;
    }
  }
  EXPECT_EQ(a.inputs(), b.inputs());
  EXPECT_EQ(a.outputs(), b.outputs());
}

// Every constant of `g`, tensor attributes included.
std::vector<Tensor> all_payloads(const Graph& g) {
  std::vector<Tensor> out;
  for (const Value& v : g.values()) {
    if (v.is_constant) out.push_back(v.data);
  }
  for (const Node& n : g.nodes()) {
    for (const auto& [name, a] : n.attrs.all()) {
      if (const auto* t = std::get_if<Tensor>(&a)) out.push_back(*t);
    }
  }
  return out;
}

// Reads every byte of every payload plus the kTensorPadding bytes after it, so ASan flags a
// payload that is not fully inside the loaded bytes.
uint64_t touch_payloads(const Graph& g) {
  uint64_t sum = 0;
  for (const Tensor& t : all_payloads(g)) {
    const auto* p = static_cast<const uint8_t*>(t.raw());
    if (p == nullptr) continue;
    for (size_t i = 0; i < t.byte_size() + kTensorPadding; ++i) sum += p[i];
  }
  return sum;
}

std::vector<uint8_t> sample_bytes() {
  return serialize_model(sample_graph(), sample_metadata()).value();
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "tessera_model_file_test_" + std::to_string(::getpid()) + "_" +
         name;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

uint32_t read_u32(const std::vector<uint8_t>& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}

// ---- Round trips -----------------------------------------------------------------------------

TEST(ModelFile, RoundTripInMemory) {
  const Graph g = sample_graph();
  const std::vector<uint8_t> bytes = serialize_model(g, sample_metadata()).value();
  auto loaded = load_model_file_from_memory(bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_same_graph(g, loaded->graph);
  EXPECT_EQ(loaded->metadata, sample_metadata());
  EXPECT_EQ(loaded->format_major, kFormatMajor);
  EXPECT_EQ(loaded->format_minor, kFormatMinor);
  EXPECT_FALSE(loaded->memory_mapped);
  for (const Tensor& t : all_payloads(loaded->graph)) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u) << t.describe();
  }
  touch_payloads(loaded->graph);
  // Loading again gives the same bytes: the writer is deterministic.
  EXPECT_EQ(serialize_model(loaded->graph, loaded->metadata).value(), bytes);
}

TEST(ModelFile, FileLayoutMatchesTheDocumentation) {
  const Graph g = sample_graph();
  const std::vector<uint8_t> bytes = serialize_model(g, {}).value();
  const uint64_t header = uint64_t{read_u32(bytes, 0)} + 4;
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data()) + 8, 4), "TSR1");
  const uint64_t weights_start = align_up(header, 64);
  const auto* model = fb::GetSizePrefixedModel(bytes.data());
  EXPECT_EQ(weights_start + model->weights_size(), bytes.size());
  for (uint64_t i = header; i < weights_start; ++i) EXPECT_EQ(bytes[i], 0) << "padding at " << i;
  // Each constant's bytes sit at its 64-aligned offset, and the file ends in kTensorPadding zeros.
  uint64_t last_end = 0;
  for (const fb::Value* v : *model->graph()->values()) {
    if (!v->constant()) continue;
    const Tensor& t = g.value(g.find_value(v->name()->str()).value()).data;
    EXPECT_EQ(v->data()->offset() % 64, 0u);
    ASSERT_EQ(v->data()->size(), t.byte_size());
    if (t.byte_size() > 0) {
      EXPECT_EQ(
          std::memcmp(bytes.data() + weights_start + v->data()->offset(), t.raw(), t.byte_size()),
          0);
    }
    last_end = std::max<uint64_t>(last_end, v->data()->offset() + v->data()->size());
  }
  EXPECT_GE(model->weights_size(), last_end + kTensorPadding);
  for (size_t i = bytes.size() - kTensorPadding; i < bytes.size(); ++i) EXPECT_EQ(bytes[i], 0);
}

TEST(ModelFile, RoundTripThroughAMappedFile) {
  const std::string path = temp_path("mapped.tsr");
  const Graph g = sample_graph();
  ASSERT_TRUE(save_model(g, path, sample_metadata()).ok());
  Tensor kept;
  {
    auto loaded = load_model_file(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    EXPECT_TRUE(loaded->memory_mapped);
    expect_same_graph(g, loaded->graph);
    EXPECT_EQ(loaded->metadata, sample_metadata());
    for (const Tensor& t : all_payloads(loaded->graph)) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u) << t.describe();
    }
    touch_payloads(loaded->graph);
    kept = loaded->graph.value(loaded->graph.find_value("conv.w").value()).data;
  }
  // The tensor keeps the mapping alive after the graph is gone; the file can even be removed.
  ASSERT_EQ(::unlink(path.c_str()), 0);
  EXPECT_TRUE(same_bytes(kept, g.value(g.find_value("conv.w").value()).data));
  // Constants are copy-on-write: writing one changes neither the file nor other loads.
  kept.data<float>()[0] = 42.f;
  EXPECT_EQ(kept.data<float>()[0], 42.f);
}

TEST(ModelFile, RoundTripThroughAReadFile) {
  const std::string path = temp_path("read.tsr");
  const Graph g = sample_graph();
  ASSERT_TRUE(save_model(g, path, sample_metadata()).ok());
  auto loaded = load_model_file(path, LoadOptions{.use_mmap = false});
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_FALSE(loaded->memory_mapped);
  expect_same_graph(g, loaded->graph);
  for (const Tensor& t : all_payloads(loaded->graph)) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u) << t.describe();
  }
  touch_payloads(loaded->graph);
  auto graph_only = load_model(path);
  ASSERT_TRUE(graph_only.ok());
  expect_same_graph(g, *graph_only);
  ::unlink(path.c_str());
}

TEST(ModelFile, SaveReplacesAtomicallyAndLeavesNoTemporaryFile) {
  const std::string dir = temp_path("dir");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  const std::string path = dir + "/m.tsr";
  write_file(path, {1, 2, 3});
  ASSERT_TRUE(save_model(sample_graph(), path, {}).ok());
  ASSERT_TRUE(load_model(path).ok());
  // The temporary file was renamed, not left behind.
  struct stat st;
  EXPECT_NE(::stat((path + ".tmp." + std::to_string(::getpid())).c_str(), &st), 0);
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
}

TEST(ModelFile, EmptyGraphRoundTrips) {
  Graph g;
  auto loaded = load_model_file_from_memory(serialize_model(g, {}).value());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->graph.num_values(), 0);
  EXPECT_EQ(loaded->metadata, ModelMetadata{});
}

TEST(ModelFile, SaveRejectsWhatTheLoaderWouldReject) {
  Graph cyclic;
  const ValueId a = cyclic.add_value("a");
  const ValueId b = cyclic.add_value("b");
  cyclic.add_node(Node{"n1", OpKind::kRelu, {}, {a}, {b}});
  cyclic.add_node(Node{"n2", OpKind::kRelu, {}, {b}, {a}});
  auto s = serialize_model(cyclic, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("cycle"), std::string::npos) << s.status().to_string();

  Graph undefined;
  undefined.add_constant("w", Tensor());
  s = serialize_model(undefined, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("value 0 'w'"), std::string::npos);

  Graph mismatched;
  const ValueId w = mismatched.add_constant("w", filled(DType::kF32, Shape{2}, 1));
  mismatched.value(w).info.shape = Shape{3};
  s = serialize_model(mismatched, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("does not match"), std::string::npos);

  Graph bad_attr;
  bad_attr.add_node(Node{"n", OpKind::kConstant, {}, {}, {}});
  bad_attr.node(0).attrs.set("value", Tensor());
  s = serialize_model(bad_attr, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("node 0 'n' attribute 'value'"), std::string::npos)
      << s.status().to_string();

  EXPECT_EQ(save_model(sample_graph(), temp_path("no/such/dir/m.tsr"), {}).code(),
            StatusCode::kIoError);
}

TEST(ModelFile, MissingEmptyAndNonRegularFiles) {
  auto missing = load_model(temp_path("does_not_exist.tsr"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  const std::string empty = temp_path("empty.tsr");
  write_file(empty, {});
  auto e = load_model(empty);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("empty"), std::string::npos);
  EXPECT_NE(e.status().message().find(empty), std::string::npos) << "names the file";
  ::unlink(empty.c_str());

  EXPECT_FALSE(load_model(::testing::TempDir()).ok());
  EXPECT_FALSE(load_model_from_memory({}).ok());
}

// ---- Damaged files ---------------------------------------------------------------------------

TEST(ModelFile, EveryTruncationFails) {
  const std::vector<uint8_t> bytes = sample_bytes();
  ASSERT_TRUE(load_model_from_memory(bytes).ok());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = load_model_from_memory(std::span<const uint8_t>(bytes.data(), n));
    ASSERT_FALSE(r.ok()) << "a prefix of " << n << " of " << bytes.size() << " bytes loaded";
  }
}

TEST(ModelFile, RandomCorruptionNeverCrashes) {
  const std::vector<uint8_t> bytes = sample_bytes();
  const size_t header = read_u32(bytes, 0) + 4;
  std::mt19937 rng(20240611);
  int failed = 0, loaded = 0;
  for (int trial = 0; trial < 600; ++trial) {
    std::vector<uint8_t> b = bytes;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      // Most edits hit the header, where the structure is; some hit anywhere.
      const size_t at = (rng() % 4 != 0) ? rng() % header : rng() % b.size();
      if (rng() % 2) {
        b[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
      } else {
        b[at] = static_cast<uint8_t>(rng());
      }
    }
    auto r = load_model_file_from_memory(b);
    if (!r.ok()) {
      ++failed;
      EXPECT_FALSE(r.status().message().empty());
      continue;
    }
    ++loaded;
    EXPECT_TRUE(r->graph.validate().ok());
    touch_payloads(r->graph);
  }
  // Both outcomes occur, so the test exercises the validator and the graph builder.
  EXPECT_GT(failed, 100);
  EXPECT_GT(loaded, 10);
}

// ---- Crafted files ---------------------------------------------------------------------------
// A model built field by field with the FlatBuffers builder, so that each test breaks one rule.
// The default is valid: graph input x f32[2, 3], constant w f32[2, 3], y = Add(x, w), output y.

struct ValueSpec {
  std::optional<std::string> name;
  bool has_info = false;
  int dtype = 0;
  std::vector<int64_t> shape;
  bool constant = false;
  int layout = 0;
  bool has_data = false;
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct AttrSpec {
  std::optional<std::string> name;
  int type = 0;  // fb::AttributeValue
  bool null_value = false;
  int64_t i = 0;
  std::vector<int64_t> ints;
  std::optional<std::string> s;
  int t_dtype = 0;
  std::vector<int64_t> t_shape;
  bool t_has_data = true;
  uint64_t t_offset = 0;
  uint64_t t_size = 0;
};

struct NodeSpec {
  std::optional<std::string> name;
  std::optional<std::string> op;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::vector<AttrSpec> attrs;
};

struct Craft {
  std::string identifier = "TSR1";
  uint16_t major = kFormatMajor;
  uint16_t minor = kFormatMinor;
  bool has_graph = true;
  std::vector<ValueSpec> values = {
      {"x", true, 0, {2, 3}},
      {"w", true, 0, {2, 3}, true, 0, true, 0, 24},
      {"y"},
  };
  std::vector<NodeSpec> nodes = {{"add", "Add", {0, 1}, {2}, {}}};
  int repeat_first_node = 1;  // how many times the nodes vector points at node 0's table
  std::vector<int32_t> inputs = {0};
  std::vector<int32_t> outputs = {2};
  std::vector<std::pair<std::optional<std::string>, std::optional<std::string>>> metadata;
  uint64_t weights_size = 128;
  std::optional<uint64_t> weights_bytes;  // bytes actually in the file; default weights_size
};

std::vector<uint8_t> craft(const Craft& c) {
  flatbuffers::FlatBufferBuilder fbb;
  auto opt_string = [&](const std::optional<std::string>& s) {
    return s ? fbb.CreateString(*s) : flatbuffers::Offset<flatbuffers::String>();
  };
  std::vector<flatbuffers::Offset<fb::Value>> values;
  for (const ValueSpec& v : c.values) {
    const auto name = opt_string(v.name);
    const auto shape = fbb.CreateVector(v.shape);
    const fb::TensorRef ref(v.offset, v.size);
    fb::ValueBuilder b(fbb);
    b.add_name(name);
    b.add_has_info(v.has_info);
    b.add_dtype(static_cast<fb::DataType>(v.dtype));
    b.add_shape(shape);
    b.add_constant(v.constant);
    b.add_layout(static_cast<fb::TensorLayout>(v.layout));
    if (v.has_data) b.add_data(&ref);
    values.push_back(b.Finish());
  }
  std::vector<flatbuffers::Offset<fb::Node>> nodes;
  for (const NodeSpec& n : c.nodes) {
    std::vector<flatbuffers::Offset<fb::Attribute>> attrs;
    for (const AttrSpec& a : n.attrs) {
      flatbuffers::Offset<void> value;
      switch (static_cast<fb::AttributeValue>(a.type)) {
        case fb::AttributeValue::IntAttr:
          value = fb::CreateIntAttr(fbb, a.i).Union();
          break;
        case fb::AttributeValue::IntsAttr:
          value = fb::CreateIntsAttr(fbb, fbb.CreateVector(a.ints)).Union();
          break;
        case fb::AttributeValue::StringAttr:
          value = fb::CreateStringAttr(fbb, opt_string(a.s)).Union();
          break;
        case fb::AttributeValue::TensorAttr: {
          const fb::TensorRef ref(a.t_offset, a.t_size);
          value = fb::CreateTensorAttr(fbb, static_cast<fb::DataType>(a.t_dtype),
                                       fbb.CreateVector(a.t_shape), fb::TensorLayout::NCHW,
                                       a.t_has_data ? &ref : nullptr)
                      .Union();
          break;
        }
        default:
          value = fb::CreateIntAttr(fbb, a.i).Union();
          break;
      }
      if (a.null_value) value = flatbuffers::Offset<void>();
      attrs.push_back(fb::CreateAttribute(fbb, opt_string(a.name),
                                          static_cast<fb::AttributeValue>(a.type), value));
    }
    nodes.push_back(fb::CreateNode(fbb, opt_string(n.name), opt_string(n.op),
                                   fbb.CreateVector(n.inputs), fbb.CreateVector(n.outputs),
                                   fbb.CreateVector(attrs)));
  }
  for (int r = 1; r < c.repeat_first_node; ++r) nodes.push_back(nodes[0]);
  flatbuffers::Offset<fb::Graph> graph;
  if (c.has_graph) {
    graph = fb::CreateGraph(fbb, fbb.CreateVector(values), fbb.CreateVector(nodes),
                            fbb.CreateVector(c.inputs), fbb.CreateVector(c.outputs));
  }
  std::vector<flatbuffers::Offset<fb::MetadataEntry>> entries;
  for (const auto& [k, v] : c.metadata) {
    entries.push_back(fb::CreateMetadataEntry(fbb, opt_string(k), opt_string(v)));
  }
  const auto entries_vec = fbb.CreateVector(entries);
  const auto producer = fbb.CreateString("craft");
  fb::ModelBuilder mb(fbb);
  mb.add_format_major(c.major);
  mb.add_format_minor(c.minor);
  mb.add_producer(producer);
  mb.add_metadata(entries_vec);
  if (c.has_graph) mb.add_graph(graph);
  mb.add_weights_size(c.weights_size);
  fbb.FinishSizePrefixed(mb.Finish(), c.identifier.c_str());

  std::vector<uint8_t> out(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  out.resize(align_up(out.size(), 64), 0);
  const uint64_t n = c.weights_bytes.value_or(c.weights_size);
  for (uint64_t i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(i * 7 + 1));
  return out;
}

// Loads `c` and expects failure with `code` and every piece of `wanted` in the message.
void expect_rejected(const Craft& c, StatusCode code, std::vector<std::string> wanted) {
  auto r = load_model_file_from_memory(craft(c));
  ASSERT_FALSE(r.ok()) << "loaded a bad model";
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  for (const std::string& w : wanted) {
    EXPECT_NE(r.status().message().find(w), std::string::npos)
        << "message lacks '" << w << "': " << r.status().to_string();
  }
}

TEST(ModelFileCrafted, DefaultIsValid) {
  auto r = load_model_file_from_memory(craft(Craft{}));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Graph& g = r->graph;
  ASSERT_EQ(g.num_values(), 3);
  EXPECT_TRUE(g.value(1).is_constant);
  const auto* w = static_cast<const uint8_t*>(g.value(1).data.raw());
  for (int i = 0; i < 24; ++i) EXPECT_EQ(w[i], static_cast<uint8_t>(i * 7 + 1));
  EXPECT_FALSE(g.value(2).has_info);
  EXPECT_EQ(g.node(0).kind, OpKind::kAdd);
  EXPECT_EQ(r->metadata.producer, "craft");
}

TEST(ModelFileCrafted, WrongIdentifier) {
  Craft c;
  c.identifier = "ONNX";
  expect_rejected(c, StatusCode::kInvalidArgument, {"not a Tessera model", "'ONNX'", "'TSR1'"});
  // Another kind of file is named as such, not as a truncated model.
  const std::string text =
      "\x08\x07\x12\x07pytorch\x1a\x03"
      "2.1:\xd2\x01 some protobuf bytes";
  auto r = load_model_from_memory(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a Tessera model file: the identifier at offset 8 is "
                                      "'rch\\x1a', expected 'TSR1'"),
            std::string::npos)
      << r.status().to_string();
}

TEST(ModelFileCrafted, FutureMajorVersion) {
  Craft c;
  c.major = 2;
  c.minor = 3;
  expect_rejected(c, StatusCode::kUnimplemented,
                  {"the file has format version 2.3, this Tessera reads 1.x"});
}

TEST(ModelFileCrafted, NewerMinorVersionLoads) {
  Craft c;
  c.minor = 7;
  auto r = load_model_file_from_memory(craft(c));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->format_minor, 7);
}

TEST(ModelFileCrafted, TooSmallAndSizePrefixBeyondTheFile) {
  std::vector<uint8_t> tiny = {4, 0, 0, 0, 'T', 'S', 'R', '1'};
  auto r = load_model_from_memory(tiny);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too small"), std::string::npos) << r.status().to_string();

  std::vector<uint8_t> b = craft(Craft{});
  const uint32_t huge = 0x7ffffff0u;
  std::memcpy(b.data(), &huge, 4);
  r = load_model_from_memory(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("size prefix"), std::string::npos) << r.status().to_string();

  const uint32_t small = 8;
  std::memcpy(b.data(), &small, 4);
  EXPECT_FALSE(load_model_from_memory(b).ok());
}

TEST(ModelFileCrafted, WeightsSectionBeyondTheFile) {
  Craft c;
  c.weights_size = uint64_t{1} << 40;
  c.weights_bytes = 128;
  expect_rejected(c, StatusCode::kInvalidArgument, {"weights section", "truncated"});
  c.weights_size = ~uint64_t{0};
  expect_rejected(c, StatusCode::kInvalidArgument, {"weights section"});
}

TEST(ModelFileCrafted, AbsurdDimensions) {
  Craft c;
  c.values[1].shape = {int64_t{1} << 40, 1};
  expect_rejected(c, StatusCode::kOutOfRange, {"value 1 'w'", "field 'shape'", "exceeds"});

  c = Craft{};
  c.values[1].shape = std::vector<int64_t>(100, 1);
  expect_rejected(c, StatusCode::kOutOfRange, {"value 1 'w'", "rank 100"});

  c = Craft{};
  c.values[0].shape = {2, -3};
  expect_rejected(c, StatusCode::kInvalidArgument, {"value 0 'x'", "negative"});

  // Each dimension within limits, their product not.
  c = Craft{};
  c.values[1].shape = {int64_t{1} << 31, int64_t{1} << 31, int64_t{1} << 31};
  expect_rejected(c, StatusCode::kOutOfRange, {"value 1 'w'", "element count"});
}

TEST(ModelFileCrafted, InvalidDTypeAndLayout) {
  Craft c;
  c.values[1].dtype = 9;
  expect_rejected(c, StatusCode::kInvalidArgument, {"value 1 'w'", "field 'dtype' holds 9"});
  c = Craft{};
  c.values[1].layout = 5;
  expect_rejected(c, StatusCode::kInvalidArgument, {"value 1 'w'", "field 'layout' holds 5"});
}

TEST(ModelFileCrafted, PayloadSizeMismatch) {
  Craft c;
  c.values[1].size = 20;
  expect_rejected(c, StatusCode::kInvalidArgument,
                  {"value 1 'w'", "holds 20 bytes", "f32[2, 3] needs 24"});
  c.values[1].size = 48;
  expect_rejected(c, StatusCode::kInvalidArgument, {"holds 48 bytes"});
}

TEST(ModelFileCrafted, PayloadMisalignedOrOutOfRange) {
  Craft c;
  c.values[1].offset = 8;
  expect_rejected(c, StatusCode::kInvalidArgument, {"value 1 'w'", "offset 8", "multiple of 64"});

  c = Craft{};
  c.values[1].offset = 128;  // the section is 128 bytes
  expect_rejected(c, StatusCode::kOutOfRange, {"value 1 'w'", "outside the weights section"});

  c = Craft{};
  c.values[1].offset = ~uint64_t{63};  // aligned, but offset + size wraps around
  expect_rejected(c, StatusCode::kOutOfRange, {"value 1 'w'", "outside the weights section"});
}

TEST(ModelFileCrafted, ConstantFlagsAndData) {
  Craft c;
  c.values[1].has_data = false;
  expect_rejected(c, StatusCode::kInvalidArgument, {"value 1 'w'", "field 'data' is missing"});

  c = Craft{};
  c.values[1].has_info = false;
  expect_rejected(c, StatusCode::kInvalidArgument, {"value 1 'w'", "has_info"});

  c = Craft{};
  c.values[0].has_data = true;
  expect_rejected(c, StatusCode::kInvalidArgument, {"value 0 'x'", "not constant"});

  c = Craft{};
  c.values[2].name.reset();
  expect_rejected(c, StatusCode::kInvalidArgument, {"value 2 (unnamed)", "field 'name'"});
}

TEST(ModelFileCrafted, IndicesOutOfRange) {
  Craft c;
  c.nodes[0].inputs = {0, 3};
  expect_rejected(c, StatusCode::kOutOfRange, {"node 0 'add'", "input 1 is value 3"});
  c.nodes[0].inputs = {0, -2};
  expect_rejected(c, StatusCode::kOutOfRange, {"node 0 'add'", "input 1 is value -2"});
  c = Craft{};
  c.nodes[0].outputs = {-1};
  expect_rejected(c, StatusCode::kOutOfRange, {"node 0 'add'", "output 0 is value -1"});
  c = Craft{};
  c.outputs = {7};
  expect_rejected(c, StatusCode::kOutOfRange, {"graph output 0 is value 7"});
  c = Craft{};
  c.inputs = {INT32_MIN};
  expect_rejected(c, StatusCode::kOutOfRange, {"graph input 0"});
  // An omitted optional input is fine.
  c = Craft{};
  c.nodes[0].inputs = {0, 1, -1};
  EXPECT_TRUE(load_model_from_memory(craft(c)).ok());
}

TEST(ModelFileCrafted, UnknownOperatorsAreListed) {
  Craft c;
  c.values.push_back({"z"});
  c.nodes[0].op = "FancyOp";
  c.nodes.push_back({"second", "OtherOp", {2}, {3}, {}});
  expect_rejected(c, StatusCode::kUnimplemented,
                  {"FancyOp (node 0 'add')", "OtherOp (node 1 'second')"});
  c = Craft{};
  c.nodes[0].op.reset();
  expect_rejected(c, StatusCode::kInvalidArgument, {"node 0 'add'", "field 'op_type'"});
  c = Craft{};
  c.nodes[0].name.reset();
  expect_rejected(c, StatusCode::kInvalidArgument, {"node 0 (unnamed)", "field 'name'"});
}

TEST(ModelFileCrafted, MalformedAttributes) {
  const int kInt = static_cast<int>(fb::AttributeValue::IntAttr);
  const int kString = static_cast<int>(fb::AttributeValue::StringAttr);
  const int kTensor = static_cast<int>(fb::AttributeValue::TensorAttr);
  Craft c;
  c.nodes[0].attrs = {AttrSpec{"a", kInt, false, 3}, AttrSpec{"a", kInt, false, 4}};
  expect_rejected(c, StatusCode::kInvalidArgument,
                  {"node 0 'add' attribute 'a'", "more than once"});

  c.nodes[0].attrs = {AttrSpec{std::nullopt, kInt}};
  expect_rejected(c, StatusCode::kInvalidArgument, {"node 0 'add'", "attribute 0", "'name'"});

  c.nodes[0].attrs = {AttrSpec{"mode", kString}};  // no string
  expect_rejected(c, StatusCode::kInvalidArgument, {"attribute 'mode'", "string value"});

  c.nodes[0].attrs = {AttrSpec{"k", kInt, true}};  // type set, value table missing
  expect_rejected(c, StatusCode::kInvalidArgument, {"attribute 'k'", "missing"});

  c.nodes[0].attrs = {AttrSpec{"k", 0}};  // NONE
  expect_rejected(c, StatusCode::kInvalidArgument, {"attribute 'k'", "not an attribute kind"});

  c.nodes[0].attrs = {AttrSpec{"k", 42}};  // a kind from the future
  expect_rejected(c, StatusCode::kInvalidArgument, {"attribute 'k'", "holds 42"});

  AttrSpec t{"value", kTensor};
  t.t_dtype = 5;  // i64
  t.t_shape = {3};
  t.t_offset = 64;
  t.t_size = 24;
  c.nodes[0].attrs = {t};
  auto ok = load_model_file_from_memory(craft(c));
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->graph.node(0).attrs.get_tensor("value")->describe(), "i64[3]");

  t.t_size = 16;
  c.nodes[0].attrs = {t};
  expect_rejected(c, StatusCode::kInvalidArgument, {"attribute 'value'", "holds 16 bytes"});
  t.t_size = 24;
  t.t_offset = 96;
  c.nodes[0].attrs = {t};
  expect_rejected(c, StatusCode::kInvalidArgument, {"attribute 'value'", "multiple of 64"});
  t.t_offset = 64;
  t.t_has_data = false;
  c.nodes[0].attrs = {t};
  expect_rejected(c, StatusCode::kInvalidArgument, {"attribute 'value'", "'data' is missing"});
  t.t_has_data = true;
  t.t_shape = {int64_t{1} << 40};
  c.nodes[0].attrs = {t};
  expect_rejected(c, StatusCode::kOutOfRange, {"attribute 'value'", "shape"});
}

TEST(ModelFileCrafted, GraphStructureIsValidated) {
  // Two nodes feeding each other.
  Craft c;
  c.values.push_back({"z"});
  c.nodes = {{"n1", "Relu", {3}, {2}, {}}, {"n2", "Relu", {2}, {3}, {}}};
  expect_rejected(c, StatusCode::kInvalidArgument, {"graph in the file is invalid", "cycle"});
  // Nodes out of topological order are sorted.
  c = Craft{};
  c.values.push_back({"z"});
  c.nodes = {{"second", "Relu", {2}, {3}, {}}, {"first", "Add", {0, 1}, {2}, {}}};
  c.outputs = {3};
  auto sorted = load_model_from_memory(craft(c));
  ASSERT_TRUE(sorted.ok()) << sorted.status().to_string();
  EXPECT_EQ(sorted->node(0).name, "first");
  EXPECT_EQ(sorted->node(1).name, "second");
  EXPECT_EQ(sorted->value(3).producer, 1);
  // A constant written by a node.
  c = Craft{};
  c.nodes[0].outputs = {1};
  expect_rejected(c, StatusCode::kInvalidArgument, {"graph in the file is invalid", "'w'"});
  // No graph at all.
  c = Craft{};
  c.has_graph = false;
  expect_rejected(c, StatusCode::kInvalidArgument, {"no graph"});
}

TEST(ModelFileCrafted, SharedTablesCannotInflateTheGraph) {
  // One node with a 4096-entry list, referenced 2000 times: a 50 KB header that would expand to
  // 2000 copies of the list (65 MB) if built.
  Craft c;
  AttrSpec list{"pads", static_cast<int>(fb::AttributeValue::IntsAttr)};
  list.ints.assign(4096, 1);
  c.nodes[0].attrs = {list};
  c.repeat_first_node = 2000;
  const std::vector<uint8_t> bytes = craft(c);
  EXPECT_LT(bytes.size(), 64u * 1024);
  expect_rejected(c, StatusCode::kInvalidArgument, {"would expand", "referenced over and over"});
  // Used once, the same list is fine.
  c.repeat_first_node = 1;
  EXPECT_TRUE(load_model_from_memory(craft(c)).ok());
}

TEST(ModelFileCrafted, Metadata) {
  Craft c;
  c.metadata = {{"a", "1"}, {"b", "2"}};
  auto r = load_model_file_from_memory(craft(c));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->metadata.properties.at("b"), "2");
  c.metadata = {{"a", "1"}, {"a", "2"}};
  expect_rejected(c, StatusCode::kInvalidArgument, {"metadata entry 1", "'a'", "more than once"});
  c.metadata = {{std::nullopt, "1"}};
  expect_rejected(c, StatusCode::kInvalidArgument, {"metadata entry 0", "'key'"});
  c.metadata = {{"a", std::nullopt}};
  expect_rejected(c, StatusCode::kInvalidArgument, {"metadata entry 0 'a'", "'value'"});
}

TEST(ModelFileCrafted, MisalignedShapeElementsAreReadSafely) {
  // The FlatBuffers verifier checks that a vector's length is 4-byte aligned but not that its
  // int64 elements are 8-byte aligned. Point value 1's shape 4 bytes further on: its length is
  // then the low half of the old first dimension (2) and its elements are misaligned int64s
  // (which UBSan flags if read in place).
  std::vector<uint8_t> b = craft(Craft{});
  const auto* model = fb::GetSizePrefixedModel(b.data());
  const auto* shape = model->graph()->values()->Get(1)->shape();
  const size_t target = static_cast<size_t>(reinterpret_cast<const uint8_t*>(shape) - b.data());
  ASSERT_EQ(target % 8, 4u);
  size_t field = 0;
  for (size_t p = 4; p + 4 <= target; p += 4) {
    if (p + read_u32(b, p) == target) field = p;
  }
  ASSERT_NE(field, 0u);
  const uint32_t moved = read_u32(b, field) + 4;
  std::memcpy(b.data() + field, &moved, 4);
  ASSERT_EQ(read_u32(b, target + 4), 2u);
  int64_t first_dim;
  std::memcpy(&first_dim, b.data() + target + 8, 8);
  ASSERT_GT(first_dim, kMaxDim);  // the high half of dimension 0 and the low half of dimension 1
  auto r = load_model_from_memory(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("value 1 'w': field 'shape': dimension " +
                                      std::to_string(first_dim)),
            std::string::npos)
      << r.status().to_string();
}

TEST(ModelFileCrafted, ConstantAtThePageEndWithoutPaddingIsCopied) {
  // A writer other than Tessera may omit the trailing padding. When the mapped file ends right
  // after a payload, the loader copies that payload so kernels can still read past its end.
  Craft c;
  c.values[1] = {"w", true, 3, {1}, true, 0, true, 0, 1};  // u8[1], resized below
  const uint64_t weights_start = craft(c).size() - c.weights_size;
  const long page = ::sysconf(_SC_PAGESIZE);
  ASSERT_GT(page, 0);
  const uint64_t payload = static_cast<uint64_t>(page) - weights_start;
  c.values[1].shape = {static_cast<int64_t>(payload)};
  c.values[1].size = payload;
  c.weights_size = payload;
  const std::vector<uint8_t> bytes = craft(c);
  ASSERT_EQ(bytes.size(), static_cast<size_t>(page));

  const std::string path = temp_path("unpadded.tsr");
  write_file(path, bytes);
  auto r = load_model_file(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->memory_mapped);
  const Tensor& w = r->graph.value(1).data;
  ASSERT_EQ(w.byte_size(), payload);
  EXPECT_EQ(std::memcmp(w.raw(), bytes.data() + weights_start, payload), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.raw()) % 64, 0u);
  touch_payloads(r->graph);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace tessera
