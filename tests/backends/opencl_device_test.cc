// The opencl device beyond single ops: discovery and names, the program cache on disk (hits,
// corrupt entries), failure handling (kernel build errors, allocations beyond the device's
// limit, tensors too large for a node, unsupported nodes, no OpenCL platform at all), transfers,
// and multi-node slices with buffer reuse against the reference device.
#ifdef TESSERA_HAVE_OPENCL  // the whole file: only builds with the OpenCL backend

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "backends/opencl/opencl_device.h"
#include "backends/opencl/opencl_ops.h"
#include "backends/opencl/opencl_runtime.h"
#include "backends/reference/reference_device.h"
#include "core/npy.h"
#include "graph/format/model_file.h"
#include "tests/backends/opencl_test_util.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;

Tensor rnd(const Shape& s, uint32_t seed) {
  Tensor t = Tensor::create(DType::kF32, s).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}

Tensor i64s(const std::vector<int64_t>& v) {
  return Tensor::from_int64s(Shape({static_cast<int64_t>(v.size())}), v);
}

std::shared_ptr<opencl::Runtime> runtime_or_null(std::string* why) {
  Result<std::shared_ptr<opencl::Runtime>> rt = opencl::Runtime::open(0);
  if (!rt.ok()) {
    *why = rt.status().to_string();
    return nullptr;
  }
  return *rt;
}

#define TESSERA_OPENCL_RUNTIME_OR_SKIP(rt)                                                 \
  std::string tessera_rt_why_;                                                             \
  rt = runtime_or_null(&tessera_rt_why_);                                                  \
  if (!rt) {                                                                               \
    if (opencl_required()) FAIL() << "TESSERA_REQUIRE_OPENCL is set: " << tessera_rt_why_; \
    GTEST_SKIP() << "no OpenCL device: " << tessera_rt_why_;                               \
  }

constexpr char kGoodSource[] =
    "__kernel void scale(__global float* x, const float s) { x[get_global_id(0)] *= s; }\n";

class TempDir {
 public:
  TempDir() {
    path_ = fs::path(::testing::TempDir()) /
            ("tessera_opencl_cache_" + std::to_string(std::random_device{}()));
    fs::remove_all(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

TEST(OpenCLRuntime, BuildErrorCarriesTheBuildLog) {
  std::shared_ptr<opencl::Runtime> rt;
  TESSERA_OPENCL_RUNTIME_OR_SKIP(rt);
  const char* bad = "__kernel void broken(__global float* x) { x[0] = no_such_symbol; }\n";
  Result<opencl::ProgramHandle> p = opencl::build_program(
      rt->context(), rt->device(), rt->info(), "broken_family", bad, "-cl-std=CL1.2", "");
  ASSERT_FALSE(p.ok());
  const std::string msg = p.status().message();
  EXPECT_NE(msg.find("broken_family"), std::string::npos) << msg;
  EXPECT_NE(msg.find("build log"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no_such_symbol"), std::string::npos) << msg;
}

TEST(OpenCLRuntime, DiskCacheHitsAndRebuildsCorruptEntries) {
  std::shared_ptr<opencl::Runtime> rt;
  TESSERA_OPENCL_RUNTIME_OR_SKIP(rt);
  TempDir dir;
  const std::string options = "-cl-std=CL1.2";
  auto build = [&](bool* from_cache) {
    Result<opencl::ProgramHandle> p =
        opencl::build_program(rt->context(), rt->device(), rt->info(), "scale", kGoodSource,
                              options, dir.str(), from_cache);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    cl_int err = CL_SUCCESS;
    opencl::KernelHandle k(clCreateKernel(p->get(), "scale", &err));
    EXPECT_EQ(err, CL_SUCCESS);
  };
  bool hit = true;
  build(&hit);
  EXPECT_FALSE(hit) << "first build cannot come from an empty cache";
  const std::string path = opencl::program_cache_path(dir.str(), rt->info(), kGoodSource, options);
  ASSERT_TRUE(fs::exists(path)) << path;
  build(&hit);
  EXPECT_TRUE(hit);

  // Flip one byte of the stored binary: the checksum catches it, the program is rebuilt and
  // the entry rewritten.
  const auto size = fs::file_size(path);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(size - 3));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x55);
    f.seekp(static_cast<std::streamoff>(size - 3));
    f.write(&c, 1);
  }
  build(&hit);
  EXPECT_FALSE(hit);
  build(&hit);
  EXPECT_TRUE(hit) << "the corrupt entry was not rewritten";

  // A truncated entry, and one that is garbage from the first byte.
  fs::resize_file(path, size / 2);
  build(&hit);
  EXPECT_FALSE(hit);
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << "not a cache entry";
  }
  build(&hit);
  EXPECT_FALSE(hit);
  build(&hit);
  EXPECT_TRUE(hit);

  // A different source or options is a different entry.
  EXPECT_NE(path, opencl::program_cache_path(dir.str(), rt->info(), kGoodSource, "-cl-std=CL1.1"));
  EXPECT_NE(path, opencl::program_cache_path(dir.str(), rt->info(), "// x\n", options));
}

TEST(OpenCLRuntime, AllocationBeyondTheDeviceLimitIsAStatus) {
  std::shared_ptr<opencl::Runtime> rt;
  TESSERA_OPENCL_RUNTIME_OR_SKIP(rt);
  Result<opencl::MemHandle> m = rt->create_buffer(rt->info().max_alloc_bytes + 1);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(m.status().message().find("maximum allocation"), std::string::npos);
  Result<opencl::MemHandle> ok = rt->create_buffer(0);
  EXPECT_TRUE(ok.ok()) << "an empty tensor still gets a (minimal) buffer";
}

// Every foundation op has an OpenCL entry (the op case list, tests/backends/op_cases_test.cc, runs
// them all on opencl:0 against the reference).
TEST(OpenCLOpTable, EveryFoundationOpHasAnEntry) {
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    if (kind == OpKind::kConstant || !is_foundation_op(kind)) continue;  // Constant: folded away
    EXPECT_NE(opencl::find_opencl_op(kind), nullptr) << op_name(kind);
  }
}

