// core/stats.h against hand-computed values and a brute-force definition of the percentile.
#include "core/stats.h"

#include <gtest/gtest.h>

#include <cctype>
#include <random>

namespace tessera {
namespace {

TEST(Stats, MedianOfOddEvenAndNoSamples) {
  EXPECT_EQ(median({}), 0);
  EXPECT_EQ(median({3}), 3);
  EXPECT_EQ(median({5, 1, 3}), 3);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({-1, -1, 7, 7}), 3);
}

TEST(Stats, NearestRankPercentile) {
  std::vector<double> v;
  for (int i = 20; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(nearest_rank_percentile(v, 95), 19);  // rank ceil(0.95 * 20) = 19
  EXPECT_EQ(nearest_rank_percentile(v, 100), 20);
  EXPECT_EQ(nearest_rank_percentile(v, 50), 10);
  EXPECT_EQ(nearest_rank_percentile(v, 0), 1);
  EXPECT_EQ(nearest_rank_percentile(v, 1e9), 20);
  EXPECT_EQ(nearest_rank_percentile({}, 95), 0);
  EXPECT_EQ(nearest_rank_percentile({7}, 95), 7);
  // Brute force: the smallest sample with at least p% of the samples at or below it.
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> s(1 + rng() % 40);
    for (double& x : s) x = static_cast<double>(rng() % 17);
    const double p = 1 + static_cast<double>(rng() % 100);
    double want = 1e300;
    for (double c : s) {
      size_t at_or_below = 0;
      for (double x : s) at_or_below += x <= c ? 1 : 0;
      if (100.0 * static_cast<double>(at_or_below) >= p * static_cast<double>(s.size()) - 1e-9) {
        want = std::min(want, c);
      }
    }
    EXPECT_EQ(nearest_rank_percentile(s, p), want) << "p " << p << ", " << s.size() << " samples";
  }
}

TEST(Stats, UtcTimestampIsIso8601) {
  // "YYYY-MM-DDTHH:MM:SSZ": digits everywhere but the separators.
  const std::string t = utc_timestamp();
  const std::string shape = "dddd-dd-ddTdd:dd:ddZ";
  ASSERT_EQ(t.size(), shape.size()) << t;
  for (size_t i = 0; i < t.size(); ++i) {
    if (shape[i] == 'd') {
      EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(t[i]))) << t;
    } else {
      EXPECT_EQ(t[i], shape[i]) << t;
    }
  }
}

}  // namespace
}  // namespace tessera
