// A byte-flip sweep of one .tsr model: every byte of the FlatBuffer part (the graph: everything
// before the weights section) and every 4099th byte of the weights, each flipped four ways (xor
// 0x01, xor 0x80, xor 0xff, set to 0), loaded, shapes inferred, and run on the reference kernels
// when the flipped model is within the fuzz bounds (fuzz/fuzz_graph.h). Built with the fuzz
// targets (ASan + UBSan); scripts/byte_flip_sweep.sh builds and runs it.
//
//   tessera_byte_flip_sweep MODEL.tsr [--run-flops F]
//
// --run-flops raises the bound on FLOPs of the flipped models that are run (default 2e7, which
// runs only small models). Prints the counts of cases, loads, runs and refusals by status code;
// a crash, a sanitizer report or a refusal without a message ends the sweep with the case.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "fuzz/fuzz_graph.h"
#include "graph/format/model_file.h"

int main(int argc, char** argv) {
  using namespace tessera;
  if (argc != 2 && argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL.tsr [--run-flops F]\n", argv[0]);
    return 2;
  }
  fuzz::RunBounds bounds;
  if (argc == 4) bounds.max_flops = std::atof(argv[3]);
  bounds.max_constant_bytes = UINT64_MAX;  // the weights of a real model
  bounds.max_nodes = 1 << 20;
  std::ifstream f(argv[1], std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8 || !load_model_from_memory(bytes).ok()) {
    std::fprintf(stderr, "%s: not a loadable .tsr file\n", argv[1]);
    return 2;
  }
  // The size prefix: the FlatBuffer's length; the weights section follows it, aligned.
  uint32_t fb_size = 0;
  std::memcpy(&fb_size, bytes.data(), 4);
  const size_t graph_end = std::min<size_t>(bytes.size(), size_t{fb_size} + 4);
  std::vector<size_t> positions;
  for (size_t i = 0; i < graph_end; ++i) positions.push_back(i);
  for (size_t i = graph_end; i < bytes.size(); i += 4099) positions.push_back(i);

  long cases = 0, loaded = 0, inferred = 0, ran = 0;
  std::map<std::string, long> refusals;
  for (size_t i : positions) {
    const uint8_t original = bytes[i];
    for (const uint8_t flipped : {uint8_t(original ^ 0x01), uint8_t(original ^ 0x80),
                                  uint8_t(original ^ 0xff), uint8_t{0}}) {
      if (flipped == original) continue;
      bytes[i] = flipped;
      ++cases;
      Result<Graph> m = load_model_from_memory(bytes);
      Status s = m.status();
      if (m.ok()) {
        ++loaded;
        s = m->infer_shapes();
        if (s.ok()) {
          ++inferred;
          std::vector<Tensor> out;
          if (fuzz::within_bounds(*m, bounds)) {
            s = fuzz::run_reference_graph(*m, &out);
            if (s.ok()) ++ran;
          }
        }
      }
      fuzz::check_refusal(s);
      if (!s.ok()) ++refusals[status_code_name(s.code())];
    }
    bytes[i] = original;
    if (positions.size() > 1000 && (&i - &positions[0]) % 1000 == 0) {
      std::fprintf(stderr, "\r%zu / %zu bytes", static_cast<size_t>(&i - &positions[0]),
                   positions.size());
    }
  }
  std::printf("\n%s: %zu bytes (%zu of graph), %ld cases: %ld loaded, %ld inferred, %ld ran\n",
              argv[1], bytes.size(), graph_end, cases, loaded, inferred, ran);
  for (const auto& [code, n] : refusals) std::printf("  refused %-20s %ld\n", code.c_str(), n);
  return 0;
}
