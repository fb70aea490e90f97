// Hostile model files: the reproducers of tests/data/hostile/ (each once made Tessera allocate
// gigabytes, overflow, or terminate) end in a clear refusal or a bounded run; a byte-flip sweep
// of a small .tsr file never crashes and every refusal says why; constant folding stays within
// its memory budget.
#include <sys/resource.h>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/budget.h"
#include "core/json.h"
#include "fuzz/byte_flip.h"
#include "fuzz/fuzz_graph.h"
#include "graph/format/model_file.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes.h"
#include "tests/scoped_env.h"

namespace tessera {
namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)),
                              std::istreambuf_iterator<char>());
}

using testing::ScopedEnv;

// What `tessera convert` then `tessera run --device reference` do, for bytes of an ONNX file.
Status convert_and_run(std::span<const uint8_t> bytes) {
  ASSIGN_OR_RETURN(ImportedModel m, import_onnx_from_memory(bytes));
  RETURN_IF_ERROR(infer_onnx_shapes(m));
  RETURN_IF_ERROR(optimize_graph(m.graph));
  ASSIGN_OR_RETURN(std::vector<uint8_t> tsr, serialize_model(m.graph, {}));
  ASSIGN_OR_RETURN(Graph g, load_model_from_memory(tsr));
  RETURN_IF_ERROR(g.infer_shapes());
  std::vector<Tensor> outputs;
  if (fuzz::within_bounds(g, fuzz::RunBounds{})) {
    RETURN_IF_ERROR(fuzz::run_reference_graph(g, &outputs));
  }
  return Status();
}

Status load_and_run(std::span<const uint8_t> bytes) {
  ASSIGN_OR_RETURN(Graph g, load_model_from_memory(bytes));
  RETURN_IF_ERROR(g.infer_shapes());
  std::vector<Tensor> outputs;
  if (fuzz::within_bounds(g, fuzz::RunBounds{})) {
    RETURN_IF_ERROR(fuzz::run_reference_graph(g, &outputs));
  }
  return Status();
}

TEST(HostileInput, EveryReproducerEndsInARefusalOrABoundedRun) {
  ScopedEnv budget("TESSERA_MEMORY_BUDGET", "256M");
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(TESSERA_HOSTILE_DATA_DIR)) {
    const std::string path = entry.path().string();
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    const std::vector<uint8_t> bytes = read_bytes(path);
    ASSERT_FALSE(bytes.empty());
    Status s;
    if (name.ends_with(".onnx")) {
      s = convert_and_run(bytes);
    } else if (name.ends_with(".tsr")) {
      s = load_and_run(bytes);
    } else if (name.ends_with(".json")) {
      s = json::parse(std::string(bytes.begin(), bytes.end()), name).status();
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(s.message().find("out of range"), std::string::npos) << s.to_string();
    } else {
      continue;
    }
    ++files;
    if (!s.ok()) {
      EXPECT_FALSE(s.message().empty());
    }
    if (name == "constant_fold_bomb_resize.onnx") {
      EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.to_string();
      EXPECT_NE(s.message().find("(Resize)"), std::string::npos) << s.to_string();
      EXPECT_NE(s.message().find("over the memory budget of 256 MiB"), std::string::npos)
          << s.to_string();
    }
  }
  EXPECT_GE(files, 17);
  // Nothing above came near the gigabytes these files once asked for (ASan's shadow included).
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  EXPECT_LT(ru.ru_maxrss, 1536L * 1024) << "peak RSS " << ru.ru_maxrss << " KiB";
}

// ---- constant folding's budget ---------------------------------------------------------------

// x: f32[1, 1, 2, 2] constant -> Resize(scales 1, 1, s, s) -> y
Graph resize_constant_graph(float s) {
  Graph g;
  const ValueId x =
      g.add_constant("x", Tensor::from_floats(Shape{1, 1, 2, 2}, std::vector<float>{1, 2, 3, 4}));
  const ValueId scales =
      g.add_constant("scales", Tensor::from_floats(Shape{4}, std::vector<float>{1, 1, s, s}));
  const ValueId y = g.add_value("y");
  Node n;
  n.name = "up";
  n.kind = OpKind::kResize;
  n.inputs = {x, kNoValue, scales};
  n.outputs = {y};
  g.add_node(n);
  g.outputs().push_back(y);
  return g;
}

TEST(HostileInput, ConstantFoldingIsRefusedOverItsBudgetBeforeAllocating) {
  Graph big = resize_constant_graph(32768);  // 65536 x 65536 f32: 16 GiB
  const Status s = fold_constants(big, nullptr, uint64_t{1} << 30);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("node 'up' (Resize) makes f32[1, 1, 65536, 65536] (16 GiB)"),
            std::string::npos)
      << s.to_string();
  EXPECT_NE(s.message().find("over the memory budget of 1 GiB"), std::string::npos)
      << s.to_string();

  Graph small = resize_constant_graph(8);  // 16 x 16: 1 KiB
  ASSERT_TRUE(fold_constants(small, nullptr, 4096).ok());
  EXPECT_EQ(small.num_nodes(), 0);
  Graph over = resize_constant_graph(8);
  EXPECT_EQ(fold_constants(over, nullptr, 1000).code(), StatusCode::kResourceExhausted);
}

