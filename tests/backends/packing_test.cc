// The packing codec of remote hops (backends/remote/packing.h): the round-trip error bound for
// every bitwidth against a reference computed here, exact constant tensors, NaN/Inf refused, the
// wire layout of the bit planes, honest ratios (a ReLU-sparse tensor against a noise control),
// and an unpacker that survives hostile bytes.
#include "backends/remote/packing.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tests/backends/packing_test_util.h"

namespace tessera {
namespace {

constexpr int kAllBits[] = {2, 3, 4, 5, 6, 7, 8, 16};

std::vector<float> gaussian(size_t n, uint32_t seed, float mean = 0.3f, float stddev = 2.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<uint8_t> pack(const std::vector<float>& v, const PackPolicy& p) {
  std::vector<uint8_t> out;
  Status st = pack_f32(v, Shape{static_cast<int64_t>(v.size())}, p, "t", &out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return out;
}

std::vector<float> unpack(const std::vector<uint8_t>& bytes) {
  Result<Tensor> t = unpack_tensor(bytes);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  if (!t.ok()) return {};
  return {t->data<float>(), t->data<float>() + t->numel()};
}

// Checks |x - x'| <= step / 2 (+ f32 rounding) with the step computed here from the data: the
// real scale (max - min) / (2^b - 1), or for pow2 the smallest power of two at least that.
void expect_within_half_step(const std::vector<float>& x, const std::vector<float>& y, int bits,
                             PackScale kind) {
  ASSERT_EQ(x.size(), y.size());
  double lo = x[0], hi = x[0];
  for (float v : x) lo = std::min(lo, double{v}), hi = std::max(hi, double{v});
  double step = (hi - lo) / ((1 << bits) - 1);
  if (kind == PackScale::kPow2 && step > 0) step = std::exp2(std::ceil(std::log2(step)));
  const double tol = step / 2 + 8 * FLT_EPSILON * std::max(std::fabs(lo), std::fabs(hi));
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(double{x[i]} - y[i]));
  EXPECT_LE(worst, tol) << "bits " << bits << " step " << step << " n " << x.size();
  // The grid is used: a coarser quantiser would be within the bound only by luck of the data.
  if (x.size() > 100) {
    EXPECT_GT(worst, 0.2 * step) << "bits " << bits;
  }
}

TEST(Packing, RoundTripWithinHalfAStepForEveryPolicy) {
  for (int bits : kAllBits) {
    for (PackScale kind : {PackScale::kReal, PackScale::kPow2}) {
      for (PackShuffle shuffle : {PackShuffle::kBit, PackShuffle::kNone}) {
        for (PackCodec codec : {PackCodec::kLz4, PackCodec::kNone}) {
          for (size_t n : {13u, 127u, 4097u}) {
            const PackPolicy p{bits, kind, shuffle, codec};
            SCOPED_TRACE(pack_policy_name(p) + " n=" + std::to_string(n));
            const std::vector<float> x = gaussian(n, static_cast<uint32_t>(n * 31 + bits));
            const std::vector<uint8_t> packed = pack(x, p);
            const PackedHeader h = read_packed_header(packed).value();
            EXPECT_EQ(h.policy.bits, bits);
            EXPECT_EQ(h.policy.scale, kind);
            EXPECT_EQ(h.policy.shuffle, shuffle);
            EXPECT_EQ(h.elements, n);
            EXPECT_EQ(h.header_bytes + h.payload_bytes, packed.size());
            expect_within_half_step(x, unpack(packed), bits, kind);
          }
        }
      }
    }
  }
}

TEST(Packing, KeepsTheShape) {
  const std::vector<float> x = gaussian(2 * 3 * 5 * 7, 1);
  std::vector<uint8_t> out;
  ASSERT_TRUE(pack_f32(x, Shape{2, 3, 5, 7}, PackPolicy{}, "t", &out).ok());
  Tensor t = unpack_tensor(out).value();
  EXPECT_EQ(t.shape(), (Shape{2, 3, 5, 7}));
  EXPECT_EQ(read_packed_header(out)->header_bytes, kPackHeaderBytes + 4 * 8);
  // The shape must hold the values.
  EXPECT_FALSE(pack_f32(x, Shape{2, 3, 5}, PackPolicy{}, "t", &out).ok());
}

TEST(Packing, ConstantAndZeroTensorsAreExactWithNoPayload) {
  for (float c : {0.0f, 3.25f, -1e-30f, 65504.0f}) {
    for (size_t n : {1u, 13u, 127u, 4097u}) {
      for (int bits : kAllBits) {
        const std::vector<float> x(n, c);
        const std::vector<uint8_t> packed = pack(x, PackPolicy{bits});
        const PackedHeader h = read_packed_header(packed).value();
        EXPECT_EQ(h.scale, 0.0f);
        EXPECT_EQ(h.payload_bytes, 0u);
        EXPECT_EQ(packed.size(), kPackHeaderBytes + 8);
        EXPECT_EQ(unpack(packed), x) << c << " n " << n;
      }
    }
  }
  // An empty tensor packs to a header alone.
  std::vector<uint8_t> out;
  ASSERT_TRUE(pack_f32({}, Shape{0, 4}, PackPolicy{}, "t", &out).ok());
  EXPECT_EQ(unpack_tensor(out)->shape(), (Shape{0, 4}));
}

TEST(Packing, TwoLevelTensorIsExact) {
  // min and max decode exactly: q = 0 gives min, q = 2^b - 1 gives min + (max - min).
  std::vector<float> x(100, 0.0f);
  for (size_t i = 0; i < x.size(); i += 3) x[i] = 6.0f;
  for (int bits : kAllBits) EXPECT_EQ(unpack(pack(x, PackPolicy{bits})), x) << bits;
}

TEST(Packing, NanAndInfAreErrorsNamingTheTensor) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> x = gaussian(64, 2);
    x[37] = bad;
    std::vector<uint8_t> out;
    Status st = pack_f32(x, Shape{64}, PackPolicy{4}, "layer3.relu", &out);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("'layer3.relu'"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("element 37"), std::string::npos) << st.message();
  }
  // A range f32 side information cannot hold is refused too.
  std::vector<uint8_t> out;
  const std::vector<float> huge = {-3e38f, 3e38f};
  EXPECT_EQ(pack_f32(huge, Shape{2}, PackPolicy{4}, "wide", &out).code(),
            StatusCode::kInvalidArgument);
}

TEST(Packing, TinyRangesStayWithinHalfAStep) {
  // A step below the smallest normal f32 is raised to FLT_MIN: the error stays below FLT_MIN.
  const std::vector<float> x = {1e-39f, 2e-39f, 0.0f, 3e-39f};
  const std::vector<float> y = unpack(pack(x, PackPolicy{16}));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_LE(std::fabs(x[i] - y[i]), FLT_MIN);
}

TEST(Packing, BitPlanesFollowTheDocumentedLayout) {
  // Values 0..maxq with min 0 and max maxq give scale 1, so the codes are the values; plane p,
  // byte g, bit j must be bit p of code 8g + j.
  for (int bits : kAllBits) {
    const uint32_t maxq = (1u << bits) - 1;
    std::mt19937 rng(bits);
    std::vector<float> x(77);
    for (float& v : x) v = static_cast<float>(rng() % (maxq + 1));
    x[0] = 0.0f;
    x[1] = static_cast<float>(maxq);
    const std::vector<uint8_t> packed =
        pack(x, PackPolicy{bits, PackScale::kReal, PackShuffle::kBit, PackCodec::kNone});
    const PackedHeader h = read_packed_header(packed).value();
    ASSERT_EQ(h.scale, 1.0f);
    const size_t groups = (x.size() + 7) / 8;
    ASSERT_EQ(h.raw_bytes, groups * bits);
    const uint8_t* planes = packed.data() + h.header_bytes;
    for (int p = 0; p < bits; ++p) {
      for (size_t i = 0; i < groups * 8; ++i) {
        const uint32_t code = i < x.size() ? static_cast<uint32_t>(x[i]) : 0;
        const int bit = (planes[p * groups + i / 8] >> (i % 8)) & 1;
        ASSERT_EQ(bit, static_cast<int>((code >> p) & 1)) << "bits " << bits << " plane " << p;
      }
    }
  }
}

TEST(Packing, SparseReluActivationPacksFarBelowDenseBits) {
  // 32 x 40 x 40 floats = 200 KB, 90% zeros in coherent regions, as after a ReLU.
  const std::vector<float> x = relu_activation(32, 40, 40, 0.9, 3);
  for (int bits : {4, 8}) {
    const std::vector<uint8_t> packed = pack(x, PackPolicy{bits});
    const double dense = static_cast<double>(dense_bits_bytes(x.size(), bits));
    // Measured: 4.5x below dense 4-bit (36x below fp32), 3.6x below dense 8-bit.
    EXPECT_LT(static_cast<double>(packed.size()), dense / 3) << "bits " << bits;
    expect_within_half_step(x, unpack(packed), bits, PackScale::kReal);
  }
}

TEST(Packing, NoiseDoesNotCompressBelowDenseBits) {
  // The control: uniform noise gives 32 / b against fp32 and nothing more.
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(51200);
  for (float& v : x) v = u(rng);
  for (int bits : kAllBits) {
    for (PackShuffle shuffle : {PackShuffle::kBit, PackShuffle::kNone}) {
      const std::vector<uint8_t> packed =
          pack(x, PackPolicy{bits, PackScale::kReal, shuffle, PackCodec::kLz4});
      const uint64_t dense = dense_bits_bytes(x.size(), bits);
      EXPECT_GE(packed.size(), dense) << "bits " << bits;
      if (shuffle == PackShuffle::kBit) {
        // Bit planes are dense b-bit packing already; LZ4 cannot shrink noise, so it is stored
        // as it is, and the header is all it costs.
        EXPECT_LE(packed.size(), dense + kPackHeaderBytes + 8) << "bits " << bits;
        EXPECT_EQ(read_packed_header(packed)->policy.codec, PackCodec::kNone);
      }
    }
  }
}

TEST(Packing, PolicyNamesRoundTrip) {
  for (int bits : kAllBits) {
    for (PackScale kind : {PackScale::kReal, PackScale::kPow2}) {
      for (PackShuffle shuffle : {PackShuffle::kBit, PackShuffle::kNone}) {
        for (PackCodec codec : {PackCodec::kLz4, PackCodec::kNone}) {
          const PackPolicy p{bits, kind, shuffle, codec};
          EXPECT_EQ(parse_pack_policy(pack_policy_name(p)).value(), p);
        }
      }
    }
  }
  EXPECT_EQ(pack_policy_name(PackPolicy{4}), "isq4+bitshuffle+lz4");
  for (const char* bad : {"", "none", "isq", "isq9", "isq1", "isq32", "isq4+lz4+bitshuffle",
                          "isq4+zstd", "isq4+lz4+lz4", "isq4+", "isq04x"}) {
    EXPECT_FALSE(parse_pack_policy(bad).ok()) << bad;
  }
}

// ---- hostile input --------------------------------------------------------------------------

std::vector<std::vector<uint8_t>> sample_packings() {
  const std::vector<float> relu = relu_activation(4, 16, 16, 0.7, 5);
  const std::vector<float> noise = gaussian(777, 6);
  return {
      pack(relu, PackPolicy{4}),  // lz4 bit planes
      pack(relu, PackPolicy{16}),
      pack(noise, PackPolicy{3, PackScale::kPow2, PackShuffle::kNone, PackCodec::kNone}),
      pack(relu, PackPolicy{5, PackScale::kReal, PackShuffle::kNone, PackCodec::kLz4}),
      pack(noise, PackPolicy{7, PackScale::kReal, PackShuffle::kBit, PackCodec::kNone}),
      pack(std::vector<float>(50, 2.0f), PackPolicy{8}),  // constant
  };
}

TEST(PackingHostile, EveryTruncationAndExtensionIsRefused) {
  for (const std::vector<uint8_t>& packed : sample_packings()) {
    for (size_t len = 0; len < packed.size(); ++len) {
      const std::span<const uint8_t> prefix(packed.data(), len);
      EXPECT_FALSE(unpack_tensor(prefix).ok()) << "length " << len << " of " << packed.size();
    }
    std::vector<uint8_t> longer = packed;
    longer.push_back(0);
    Result<Tensor> r = unpack_tensor(longer);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("payload size"), std::string::npos);
  }
}

