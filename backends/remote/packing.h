// The packing codec of a remote hop: seed 002 (DynO) Algorithm 1, "CNN-ISPM".
//
// An f32 tensor crossing a remote hop is packed in three steps, and unpacked in reverse:
//
//   1. ISQuant, input-specific quantisation: per tensor, val_min = min(x), val_max = max(x), and
//        scale = (val_max - val_min) / (2^b - 1)      (the paper's 2^-sl)
//        q     = round_to_nearest((x - val_min) / scale)   clamped to [0, 2^b - 1]
//      with b = 2..8 or 16 bits. The unpacker computes x' = val_min + q * scale, so
//      |x - x'| <= scale / 2 (plus the f32 rounding of these two formulas).
//   2. Bit shuffling (Masui 2015): the b-bit codes are transposed into b bit planes, plane p
//      holding bit p of every element, one bit per element. Only the b planes that can hold a 1
//      are written, so the shuffled stream is already dense b-bit packing (ceil(n/8) * b bytes):
//      mostly-zero activations give long runs of zero bytes in every plane.
//   3. LZ4 (liblz4, LZ4_compress_default). When LZ4 does not make the stream smaller, the stream
//      is stored as it is and the header says so (codec none): noise costs dense b-bit, no more.
//
// What the paper leaves open, decided here (docs/packing.md has the reasoning and figures):
//   - rounding: to nearest, ties away from zero (q = floor(d + 0.5) on d >= 0);
//   - the scale: real by default (every one of the 2^b codes is used); PackScale::kPow2 rounds it
//     up to a power of two (the paper's log2 form with an integer sl: "which bits to keep");
//   - side information: val_min and scale as f32, with the dtype, shape, bits, shuffle, codec and
//     both sizes, in a self-describing header that is part of the packed bytes (and so of every
//     size and ratio Tessera reports; seed 002 pitfall 3);
//   - a constant tensor (val_max == val_min, all-zero ReLU maps included): scale 0 and no payload
//     at all; it unpacks exactly (the sign of a zero is not kept);
//   - NaN or Inf anywhere in the tensor: an InvalidArgument naming the tensor and the element,
//     never a float-to-int cast of a NaN (undefined behaviour); so is a range max - min that f32
//     cannot hold.
//
// Wire layout of one packed tensor (little-endian, no padding):
//
//   offset size  field
//        0    4  magic "TPK1"
//        4    2  version (kPackVersion)
//        6    1  dtype of the unpacked tensor (DType; only f32)
//        7    1  bits b (2..8 or 16)
//        8    1  scale kind (PackScale)
//        9    1  shuffle (PackShuffle)
//       10    1  codec of the payload (PackCodec: what was done, not what was asked)
//       11    1  rank r (0..kMaxRank)
//       12    4  reserved, zero
//       16    8  element count n (the product of the dims)
//       24    4  val_min (f32)
//       28    4  scale (f32; 0 for a constant tensor)
//       32    8  raw size: bytes of the quantised stream before the codec (0 when constant)
//       40    8  payload size: bytes after the header (equal to the raw size for codec none)
//       48  8*r  dims (int64 each)
//   48+8*r       payload
//
// The unpacker treats every input as hostile: read_packed_header() checks every field (and
// every size against the others and against UnpackCaps) before anything is allocated, the LZ4
// stream is decoded with LZ4_decompress_safe only and must yield exactly the raw size, and a
// stream whose codes exceed 2^b - 1 is refused. An unpacked tensor therefore always has the
// declared shape and finite values in [val_min, val_min + (2^b - 1) * scale], whatever the bytes.
//
// Thread rule: every function is safe to call from several threads at once (a PackScratch is
// used by one thread at a time).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/shape.h"
#include "core/status.h"
#include "core/tensor.h"

