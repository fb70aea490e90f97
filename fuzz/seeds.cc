// Writes the seed corpora of the model and file fuzz targets, built in code from the real
// writers, so that the fuzzer starts from valid files and spends its time past the envelopes:
//
//   tessera_fuzz_seeds DIR     ->  DIR/onnx, DIR/tsr, DIR/npy, DIR/plan, DIR/profile
//
// onnx: small models (opset 13) covering every operator family Tessera imports, with
// initializers, shape subgraphs and constant inputs; tsr: each of them converted as `tessera
// convert` does and written by the .tsr writer; npy: tensors of every dtype, odd shapes, 0-d and
// empty ones; plan and profile: sequential and streaming plans, and a profile with two devices,
// written by their own writers. Platform seeds are the shipped files (energy/platforms/), which
// scripts/fuzz.sh adds. The hostile files of tests/data/hostile/ are added by scripts/fuzz.sh too.
#include <sys/stat.h>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/npy.h"
#include "graph/format/model_file.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes.h"
#include "onnx/onnx_pb.h"
#include "scheduler/cut_profile.h"
#include "scheduler/plan.h"
#include "scheduler/profile.h"

namespace {

using namespace tessera;
using onnx::AttributeProto;
using onnx::GraphProto;
using onnx::ModelProto;
using onnx::NodeProto;
using onnx::TensorProto;

int g_written = 0;

bool write_file(const std::string& path, const void* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(data, 1, size, f) != size) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    if (f != nullptr) std::fclose(f);
    return false;
  }
  std::fclose(f);
  ++g_written;
  return true;
}

// ---- ONNX model building --------------------------------------------------------------------

struct Model {
  ModelProto proto;
  GraphProto* g;
  explicit Model(int64_t opset = 13) {
    proto.set_ir_version(8);
    proto.set_producer_name("tessera-fuzz-seeds");
    g = proto.mutable_graph();
    g->set_name("seed");
    onnx::OperatorSetIdProto* os = proto.add_opset_import();
    os->set_domain("");
    os->set_version(opset);
  }
  void input(const std::string& name, std::vector<int64_t> dims,
             int32_t type = TensorProto::FLOAT) {
    onnx::ValueInfoProto* vi = g->add_input();
    vi->set_name(name);
    onnx::TypeProto::Tensor* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void output(const std::string& name) { g->add_output()->set_name(name); }
  NodeProto* node(const std::string& op, std::vector<std::string> ins,
                  std::vector<std::string> outs) {
    NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + std::to_string(g->node_size()));
    for (const std::string& i : ins) n->add_input(i);
    for (const std::string& o : outs) n->add_output(o);
    return n;
  }
  void floats(const std::string& name, std::vector<int64_t> dims) {
    TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    for (int64_t i = 0; i < n; ++i) t->add_float_data(static_cast<float>((i * 37) % 17) / 8 - 1);
  }
  void ints(const std::string& name, std::vector<int64_t> values, bool as_vector = true) {
    TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(TensorProto::INT64);
    if (as_vector) t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }
};

void attr_i(NodeProto* n, const std::string& name, int64_t v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INT);
  a->set_i(v);
}
void attr_f(NodeProto* n, const std::string& name, float v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::FLOAT);
  a->set_f(v);
}
void attr_ints(NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void attr_s(NodeProto* n, const std::string& name, const std::string& v) {
  AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::STRING);
  a->set_s(v);
}

