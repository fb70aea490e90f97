// Writes a seed corpus for the unpacker's fuzz target: packed tensors of every bitwidth, scale
// kind, shuffle and codec, of odd sizes, constant and ReLU-like. Without valid seeds the fuzzer
// spends its time finding the magic and the size relations of the header.
//
//   tessera_fuzz_unpack_seeds DIR
#include <cstdio>
#include <string>

#include "backends/remote/packing.h"
#include "tests/backends/packing_test_util.h"

int main(int argc, char** argv) {
  using namespace tessera;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  int written = 0;
  const std::vector<float> relu = relu_activation(3, 7, 9, 0.6, 1);  // 189 elements
  const std::vector<float> constant(13, 1.5f);
  for (int bits : {2, 3, 4, 5, 6, 7, 8, 16}) {
    for (int variant = 0; variant < 8; ++variant) {
      PackPolicy p;
      p.bits = bits;
      p.scale = (variant & 1) ? PackScale::kPow2 : PackScale::kReal;
      p.shuffle = (variant & 2) ? PackShuffle::kNone : PackShuffle::kBit;
      p.codec = (variant & 4) ? PackCodec::kNone : PackCodec::kLz4;
      for (const auto* values : {&relu, &constant}) {
        std::vector<uint8_t> packed;
        const Shape shape = values == &relu ? Shape{3, 7, 9} : Shape{13};
        if (!pack_f32(*values, shape, p, "seed", &packed).ok()) return 1;
        const std::string path =
            dir + "/" + pack_policy_name(p) + (values == &relu ? "_relu" : "_constant") + ".tpk";
        std::FILE* f = std::fopen(path.c_str(), "wb");
        if (f == nullptr || std::fwrite(packed.data(), 1, packed.size(), f) != packed.size()) {
          std::fprintf(stderr, "cannot write %s\n", path.c_str());
          return 1;
        }
        std::fclose(f);
        ++written;
      }
    }
  }
  std::printf("%d seeds in %s\n", written, dir.c_str());
  return 0;
}
