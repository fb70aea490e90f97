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

#include "fuzz/byte_flip.h"
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

  size_t done = 0;  // positions finished (the observer sees each one up to 4 times)
  const fuzz::ByteFlipCounts c =
      fuzz::byte_flip_sweep(bytes, positions, bounds, [&](size_t pos, uint8_t, const Status&) {
        if (pos == positions[done]) return;
        ++done;
        if (done % 1000 == 0) std::fprintf(stderr, "\r%zu / %zu bytes", done, positions.size());
      });
  std::printf("\n%s: %zu bytes (%zu of graph), %ld cases: %ld loaded, %ld inferred, %ld ran\n",
              argv[1], bytes.size(), graph_end, c.cases, c.loaded, c.inferred, c.ran);
  for (const auto& [code, n] : c.refusals) std::printf("  refused %-20s %ld\n", code.c_str(), n);
  return 0;
}