TEST(PackingHostile, RandomByteFlipsGiveAnErrorOrABoundedTensor) {
  std::mt19937 rng(7);
  int refused = 0, accepted = 0;
  for (const std::vector<uint8_t>& packed : sample_packings()) {
    const int64_t numel = read_packed_header(packed)->shape.numel();
    for (int trial = 0; trial < 2000; ++trial) {
      std::vector<uint8_t> b = packed;
      const int flips = 1 + static_cast<int>(rng() % 3);
      for (int f = 0; f < flips; ++f) b[rng() % b.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
      Result<Tensor> r = unpack_tensor(b);
      if (!r.ok()) {
        ++refused;
        EXPECT_FALSE(r.status().message().empty());
        continue;
      }
      ++accepted;
      // Accepted: the header it declares holds, and every value lies on its grid.
      const PackedHeader h = read_packed_header(b).value();
      ASSERT_EQ(r->numel(), numel);
      const double top = double{h.min} + ((1 << h.policy.bits) - 1) * double{h.scale};
      const double slack = 1e-6 * (std::fabs(double{h.min}) + std::fabs(top));
      for (float v : r->span<float>()) {
        ASSERT_TRUE(std::isfinite(v));
        ASSERT_GE(v, h.min - slack);
        ASSERT_LE(v, top + slack);
      }
    }
  }
  // Both outcomes happen: flips in the header are refused, flips in raw planes decode.
  EXPECT_GT(refused, 1000);
  EXPECT_GT(accepted, 100);
}

// A 4-bit, bit-shuffled, LZ4 header declaring `n` elements in `rank` dims of `dim` each, then a
// 16-byte payload of filler.
std::vector<uint8_t> forged_header(uint64_t n, int rank, int64_t dim) {
  const size_t header = kPackHeaderBytes + 8 * static_cast<size_t>(rank);
  const uint64_t raw = (n + 7) / 8 * 4, payload = 16;
  std::vector<uint8_t> b(header + payload, 0x11);
  std::fill(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(header), uint8_t{0});
  std::memcpy(b.data(), kPackMagic, 4);
  b[4] = kPackVersion & 0xff;
  b[7] = 4;   // bits
  b[9] = 1;   // bit shuffle
  b[10] = 1;  // lz4
  b[11] = static_cast<uint8_t>(rank);
  std::memcpy(b.data() + 16, &n, 8);
  const float scale = 1.0f;
  std::memcpy(b.data() + 28, &scale, 4);
  std::memcpy(b.data() + 32, &raw, 8);
  std::memcpy(b.data() + 40, &payload, 8);
  for (int d = 0; d < rank; ++d) std::memcpy(b.data() + kPackHeaderBytes + 8 * d, &dim, 8);
  return b;
}

TEST(PackingHostile, OversizedCountsAreRefusedBeforeAllocation) {
  // 2^40 elements (4 TiB of f32) declared in a 80-byte message: refused by the caps.
  Result<Tensor> r = unpack_tensor(forged_header(uint64_t{1} << 40, 2, int64_t{1} << 20));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(r.status().message().find("element count"), std::string::npos);
  // Under the default caps but over a caller's.
  const std::vector<uint8_t> packed = pack(gaussian(4097, 8), PackPolicy{4});
  UnpackCaps small;
  small.max_elements = 4096;
  EXPECT_EQ(unpack_tensor(packed, small).status().code(), StatusCode::kOutOfRange);
  small.max_elements = 4097;
  EXPECT_TRUE(unpack_tensor(packed, small).ok());
  // Dims that overflow when multiplied, or disagree with the count.
  EXPECT_FALSE(unpack_tensor(forged_header(1000, 8, int64_t{1} << 31)).ok());
  EXPECT_FALSE(unpack_tensor(forged_header(1000, 1, 999)).ok());
  EXPECT_FALSE(unpack_tensor(forged_header(1000, 1, -1000)).ok());
  // The forged header is otherwise valid: its LZ4 payload is what fails.
  Result<Tensor> garbage = unpack_tensor(forged_header(1000, 1, 1000));
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("LZ4"), std::string::npos)
      << garbage.status().message();
}