std::vector<std::pair<std::string, Model>> onnx_models() {
  std::vector<std::pair<std::string, Model>> out;
  {  // a small CNN: Conv, BatchNorm, Relu, MaxPool, Flatten, Gemm, Softmax
    Model m;
    m.input("x", {1, 3, 9, 7});
    m.floats("w", {4, 3, 3, 3});
    m.floats("b", {4});
    for (const char* p : {"scale", "bias", "mean"}) m.floats(p, {4});
    m.floats("var", {4});
    NodeProto* c = m.node("Conv", {"x", "w", "b"}, {"c"});
    attr_ints(c, "pads", {1, 1, 1, 1});
    m.node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"bn"});
    m.node("Relu", {"bn"}, {"r"});
    NodeProto* p = m.node("MaxPool", {"r"}, {"p"});
    attr_ints(p, "kernel_shape", {2, 2});
    attr_ints(p, "strides", {2, 2});
    m.node("Flatten", {"p"}, {"f"});
    m.floats("gw", {5, 48});
    m.floats("gb", {5});
    NodeProto* g = m.node("Gemm", {"f", "gw", "gb"}, {"y"});
    attr_i(g, "transB", 1);
    m.node("Softmax", {"y"}, {"s"});
    m.output("s");
    out.emplace_back("cnn", std::move(m));
  }
  {  // element-wise and activations with broadcasting
    Model m;
    m.input("x", {2, 3, 5});
    m.floats("k", {3, 1});
    m.floats("lo", {});
    m.node("Add", {"x", "k"}, {"a"});
    m.node("Mul", {"a", "x"}, {"b"});
    m.node("Sub", {"b", "k"}, {"c"});
    m.node("Div", {"c", "k"}, {"d"});
    m.node("Sigmoid", {"d"}, {"e"});
    m.node("Tanh", {"e"}, {"f"});
    NodeProto* l = m.node("LeakyRelu", {"f"}, {"g"});
    attr_f(l, "alpha", 0.2f);
    m.node("HardSigmoid", {"g"}, {"h"});
    m.node("Clip", {"h", "lo"}, {"i"});
    m.node("Mul", {"i", "h"}, {"j"});
    m.output("j");
    out.emplace_back("elementwise", std::move(m));
  }
  {  // data movement: Pad, Slice, Transpose, Concat, Split, Squeeze, Unsqueeze
    Model m;
    m.input("x", {1, 2, 4, 5});
    m.ints("pads", {0, 0, 1, 2, 0, 0, 2, 1});
    NodeProto* p = m.node("Pad", {"x", "pads"}, {"p"});
    attr_s(p, "mode", "reflect");
    m.ints("st", {1, 0});
    m.ints("en", {6, 7});
    m.ints("ax", {2, 3});
    m.ints("sp", {2, 3});
    m.node("Slice", {"p", "st", "en", "ax", "sp"}, {"s"});
    NodeProto* t = m.node("Transpose", {"s"}, {"t"});
    attr_ints(t, "perm", {0, 1, 3, 2});
    NodeProto* c = m.node("Concat", {"t", "t"}, {"c"});
    attr_i(c, "axis", 1);
    m.ints("parts", {1, 3});
    NodeProto* sp = m.node("Split", {"c", "parts"}, {"s1", "s2"});
    attr_i(sp, "axis", 1);
    m.ints("zero", {0});
    m.node("Squeeze", {"s1", "zero"}, {"q"});
    m.node("Unsqueeze", {"q", "zero"}, {"u"});
    m.output("u");
    m.output("s2");
    out.emplace_back("movement", std::move(m));
  }
  {  // shape arithmetic folded at conversion: Shape -> Gather -> Concat -> Reshape
    Model m;
    m.input("x", {2, 3, 4});
    m.node("Shape", {"x"}, {"sh"});
    m.ints("i0", {0}, false);
    m.node("Gather", {"sh", "i0"}, {"d0"});
    m.ints("z", {0});
    m.node("Unsqueeze", {"d0", "z"}, {"d0v"});
    m.ints("rest", {-1});
    NodeProto* c = m.node("Concat", {"d0v", "rest"}, {"target"});
    attr_i(c, "axis", 0);
    m.node("Reshape", {"x", "target"}, {"r"});
    m.ints("axes", {1});
    m.node("ReduceMean", {"r", "axes"}, {"mean"});
    m.output("mean");
    out.emplace_back("shape_subgraph", std::move(m));
  }
  {  // Resize (nearest and linear), pooling, LRN, ConvTranspose
    Model m;
    m.input("x", {1, 2, 3, 4});
    m.floats("scales", {4});
    TensorProto* sc = m.g->mutable_initializer(m.g->initializer_size() - 1);
    sc->clear_float_data();
    for (float v : {1.f, 1.f, 2.f, 1.5f}) sc->add_float_data(v);
    NodeProto* r = m.node("Resize", {"x", "", "scales"}, {"r"});
    attr_s(r, "mode", "linear");
    NodeProto* n = m.node("Resize", {"x", "", "scales"}, {"n"});
    attr_s(n, "mode", "nearest");
    NodeProto* a = m.node("AveragePool", {"r"}, {"a"});
    attr_ints(a, "kernel_shape", {3, 3});
    attr_ints(a, "pads", {1, 1, 1, 1});
    NodeProto* l = m.node("LRN", {"a"}, {"l"});
    attr_i(l, "size", 3);
    m.floats("wt", {2, 3, 2, 2});
    NodeProto* ct = m.node("ConvTranspose", {"n", "wt"}, {"ct"});
    attr_ints(ct, "strides", {2, 2});
    m.node("GlobalAveragePool", {"ct"}, {"g"});
    m.node("GlobalMaxPool", {"l"}, {"gm"});
    m.output("g");
    m.output("gm");
    out.emplace_back("resize_pool", std::move(m));
  }
  {  // MatMul, Cast, Identity, Dropout, HardSwish (opset 14)
    Model m(14);
    m.input("x", {3, 4});
    m.floats("w", {4, 6});
    m.node("MatMul", {"x", "w"}, {"y"});
    m.node("HardSwish", {"y"}, {"h"});
    m.node("Identity", {"h"}, {"i"});
    m.node("Dropout", {"i"}, {"d"});
    NodeProto* c = m.node("Cast", {"d"}, {"c"});
    attr_i(c, "to", TensorProto::FLOAT);
    m.output("c");
    out.emplace_back("matmul", std::move(m));
  }
  {  // depthwise and grouped convolution with dilation and strides
    Model m;
    m.input("x", {1, 4, 7, 6});
    m.floats("w", {4, 1, 3, 3});
    NodeProto* c = m.node("Conv", {"x", "w"}, {"c"});
    attr_i(c, "group", 4);
    attr_ints(c, "dilations", {2, 1});
    attr_ints(c, "strides", {1, 2});
    m.floats("w2", {2, 2, 1, 1});
    NodeProto* c2 = m.node("Conv", {"c", "w2"}, {"y"});
    attr_i(c2, "group", 2);
    m.output("y");
    out.emplace_back("grouped_conv", std::move(m));
  }
  {  // no nodes: the output is a 4 GiB input, which the runner must not allocate
    Model m;
    m.input("x", {1, 1 << 30});
    m.output("x");
    out.emplace_back("no_nodes_big_input", std::move(m));
  }
  return out;
}

