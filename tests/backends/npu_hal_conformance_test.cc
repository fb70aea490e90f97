// HAL conformance: what every NPU driver must do, checked through the raw C table.
//
// Runs against the reference driver of this build and against the driver named by
// TESSERA_NPU_DRIVER (if set and different). A driver passes when its table is complete and
// versioned, its queries are consistent, it runs a small Conv+ReLU subgraph correctly in every
// precision it claims, and it refuses bad descriptions, unknown ops, over-cap subgraphs and bad
// buffers with an error code and a message, never a crash.
//
// Without any driver the suite skips, unless TESSERA_REQUIRE_NPU is set (CI sets it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backends/npu/hal.h"
#include "backends/npu/npu_driver.h"
#include "core/dtype.h"

namespace tessera {
namespace {

bool npu_required() {
  const char* r = std::getenv("TESSERA_REQUIRE_NPU");
  return r != nullptr && *r != '\0' && std::string(r) != "0";
}

std::vector<std::string> drivers_under_test() {
  std::vector<std::string> paths;
  const std::string ref = NpuDriver::reference_driver_path();
  if (!ref.empty()) paths.push_back(ref);
  const char* env = std::getenv("TESSERA_NPU_DRIVER");
  if (env != nullptr && *env != '\0' && std::string(env) != ref) paths.push_back(env);
  if (paths.empty()) paths.push_back("");  // one instance that skips (or fails when required)
  return paths;
}

// A Conv(3x3, pad 1, stride 1) + fused ReLU over odd sizes, as a HAL description that owns its
// storage.
struct ConvGraph {
  static constexpr int64_t N = 1, C = 13, H = 9, W = 11, M = 7;
  std::vector<float> weights, bias;
  std::vector<tnpu_tensor_desc> tensors;
  std::vector<uint32_t> node_in{0, 1, 2}, node_out{3}, in{0}, out{3};
  std::vector<int64_t> pads{1, 1, 1, 1}, kernel{3, 3};
  std::vector<tnpu_attribute> attrs;
  tnpu_node node{};
  tnpu_graph graph{};

  explicit ConvGraph(const char* op_type = "Conv") {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> d(-0.3f, 0.3f);
    weights.resize(M * C * 9);
    for (float& v : weights) v = d(rng);
    bias.resize(M);
    for (float& v : bias) v = d(rng);
    tensors.resize(4);
    auto set = [&](int i, const char* name, std::vector<int64_t> dims, const void* data,
                   uint64_t bytes) {
      tnpu_tensor_desc& t = tensors[static_cast<size_t>(i)];
      t = tnpu_tensor_desc{};
      t.name = name;
      t.dtype = TNPU_DTYPE_F32;
      t.rank = static_cast<uint32_t>(dims.size());
      for (size_t k = 0; k < dims.size(); ++k) t.dims[k] = dims[k];
      t.data = data;
      t.data_bytes = bytes;
    };
    set(0, "x", {N, C, H, W}, nullptr, 0);
    set(1, "w", {M, C, 3, 3}, weights.data(), weights.size() * 4);
    set(2, "b", {M}, bias.data(), bias.size() * 4);
    set(3, "y", {N, M, H, W}, nullptr, 0);
    tnpu_attribute a{};
    a.name = "pads", a.type = TNPU_ATTR_INTS, a.ints = pads.data(), a.count = 4;
    attrs.push_back(a);
    a = tnpu_attribute{};
    a.name = "kernel_shape", a.type = TNPU_ATTR_INTS, a.ints = kernel.data(), a.count = 2;
    attrs.push_back(a);
    a = tnpu_attribute{};
    a.name = "activation", a.type = TNPU_ATTR_STRING, a.s = "relu";
    attrs.push_back(a);
    node.name = "conv_relu";
    node.op_type = op_type;
    link();
  }
  void link() {
    node.inputs = node_in.data(), node.num_inputs = static_cast<uint32_t>(node_in.size());
    node.outputs = node_out.data(), node.num_outputs = 1;
    node.attrs = attrs.data(), node.num_attrs = static_cast<uint32_t>(attrs.size());
    graph = tnpu_graph{};
    graph.struct_size = sizeof(graph);
    graph.tensors = tensors.data(), graph.num_tensors = static_cast<uint32_t>(tensors.size());
    graph.nodes = &node, graph.num_nodes = 1;
    graph.inputs = in.data(), graph.num_inputs = 1;
    graph.outputs = out.data(), graph.num_outputs = 1;
  }

