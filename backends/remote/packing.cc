// The packing codec (see packing.h): ISQuant, bit shuffling and LZ4, and the hostile-input
// unpacker.
#include "backends/remote/packing.h"

#include <lz4.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace tessera {

static_assert(std::endian::native == std::endian::little,
              "the packed layout is little-endian and is read with memcpy");

namespace {

// Elements quantised at a time before they are shuffled (a multiple of 8, small enough for the
// codes to stay in L1).
constexpr size_t kBlock = 1024;

// The largest |val_min| + (2^b - 1) * scale a header may declare: half of FLT_MAX, so that no
// rounding of min + q * scale in f32 can reach infinity.
constexpr double kMaxDecodedMagnitude = 0.5 * static_cast<double>(FLT_MAX);

uint32_t max_code(int bits) {
  return (uint32_t{1} << bits) - 1;
}

// Bytes of the quantised stream of n elements: b planes of ceil(n / 8) bytes, or one container
// (1 or 2 bytes) per element without shuffling.
uint64_t stream_bytes(uint64_t n, int bits, PackShuffle shuffle) {
  if (shuffle == PackShuffle::kBit) return (n + 7) / 8 * static_cast<uint64_t>(bits);
  return n * (bits > 8 ? 2 : 1);
}

// Transposes an 8x8 bit matrix held in a uint64 (row r = byte r, column c = bit c of it): on
// return byte c holds, in bit r, what was bit c of byte r. With 8 codes in the 8 bytes, byte p
// of the result is bit plane p of those codes; applied to 8 plane bytes it gives the codes back.
// Three rounds of swapping off-diagonal blocks (2x2 bits, then 4x4, then 8x8... of the 8x8).
inline uint64_t transpose8x8(uint64_t x) {
  uint64_t t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
  x ^= t ^ (t << 7);
  t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
  x ^= t ^ (t << 14);
  t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
  x ^= t ^ (t << 28);
  return x;
}

// The grid of one tensor: x' = min + q * scale, q = round((x - min) * inv) in [0, maxq].
struct Grid {
  float min = 0;
  float scale = 0;
  float inv = 0;
  float maxq = 0;
};

// Codes of values[0, m) into lo (and hi, the high bytes, for 16 bits).
void quantise_block(const float* values, size_t m, const Grid& g, uint8_t* lo, uint8_t* hi) {
  if (hi == nullptr) {
    for (size_t i = 0; i < m; ++i) {
      const float d = std::min((values[i] - g.min) * g.inv + 0.5f, g.maxq);
      lo[i] = static_cast<uint8_t>(static_cast<int32_t>(d));
    }
  } else {
    for (size_t i = 0; i < m; ++i) {
      const float d = std::min((values[i] - g.min) * g.inv + 0.5f, g.maxq);
      const auto q = static_cast<uint32_t>(static_cast<int32_t>(d));
      lo[i] = static_cast<uint8_t>(q);
      hi[i] = static_cast<uint8_t>(q >> 8);
    }
  }
}

void dequantise_block(const uint8_t* lo, const uint8_t* hi, size_t m, const Grid& g, float* out) {
  if (hi == nullptr) {
    for (size_t i = 0; i < m; ++i) out[i] = g.min + static_cast<float>(lo[i]) * g.scale;
  } else {
    for (size_t i = 0; i < m; ++i) {
      const auto q = static_cast<uint32_t>(lo[i]) | (static_cast<uint32_t>(hi[i]) << 8);
      out[i] = g.min + static_cast<float>(q) * g.scale;
    }
  }
}

// Writes the b bit planes of n codes; `planes` holds b * ceil(n / 8) bytes.
void quantise_bitshuffle(std::span<const float> values, const Grid& g, int bits, uint8_t* planes) {
  const size_t n = values.size();
  const size_t groups = (n + 7) / 8;
  alignas(64) uint8_t lo[kBlock];
  alignas(64) uint8_t hi[kBlock];
  uint8_t* const hi_or_null = bits > 8 ? hi : nullptr;
  const int lo_planes = std::min(bits, 8);
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t m = std::min(kBlock, n - base);
    quantise_block(values.data() + base, m, g, lo, hi_or_null);
    const size_t m8 = (m + 7) / 8 * 8;  // the tail of the last group is code 0
    std::fill(lo + m, lo + m8, uint8_t{0});
    std::fill(hi + m, hi + m8, uint8_t{0});
    for (size_t k = 0; k < m8 / 8; ++k) {
      const size_t group = base / 8 + k;
      uint64_t x;
      std::memcpy(&x, lo + 8 * k, 8);
      x = transpose8x8(x);
      for (int p = 0; p < lo_planes; ++p) {
        planes[static_cast<size_t>(p) * groups + group] = static_cast<uint8_t>(x >> (8 * p));
      }
      if (bits > 8) {
        std::memcpy(&x, hi + 8 * k, 8);
        x = transpose8x8(x);
        for (int p = 8; p < bits; ++p) {
          planes[static_cast<size_t>(p) * groups + group] =
              static_cast<uint8_t>(x >> (8 * (p - 8)));
        }
      }
    }
  }
}