// ---- files of the other formats --------------------------------------------------------------

std::vector<std::pair<std::string, Tensor>> npy_tensors() {
  std::vector<std::pair<std::string, Tensor>> out;
  const DType types[] = {DType::kF32, DType::kF16, DType::kI8,  DType::kU8,
                         DType::kI32, DType::kI64, DType::kBool};
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {3}, {2, 5}, {1, 3, 2, 2}, {2, 0, 3}};
  for (DType t : types) {
    for (const std::vector<int64_t>& s : shapes) {
      Result<Tensor> x = Tensor::create(t, Shape(s));
      if (!x.ok()) continue;
      uint8_t* raw = static_cast<uint8_t*>(x->raw());
      for (size_t i = 0; i < x->byte_size(); ++i) raw[i] = static_cast<uint8_t>(i * 29 + 3);
      if (t == DType::kBool) {
        for (size_t i = 0; i < x->byte_size(); ++i) raw[i] &= 1;
      }
      std::string name = dtype_name(t);
      for (int64_t d : s) name += "_" + std::to_string(d);
      out.emplace_back(name, std::move(*x));
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> plans() {
  std::vector<std::pair<std::string, std::string>> out;
  Result<Plan> seq = plan_from_slices(12, {{0, "cpu"}, {5, "opencl:0@600"}, {9, "cpu:0-3"}});
  if (seq.ok()) {
    seq->model_name = "seed";
    seq->model_hash = "fnv1a64:0123456789abcdef";
    seq->planner = "slice";
    seq->objective = "latency";
    seq->estimated_latency_ms = 4.5;
    out.emplace_back("sequential", seq->to_json_text());
    Plan st = *seq;
    st.mode = PlanMode::kStreaming;
    st.queue_capacity = 3;
    st.stages[0].actor = 0;
    st.stages[2].actor = 0;
    st.stages[1].packing = "q8-pow2-bit-lz4";
    st.device_load = {{"cpu", 2.5}, {"opencl:0@600", 1.0}};
    st.estimated_period_ms = 2.5;
    out.emplace_back("streaming", st.to_json_text());
    // A split stage, its members' prices with it.
    Plan split = st;
    split.stages[1].layers = {5};
    split.stages[1].packing.clear();
    split.stages[1].placement.devices = {{"cpu:0", 0, 0.6}, {"cpu:1", 0, 0.4}};
    split.stages[1].placement.split = "conv-channel";
    split.stages[1].estimate = {0.5, 0.1, 1.0, {0.55, 0.6}};
    split.stages[2].layers = {6, 7, 8, 9, 10, 11};
    out.emplace_back("split", split.to_json_text());
  }
  return out;
}

std::string profile_text() {
  Profile p;
  p.model_name = "seed";
  p.model_hash = "fnv1a64:0123456789abcdef";
  for (int i = 0; i < 3; ++i) {
    p.layers.push_back({"layer" + std::to_string(i), i == 1 ? "Relu" : "Conv", 1e6 * (i + 1), 4096,
                        i == 1 ? 0u : 1024u, 4096});
  }
  p.cut_live_bytes = {4096, 4096, 4096, 4096};
  for (const char* dev : {"cpu", "reference"}) {
    DeviceProfile d;
    d.device = dev;
    d.description = std::string("seed ") + dev;
    d.memory_bytes = uint64_t{1} << 30;
    if (std::string(dev) == "reference") d.unsupported[2] = "not here";
    LevelProfile l;
    l.mhz = std::string(dev) == "cpu" ? 1800 : 0;
    l.layer_ms = {0.5, 0.1, std::nullopt};
    l.slice_runs = {{0, 2, 0.7, 0.6, 0.55}};
    l.piece_runs = {{0, "conv-channel", 5e5, 6000, 0.3, 0.5},
                    {2, "conv-spatial", 1.5e6, 9000, 0.9, 1.6}};
    l.upload = {1e-6, 0.01, 0.99, {{4096, 0.02}, {65536, 0.08}}};
    l.download = {1e-6, 0.01, 0.99, {}};
    d.levels.push_back(l);
    p.devices.push_back(std::move(d));
  }
  p.conditions.repeat = 5;
  p.conditions.date = "2026-11-26T00:00:00Z";
  return p.to_json_text();
}

// A cut profile of a 4-layer model: cuts 1 and 3 at 4 and 8 bits, written by its own writer.
std::string cut_profile_text() {
  CutProfile c;
  c.model_name = "seed";
  c.model_hash = "fnv1a64:0123456789abcdef";
  c.num_layers = 4;
  c.device = "cpu";
  c.choose_inputs = 2;
  c.report_inputs = 1;
  c.date = "2026-11-27T00:00:00Z";
  c.cuts = {1, 3};
  c.relu = {1, 0};
  c.bits = {4, 8};
  for (int cut : c.cuts) {
    for (int b : c.bits) {
      c.entries.push_back(
          {cut, b, 1000.0 * b, 1100.0 * b, 0.01, 0.02, 1.0, 0.05 / b, 1.0, 0.06 / b});
    }
  }
  return c.to_json_text();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  for (const char* sub : {"", "/onnx", "/tsr", "/npy", "/plan", "/profile", "/cutprofile"}) {
    mkdir((dir + sub).c_str(), 0755);
  }
  for (auto& [name, m] : onnx_models()) {
    std::string bytes;
    if (!m.proto.SerializeToString(&bytes)) return 1;
    if (!write_file(dir + "/onnx/" + name + ".onnx", bytes.data(), bytes.size())) return 1;
    Result<ImportedModel> im = import_onnx_from_memory(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    Status s = im.ok() ? infer_onnx_shapes(*im) : im.status();
    if (s.ok()) s = optimize_graph(im->graph);
    Result<std::vector<uint8_t>> tsr =
        s.ok() ? serialize_model(im->graph, {"seed", {}}) : Result<std::vector<uint8_t>>(s);
    if (!tsr.ok()) {
      std::fprintf(stderr, "seed %s does not convert: %s\n", name.c_str(),
                   tsr.status().to_string().c_str());
      return 1;
    }
    if (!write_file(dir + "/tsr/" + name + ".tsr", tsr->data(), tsr->size())) return 1;
  }
  for (auto& [name, t] : npy_tensors()) {
    const std::string path = dir + "/npy/" + name + ".npy";
    if (!write_npy(path, t).ok()) return 1;
    ++g_written;
  }
  for (auto& [name, text] : plans()) {
    if (!write_file(dir + "/plan/" + name + ".json", text.data(), text.size())) return 1;
  }
  const std::string profile = profile_text();
  if (!write_file(dir + "/profile/seed.json", profile.data(), profile.size())) return 1;
  const std::string cuts = cut_profile_text();
  if (!write_file(dir + "/cutprofile/seed.json", cuts.data(), cuts.size())) return 1;
  std::printf("%d seeds in %s\n", g_written, dir.c_str());
  return 0;
}