  // Naive oracle.
  std::vector<float> expected(const std::vector<float>& x) const {
    std::vector<float> y(N * M * H * W);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t oy = 0; oy < H; ++oy)
        for (int64_t ox = 0; ox < W; ++ox) {
          double acc = bias[static_cast<size_t>(m)];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t ky = 0; ky < 3; ++ky)
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t iy = oy + ky - 1, ix = ox + kx - 1;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                acc += static_cast<double>(
                           weights[static_cast<size_t>(((m * C + c) * 3 + ky) * 3 + kx)]) *
                       x[static_cast<size_t>((c * H + iy) * W + ix)];
              }
          y[static_cast<size_t>((m * H + oy) * W + ox)] = static_cast<float>(std::max(acc, 0.0));
        }
    return y;
  }
};

std::vector<float> random_input(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// Host f32 NCHW <-> the boundary format a driver asks for (the conformance suite's own,
// independent of Tessera's NpuDevice).
std::vector<uint8_t> to_io(const std::vector<float>& x, const tnpu_io_desc& d) {
  std::vector<uint8_t> out(d.bytes);
  const bool nhwc = d.layout == TNPU_LAYOUT_NHWC && d.rank == 4;
  const int64_t c = d.rank == 4 ? d.dims[1] : 1, hw = d.rank == 4 ? d.dims[2] * d.dims[3] : 1;
  for (size_t i = 0; i < x.size(); ++i) {
    size_t j = i;
    if (nhwc) {
      const int64_t n = static_cast<int64_t>(i) / (c * hw), cc = (static_cast<int64_t>(i) / hw) % c,
                    p = static_cast<int64_t>(i) % hw;
      j = static_cast<size_t>((n * hw + p) * c + cc);
    }
    switch (d.dtype) {
      case TNPU_DTYPE_F32:
        std::memcpy(out.data() + j * 4, &x[i], 4);
        break;
      case TNPU_DTYPE_F16: {
        const uint16_t h = float_to_half(x[i]);
        std::memcpy(out.data() + j * 2, &h, 2);
        break;
      }
      case TNPU_DTYPE_I8:
        out[j] = static_cast<uint8_t>(static_cast<int8_t>(
            std::clamp(std::nearbyint(x[i] / d.scale) + d.zero_point, -128.f, 127.f)));
        break;
      case TNPU_DTYPE_U8:
        out[j] = static_cast<uint8_t>(
            std::clamp(std::nearbyint(x[i] / d.scale) + d.zero_point, 0.f, 255.f));
        break;
      default:
        ADD_FAILURE() << "unexpected boundary dtype " << d.dtype;
    }
  }
  return out;
}

std::vector<float> from_io(const std::vector<uint8_t>& b, const tnpu_io_desc& d, size_t numel) {
  std::vector<float> out(numel);
  const bool nhwc = d.layout == TNPU_LAYOUT_NHWC && d.rank == 4;
  const int64_t c = d.rank == 4 ? d.dims[1] : 1, hw = d.rank == 4 ? d.dims[2] * d.dims[3] : 1;
  for (size_t i = 0; i < numel; ++i) {
    size_t j = i;
    if (nhwc) {
      const int64_t n = static_cast<int64_t>(i) / (c * hw), cc = (static_cast<int64_t>(i) / hw) % c,
                    p = static_cast<int64_t>(i) % hw;
      j = static_cast<size_t>((n * hw + p) * c + cc);
    }
    switch (d.dtype) {
      case TNPU_DTYPE_F32:
        std::memcpy(&out[i], b.data() + j * 4, 4);
        break;
      case TNPU_DTYPE_F16: {
        uint16_t h;
        std::memcpy(&h, b.data() + j * 2, 2);
        out[i] = half_to_float(h);
        break;
      }
      case TNPU_DTYPE_I8:
        out[i] = d.scale * static_cast<float>(static_cast<int8_t>(b[j]) - d.zero_point);
        break;
      case TNPU_DTYPE_U8:
        out[i] = d.scale * static_cast<float>(static_cast<int32_t>(b[j]) - d.zero_point);
        break;
      default:
        break;
    }
  }
  return out;
}

class HalConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam().empty()) {
      if (npu_required())
        FAIL() << "TESSERA_REQUIRE_NPU is set but no NPU driver was built or named";
      GTEST_SKIP() << "no NPU driver in this build and TESSERA_NPU_DRIVER unset";
    }
    auto d = NpuDriver::load(GetParam());
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    driver_ = *d;
    api_ = &driver_->api();
    ASSERT_EQ(api_->open_device(0, &dev_), TNPU_OK) << api_->driver_last_error();
    ASSERT_NE(dev_, nullptr);
    info_.struct_size = sizeof(info_);
    ASSERT_EQ(api_->get_device_info(dev_, &info_), TNPU_OK) << api_->device_last_error(dev_);
  }
  void TearDown() override {
    if (api_ != nullptr && dev_ != nullptr) api_->close_device(dev_);
  }

  tnpu_prepare_options options(uint32_t precision, const tnpu_calibration* cal) {
    tnpu_prepare_options o{};
    o.struct_size = sizeof(o);
    o.precision = precision;
    o.calibration = cal;
    return o;
  }

  // Prepares `g` in `precision` (with calibration samples for int8).
  tnpu_status prepare(const tnpu_graph& g, uint32_t precision, tnpu_prepared* out,
                      uint64_t memory_limit = 0) {
    calib_.clear();
    calib_ptrs_.clear();
    for (uint32_t s = 0; s < 4; ++s) {
      calib_.push_back(
          random_input(ConvGraph::N * ConvGraph::C * ConvGraph::H * ConvGraph::W, 100 + s));
    }
    for (const auto& c : calib_) calib_ptrs_.push_back(c.data());
    cal_.num_samples = 4;
    cal_.inputs = calib_ptrs_.data();
    tnpu_prepare_options o = options(precision, &cal_);
    o.memory_limit = memory_limit;
    return api_->prepare(dev_, &g, &o, out);
  }

  // Prepares `g` in the device's default precision and reads its one input and output format.
  void prepare_default(const tnpu_graph& g, tnpu_prepared* p, tnpu_io_desc* din,
                       tnpu_io_desc* dout) {
    ASSERT_EQ(prepare(g, info_.default_precision, p), TNPU_OK) << api_->device_last_error(dev_);
    din->struct_size = dout->struct_size = sizeof(tnpu_io_desc);
    ASSERT_EQ(api_->get_io_desc(*p, 0, 0, din), TNPU_OK);
    ASSERT_EQ(api_->get_io_desc(*p, 1, 0, dout), TNPU_OK);
  }

  std::shared_ptr<const NpuDriver> driver_;
  const tnpu_driver_api* api_ = nullptr;
  tnpu_device dev_ = nullptr;
  tnpu_device_info info_{};
  std::vector<std::vector<float>> calib_;
  std::vector<const float*> calib_ptrs_;
  tnpu_calibration cal_{};
};

