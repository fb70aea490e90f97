// The byte-flip sweep of a .tsr model, shared by the sweep program (byte_flip_sweep.cc) and the
// unit test that sweeps a small model (tests/graph/hostile_input_test.cc): each chosen byte is
// flipped four ways (xor 0x01, 0x80, 0xff, and zero; a flip that leaves the byte as it was is not
// a case), and the flipped file is loaded, its shapes inferred, and run on the reference kernels
// when it is within the bounds. Every refusal must carry a message (check_refusal).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "fuzz/fuzz_graph.h"
#include "graph/format/model_file.h"

namespace tessera::fuzz {

struct ByteFlipCounts {
  long cases = 0;
  long loaded = 0;
  long inferred = 0;
  long ran = 0;
  std::map<std::string, long> refusals;  // by status code name
  long refused() const {
    long n = 0;
    for (const auto& [code, count] : refusals) n += count;
    return n;
  }
};

// Called after each case: the byte's position, its flipped value and the outcome (ok when the
// flipped file loaded, inferred and either ran or was out of bounds).
using ByteFlipObserver = std::function<void(size_t pos, uint8_t flipped, const Status& outcome)>;

// Sweeps `positions` of `bytes` (restored after each position).
inline ByteFlipCounts byte_flip_sweep(std::vector<uint8_t> bytes, std::span<const size_t> positions,
                                      const RunBounds& bounds,
                                      const ByteFlipObserver& observe = nullptr) {
  ByteFlipCounts c;
  for (size_t i : positions) {
    const uint8_t original = bytes[i];
    for (const uint8_t flipped : {uint8_t(original ^ 0x01), uint8_t(original ^ 0x80),
                                  uint8_t(original ^ 0xff), uint8_t{0}}) {
      if (flipped == original) continue;
      bytes[i] = flipped;
      ++c.cases;
      Result<Graph> m = load_model_from_memory(bytes);
      Status s = m.status();
      if (m.ok()) {
        ++c.loaded;
        s = m->infer_shapes();
        if (s.ok()) {
          ++c.inferred;
          if (within_bounds(*m, bounds)) {
            std::vector<Tensor> out;
            s = run_reference_graph(*m, &out);
            if (s.ok()) ++c.ran;
          }
        }
      }
      check_refusal(s);
      if (!s.ok()) ++c.refusals[status_code_name(s.code())];
      if (observe) observe(i, flipped, s);
    }
    bytes[i] = original;
  }
  return c;
}

}  // namespace tessera::fuzz