void bitunshuffle_dequantise(const uint8_t* planes, const Grid& g, int bits, std::span<float> out) {
  const size_t n = out.size();
  const size_t groups = (n + 7) / 8;
  alignas(64) uint8_t lo[kBlock];
  alignas(64) uint8_t hi[kBlock];
  const int lo_planes = std::min(bits, 8);
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t m = std::min(kBlock, n - base);
    for (size_t k = 0; k < (m + 7) / 8; ++k) {
      const size_t group = base / 8 + k;
      uint64_t x = 0;
      for (int p = 0; p < lo_planes; ++p) {
        x |= static_cast<uint64_t>(planes[static_cast<size_t>(p) * groups + group]) << (8 * p);
      }
      x = transpose8x8(x);
      std::memcpy(lo + 8 * k, &x, 8);
      if (bits > 8) {
        x = 0;
        for (int p = 8; p < bits; ++p) {
          x |= static_cast<uint64_t>(planes[static_cast<size_t>(p) * groups + group])
               << (8 * (p - 8));
        }
        x = transpose8x8(x);
        std::memcpy(hi + 8 * k, &x, 8);
      }
    }
    dequantise_block(lo, bits > 8 ? hi : nullptr, m, g, out.data() + base);
  }
}

// One container per code: a byte for b <= 8, two little-endian bytes for b = 16.
void quantise_plain(std::span<const float> values, const Grid& g, int bits, uint8_t* stream) {
  const size_t n = values.size();
  if (bits <= 8) {
    quantise_block(values.data(), n, g, stream, nullptr);
    return;
  }
  alignas(64) uint8_t lo[kBlock];
  alignas(64) uint8_t hi[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t m = std::min(kBlock, n - base);
    quantise_block(values.data() + base, m, g, lo, hi);
    for (size_t i = 0; i < m; ++i) {
      stream[2 * (base + i)] = lo[i];
      stream[2 * (base + i) + 1] = hi[i];
    }
  }
}

// Fails when a code exceeds 2^b - 1 (only a corrupt or hostile stream has one).
Status dequantise_plain(const uint8_t* stream, const Grid& g, int bits, std::span<float> out) {
  const size_t n = out.size();
  if (bits <= 8) {
    uint8_t high = 0;  // any bit above bit b-1 of any code
    const auto mask = static_cast<uint8_t>(~max_code(bits));
    for (size_t i = 0; i < n; ++i) high |= static_cast<uint8_t>(stream[i] & mask);
    if (high != 0) {
      return invalid_argument("packed tensor: payload holds a code above 2^" +
                              std::to_string(bits) + " - 1 (corrupt stream)");
    }
    dequantise_block(stream, nullptr, n, g, out.data());
    return Status();
  }
  alignas(64) uint8_t lo[kBlock];
  alignas(64) uint8_t hi[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t m = std::min(kBlock, n - base);
    for (size_t i = 0; i < m; ++i) {
      lo[i] = stream[2 * (base + i)];
      hi[i] = stream[2 * (base + i) + 1];
    }
    dequantise_block(lo, hi, m, g, out.data() + base);
  }
  return Status();
}

template <typename T>
void put(std::vector<uint8_t>* out, size_t offset, T v) {
  std::memcpy(out->data() + offset, &v, sizeof v);
}
template <typename T>
T get(std::span<const uint8_t> bytes, size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof v);
  return v;
}