TEST_P(HalConformance, TableIsVersionedAndComplete) {
  EXPECT_EQ(TNPU_VERSION_MAJOR(api_->api_version), TNPU_API_VERSION_MAJOR);
  EXPECT_GE(api_->struct_size, TNPU_API_V1_MIN_SIZE);
  tnpu_driver_info di{};
  di.struct_size = sizeof(di);
  ASSERT_EQ(api_->get_driver_info(&di), TNPU_OK);
  EXPECT_GT(std::strlen(di.name), 0u);
  EXPECT_LT(std::strlen(di.name), sizeof(di.name));
  EXPECT_GE(di.device_count, 1u);
  if (TNPU_HAS_SLOT(api_, get_proc_address)) {
    EXPECT_EQ(api_->get_proc_address("tnpu_no_such_extension_xyz"), nullptr);
    EXPECT_EQ(api_->get_proc_address(nullptr), nullptr);
  }
}

TEST_P(HalConformance, RespectsCallerStructSize) {
  // An older caller knowing only the first 8 bytes of tnpu_device_info: nothing beyond them
  // may be written, and struct_size stays the caller's.
  unsigned char buf[sizeof(tnpu_device_info) + 16];
  std::memset(buf, 0xAB, sizeof(buf));
  auto* small = reinterpret_cast<tnpu_device_info*>(buf);
  small->struct_size = 8;
  ASSERT_EQ(api_->get_device_info(dev_, small), TNPU_OK);
  EXPECT_EQ(small->struct_size, 8u);
  for (size_t i = 8; i < sizeof(buf); ++i) ASSERT_EQ(buf[i], 0xAB) << "byte " << i << " written";
}

