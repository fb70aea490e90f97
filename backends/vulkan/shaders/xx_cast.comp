// Cast between f32, f16, i8, u8, i32, i64 and bool with the rules of ops/cast.cc: float ->
// integer truncates and saturates (NaN gives 0), integer -> integer wraps, anything -> bool is
// != 0 (NaN gives true), f16 goes through f32 with round-to-nearest-even, i64 -> f32 rounds once.
// Buffers are 32-bit words; one thread writes one output word (4 u8/i8/bool, 2 f16, 1 f32/i32)
// or one i64 (two words), so no two threads share a word. Values travel as a float (float
// sources) or as an i64 lo/hi word pair (integer and bool sources).
// Spec: 0 local size, 1 source dtype, 2 destination dtype (DType numbering of core/dtype.h).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint SRC = 0;
layout(constant_id = 2) const uint DST = 0;
layout(std430, binding = 0) readonly buffer S { uint src[]; };
layout(std430, binding = 1) writeonly buffer D { uint dst[]; };
layout(push_constant) uniform P { uint numel, units; } p;

const uint F32 = 0, F16 = 1, I8 = 2, U8 = 3, I32 = 4, I64 = 5, BOOL = 6;
const bool SRC_FLOAT = SRC == F32 || SRC == F16;
const uint DST_BYTES = DST == F32 || DST == I32 ? 4 : DST == F16 ? 2 : DST == I64 ? 8 : 1;
const uint PER_UNIT = DST_BYTES >= 4 ? 1 : 4 / DST_BYTES;

float half_to_float(uint h) {
  const uint sign = (h & 0x8000u) << 16;
  const uint e = (h >> 10) & 0x1fu;
  uint mant = h & 0x3ffu;
  if (e == 0x1fu) return uintBitsToFloat(sign | 0x7f800000u | (mant << 13));
  if (e != 0) return uintBitsToFloat(sign | ((e + 112u) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24, exact in f32.
  const float f = float(mant) * (1.0 / 16777216.0);
  return sign != 0 ? -f : f;
}

// Round-to-nearest-even f32 -> f16 bits, as core/dtype.cc float_to_half.
uint float_to_half(float f) {
  const uint x = floatBitsToUint(f);
  const uint sign = (x >> 16) & 0x8000u;
  const uint a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a < 0x38800000u) {
    if (a < 0x33000000u) return sign;
    const uint mant = (a & 0x7fffffu) | 0x800000u;
    const uint shift = 126u - (a >> 23);
    uint h = mant >> shift;
    const uint rem = mant & ((1u << shift) - 1u);
    const uint half_ = 1u << (shift - 1u);
    if (rem > half_ || (rem == half_ && (h & 1u) != 0)) ++h;
    return sign | h;
  }
  uint h = (a - 0x38000000u) >> 13;
  const uint rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0)) ++h;
  return sign | h;
}

uint byte_at(uint e) { return (src[e >> 2] >> (8u * (e & 3u))) & 0xffu; }

float load_float(uint e) {
  if (SRC == F16) return half_to_float((src[e >> 1] >> (16u * (e & 1u))) & 0xffffu);
  return uintBitsToFloat(src[e]);
}

// The source element as an i64 (lo, hi) pair.
uvec2 load_int(uint e) {
  if (SRC == I64) return uvec2(src[2 * e], src[2 * e + 1]);
  int v;
  if (SRC == I32) v = int(src[e]);
  else if (SRC == I8) v = int(byte_at(e) << 24) >> 24;
  else if (SRC == U8) v = int(byte_at(e));
  else v = byte_at(e) != 0 ? 1 : 0;  // BOOL
  return uvec2(uint(v), v < 0 ? 0xffffffffu : 0u);
}

// i64 -> f32, rounded once: a 64-bit magnitude is narrowed to 32 bits whose lowest bit is sticky
// (far below the 24 bits kept), then converted (correctly rounded) and scaled exactly.
float int_to_float(uvec2 v) {
  const bool neg = (v.y >> 31) != 0;
  uint lo = v.x, hi = v.y;
  if (neg) {  // two's complement negation
    lo = ~lo + 1u;
    hi = ~hi + (lo == 0u ? 1u : 0u);
  }
  float m;
  if (hi == 0u) {
    m = float(lo);
  } else {
    const int shift = findMSB(hi) + 1;  // 1..32
    uint narrow = shift == 32 ? hi : (hi << (32 - shift)) | (lo >> shift);
    const uint dropped = shift == 32 ? lo : (lo & ((1u << shift) - 1u));
    if (dropped != 0u) narrow |= 1u;
    m = ldexp(float(narrow), shift);
  }
  return neg ? -m : m;
}

// Float -> integer: truncate, saturate at the destination's range, NaN gives 0 (as i64 pair).
uvec2 float_to_int(float v) {
  if (isnan(v)) return uvec2(0u);
  const float t = trunc(v);
  if (DST == I64) {
    if (t >= 9223372036854775808.0) return uvec2(0xffffffffu, 0x7fffffffu);
    if (t <= -9223372036854775808.0) return uvec2(0u, 0x80000000u);
    const float a = abs(t);
    uint hi = uint(floor(a / 4294967296.0));
    uint lo = uint(a - float(hi) * 4294967296.0);
    if (t < 0.0) {
      lo = ~lo + 1u;
      hi = ~hi + (lo == 0u ? 1u : 0u);
    }
    return uvec2(lo, hi);
  }
  float lo_bound = -2147483648.0, hi_bound = 2147483647.0;
  if (DST == I8) {
    lo_bound = -128.0;
    hi_bound = 127.0;
  } else if (DST == U8) {
    lo_bound = 0.0;
    hi_bound = 255.0;
  }
  int r;
  if (t <= lo_bound) r = int(lo_bound);
  else if (DST == I32 && t >= 2147483648.0) r = 2147483647;
  else if (t >= hi_bound) r = int(hi_bound);
  else r = int(t);
  return uvec2(uint(r), r < 0 ? 0xffffffffu : 0u);
}

// The destination bits of element e (low DST_BYTES * 8 bits; i64 uses both words).
uvec2 convert(uint e) {
  if (SRC_FLOAT) {
    const float v = load_float(e);
    if (DST == F32) return uvec2(floatBitsToUint(v), 0u);
    if (DST == F16) return uvec2(float_to_half(v), 0u);
    if (DST == BOOL) return uvec2(isnan(v) || v != 0.0 ? 1u : 0u, 0u);
    return float_to_int(v);
  }
  const uvec2 v = load_int(e);
  if (DST == F32) return uvec2(floatBitsToUint(int_to_float(v)), 0u);
  if (DST == F16) return uvec2(float_to_half(int_to_float(v)), 0u);
  if (DST == BOOL) return uvec2(v.x != 0u || v.y != 0u ? 1u : 0u, 0u);
  return v;  // integer -> integer: the low bits, modulo 2^bits
}

void main() {
  const uint u = linear_index();
  if (u >= p.units) return;
  if (DST == I64) {
    const uvec2 v = convert(u);
    dst[2 * u] = v.x;
    dst[2 * u + 1] = v.y;
    return;
  }
  uint word = 0u;
  for (uint k = 0; k < PER_UNIT; ++k) {
    const uint e = u * PER_UNIT + k;
    if (e >= p.numel) break;
    const uint bits = convert(e).x & (DST_BYTES == 4 ? 0xffffffffu : (1u << (8u * DST_BYTES)) - 1u);
    word |= bits << (8u * DST_BYTES * k);
  }
  dst[u] = word;
}
