// The error of the last failed dlopen/dlsym of the calling thread, taken and cleared.
#pragma once

#include <dlfcn.h>

#include <string>

namespace tessera {

// Returns the calling thread's pending dlerror() message ("" when none) and clears it. glibc
// keeps the message in a per-thread buffer until the next dlerror() call; a probe that fails
// (dlopen with RTLD_NOLOAD of a library not yet loaded, dlsym of an optional symbol) and is never
// followed by another dl* call leaves it allocated for good, which LeakSanitizer reports when it
// does not scan thread-local storage. Call this after every dl* call that may fail.
inline std::string take_dl_error() {
  const char* e = dlerror();
  std::string message = e != nullptr ? e : "";
  if (e != nullptr) dlerror();  // the second call frees the buffer
  return message;
}

}  // namespace tessera