TEST_P(HalConformance, DeviceInfoIsConsistent) {
  EXPECT_NE(info_.precisions, 0u);
  EXPECT_NE(info_.precisions & info_.default_precision, 0u);
  EXPECT_EQ(info_.default_precision & (info_.default_precision - 1), 0u) << "one bit";
  EXPECT_GT(info_.memory_capacity, 0u);
  EXPECT_GE(info_.num_cores, 1u);
  EXPECT_GE(info_.max_rank, 2u);
  EXPECT_GT(std::strlen(info_.name), 0u);
}

TEST_P(HalConformance, OpenDeviceOutOfRangeIsAnError) {
  tnpu_driver_info di{};
  di.struct_size = sizeof(di);
  ASSERT_EQ(api_->get_driver_info(&di), TNPU_OK);
  tnpu_device d = reinterpret_cast<tnpu_device>(0x1);
  EXPECT_EQ(api_->open_device(di.device_count, &d), TNPU_ERR_NOT_FOUND);
  EXPECT_EQ(d, nullptr);
  EXPECT_GT(std::strlen(api_->driver_last_error()), 0u);
  EXPECT_NE(api_->open_device(0, nullptr), TNPU_OK);
}

TEST_P(HalConformance, OpSupportTableIsConsistent) {
  const uint32_t n = api_->get_op_count(dev_);
  ASSERT_GT(n, 0u);
  std::set<std::string> names;
  for (uint32_t i = 0; i < n; ++i) {
    tnpu_op_support s{};
    s.struct_size = sizeof(s);
    ASSERT_EQ(api_->get_op_support(dev_, i, &s), TNPU_OK) << api_->device_last_error(dev_);
    const std::string name(s.op_type, strnlen(s.op_type, sizeof(s.op_type)));
    EXPECT_FALSE(name.empty());
    EXPECT_TRUE(names.insert(name).second) << "duplicate op " << name;
    EXPECT_NE(s.precisions, 0u) << name;
    EXPECT_EQ(s.precisions & ~info_.precisions, 0u)
        << name << " claims a precision the device lacks";
  }
  tnpu_op_support s{};
  s.struct_size = sizeof(s);
  EXPECT_NE(api_->get_op_support(dev_, n, &s), TNPU_OK);
  EXPECT_GT(std::strlen(api_->device_last_error(dev_)), 0u);
}