// The grid for [lo, hi] at `bits`: fails when the range, or the values it decodes to, are beyond
// what f32 side information can hold.
Result<Grid> make_grid(float lo, float hi, const PackPolicy& policy, std::string_view name) {
  Grid g;
  g.min = lo;
  g.maxq = static_cast<float>(max_code(policy.bits));
  if (hi == lo) return g;  // constant: scale 0, no payload
  const double range = static_cast<double>(hi) - static_cast<double>(lo);
  double scale = range / max_code(policy.bits);
  if (policy.scale == PackScale::kPow2) {
    int e = 0;
    const double m = std::frexp(scale, &e);  // scale = m * 2^e, m in [0.5, 1)
    scale = m == 0.5 ? scale : std::ldexp(1.0, e);
  }
  // A range so small that its step is below the smallest normal f32: use that step (the codes
  // then span less than 2^b - 1; the error is at most FLT_MIN / 2).
  scale = std::max(scale, static_cast<double>(FLT_MIN));
  if (std::fabs(static_cast<double>(lo)) + max_code(policy.bits) * scale > kMaxDecodedMagnitude) {
    return invalid_argument("tensor '" + std::string(name) + "': its range [" + std::to_string(lo) +
                            ", " + std::to_string(hi) +
                            "] is beyond what f32 side information can hold (|min| + the "
                            "range must stay below FLT_MAX / 2)");
  }
  g.scale = static_cast<float>(scale);  // exact for pow2; for real, the f32 both sides use
  g.inv = 1.0f / g.scale;
  return g;
}

}  // namespace

bool pack_bits_supported(int bits) {
  return (bits >= 2 && bits <= 8) || bits == 16;
}

Status validate_pack_policy(const PackPolicy& policy) {
  if (!pack_bits_supported(policy.bits)) {
    return invalid_argument("packing policy: bits " + std::to_string(policy.bits) +
                            " not supported (2..8 or 16)");
  }
  if (policy.scale != PackScale::kReal && policy.scale != PackScale::kPow2) {
    return invalid_argument("packing policy: unknown scale kind");
  }
  if (policy.shuffle != PackShuffle::kNone && policy.shuffle != PackShuffle::kBit) {
    return invalid_argument("packing policy: unknown shuffle");
  }
  if (policy.codec != PackCodec::kNone && policy.codec != PackCodec::kLz4) {
    return invalid_argument("packing policy: unknown codec");
  }
  return Status();
}

std::string pack_policy_name(const PackPolicy& policy) {
  std::string s = "isq" + std::to_string(policy.bits);
  if (policy.scale == PackScale::kPow2) s += "+pow2";
  if (policy.shuffle == PackShuffle::kBit) s += "+bitshuffle";
  if (policy.codec == PackCodec::kLz4) s += "+lz4";
  return s;
}