TEST(OpenCLDevice, NamesAndListing) {
  Device* dev = nullptr;
  TESSERA_OPENCL_DEVICE_OR_SKIP(dev);
  EXPECT_EQ(dev->name(), "opencl:0");
  EXPECT_NE(dev->description().find("max allocation"), std::string::npos);
  const auto* cl = dynamic_cast<OpenCLDevice*>(dev);
  ASSERT_NE(cl, nullptr);
  EXPECT_GT(cl->max_allocation(), 0u);
  EXPECT_GE(dev->memory_capacity(), cl->max_allocation());
  bool listed = false;
  for (const DeviceListing& d : list_devices()) listed = listed || d.name == "opencl:0";
  EXPECT_TRUE(listed);
  EXPECT_EQ(open_device("opencl").status().code(), StatusCode::kOk) << "opencl means opencl:0";

  Result<std::unique_ptr<Device>> missing = open_device("opencl:999");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("opencl:999"), std::string::npos);
  Result<std::unique_ptr<Device>> dvfs = open_device("opencl:0@500");
  ASSERT_FALSE(dvfs.ok());
  EXPECT_EQ(dvfs.status().code(), StatusCode::kUnimplemented);
}

TEST(OpenCLDevice, RefusesTensorsBeyondTheMaximumAllocation) {
  Device* dev = nullptr;
  TESSERA_OPENCL_DEVICE_OR_SKIP(dev);
  // A Relu on a 12 GiB input: only shapes, nothing is allocated.
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape({3, 1 << 30})});
  g.inputs().push_back(x);
  const ValueId y = g.add_value("y");
  g.outputs().push_back(y);
  Node n;
  n.name = "huge_relu";
  n.kind = OpKind::kRelu;
  n.inputs = {x};
  n.outputs = {y};
  g.add_node(n);
  ASSERT_TRUE(g.infer_shapes().ok());
  const Capability c = dev->capabilities(g, g.node(0));
  EXPECT_FALSE(c.supported);
  EXPECT_NE(c.reason.find("bytes"), std::string::npos) << c.reason;
  Result<std::unique_ptr<Program>> p = dev->compile(g, std::vector<NodeId>{0});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(p.status().message().find("huge_relu"), std::string::npos);
}

TEST(OpenCLDevice, RefusesUnsupportedNodesByName) {
  Device* dev = nullptr;
  TESSERA_OPENCL_DEVICE_OR_SKIP(dev);
  // A Relu on f16 data (a graph built without shape inference, which would refuse it too): the
  // kernels compute in f32, and the refusal names the node and the input.
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF16, Shape({4})});
  const ValueId y = g.add_value("y", TensorInfo{DType::kF16, Shape({4})});
  g.inputs() = {x};
  g.outputs() = {y};
  Node n;
  n.name = "half_relu";
  n.kind = OpKind::kRelu;
  n.inputs = {x};
  n.outputs = {y};
  g.add_node(std::move(n));
  const Capability c = dev->capabilities(g, g.node(0));
  EXPECT_FALSE(c.supported);
  EXPECT_NE(c.reason.find("f16"), std::string::npos) << c.reason;
  Result<std::unique_ptr<Program>> p = dev->compile(g, std::vector<NodeId>{0});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("half_relu"), std::string::npos) << p.status().to_string();
}