bool device_runs(const tnpu_driver_api* api, tnpu_device dev, const char* op) {
  const uint32_t n = api->get_op_count(dev);
  for (uint32_t i = 0; i < n; ++i) {
    tnpu_op_support s{};
    s.struct_size = sizeof(s);
    if (api->get_op_support(dev, i, &s) == TNPU_OK && std::strcmp(s.op_type, op) == 0) return true;
  }
  return false;
}

TEST_P(HalConformance, RunsConvReluInEveryPrecision) {
  if (!device_runs(api_, dev_, "Conv")) GTEST_SKIP() << "the device does not run Conv";
  ConvGraph cg;
  for (uint32_t precision : {TNPU_PRECISION_F32, TNPU_PRECISION_F16, TNPU_PRECISION_INT8}) {
    if ((info_.precisions & precision) == 0) continue;
    SCOPED_TRACE("precision bit " + std::to_string(precision));
    tnpu_prepared p = nullptr;
    ASSERT_EQ(prepare(cg.graph, precision, &p), TNPU_OK) << api_->device_last_error(dev_);
    ASSERT_NE(p, nullptr);
    tnpu_prepared_info pi{};
    pi.struct_size = sizeof(pi);
    ASSERT_EQ(api_->get_prepared_info(p, &pi), TNPU_OK);
    EXPECT_EQ(pi.precision, precision);
    EXPECT_EQ(pi.num_inputs, 1u);
    EXPECT_EQ(pi.num_outputs, 1u);
    EXPECT_GT(pi.weight_bytes, 0u);
    EXPECT_LE(pi.weight_bytes + pi.activation_bytes, info_.memory_capacity);

    tnpu_io_desc din{}, dout{};
    din.struct_size = dout.struct_size = sizeof(tnpu_io_desc);
    ASSERT_EQ(api_->get_io_desc(p, 0, 0, &din), TNPU_OK);
    ASSERT_EQ(api_->get_io_desc(p, 1, 0, &dout), TNPU_OK);
    EXPECT_EQ(din.rank, 4u);
    EXPECT_EQ(din.dims[1], ConvGraph::C);
    EXPECT_EQ(dout.dims[1], ConvGraph::M);
    EXPECT_NE(api_->get_io_desc(p, 0, 1, &din), TNPU_OK);
    ASSERT_EQ(api_->get_io_desc(p, 0, 0, &din), TNPU_OK);

    const auto x = random_input(ConvGraph::N * ConvGraph::C * ConvGraph::H * ConvGraph::W, 1);
    const auto want = cg.expected(x);
    auto in_bytes = to_io(x, din);
    std::vector<uint8_t> out_bytes(dout.bytes);
    tnpu_buffer ib{in_bytes.data(), in_bytes.size()}, ob{out_bytes.data(), out_bytes.size()};
    ASSERT_EQ(api_->execute(p, &ib, 1, &ob, 1), TNPU_OK) << api_->prepared_last_error(p);
    const auto got = from_io(out_bytes, dout, want.size());
    double max_ref = 0, max_err = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << i;
      EXPECT_GE(got[i], 0.f) << "fused relu at " << i;
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
      max_err = std::max(max_err, std::fabs(static_cast<double>(got[i] - want[i])));
    }
    const double tol = precision == TNPU_PRECISION_F32   ? 1e-4
                       : precision == TNPU_PRECISION_F16 ? 1e-2
                                                         : 6e-2;
    EXPECT_LE(max_err, tol * std::max(1.0, max_ref)) << "max|ref| " << max_ref;

    // Deterministic: a second run gives the same bytes.
    std::vector<uint8_t> again(dout.bytes);
    tnpu_buffer ob2{again.data(), again.size()};
    ASSERT_EQ(api_->execute(p, &ib, 1, &ob2, 1), TNPU_OK);
    EXPECT_EQ(again, out_bytes);

    if (TNPU_HAS_SLOT(api_, get_perf_counters)) {
      std::vector<uint64_t> node_ns(4, 0);
      tnpu_perf_counters c{};
      c.struct_size = sizeof(c);
      c.node_ns = node_ns.data();
      c.num_node_ns = 4;
      ASSERT_EQ(api_->get_perf_counters(p, &c), TNPU_OK);
      EXPECT_GT(c.total_ns, 0u);
      EXPECT_EQ(c.bytes_in, din.bytes);
      EXPECT_EQ(c.bytes_out, dout.bytes);
      EXPECT_GE(c.total_ns, c.compute_ns);
      EXPECT_EQ(c.node_ns, node_ns.data());
      EXPECT_EQ(node_ns[1], 0u) << "only one node";
    }
    api_->release(p);
  }
}