Result<PackPolicy> parse_pack_policy(std::string_view name) {
  std::vector<std::string_view> tokens;
  for (size_t start = 0;;) {
    const size_t plus = name.find('+', start);
    tokens.push_back(name.substr(start, plus == std::string_view::npos ? plus : plus - start));
    if (plus == std::string_view::npos) break;
    start = plus + 1;
  }
  const std::string quoted = "packing policy '" + std::string(name) + "'";
  const std::string_view first = tokens[0];
  if (first.size() < 4 || first.size() > 5 || first.substr(0, 3) != "isq" ||
      !std::all_of(first.begin() + 3, first.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return invalid_argument(quoted + ": must start with isq<BITS> (e.g. isq4+bitshuffle+lz4)");
  }
  PackPolicy p;
  p.bits = std::stoi(std::string(first.substr(3)));
  p.scale = PackScale::kReal;
  p.shuffle = PackShuffle::kNone;
  p.codec = PackCodec::kNone;
  RETURN_IF_ERROR(validate_pack_policy(p).with_context(quoted));
  // The optional steps, each at most once and in this order.
  const std::string_view steps[] = {"pow2", "bitshuffle", "lz4"};
  size_t next = 0;
  for (size_t i = 1; i < tokens.size(); ++i) {
    size_t s = next;
    while (s < 3 && steps[s] != tokens[i]) ++s;
    if (s == 3) {
      return invalid_argument(quoted + ": unexpected '" + std::string(tokens[i]) +
                              "' (after isq<BITS>: +pow2, +bitshuffle, +lz4, in that order)");
    }
    if (s == 0) p.scale = PackScale::kPow2;
    if (s == 1) p.shuffle = PackShuffle::kBit;
    if (s == 2) p.codec = PackCodec::kLz4;
    next = s + 1;
  }
  return p;
}

uint64_t dense_bits_bytes(uint64_t elements, int bits) {
  return (elements * static_cast<uint64_t>(bits) + 7) / 8;
}

// ---- packing --------------------------------------------------------------------------------

Status pack_f32(std::span<const float> values, const Shape& shape, const PackPolicy& policy,
                std::string_view name, std::vector<uint8_t>* packed, PackScratch* scratch) {
  const std::string quoted = "tensor '" + std::string(name) + "'";
  RETURN_IF_ERROR(validate_pack_policy(policy).with_context(quoted));
  RETURN_IF_ERROR(shape.validate().with_context(quoted));
  if (static_cast<uint64_t>(shape.numel()) != values.size()) {
    return invalid_argument(quoted + ": shape " + shape.to_string() + " has " +
                            std::to_string(shape.numel()) + " elements, given " +
                            std::to_string(values.size()) + " values");
  }
  const size_t n = values.size();

  // Phase 1: min, max and a NaN/Inf screen in one pass (the ternaries vectorise as min/max).
  float lo = n ? values[0] : 0.0f;
  float hi = lo;
  uint32_t non_finite = 0;
  for (size_t i = 0; i < n; ++i) {
    const float x = values[i];
    lo = x < lo ? x : lo;
    hi = x > hi ? x : hi;
    uint32_t b;
    std::memcpy(&b, &x, 4);
    non_finite |= static_cast<uint32_t>((b & 0x7f800000u) == 0x7f800000u);
  }
  if (non_finite) {
    size_t i = 0;
    while (std::isfinite(values[i])) ++i;
    return invalid_argument(quoted + ": element " + std::to_string(i) + " is " +
                            (std::isnan(values[i]) ? "NaN" : "infinite") +
                            "; only finite tensors can be packed");
  }
  ASSIGN_OR_RETURN(const Grid g, make_grid(lo, hi, policy, name));

  // Phase 2: the header; the sizes are filled in once the payload is known.
  const bool constant = g.scale == 0.0f;
  const size_t header = kPackHeaderBytes + 8 * static_cast<size_t>(shape.rank());
  const uint64_t raw = constant ? 0 : stream_bytes(n, policy.bits, policy.shuffle);
  const bool try_lz4 = policy.codec == PackCodec::kLz4 && raw > 0 && raw <= LZ4_MAX_INPUT_SIZE;
  const size_t room =
      try_lz4 ? std::max<size_t>(raw, static_cast<size_t>(LZ4_compressBound(static_cast<int>(raw))))
              : raw;
  packed->resize(header + room);
  std::memcpy(packed->data(), kPackMagic, 4);
  put<uint16_t>(packed, 4, kPackVersion);
  put<uint8_t>(packed, 6, static_cast<uint8_t>(DType::kF32));
  put<uint8_t>(packed, 7, static_cast<uint8_t>(policy.bits));
  put<uint8_t>(packed, 8, static_cast<uint8_t>(policy.scale));
  put<uint8_t>(packed, 9, static_cast<uint8_t>(policy.shuffle));
  put<uint8_t>(packed, 11, static_cast<uint8_t>(shape.rank()));
  put<uint32_t>(packed, 12, 0);
  put<uint64_t>(packed, 16, n);
  put<float>(packed, 24, g.min);
  put<float>(packed, 28, g.scale);
  put<uint64_t>(packed, 32, raw);
  for (int d = 0; d < shape.rank(); ++d) put<int64_t>(packed, kPackHeaderBytes + 8 * d, shape[d]);

  // Phase 3: quantise (and shuffle) into the scratch stream, or straight into the payload when
  // there is no codec to run.
  PackScratch local;
  PackScratch* s = scratch ? scratch : &local;
  uint8_t* stream = packed->data() + header;
  if (try_lz4) {
    s->stream.resize(raw);
    stream = s->stream.data();
  }
  if (!constant) {
    if (policy.shuffle == PackShuffle::kBit) {
      quantise_bitshuffle(values, g, policy.bits, stream);
    } else {
      quantise_plain(values, g, policy.bits, stream);
    }
  }

  // Phase 4: LZ4, kept only when it makes the stream smaller.
  uint64_t payload = raw;
  PackCodec codec = PackCodec::kNone;
  if (try_lz4) {
    const int c = LZ4_compress_default(reinterpret_cast<const char*>(stream),
                                       reinterpret_cast<char*>(packed->data() + header),
                                       static_cast<int>(raw), static_cast<int>(room));
    if (c > 0 && static_cast<uint64_t>(c) < raw) {
      payload = static_cast<uint64_t>(c);
      codec = PackCodec::kLz4;
    } else {
      std::memcpy(packed->data() + header, stream, raw);
    }
  }
  put<uint8_t>(packed, 10, static_cast<uint8_t>(codec));
  put<uint64_t>(packed, 40, payload);
  packed->resize(header + payload);
  return Status();
}

Result<std::vector<uint8_t>> pack_tensor(const Tensor& tensor, const PackPolicy& policy,
                                         std::string_view name) {
  if (tensor.dtype() != DType::kF32) {
    return unimplemented("tensor '" + std::string(name) + "': packing takes f32, not " +
                         dtype_name(tensor.dtype()));
  }
  std::vector<uint8_t> packed;
  RETURN_IF_ERROR(pack_f32(tensor.span<float>(), tensor.shape(), policy, name, &packed));
  return packed;
}

// ---- unpacking: every byte is hostile -------------------------------------------------------

Result<PackedHeader> read_packed_header(std::span<const uint8_t> bytes, const UnpackCaps& caps) {
  auto bad = [](const std::string& field, const std::string& why) {
    return invalid_argument("packed tensor: " + field + ": " + why);
  };
  if (bytes.size() < kPackHeaderBytes) {
    return bad("header", std::to_string(bytes.size()) + " bytes, shorter than the " +
                             std::to_string(kPackHeaderBytes) + "-byte header");
  }
  if (std::memcmp(bytes.data(), kPackMagic, 4) != 0) return bad("magic", "not 'TPK1'");
  const auto version = get<uint16_t>(bytes, 4);
  if (version != kPackVersion) {
    return bad("version",
               std::to_string(version) + ", this build reads " + std::to_string(kPackVersion));
  }
  PackedHeader h;
  const uint8_t dtype = bytes[6];
  if (dtype != static_cast<uint8_t>(DType::kF32)) {
    return bad("dtype", std::to_string(dtype) + ", only f32 (0) is packed");
  }
  h.policy.bits = bytes[7];
  if (!pack_bits_supported(h.policy.bits)) {
    return bad("bits", std::to_string(h.policy.bits) + " (2..8 or 16)");
  }
  if (bytes[8] > 1) return bad("scale kind", std::to_string(bytes[8]) + " (0 real, 1 pow2)");
  if (bytes[9] > 1) return bad("shuffle", std::to_string(bytes[9]) + " (0 none, 1 bit)");
  if (bytes[10] > 1) return bad("codec", std::to_string(bytes[10]) + " (0 none, 1 lz4)");
  h.policy.scale = static_cast<PackScale>(bytes[8]);
  h.policy.shuffle = static_cast<PackShuffle>(bytes[9]);
  h.policy.codec = static_cast<PackCodec>(bytes[10]);
  const int rank = bytes[11];
  if (rank > kMaxRank) return bad("rank", std::to_string(rank) + " (at most 8)");
  if (get<uint32_t>(bytes, 12) != 0) return bad("reserved", "not zero");
  h.header_bytes = kPackHeaderBytes + 8 * static_cast<uint64_t>(rank);
  if (bytes.size() < h.header_bytes) {
    return bad("dims", std::to_string(bytes.size()) + " bytes, shorter than the " +
                           std::to_string(h.header_bytes) + "-byte header of rank " +
                           std::to_string(rank));
  }

  // The count against the caps first, then the dims against the count.
  h.elements = get<uint64_t>(bytes, 16);
  if (h.elements > caps.max_elements) {
    return out_of_range("packed tensor: element count: " + std::to_string(h.elements) +
                        " over the cap of " + std::to_string(caps.max_elements));
  }
  uint64_t product = 1;
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    const auto dim = get<int64_t>(bytes, kPackHeaderBytes + 8 * static_cast<size_t>(d));
    if (dim < 0 || dim > kMaxDim || !checked_mul(product, static_cast<uint64_t>(dim), &product)) {
      return bad("dims[" + std::to_string(d) + "]", std::to_string(dim) + " out of range");
    }
    dims[static_cast<size_t>(d)] = dim;
  }
  if (product != h.elements) {
    return bad("dims", "their product " + std::to_string(product) + " is not the element count " +
                           std::to_string(h.elements));
  }
  h.shape = Shape(std::move(dims));

  // The grid: finite, and decoding to finite values.
  h.min = get<float>(bytes, 24);
  h.scale = get<float>(bytes, 28);
  if (!std::isfinite(h.min)) return bad("min", "not finite");
  if (!std::isfinite(h.scale) || h.scale < 0.0f) return bad("scale", "not finite and >= 0");
  const bool constant = h.scale == 0.0f;
  if (!constant && h.scale < FLT_MIN) return bad("scale", "below the smallest normal f32");
  if (h.policy.scale == PackScale::kPow2 && !constant) {
    int e = 0;
    if (std::frexp(h.scale, &e) != 0.5f) return bad("scale", "not a power of two (pow2 scale)");
  }
  if (std::fabs(static_cast<double>(h.min)) +
          max_code(h.policy.bits) * static_cast<double>(h.scale) >
      kMaxDecodedMagnitude) {
    return bad("scale", "min + (2^bits - 1) * scale is beyond the f32 range");
  }

  // Sizes: raw from count, bits and shuffle; payload from the bytes present.
  h.raw_bytes = get<uint64_t>(bytes, 32);
  h.payload_bytes = get<uint64_t>(bytes, 40);
  const uint64_t want_raw =
      constant ? 0 : stream_bytes(h.elements, h.policy.bits, h.policy.shuffle);
  if (h.raw_bytes != want_raw) {
    return bad("raw size", std::to_string(h.raw_bytes) + ", the count and bits give " +
                               std::to_string(want_raw));
  }
  const uint64_t present = bytes.size() - h.header_bytes;
  if (h.payload_bytes != present) {
    return bad("payload size", std::to_string(h.payload_bytes) + " declared, " +
                                   std::to_string(present) + " present");
  }
  if (h.policy.codec == PackCodec::kNone && h.payload_bytes != h.raw_bytes) {
    return bad("payload size", "differs from the raw size without a codec");
  }
  if (h.policy.codec == PackCodec::kLz4) {
    if (h.raw_bytes == 0 || h.raw_bytes > LZ4_MAX_INPUT_SIZE) {
      return bad("raw size", std::to_string(h.raw_bytes) + " cannot be an LZ4 block");
    }
    if (h.payload_bytes == 0 ||
        h.payload_bytes > static_cast<uint64_t>(LZ4_compressBound(static_cast<int>(h.raw_bytes)))) {
      return bad("payload size", std::to_string(h.payload_bytes) + " is no LZ4 block of " +
                                     std::to_string(h.raw_bytes) + " bytes");
    }
  }
  return h;
}

