// A program that leaks on purpose, run only in the sanitizer build (tests/CMakeLists.txt) with the
// same LeakSanitizer suppressions as the unit tests: the test passes only when LeakSanitizer
// still reports this leak, so the suppressions of third-party driver libraries
// (scripts/sanitizers/lsan.supp) cannot hide a leak in Tessera's own code.
#include <cstdio>

#include "core/allocator.h"

namespace {

// Not inlined, so the leak report names this function.
[[gnu::noinline]] void* tessera_lsan_canary_leak() {
  return tessera::allocate_aligned(4096);
}

}  // namespace

int main() {
  void* volatile leaked = tessera_lsan_canary_leak();
  std::printf("canary: leaked %p\n", leaked);
  leaked = nullptr;
  return 0;
}