TEST(HostileInput, TheDefaultBudgetComesFromTheEnvironmentOrTheMachine) {
  {
    ScopedEnv env("TESSERA_MEMORY_BUDGET", "3G");
    EXPECT_EQ(default_memory_budget(), uint64_t{3} << 30);
    EXPECT_EQ(resolve_memory_budget(0), uint64_t{3} << 30);
    EXPECT_EQ(resolve_memory_budget(12345), 12345u);
    const Status s = check_memory_budget(uint64_t{4} << 30, default_memory_budget(), "asked 4 GiB");
    EXPECT_EQ(s.message(), "asked 4 GiB, over the memory budget of 3 GiB (TESSERA_MEMORY_BUDGET)");
  }
  {
    ScopedEnv env("TESSERA_MEMORY_BUDGET", "");
    EXPECT_GT(default_memory_budget(), uint64_t{64} << 20);  // the machine's memory
  }
  EXPECT_EQ(*parse_byte_count("512M"), uint64_t{512} << 20);
  EXPECT_EQ(*parse_byte_count("1.5GiB"), uint64_t{3} << 29);
  EXPECT_EQ(*parse_byte_count("4096"), 4096u);
  EXPECT_EQ(*parse_byte_count("64k"), uint64_t{64} << 10);
  for (const char* bad : {"", "M", "-1G", "12Q", "1e30T", "nan", "0"}) {
    EXPECT_FALSE(parse_byte_count(bad).ok()) << bad;
  }
  EXPECT_EQ(format_bytes(100), "100 B");
  EXPECT_EQ(format_bytes(uint64_t{3} << 29), "1.5 GiB");
  EXPECT_EQ(format_bytes(uint64_t{512} << 20), "512 MiB");
}

// ---- byte-flip sweep ---------------------------------------------------------------------------

// A small model touching the ops hostile files went after: Conv (pads, strides), Pad, MaxPool,
// Resize, Reshape, Softmax.
Graph sweep_graph() {
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 2, 5, 4}});
  g.inputs().push_back(x);
  std::vector<float> w(3 * 2 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
  const ValueId wv = g.add_constant("w", Tensor::from_floats(Shape{3, 2, 3, 3}, w));
  const ValueId pads = g.add_constant(
      "pads", Tensor::from_int64s(Shape{8}, std::vector<int64_t>{0, 0, 1, 0, 0, 0, 0, 1}));
  const ValueId scales =
      g.add_constant("scales", Tensor::from_floats(Shape{4}, std::vector<float>{1, 1, 2, 1}));
  const ValueId target =
      g.add_constant("target", Tensor::from_int64s(Shape{2}, std::vector<int64_t>{1, -1}));
  auto add = [&g](const char* name, OpKind kind, std::vector<ValueId> ins, Attributes attrs = {}) {
    const ValueId out = g.add_value(std::string(name) + ".out");
    Node n;
    n.name = name;
    n.kind = kind;
    n.inputs = std::move(ins);
    n.outputs = {out};
    n.attrs = std::move(attrs);
    g.add_node(n);
    return out;
  };
  Attributes conv;
  conv.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  conv.set("strides", std::vector<int64_t>{1, 2});
  const ValueId c = add("conv", OpKind::kConv, {x, wv}, conv);
  const ValueId p = add("pad", OpKind::kPad, {c, pads});
  Attributes pool;
  pool.set("kernel_shape", std::vector<int64_t>{2, 2});
  const ValueId m = add("pool", OpKind::kMaxPool, {p}, pool);
  Attributes resize;
  resize.set("mode", std::string("linear"));
  const ValueId r = add("resize", OpKind::kResize, {m, kNoValue, scales}, resize);
  const ValueId f = add("flat", OpKind::kReshape, {r, target});
  const ValueId s = add("softmax", OpKind::kSoftmax, {f});
  g.outputs().push_back(s);
  return g;
}

TEST(HostileInput, ByteFlipSweepOfASmallModelNeverCrashes) {
  Graph g = sweep_graph();
  ASSERT_TRUE(g.infer_shapes().ok());
  std::vector<Tensor> expected;
  ASSERT_TRUE(fuzz::run_reference_graph(g, &expected).ok());
  Result<std::vector<uint8_t>> file = serialize_model(g, {"sweep", {}});
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_TRUE(load_and_run(*file).ok());
  ASSERT_LT(file->size(), 2560u);  // keeps the sweep to a few seconds under ASan

  const std::vector<uint8_t>& bytes = *file;
  std::vector<size_t> positions(bytes.size());
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = i;
  const fuzz::ByteFlipCounts c = fuzz::byte_flip_sweep(
      bytes, positions, fuzz::RunBounds{}, [](size_t pos, uint8_t flipped, const Status& s) {
        if (!s.ok()) {
          ASSERT_FALSE(s.message().empty()) << "byte " << pos << " = " << int(flipped);
        }
      });
  const long cases = c.cases, ran = c.ran, refused = c.refused();
  EXPECT_EQ(
      cases, static_cast<long>(bytes.size()) * 4 - [&] {
        int same = 0;  // flips that leave the byte as it was (0 -> 0)
        for (uint8_t b : bytes) same += b == 0;
        return same;
      }());
  EXPECT_GT(refused, cases / 4);  // most flips land in checked structure
  EXPECT_GT(ran, 0);              // and some in weights or padding: still a valid model
  RecordProperty("cases", cases);
  RecordProperty("ran", ran);
  std::printf("byte-flip sweep: %ld cases, %ld loaded, %ld ran, %ld refused\n", cases, c.loaded,
              ran, refused);
}

}  // namespace
}  // namespace tessera