// Values only the kernels see (run-time Gather indices, integer divisors) that the reference
// would reject fail the run with a Status naming the node and the element, never a read out of
// bounds; the same program then runs clean inputs correctly.
TEST(OpenCLDevice, BadRunTimeIndicesAndDivisorsAreAStatus) {
  Device* dev = nullptr;
  TESSERA_OPENCL_DEVICE_OR_SKIP(dev);
  Result<Graph> g =
      one_node_graph(OpKind::kGather, Attributes(),
                     {activation(rnd(Shape({5, 3}), 1)), activation(i64s({0, 1, 2}))}, 1);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  Result<std::unique_ptr<Program>> p = dev->compile(*g, std::vector<NodeId>{0});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const Tensor data = rnd(Shape({5, 3}), 1);
  std::vector<Tensor> outs(1);
  for (int64_t bad : {int64_t{5}, int64_t{-6}, int64_t{1} << 40}) {
    const std::vector<Tensor> ins = {data, i64s({0, bad, 2})};
    const Status s = (*p)->run(ins, outs);
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.to_string();
    EXPECT_NE(s.message().find("test_node"), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("element 1"), std::string::npos) << s.to_string();
  }
  const std::vector<Tensor> good = {data, i64s({4, -5, 2})};
  ASSERT_TRUE((*p)->run(good, outs).ok());
  EXPECT_EQ(outs[0].data<float>()[0], data.data<float>()[12]);
  EXPECT_EQ(outs[0].data<float>()[3], data.data<float>()[0]);

  Result<Graph> div =
      one_node_graph(OpKind::kDiv, Attributes(),
                     {activation(i64s({8, 9, 10, 11})), activation(i64s({1, 2, 3, 4}))}, 1);
  ASSERT_TRUE(div.ok()) << div.status().to_string();
  Result<std::unique_ptr<Program>> q = dev->compile(*div, std::vector<NodeId>{0});
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  const std::vector<Tensor> zero = {i64s({8, 9, 10, 11}), i64s({1, 2, 0, 4})};
  const Status s = (*q)->run(zero, outs);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.to_string();
  EXPECT_NE(s.message().find("division by zero"), std::string::npos) << s.to_string();
  EXPECT_NE(s.message().find("element 2"), std::string::npos) << s.to_string();
}

TEST(OpenCLDevice, UploadDownloadRoundTrip) {
  Device* dev = nullptr;
  TESSERA_OPENCL_DEVICE_OR_SKIP(dev);
  for (const Tensor& t : {rnd(Shape({13, 127}), 7), Tensor::create(DType::kU8, Shape({7})).value(),
                          Tensor::create(DType::kF32, Shape({0, 3})).value()}) {
    Result<std::unique_ptr<Buffer>> b = dev->upload(t);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ((*b)->byte_size(), t.byte_size());
    Tensor back;
    ASSERT_TRUE(dev->download(**b, &back).ok());
    EXPECT_EQ(back.shape(), t.shape());
    EXPECT_EQ(back.dtype(), t.dtype());
    if (t.byte_size() > 0) {
      EXPECT_EQ(std::memcmp(back.raw(), t.raw(), t.byte_size()), 0);
    }
  }
  ReferenceDevice ref;
  Result<std::unique_ptr<Buffer>> foreign = ref.upload(rnd(Shape({3}), 1));
  ASSERT_TRUE(foreign.ok());
  Tensor back;
  EXPECT_FALSE(dev->download(**foreign, &back).ok());
}

