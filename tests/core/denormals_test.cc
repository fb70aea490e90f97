#include "core/denormals.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <thread>

namespace tessera {
namespace {

[[maybe_unused]] float half_of(float x) {  // used where the CPU has MXCSR
  volatile float v = x;                    // computed at run time, under the thread's MXCSR
  return v * 0.5f;
}

TEST(Denormals, ScopeFlushesAndRestoresOnItsThread) {
#if defined(__SSE__) || defined(__x86_64__)
  volatile float denormal = FLT_MIN / 4;  // 2.9e-39
  ASSERT_FALSE(denormals_flushed());
  EXPECT_GT(half_of(denormal), 0.0f);
  {
    const ScopedFlushDenormals flush;
    EXPECT_TRUE(denormals_flushed());
    EXPECT_EQ(half_of(denormal), 0.0f);            // a denormal input reads as zero (DAZ)
    EXPECT_EQ(half_of(FLT_MIN), 0.0f);             // a denormal result is written as zero (FTZ)
    EXPECT_EQ(half_of(4 * FLT_MIN), 2 * FLT_MIN);  // normal numbers are untouched
  }
  EXPECT_FALSE(denormals_flushed());
  EXPECT_GT(half_of(denormal), 0.0f);
#else
  GTEST_SKIP() << "no MXCSR on this CPU";
#endif
}

}  // namespace
}  // namespace tessera
