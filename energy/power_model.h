// The power model of seed 000 Sect. V-B (eq. 4-5):
//
//   P(l, d, f)       = P_dynamic(l, d, f) + P_static(d, f)                           (4)
//   P_dynamic(l,d,f) = (V_f^2 * f) / (V_fmax^2 * fmax) * P_dynamic(l, d, fmax)       (5)
//
// P_static(d, f) is the platform's static_w of that level; P_dynamic(l, d, fmax) is measured per
// layer by the profiler where a meter exists, and otherwise the platform's device-wide dynamic_w.
// When the platform does not know the voltages (mv 0), V_f = V_fmax is assumed, so the dynamic
// power scales with f alone (an upper bound: real voltages fall with frequency).
#pragma once

#include "energy/platform.h"

namespace tessera {

// The factor (V_f^2 f) / (V_fmax^2 fmax) of eq. 5 for level `level` of `d` (1 at the top level;
// 1 when the frequency is unknown).
double dynamic_power_scale(const PlatformDevice& d, int level);

// Eq. 4 with eq. 5: total power in watts of a load drawing `dynamic_at_max_w` dynamic power at
// the top level, run at `level`. A negative `dynamic_at_max_w` means "use the platform's".
double power_w(const PlatformDevice& d, int level, double dynamic_at_max_w = -1);

}  // namespace tessera
