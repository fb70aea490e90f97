// Flush-to-zero (FTZ) and denormals-are-zero (DAZ) for the threads that run kernels.
//
// Denormal floats (below 1.2e-38 in magnitude) take a slow microcode path on x86: a reference
// kernel fed denormal inputs ran 6x slower, which an input can use to slow a server down. Kernels
// run with FTZ and DAZ set, as XNNPACK's operators already do on their workers: denormal inputs
// read as zero and denormal results are written as zero. No network Tessera runs needs values
// that small.
//
// Thread rule: the mode is per thread; a ScopedFlushDenormals sets it on the constructing thread
// and restores the previous mode in its destructor, on the same thread (a thread started inside
// the scope inherits the mode: Linux copies MXCSR to new threads). On CPUs without SSE
// (non-x86 builds) it does nothing.
#pragma once

namespace tessera {

class ScopedFlushDenormals {
 public:
  ScopedFlushDenormals();
  ~ScopedFlushDenormals();
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  unsigned saved_ = 0;
};

// Whether FTZ and DAZ are both set on the calling thread (false where unsupported).
bool denormals_flushed();

}  // namespace tessera
