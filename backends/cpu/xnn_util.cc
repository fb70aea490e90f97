#include "backends/cpu/xnn_util.h"

#include <cstdlib>
#include <limits>
#include <mutex>

#include "core/allocator.h"

namespace tessera::cpu {

namespace {

// XNNPACK's packed weights and workspaces placed as Tessera's own buffers (allocate_aligned: 2 MiB
// pages for the large ones). Everything comes from the C allocator, so memory from either this
// allocator or XNNPACK's default one can be released by the other.
void* xnn_allocate(void*, size_t size) {
  return std::malloc(size);
}
void* xnn_reallocate(void*, void* pointer, size_t size) {
  return std::realloc(pointer, size);
}
void xnn_deallocate(void*, void* pointer) {
  std::free(pointer);
}
void* xnn_aligned_allocate(void*, size_t alignment, size_t size) {
  return allocate_aligned(size, alignment);
}

const xnn_allocator kXnnAllocator = {nullptr,        xnn_allocate,         xnn_reallocate,
                                     xnn_deallocate, xnn_aligned_allocate, xnn_deallocate};

}  // namespace

Status ensure_xnnpack() {
  static std::once_flag once;
  static xnn_status status = xnn_status_success;
  std::call_once(once, [] { status = xnn_initialize(&kXnnAllocator); });
  if (status == xnn_status_unsupported_hardware) {
    return unimplemented("XNNPACK does not support this CPU");
  }
  return xnn_check(status, "initialising XNNPACK");
}

Status xnn_check(xnn_status s, const std::string& what) {
  switch (s) {
    case xnn_status_success:
      return Status();
    case xnn_status_invalid_parameter:
      return invalid_argument(what + ": XNNPACK rejected a parameter");
    case xnn_status_unsupported_parameter:
      return unimplemented(what + ": XNNPACK does not support this configuration");
    case xnn_status_unsupported_hardware:
      return unimplemented(what + ": XNNPACK does not support this CPU");
    case xnn_status_out_of_memory:
      return resource_exhausted(what + ": XNNPACK ran out of memory");
    default:
      return internal_error(what + ": XNNPACK error " + std::to_string(static_cast<int>(s)));
  }
}

namespace {

// XNNPACK refuses an output range with min >= max (and NaN bounds), which ONNX Clip allows:
// min > max makes every value max, min == max every value min.
bool clip_is_xnn_range(const Activation& a) {
  return a.alpha < a.beta;
}

}  // namespace

ClampRange clamp_of(const Activation& a) {
  const float inf = std::numeric_limits<float>::infinity();
  switch (a.kind) {
    case ActivationKind::kRelu:
      return {0.f, inf};
    case ActivationKind::kClip:
      if (!clip_is_xnn_range(a)) return {-inf, inf};  // a separate pass applies it
      return {a.alpha, a.beta};
    default:
      return {-inf, inf};
  }
}

bool activation_is_clamp(const Activation& a) {
  return a.kind == ActivationKind::kNone || a.kind == ActivationKind::kRelu ||
         (a.kind == ActivationKind::kClip && clip_is_xnn_range(a));
}

}  // namespace tessera::cpu
