// Small helpers around the XNNPACK operator API.
#pragma once

#include <xnnpack.h>

#include <memory>
#include <string>

#include "core/status.h"
#include "ops/activation.h"

namespace tessera::cpu {

// Initialises XNNPACK once per process; the error says why it cannot run on this CPU.
Status ensure_xnnpack();

// An XNNPACK status as a Tessera Status naming what was being done.
Status xnn_check(xnn_status s, const std::string& what);

// Owns one XNNPACK operator.
struct XnnOperatorDeleter {
  void operator()(xnn_operator_t op) const { xnn_delete_operator(op); }
};
using XnnOperator = std::unique_ptr<xnn_operator, XnnOperatorDeleter>;

// The [min, max] output clamp that expresses `a` inside an XNNPACK operator (relu and clip), or
// (-inf, +inf) for activations that need a separate pass. A Clip whose min is not below its max
// (allowed by ONNX, refused by XNNPACK) or has NaN bounds is not a clamp: it needs the pass.
struct ClampRange {
  float min;
  float max;
};
ClampRange clamp_of(const Activation& a);
// True when `a` is fully expressed by clamp_of().
bool activation_is_clamp(const Activation& a);

}  // namespace tessera::cpu
