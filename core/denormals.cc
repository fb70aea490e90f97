#include "core/denormals.h"

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define TESSERA_HAVE_MXCSR 1
#endif

namespace tessera {

#ifdef TESSERA_HAVE_MXCSR
namespace {
constexpr unsigned kFtz = 0x8000;  // MXCSR bit 15: flush to zero
constexpr unsigned kDaz = 0x0040;  // MXCSR bit 6: denormals are zero
}  // namespace

ScopedFlushDenormals::ScopedFlushDenormals() : saved_(_mm_getcsr()) {
  _mm_setcsr(saved_ | kFtz | kDaz);
}
ScopedFlushDenormals::~ScopedFlushDenormals() {
  _mm_setcsr(saved_);
}
bool denormals_flushed() {
  return (_mm_getcsr() & (kFtz | kDaz)) == (kFtz | kDaz);
}
#else
ScopedFlushDenormals::ScopedFlushDenormals() {}
ScopedFlushDenormals::~ScopedFlushDenormals() {}
bool denormals_flushed() {
  return false;
}
#endif

}  // namespace tessera
