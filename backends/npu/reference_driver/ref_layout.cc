// The boundary of the reference NPU: half-precision conversion, the NCHW <-> NHWC8 layout
// conversion every input and output goes through, and int8 quantisation parameters.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/npu/reference_driver/ref_model.h"

namespace tnpu_ref {

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)
    return static_cast<uint16_t>(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): scale into the 10-bit mantissa with round-to-nearest-even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    // value = mant * 2^(e - 150) and the half subnormal unit is 2^-24: q = mant >> (126 - e).
    const uint32_t mant = (abs & 0x007fffffu) | 0x00800000u;
    const int rshift = 126 - static_cast<int>(abs >> 23);
    uint32_t q = mant >> rshift;
    const uint32_t rem = mant & ((1u << rshift) - 1);
    const uint32_t half = 1u << (rshift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      const float v = std::ldexp(static_cast<float>(mant), -24);
      std::memcpy(&x, &v, 4);
      x |= sign;
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// Host NCHW (dense) -> on-chip NHWC8: channels become innermost, padded with zeros to a multiple
// of 8. Processed one channel block at a time so that each output pixel is written once.
template <typename T>
void nchw_to_nhwc8(const T* src, const TensorDesc& t, T* dst) {
  const int64_t hw = t.h * t.w, c = t.c, cp = t.cpad();
  for (int64_t n = 0; n < t.n; ++n) {
    const T* s = src + n * c * hw;
    T* d = dst + n * hw * cp;
    for (int64_t c0 = 0; c0 < cp; c0 += kChannelBlock) {
      const int64_t cn = std::min<int64_t>(kChannelBlock, c - c0);
      for (int64_t p = 0; p < hw; ++p) {
        T* out = d + p * cp + c0;
        int64_t k = 0;
        for (; k < cn; ++k) out[k] = s[(c0 + k) * hw + p];
        for (; k < kChannelBlock; ++k) out[k] = T(0);
      }
    }
  }
}

template <typename T>
void nhwc8_to_nchw(const T* src, const TensorDesc& t, T* dst) {
  const int64_t hw = t.h * t.w, c = t.c, cp = t.cpad();
  for (int64_t n = 0; n < t.n; ++n) {
    const T* s = src + n * hw * cp;
    T* d = dst + n * c * hw;
    for (int64_t c0 = 0; c0 < c; c0 += kChannelBlock) {
      const int64_t cn = std::min<int64_t>(kChannelBlock, c - c0);
      for (int64_t p = 0; p < hw; ++p) {
        const T* in = s + p * cp + c0;
        for (int64_t k = 0; k < cn; ++k) d[(c0 + k) * hw + p] = in[k];
      }
    }
  }
}

template void nchw_to_nhwc8<uint16_t>(const uint16_t*, const TensorDesc&, uint16_t*);
template void nchw_to_nhwc8<int8_t>(const int8_t*, const TensorDesc&, int8_t*);
template void nhwc8_to_nchw<uint16_t>(const uint16_t*, const TensorDesc&, uint16_t*);
template void nhwc8_to_nchw<int8_t>(const int8_t*, const TensorDesc&, int8_t*);

QParams qparams_for_range(float lo, float hi) {
  // The range always contains 0 (so that zero padding and ReLU are exact) and is never
  // degenerate.
  lo = std::min(lo, 0.f);
  hi = std::max(hi, 0.f);
  if (!std::isfinite(lo)) lo = -65504.f;
  if (!std::isfinite(hi)) hi = 65504.f;
  if (hi - lo < 1e-6f) hi = lo + 1e-6f;
  QParams q;
  q.scale = (hi - lo) / 255.f;
  const float zp = std::round(-128.f - lo / q.scale);
  q.zero_point = static_cast<int32_t>(std::clamp(zp, -128.f, 127.f));
  return q;
}

}  // namespace tnpu_ref
