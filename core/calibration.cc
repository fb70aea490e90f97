// int8 activation calibration: histograms and the range search (see calibration.h).
#include "core/calibration.h"

#include <algorithm>
#include <cmath>

namespace tessera {

bool parse_calibration_method(const std::string& s, CalibrationMethod* out) {
  if (s == "minmax") {
    *out = CalibrationMethod::kMinMax;
  } else if (s == "percentile") {
    *out = CalibrationMethod::kPercentile;
  } else if (s == "mse") {
    *out = CalibrationMethod::kMse;
  } else {
    return false;
  }
  return true;
}

const char* calibration_method_name(CalibrationMethod m) {
  switch (m) {
    case CalibrationMethod::kMinMax:
      return "minmax";
    case CalibrationMethod::kPercentile:
      return "percentile";
    case CalibrationMethod::kMse:
      return "mse";
  }
  return "?";
}

void Histogram::add(const float* x, size_t n) {
  constexpr float kMax = 65504.f;  // fp16's largest value: the NPU's calibration program is fp16
  if (counts_.empty()) {
    float lo = 0, hi = 0;
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(x[i])) continue;
      lo = std::min(lo, std::max(x[i], -kMax));
      hi = std::max(hi, std::min(x[i], kMax));
    }
    if (!(hi - lo > 0)) hi = lo + 1e-6f;
    lo_ = lo, hi_ = hi;
    min_ = INFINITY, max_ = -INFINITY;
    counts_.assign(kBins, 0.0);
  }
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    const float v = std::clamp(x[i], -kMax, kMax);
    total_ += 1;
    min_ = std::min(min_, v);
    max_ = std::max(max_, v);
    if (v == 0) {
      zeros_ += 1;
      continue;
    }
    while (v > hi_) grow_up();
    while (v < lo_) grow_down();
    const double t = (static_cast<double>(v) - lo_) / (static_cast<double>(hi_) - lo_) * kBins;
    counts_[static_cast<size_t>(std::clamp(t, 0.0, static_cast<double>(kBins - 1)))] += 1;
  }
}

// [lo, hi] -> [lo, lo + 2 (hi - lo)]: bins 2i and 2i+1 become bin i.
void Histogram::grow_up() {
  for (int i = 0; i < kBins / 2; ++i)
    counts_[static_cast<size_t>(i)] =
        counts_[static_cast<size_t>(2 * i)] + counts_[static_cast<size_t>(2 * i + 1)];
  std::fill(counts_.begin() + kBins / 2, counts_.end(), 0.0);
  hi_ = lo_ + 2 * (hi_ - lo_);
}

// [lo, hi] -> [hi - 2 (hi - lo), hi]: bins 2i and 2i+1 become bin kBins / 2 + i.
void Histogram::grow_down() {
  for (int i = kBins / 2 - 1; i >= 0; --i)
    counts_[static_cast<size_t>(kBins / 2 + i)] =
        counts_[static_cast<size_t>(2 * i)] + counts_[static_cast<size_t>(2 * i + 1)];
  std::fill(counts_.begin(), counts_.begin() + kBins / 2, 0.0);
  lo_ = hi_ - 2 * (hi_ - lo_);
}

namespace {

// Prefix sums over bins of count, count * centre and count * centre^2: the clipping error of
// any bound is then O(1).
struct Prefix {
  std::vector<double> n, s1, s2;
  explicit Prefix(const Histogram& h) : n(Histogram::kBins + 1), s1(n.size()), s2(n.size()) {
    const double w = (static_cast<double>(h.hi()) - h.lo()) / Histogram::kBins;
    for (int i = 0; i < Histogram::kBins; ++i) {
      const double c = h.edge(i) + w / 2, k = h.counts()[static_cast<size_t>(i)];
      const size_t j = static_cast<size_t>(i);
      n[j + 1] = n[j] + k;
      s1[j + 1] = s1[j] + k * c;
      s2[j + 1] = s2[j] + k * c * c;
    }
  }
};

// Squared error (not normalised) of the range [edge(ia), edge(ib)].
double range_error(const Histogram& h, const Prefix& p, int ia, int ib) {
  const size_t a_i = static_cast<size_t>(ia), b_i = static_cast<size_t>(ib);
  const size_t end = static_cast<size_t>(Histogram::kBins);
  const double a = std::min(h.edge(ia), 0.0), b = std::max(h.edge(ib), 0.0);
  const double below = a * a * p.n[a_i] - 2 * a * p.s1[a_i] + p.s2[a_i];
  const double above =
      (p.s2[end] - p.s2[b_i]) - 2 * b * (p.s1[end] - p.s1[b_i]) + b * b * (p.n[end] - p.n[b_i]);
  const double step = (b - a) / 255.0;
  const double inside = p.n[b_i] - p.n[a_i];
  return std::max(below, 0.0) + std::max(above, 0.0) + inside * step * step / 12.0;
}

// The bin edges at or below 0 are [0, zero_edge]; those at or above 0 are [zero_edge', kBins].
int last_edge_at_or_below_zero(const Histogram& h) {
  int i = 0;
  while (i < Histogram::kBins && h.edge(i + 1) <= 0) ++i;
  return i;
}

}  // namespace

std::pair<float, float> choose_range(const Histogram& h, CalibrationMethod method) {
  const float lo = std::min(h.min(), 0.f), hi = std::max(h.max(), 0.f);
  const double nonzero = h.total() - h.zeros();
  if (h.empty()) return {0.f, 0.f};
  if (method == CalibrationMethod::kMinMax || nonzero <= 0) return {lo, hi};
  const int kBins = Histogram::kBins;
  const int z = last_edge_at_or_below_zero(h);
  if (method == CalibrationMethod::kPercentile) {
    // Two-sided 99.99%: 0.005% of the values may fall below the range and 0.005% above it.
    const double tail = 5e-5 * h.total();
    int ia = 0, ib = kBins;
    double c = 0;
    while (ia < z && c + h.counts()[static_cast<size_t>(ia)] <= tail)
      c += h.counts()[static_cast<size_t>(ia++)];
    c = 0;
    while (ib > z + 1 && c + h.counts()[static_cast<size_t>(ib - 1)] <= tail)
      c += h.counts()[static_cast<size_t>(--ib)];
    return {std::clamp(static_cast<float>(h.edge(ia)), lo, 0.f),
            std::clamp(static_cast<float>(h.edge(ib)), 0.f, hi)};
  }
  // kMse: coordinate descent over the lower and the upper bound, each an exhaustive search over
  // the bin edges on its side of zero.
  const Prefix p(h);
  int ia = 0, ib = kBins;
  double best = range_error(h, p, ia, ib);
  for (int round = 0; round < 3; ++round) {
    const double before = best;
    for (int j = std::min(z + 1, kBins); j <= kBins; ++j) {
      const double e = range_error(h, p, ia, j);
      if (e < best) best = e, ib = j;
    }
    for (int j = 0; j <= z; ++j) {
      const double e = range_error(h, p, j, ib);
      if (e < best) best = e, ia = j;
    }
    if (best >= before) break;
  }
  return {std::clamp(static_cast<float>(h.edge(ia)), lo, 0.f),
          std::clamp(static_cast<float>(h.edge(ib)), 0.f, hi)};
}

}  // namespace tessera