Status unpack_f32(std::span<const uint8_t> bytes, const UnpackCaps& caps, std::span<float> out,
                  PackScratch* scratch) {
  ASSIGN_OR_RETURN(const PackedHeader h, read_packed_header(bytes, caps));
  if (out.size() != h.elements) {
    return invalid_argument("packed tensor: " + std::to_string(h.elements) +
                            " elements declared, the destination holds " +
                            std::to_string(out.size()));
  }
  Grid g;
  g.min = h.min;
  g.scale = h.scale;
  if (h.scale == 0.0f) {
    std::fill(out.begin(), out.end(), h.min);
    return Status();
  }

  // Phase 1: the quantised stream, decoded by LZ4_decompress_safe to exactly the raw size.
  const uint8_t* stream = bytes.data() + h.header_bytes;
  PackScratch local;
  if (h.policy.codec == PackCodec::kLz4) {
    PackScratch* s = scratch ? scratch : &local;
    s->stream.resize(h.raw_bytes);
    const int got = LZ4_decompress_safe(
        reinterpret_cast<const char*>(stream), reinterpret_cast<char*>(s->stream.data()),
        static_cast<int>(h.payload_bytes), static_cast<int>(h.raw_bytes));
    if (got < 0) return invalid_argument("packed tensor: payload: corrupt LZ4 stream");
    if (static_cast<uint64_t>(got) != h.raw_bytes) {
      return invalid_argument("packed tensor: payload: LZ4 stream decodes to " +
                              std::to_string(got) + " bytes, the raw size is " +
                              std::to_string(h.raw_bytes));
    }
    stream = s->stream.data();
  }

  // Phase 2: un-shuffle and dequantise.
  if (h.policy.shuffle == PackShuffle::kBit) {
    bitunshuffle_dequantise(stream, g, h.policy.bits, out);
    return Status();
  }
  return dequantise_plain(stream, g, h.policy.bits, out);
}

Result<Tensor> unpack_tensor(std::span<const uint8_t> bytes, const UnpackCaps& caps) {
  ASSIGN_OR_RETURN(const PackedHeader h, read_packed_header(bytes, caps));
  ASSIGN_OR_RETURN(Tensor t, Tensor::create(DType::kF32, h.shape));
  RETURN_IF_ERROR(unpack_f32(bytes, caps, t.span<float>()));
  return t;
}

}  // namespace tessera
