#include "scheduler/fidelity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace tessera {

namespace {

// The indices of the k largest values of row[0..n), largest first (ties: lower index first).
std::vector<int64_t> top_k(const float* row, int64_t n, int64_t k) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  k = std::min(k, n);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

}  // namespace

std::string Fidelity::to_string() const {
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                "top-1 agreement %.1f%%, top-5 overlap %.1f%%, relative L2 %.2e, max |error| "
                "%.2e over %d row(s)",
                100.0 * top1_agreement, 100.0 * top5_overlap, relative_l2, max_abs_error, rows);
  return buf;
}

Status FidelityMeter::add(std::span<const Tensor> outputs, std::span<const Tensor> reference) {
  if (outputs.size() != reference.size() || outputs.empty()) {
    return invalid_argument("fidelity: " + std::to_string(outputs.size()) + " outputs against " +
                            std::to_string(reference.size()) + " reference outputs");
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& y = outputs[i];
    const Tensor& r = reference[i];
    if (y.dtype() != DType::kF32 || r.dtype() != DType::kF32 || y.shape() != r.shape()) {
      return invalid_argument("fidelity: output " + std::to_string(i) + " is " + y.describe() +
                              ", the reference " + r.describe() + " (both must be f32, one shape)");
    }
    const float* a = y.data<float>();
    const float* b = r.data<float>();
    for (int64_t e = 0; e < y.numel(); ++e) {
      const double d = static_cast<double>(a[e]) - static_cast<double>(b[e]);
      err2_ += d * d;
      ref2_ += static_cast<double>(b[e]) * static_cast<double>(b[e]);
      max_abs_ = std::max(max_abs_, std::abs(d));
    }
  }
  // Classifier rows of the first output.
  const Tensor& y = outputs[0];
  const Tensor& r = reference[0];
  const int64_t classes = y.rank() > 0 ? y.dim(y.rank() - 1) : 0;
  if (classes < 2) return Status();
  for (int64_t row = 0; row < y.numel() / classes; ++row) {
    const std::vector<int64_t> ty = top_k(y.data<float>() + row * classes, classes, 5);
    const std::vector<int64_t> tr = top_k(r.data<float>() + row * classes, classes, 5);
    top1_ += ty[0] == tr[0] ? 1 : 0;
    int common = 0;
    for (int64_t c : tr) common += std::find(ty.begin(), ty.end(), c) != ty.end() ? 1 : 0;
    top5_ += static_cast<double>(common) / static_cast<double>(tr.size());
    ++rows_;
  }
  return Status();
}

Fidelity FidelityMeter::result() const {
  Fidelity f;
  f.rows = rows_;
  f.top1_agreement = rows_ > 0 ? top1_ / rows_ : 0;
  f.top5_overlap = rows_ > 0 ? top5_ / rows_ : 0;
  f.relative_l2 = ref2_ > 0 ? std::sqrt(err2_ / ref2_) : std::sqrt(err2_);
  f.max_abs_error = max_abs_;
  return f;
}

}  // namespace tessera