// HAL 1.1 execute_profiled (optional): the same outputs as execute, one time per node, the
// node count reported even when the caller's array is too small, and nothing written beyond the
// prefix of tnpu_execute_profile the caller knows.
TEST_P(HalConformance, ExecuteProfiledTimesEveryNode) {
  if (TNPU_VERSION_MINOR(api_->api_version) < 1 || !TNPU_HAS_SLOT(api_, execute_profiled))
    GTEST_SKIP() << "a HAL 1.0 driver, or no execute_profiled";
  if (!device_runs(api_, dev_, "Conv")) GTEST_SKIP() << "the device does not run Conv";
  ConvGraph cg;
  tnpu_prepared p = nullptr;
  tnpu_io_desc din{}, dout{};
  ASSERT_NO_FATAL_FAILURE(prepare_default(cg.graph, &p, &din, &dout));
  const auto x = random_input(ConvGraph::N * ConvGraph::C * ConvGraph::H * ConvGraph::W, 3);
  auto in_bytes = to_io(x, din);
  std::vector<uint8_t> plain(dout.bytes), profiled(dout.bytes);
  tnpu_buffer ib{in_bytes.data(), in_bytes.size()};
  tnpu_buffer ob{plain.data(), plain.size()}, ob2{profiled.data(), profiled.size()};
  ASSERT_EQ(api_->execute(p, &ib, 1, &ob, 1), TNPU_OK) << api_->prepared_last_error(p);

  // The full struct, an array with room to spare.
  std::vector<uint64_t> node_ns(3, 0);
  tnpu_execute_profile prof{};
  prof.struct_size = sizeof(prof);
  prof.node_ns = node_ns.data();
  prof.node_capacity = 3;
  ASSERT_EQ(api_->execute_profiled(p, &ib, 1, &ob2, 1, &prof), TNPU_OK)
      << api_->prepared_last_error(p);
  EXPECT_EQ(profiled, plain);
  EXPECT_EQ(prof.num_nodes, 1u);
  EXPECT_EQ(prof.struct_size, sizeof(prof));
  EXPECT_EQ(prof.node_ns, node_ns.data());
  EXPECT_GT(node_ns[0], 0u);
  EXPECT_EQ(node_ns[1], 0u) << "only one node";
  EXPECT_GE(prof.total_ns, prof.compute_ns);
  EXPECT_GE(prof.compute_ns, node_ns[0]);
  EXPECT_GE(prof.total_ns, prof.input_conversion_ns + prof.compute_ns + prof.output_conversion_ns);

  // No room for the node: an error, with the count the caller needs.
  prof.node_capacity = 0;
  prof.num_nodes = 77;
  EXPECT_EQ(api_->execute_profiled(p, &ib, 1, &ob2, 1, &prof), TNPU_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(prof.num_nodes, 1u);
  EXPECT_GT(std::strlen(api_->prepared_last_error(p)), 0u);
  prof.node_capacity = 3;
  prof.node_ns = nullptr;
  EXPECT_EQ(api_->execute_profiled(p, &ib, 1, &ob2, 1, &prof), TNPU_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(api_->execute_profiled(p, &ib, 1, &ob2, 1, nullptr), TNPU_ERR_INVALID_ARGUMENT);
  // Bad buffers are refused as by execute.
  prof.node_ns = node_ns.data();
  tnpu_buffer short_out{profiled.data(), profiled.size() - 1};
  EXPECT_NE(api_->execute_profiled(p, &ib, 1, &short_out, 1, &prof), TNPU_OK);

  // An older caller knowing only the fields up to num_nodes: nothing beyond them is written.
  unsigned char buf[sizeof(tnpu_execute_profile) + 16];
  std::memset(buf, 0xAB, sizeof(buf));
  tnpu_execute_profile head{};
  head.struct_size = TNPU_EXECUTE_PROFILE_MIN_SIZE;
  head.node_ns = node_ns.data();
  head.node_capacity = 3;
  std::memcpy(buf, &head, TNPU_EXECUTE_PROFILE_MIN_SIZE);
  auto* small = reinterpret_cast<tnpu_execute_profile*>(buf);
  ASSERT_EQ(api_->execute_profiled(p, &ib, 1, &ob2, 1, small), TNPU_OK)
      << api_->prepared_last_error(p);
  EXPECT_EQ(small->struct_size, TNPU_EXECUTE_PROFILE_MIN_SIZE);
  EXPECT_EQ(small->num_nodes, 1u);
  for (size_t i = TNPU_EXECUTE_PROFILE_MIN_SIZE; i < sizeof(buf); ++i)
    ASSERT_EQ(buf[i], 0xAB) << "byte " << i << " written";
  // Smaller than that is refused.
  std::memset(buf, 0, sizeof(buf));
  small->struct_size = static_cast<uint32_t>(offsetof(tnpu_execute_profile, node_capacity));
  EXPECT_EQ(api_->execute_profiled(p, &ib, 1, &ob2, 1, small), TNPU_ERR_INVALID_ARGUMENT);
  api_->release(p);
}

TEST_P(HalConformance, RefusesUnknownOpNamingTheNode) {
  ConvGraph cg("NoSuchOpXyz");
  tnpu_prepared p = reinterpret_cast<tnpu_prepared>(0x1);
  EXPECT_EQ(prepare(cg.graph, info_.default_precision, &p), TNPU_ERR_UNSUPPORTED);
  EXPECT_EQ(p, nullptr);
  const std::string msg = api_->device_last_error(dev_);
  EXPECT_NE(msg.find("conv_relu"), std::string::npos) << msg;
  if (TNPU_HAS_SLOT(api_, check_node)) {
    EXPECT_NE(api_->check_node(dev_, &cg.graph, 0), TNPU_OK);
    EXPECT_NE(std::string(api_->device_last_error(dev_)).find("conv_relu"), std::string::npos);
    if (device_runs(api_, dev_, "Conv")) {
      ConvGraph ok;
      EXPECT_EQ(api_->check_node(dev_, &ok.graph, 0), TNPU_OK) << api_->device_last_error(dev_);
    }
  }
}

TEST_P(HalConformance, RejectsMalformedDescriptions) {
  tnpu_prepared p = nullptr;
  tnpu_prepare_options o = options(0, nullptr);
  EXPECT_NE(api_->prepare(dev_, nullptr, &o, &p), TNPU_OK);
  EXPECT_GT(std::strlen(api_->device_last_error(dev_)), 0u);
  {
    ConvGraph cg;
    cg.node_in[1] = 99;  // tensor index out of range
    cg.link();
    EXPECT_EQ(prepare(cg.graph, info_.default_precision, &p), TNPU_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(p, nullptr);
  }
  {
    ConvGraph cg;
    cg.tensors[1].data_bytes = 12;  // weights shorter than their dims
    EXPECT_EQ(prepare(cg.graph, info_.default_precision, &p), TNPU_ERR_INVALID_ARGUMENT);
  }
  {
    ConvGraph cg;
    cg.graph.struct_size = 0;
    EXPECT_EQ(prepare(cg.graph, info_.default_precision, &p), TNPU_ERR_INVALID_ARGUMENT);
  }
  {
    ConvGraph cg;
    cg.node.inputs = nullptr;  // count without array
    EXPECT_EQ(prepare(cg.graph, info_.default_precision, &p), TNPU_ERR_INVALID_ARGUMENT);
  }
  {
    ConvGraph cg;
    cg.tensors[3].dims[3] = 5;  // output dims disagree with the convolution
    if (device_runs(api_, dev_, "Conv")) {
      EXPECT_NE(prepare(cg.graph, info_.default_precision, &p), TNPU_OK);
    }
  }
  {
    ConvGraph cg;
    cg.tensors[0].dims[2] = -3;
    EXPECT_EQ(prepare(cg.graph, info_.default_precision, &p), TNPU_ERR_INVALID_ARGUMENT);
  }
  EXPECT_EQ(p, nullptr);
}

TEST_P(HalConformance, RefusesSubgraphOverTheMemoryLimit) {
  if (!device_runs(api_, dev_, "Conv")) GTEST_SKIP() << "the device does not run Conv";
  ConvGraph cg;
  tnpu_prepared p = nullptr;
  EXPECT_EQ(prepare(cg.graph, info_.default_precision, &p, /*memory_limit=*/256),
            TNPU_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(p, nullptr);
  EXPECT_GT(std::strlen(api_->device_last_error(dev_)), 0u);
}

TEST_P(HalConformance, ExecuteChecksBuffers) {
  if (!device_runs(api_, dev_, "Conv")) GTEST_SKIP() << "the device does not run Conv";
  ConvGraph cg;
  tnpu_prepared p = nullptr;
  tnpu_io_desc din{}, dout{};
  ASSERT_NO_FATAL_FAILURE(prepare_default(cg.graph, &p, &din, &dout));
  std::vector<uint8_t> in(din.bytes), out(dout.bytes);
  tnpu_buffer ib{in.data(), in.size()}, ob{out.data(), out.size()};
  tnpu_buffer short_in{in.data(), in.size() - 1}, null_out{nullptr, out.size()};
  EXPECT_EQ(api_->execute(p, &short_in, 1, &ob, 1), TNPU_ERR_INVALID_ARGUMENT);
  EXPECT_GT(std::strlen(api_->prepared_last_error(p)), 0u);
  EXPECT_EQ(api_->execute(p, &ib, 1, &null_out, 1), TNPU_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(api_->execute(p, &ib, 0, &ob, 1), TNPU_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(api_->execute(p, &ib, 2, &ob, 1), TNPU_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(api_->execute(p, nullptr, 1, &ob, 1), TNPU_ERR_INVALID_ARGUMENT);
  // The handle stays usable after refused calls.
  EXPECT_EQ(api_->execute(p, &ib, 1, &ob, 1), TNPU_OK) << api_->prepared_last_error(p);
  api_->release(p);
}

TEST_P(HalConformance, NullHandlesAndUnknownOptionsAreSafe) {
  api_->release(nullptr);
  api_->close_device(nullptr);
  if (TNPU_HAS_SLOT(api_, set_device_option)) {
    EXPECT_EQ(api_->set_device_option(dev_, "no_such_option_xyz", "1"), TNPU_ERR_NOT_FOUND);
    EXPECT_GT(std::strlen(api_->device_last_error(dev_)), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Drivers, HalConformance, ::testing::ValuesIn(drivers_under_test()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.index == 0 && !p.param.empty() &&
                                          p.param == NpuDriver::reference_driver_path()
                                      ? std::string("reference")
                                  : p.param.empty() ? std::string("none")
                                                    : "env" + std::to_string(p.index);
                         });

}  // namespace
}  // namespace tessera
