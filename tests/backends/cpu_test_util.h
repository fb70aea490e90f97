// Helpers shared by the cpu backend's tests.
#pragma once

#include <memory>
#include <vector>

#include "backends/cpu/thread_pool.h"

namespace tessera::testing {

// A cpu thread pool on cores 0 .. threads-1, or null where the machine has fewer cores.
inline std::shared_ptr<cpu::ThreadPool> cpu_pool_on_first_cores(int threads) {
  std::vector<int> cores;
  for (int c = 0; c < threads; ++c) cores.push_back(c);
  auto pool = cpu::ThreadPool::create(cpu::CoreSet(cores));
  if (!pool.ok()) return nullptr;
  return std::move(*pool);
}

}  // namespace tessera::testing
