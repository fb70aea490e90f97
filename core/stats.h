// Order statistics of measured samples (latencies, byte counts) and the UTC timestamp that
// profiles and reports record. Plain functions: safe from any thread.
#pragma once

#include <string>
#include <vector>

namespace tessera {

// The median: the middle sample, or the mean of the middle two for an even count; 0 for none.
double median(std::vector<double> samples);

// The nearest-rank percentile p (0 < p <= 100): the smallest sample with at least p% of the
// samples at or below it; 0 for none. p outside (0, 100] is clamped into it.
double nearest_rank_percentile(std::vector<double> samples, double p);

// The current time as "YYYY-MM-DDTHH:MM:SSZ" (UTC).
std::string utc_timestamp();

}  // namespace tessera
