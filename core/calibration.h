// int8 activation calibration: which [lo, hi] range each tensor is quantised to, chosen from the
// values the calibration inputs produce. Shared by the cpu device's int8 path (`tessera
// calibrate`, scheduler/calibrate.h) and the reference NPU driver, which compiles this file into
// its own library (it links no Tessera library) and names it through ref_calibration.h.
//
// Like a vendor toolchain, the caller gathers a histogram of every activation over the
// calibration inputs and then picks the range by one of three methods:
//   - kMinMax: the observed minimum and maximum (TFLite's default). One outlier in millions of
//     values stretches the range and coarsens the step for all the others;
//   - kPercentile: the 0.01% and 99.99% quantiles (clips the rarest values);
//   - kMse: the range that minimises the expected squared quantisation error, rounding noise
//     (step^2 / 12 per value inside the range) plus clipping error (squared distance to the
//     bound of every value outside it); the search runs over histogram bin edges.
// Every range contains 0, so that zero padding and ReLU's zeros stay exact.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

enum class CalibrationMethod { kMinMax, kPercentile, kMse };

// Parses "minmax" | "percentile" | "mse"; false for anything else.
bool parse_calibration_method(const std::string& s, CalibrationMethod* out);
const char* calibration_method_name(CalibrationMethod m);

// Thread rule: a Histogram is used by one thread at a time; the functions are pure.

// Counts of values over kBins equal bins spanning [lo, hi], gathered in one pass: the first batch
// of values sets the span (always containing 0), and a later value outside it doubles the span
// on its side, merging bins pairwise, until it fits. Exact zeros are counted apart (a zero is
// always representable and never adds rounding noise), and the exact extremes are kept.
class Histogram {
 public:
  static constexpr int kBins = 2048;
  void add(const float* x, size_t n);
  bool empty() const { return counts_.empty(); }
  float lo() const { return lo_; }
  float hi() const { return hi_; }
  float min() const { return min_; }
  float max() const { return max_; }
  double total() const { return total_; }
  double zeros() const { return zeros_; }
  const std::vector<double>& counts() const { return counts_; }
  // The value at the left edge of bin `i` (i in [0, kBins]).
  double edge(int i) const { return lo_ + (static_cast<double>(hi_) - lo_) * i / kBins; }

 private:
  void grow_up();
  void grow_down();
  float lo_ = 0, hi_ = 0, min_ = 0, max_ = 0;
  double total_ = 0, zeros_ = 0;
  std::vector<double> counts_;
};

// The range picked by `method` from `h` (for kMinMax the observed extremes); the result contains
// 0 and lies within [min(h.min(), 0), max(h.max(), 0)].
std::pair<float, float> choose_range(const Histogram& h, CalibrationMethod method);

}  // namespace tessera