// x -> conv1 (relu) -> conv2 -> pool -> gap -> gemm -> softmax, where conv1's output is also a
// graph output: whole-graph and middle-slice programs both match the reference device.
TEST(OpenCLDevice, MultiNodeSlicesMatchTheReference) {
  Device* dev = nullptr;
  TESSERA_OPENCL_DEVICE_OR_SKIP(dev);
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape({2, 3, 17, 19})});
  g.inputs().push_back(x);
  auto node = [&](const char* name, OpKind kind, std::vector<ValueId> ins, Attributes a) {
    const ValueId out = g.add_value(std::string(name) + "_out");
    Node n;
    n.name = name;
    n.kind = kind;
    n.inputs = std::move(ins);
    n.outputs = {out};
    n.attrs = std::move(a);
    g.add_node(std::move(n));
    return out;
  };
  Attributes pad1;
  pad1.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  Attributes relu = pad1;
  relu.set("activation", std::string("relu"));
  Attributes pool;
  pool.set("kernel_shape", std::vector<int64_t>{2, 2});
  pool.set("strides", std::vector<int64_t>{2, 2});
  Attributes trans_b;
  trans_b.set("transB", int64_t{1});
  const ValueId c1 = node("conv1", OpKind::kConv,
                          {x, g.add_constant("w1", rnd(Shape({8, 3, 3, 3}), 1)),
                           g.add_constant("b1", rnd(Shape({8}), 2))},
                          relu);
  const ValueId c2 =
      node("conv2", OpKind::kConv, {c1, g.add_constant("w2", rnd(Shape({16, 8, 3, 3}), 3))}, pad1);
  const ValueId p = node("pool", OpKind::kMaxPool, {c2}, pool);
  const ValueId gap = node("gap", OpKind::kGlobalAveragePool, {p}, Attributes());
  const ValueId c3 = node("conv3", OpKind::kConv,
                          {gap, g.add_constant("w3", rnd(Shape({10, 16, 1, 1}), 4))}, Attributes());
  const ValueId s = node("softmax", OpKind::kSoftmax, {c3}, Attributes());
  g.outputs() = {c1, s};
  ASSERT_TRUE(g.infer_shapes().ok());
  const std::vector<std::pair<ValueId, Tensor>> feed = {{x, rnd(Shape({2, 3, 17, 19}), 9)}};

  ReferenceDevice ref;
  const std::vector<NodeId> all = {0, 1, 2, 3, 4, 5};
  Result<std::vector<Tensor>> want = run_layers(ref, g, all, feed);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  Result<std::vector<Tensor>> got = run_layers(*dev, g, all, feed);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->size(), want->size());
  for (size_t o = 0; o < got->size(); ++o) {
    const Tensor& a = (*got)[o];
    const Tensor& b = (*want)[o];
    ASSERT_EQ(a.shape(), b.shape());
    for (int64_t i = 0; i < a.numel(); ++i) {
      ASSERT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-4f) << "output " << o << " at " << i;
    }
  }
  // The middle slice {conv2, pool, gap}: its input is conv1's output, its output gap's.
  const std::vector<NodeId> middle = {1, 2, 3};
  Result<std::vector<Tensor>> ref_mid = run_layers(ref, g, middle, {{c1, (*want)[0]}});
  ASSERT_TRUE(ref_mid.ok()) << ref_mid.status().to_string();
  Result<std::vector<Tensor>> cl_mid = run_layers(*dev, g, middle, {{c1, (*want)[0]}});
  ASSERT_TRUE(cl_mid.ok()) << cl_mid.status().to_string();
  ASSERT_EQ(cl_mid->size(), 1u);
  for (int64_t i = 0; i < (*cl_mid)[0].numel(); ++i) {
    ASSERT_NEAR((*cl_mid)[0].data<float>()[i], (*ref_mid)[0].data<float>()[i], 1e-4f);
  }
  // Wrong input shapes are refused, not read out of bounds.
  Result<std::unique_ptr<Program>> prog = dev->compile(g, middle);
  ASSERT_TRUE(prog.ok());
  std::vector<Tensor> bad = {rnd(Shape({1, 8, 17, 19}), 3)};
  std::vector<Tensor> outs(1);
  EXPECT_EQ((*prog)->run(bad, outs).code(), StatusCode::kInvalidArgument);
}

#ifdef TESSERA_CLI_PATH
// With no OpenCL platform installed (the ICD loader pointed at an empty vendor list), the device
// is simply not listed and naming it gives a clear error, never a crash.
TEST(OpenCLDevice, NoPlatformMeansNoDeviceAndAClearError) {
  const std::string dir = ::testing::TempDir() + "tessera_no_opencl";
  fs::create_directories(dir);
  Result<Graph> g =
      one_node_graph(OpKind::kRelu, Attributes(), {activation(rnd(Shape({4}), 1))}, 1);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(save_model(*g, dir + "/relu.tsr", ModelMetadata{"opencl_test", {}}).ok());
  ASSERT_TRUE(write_npy(dir + "/x.npy", rnd(Shape({4}), 2)).ok());
  const std::string env = "OCL_ICD_VENDORS=" + dir + "/no_vendors ";
  const std::string cli = TESSERA_CLI_PATH;
  const std::string list = dir + "/devices.txt", err = dir + "/run.txt";
  ASSERT_EQ(std::system((env + cli + " devices > " + list + " 2>&1").c_str()), 0);
  std::ifstream lf(list);
  const std::string listed((std::istreambuf_iterator<char>(lf)), std::istreambuf_iterator<char>());
  EXPECT_NE(listed.find("reference"), std::string::npos) << listed;
  EXPECT_EQ(listed.find("opencl"), std::string::npos) << listed;
  const int rc = std::system((env + cli + " run " + dir + "/relu.tsr --input " + dir +
                              "/x.npy --device opencl:0 > " + err + " 2>&1")
                                 .c_str());
  EXPECT_NE(rc, 0);
  std::ifstream ef(err);
  const std::string out((std::istreambuf_iterator<char>(ef)), std::istreambuf_iterator<char>());
  EXPECT_NE(out.find("no OpenCL platform"), std::string::npos) << out;
  fs::remove_all(dir);
}
#endif

}  // namespace
}  // namespace tessera::testing

#endif  // TESSERA_HAVE_OPENCL