namespace tessera {

inline constexpr char kPackMagic[4] = {'T', 'P', 'K', '1'};
inline constexpr uint16_t kPackVersion = 1;
// Bytes of the header before the dims; a packed tensor of rank r has kPackHeaderBytes + 8 * r.
inline constexpr size_t kPackHeaderBytes = 48;

enum class PackScale : uint8_t {
  kReal = 0,  // scale = (max - min) / (2^b - 1), as the paper's formula gives
  kPow2 = 1,  // the smallest power of two >= that: fewer codes used, a coarser grid
};
enum class PackShuffle : uint8_t {
  kNone = 0,  // one byte (b <= 8) or two little-endian bytes (b = 16) per code
  kBit = 1,   // b bit planes of ceil(n / 8) bytes each
};
enum class PackCodec : uint8_t {
  kNone = 0,  // the quantised stream as it is
  kLz4 = 1,   // LZ4 block format, decoded with LZ4_decompress_safe
};

// How one hop packs its tensors: the `packing` of a remote Stage.
struct PackPolicy {
  int bits = 8;  // 2..8 or 16
  PackScale scale = PackScale::kReal;
  PackShuffle shuffle = PackShuffle::kBit;
  PackCodec codec = PackCodec::kLz4;  // asked for; a stream LZ4 cannot shrink is stored as is

  bool operator==(const PackPolicy&) const = default;
};

// Whether `bits` is one the codec offers (2..8, 16).
bool pack_bits_supported(int bits);
// OK, or InvalidArgument naming the bad field.
Status validate_pack_policy(const PackPolicy& policy);

// The policy as a Stage::packing string: "isq<B>[+pow2][+bitshuffle][+lz4]", e.g.
// "isq4+bitshuffle+lz4" (the default shuffle and codec at 4 bits). Tokens in that order; a token
// left out means that step is off (real scale, no shuffle, no codec).
std::string pack_policy_name(const PackPolicy& policy);
Result<PackPolicy> parse_pack_policy(std::string_view name);

// Bytes of dense b-bit packing of n elements, ceil(n * b / 8): the reference against which a
// packed size shows what the codec (not the container change from fp32) gained.
uint64_t dense_bits_bytes(uint64_t elements, int bits);

// Buffers a packer or unpacker reuses from call to call (to keep allocation out of a hot loop).
// Optional everywhere; one thread at a time.
struct PackScratch {
  std::vector<uint8_t> stream;  // the quantised (and shuffled) stream before the codec
};

// Packs `values` (an f32 tensor of `shape`, whose element count must match) with `policy` into
// `packed` (resized to exactly the packed bytes, header included). `name` names the tensor in
// errors (NaN, Inf, a range f32 cannot hold).
Status pack_f32(std::span<const float> values, const Shape& shape, const PackPolicy& policy,
                std::string_view name, std::vector<uint8_t>* packed,
                PackScratch* scratch = nullptr);
// The same for a Tensor (which must be f32).
Result<std::vector<uint8_t>> pack_tensor(const Tensor& tensor, const PackPolicy& policy,
                                         std::string_view name);

// Limits an unpacker enforces before it allocates anything.
struct UnpackCaps {
  uint64_t max_elements = uint64_t{1} << 28;  // 1 GiB of f32
};

// What the header of a packed tensor declares, every field checked (see read_packed_header).
struct PackedHeader {
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t elements = 0;
  PackPolicy policy;  // policy.codec: the codec of the payload
  float min = 0;
  float scale = 0;  // 0: a constant tensor (no payload)
  uint64_t raw_bytes = 0;
  uint64_t payload_bytes = 0;
  uint64_t header_bytes = 0;  // kPackHeaderBytes + 8 * rank
};

// Parses and checks the header of `bytes` (a whole packed tensor): magic, version, dtype, bits,
// scale kind, shuffle, codec, rank, dims against the element count, the count against `caps`,
// min and scale finite (and the largest value they decode to), the raw size against what the
// count and bits give, and the payload size against the bytes present. Allocates nothing but the
// shape. Errors are InvalidArgument (OutOfRange for a count over the caps) naming the field.
Result<PackedHeader> read_packed_header(std::span<const uint8_t> bytes,
                                        const UnpackCaps& caps = {});

// Unpacks `bytes` into `out`, whose size must equal the declared element count (check it with
// read_packed_header first). A corrupt payload (a bad LZ4 stream, a wrong decoded size, codes
// beyond 2^b - 1) is an InvalidArgument; `out` may then be partly written.
Status unpack_f32(std::span<const uint8_t> bytes, const UnpackCaps& caps, std::span<float> out,
                  PackScratch* scratch = nullptr);
// Unpacks into a new f32 tensor of the declared shape.
Result<Tensor> unpack_tensor(std::span<const uint8_t> bytes, const UnpackCaps& caps = {});

}  // namespace tessera