TEST(PackingHostile, EachBadFieldIsNamed) {
  const std::vector<uint8_t> good = pack(gaussian(100, 9), PackPolicy{6});
  ASSERT_TRUE(unpack_tensor(good).ok());
  struct Case {
    size_t offset;
    std::vector<uint8_t> bytes;
    const char* field;
  };
  const auto f32 = [](float v) {
    std::vector<uint8_t> b(4);
    std::memcpy(b.data(), &v, 4);
    return b;
  };
  const std::vector<Case> cases = {
      {0, {'X'}, "magic"},
      {4, {2}, "version"},
      {6, {1}, "dtype"},
      {7, {1}, "bits"},
      {7, {9}, "bits"},
      {7, {32}, "bits"},
      {8, {2}, "scale kind"},
      {9, {2}, "shuffle"},
      {10, {3}, "codec"},
      {11, {9}, "rank"},
      {11, {2}, "dims"},
      {12, {1}, "reserved"},
      {16, {101}, "dims"},
      {24, f32(std::numeric_limits<float>::quiet_NaN()), "min"},
      {24, f32(std::numeric_limits<float>::infinity()), "min"},
      {28, f32(-1.0f), "scale"},
      {28, f32(std::numeric_limits<float>::infinity()), "scale"},
      {28, f32(1e-40f), "scale"},
      {28, f32(1e37f), "scale"},
      {32, {1}, "raw size"},
      {40, {1}, "payload size"},
      {48, {99}, "dims"},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> b = good;
    std::copy(c.bytes.begin(), c.bytes.end(), b.begin() + static_cast<std::ptrdiff_t>(c.offset));
    Result<Tensor> r = unpack_tensor(b);
    ASSERT_FALSE(r.ok()) << c.field << " at " << c.offset;
    EXPECT_NE(r.status().message().find(c.field), std::string::npos)
        << c.field << ": " << r.status().message();
  }
  // A pow2 header whose scale is no power of two.
  std::vector<uint8_t> pow2 =
      pack(gaussian(100, 10), PackPolicy{6, PackScale::kPow2, PackShuffle::kBit, PackCodec::kLz4});
  const float not_pow2 = 0.3f;
  std::memcpy(pow2.data() + 28, &not_pow2, 4);
  EXPECT_NE(unpack_tensor(pow2).status().message().find("power of two"), std::string::npos);
}

TEST(PackingHostile, CodesAboveTheBitsAreRefused) {
  std::vector<uint8_t> b = pack(
      gaussian(100, 11), PackPolicy{3, PackScale::kReal, PackShuffle::kNone, PackCodec::kNone});
  const size_t header = read_packed_header(b)->header_bytes;
  b[header + 50] = 8;  // 3 bits hold 0..7
  Result<Tensor> r = unpack_tensor(b);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("code above"), std::string::npos);
}

TEST(PackingHostile, DestinationSizeIsChecked) {
  const std::vector<uint8_t> packed = pack(gaussian(100, 12), PackPolicy{4});
  std::vector<float> out(99);
  EXPECT_FALSE(unpack_f32(packed, UnpackCaps{}, out).ok());
}

}  // namespace
}  // namespace tessera
