// Fidelity of a reduced-precision run (docs/precision.md): how far its outputs are from the f32
// run's on the same inputs. For classifiers, top-1 agreement and top-5 overlap over the rows of
// the first output (the last dimension being the classes); for any model, the relative L2 error
// over all outputs. Plain functions of tensors: safe from any thread.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace tessera {

// Below this top-1 agreement `tessera run --fidelity` warns that a precision changes answers.
inline constexpr double kFidelityTop1Goal = 0.99;

struct Fidelity {
  int rows = 0;               // classifier rows compared (frames x batch)
  double top1_agreement = 0;  // share of rows whose arg max is the f32 one's
  double top5_overlap = 0;    // mean share of the f32 top 5 found in the top 5
  double relative_l2 = 0;     // ||y - y_f32|| / ||y_f32|| over every output element
  double max_abs_error = 0;

  // "top-1 agreement 100.0%, top-5 overlap 99.6%, relative L2 3.1e-03 over 8 rows".
  std::string to_string() const;
};

// Accumulates frames: each call adds one frame's outputs against the f32 reference's.
class FidelityMeter {
 public:
  // Fails when the two output lists differ in count, dtype or shape, or are not f32.
  Status add(std::span<const Tensor> outputs, std::span<const Tensor> reference);
  Fidelity result() const;

 private:
  int rows_ = 0;
  double top1_ = 0, top5_ = 0;
  double err2_ = 0, ref2_ = 0, max_abs_ = 0;
};

}  // namespace tessera
