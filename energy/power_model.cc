#include "energy/power_model.h"

namespace tessera {

double dynamic_power_scale(const PlatformDevice& d, int level) {
  const DvfsLevel& top = d.max_level();
  const DvfsLevel& at = d.dvfs[static_cast<size_t>(level)];
  if (top.mhz <= 0 || at.mhz <= 0) return 1.0;
  const double v = at.mv > 0 && top.mv > 0 ? static_cast<double>(at.mv) / top.mv : 1.0;
  return v * v * static_cast<double>(at.mhz) / top.mhz;
}

double power_w(const PlatformDevice& d, int level, double dynamic_at_max_w) {
  const double dyn = dynamic_at_max_w < 0 ? d.dynamic_w : dynamic_at_max_w;
  return d.dvfs[static_cast<size_t>(level)].static_w + dynamic_power_scale(d, level) * dyn;
}

}  // namespace tessera
