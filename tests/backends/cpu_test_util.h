// Helpers shared by the cpu backend's tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/thread_pool.h"
#include "ops/attributes.h"

namespace tessera::testing {

// A cpu thread pool on cores 0 .. threads-1, or null where the machine has fewer cores.
inline std::shared_ptr<cpu::ThreadPool> cpu_pool_on_first_cores(int threads) {
  std::vector<int> cores;
  for (int c = 0; c < threads; ++c) cores.push_back(c);
  auto pool = cpu::ThreadPool::create(cpu::CoreSet(cores));
  if (!pool.ok()) return nullptr;
  return std::move(*pool);
}

// A fused activation on a node's attributes as the fusion passes write it ("" for none): clip
// with bounds [clip_lo, clip_hi], leaky_relu with slope 0.1.
inline void set_fused_activation(Attributes& a, const std::string& activation, float clip_lo,
                                 float clip_hi) {
  if (activation.empty()) return;
  if (activation == "clip") {
    a.set("activation_alpha", clip_lo);
    a.set("activation_beta", clip_hi);
  }
  if (activation == "leaky_relu") a.set("activation_alpha", 0.1f);
  a.set("activation", activation);
}

}  // namespace tessera::testing
