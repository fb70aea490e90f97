// Writes a seed corpus for the wire decoder's fuzz target: one valid message of every type, Runs
// and Results with raw tensors of several dtypes and with packed tensors.
//
//   tessera_fuzz_wire_seeds DIR
#include <cstdio>
#include <string>
#include <vector>

#include "backends/remote/wire.h"

int main(int argc, char** argv) {
  using namespace tessera;
  using namespace tessera::remote;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<std::pair<std::string, std::vector<uint8_t>>> seeds;
  seeds.emplace_back("hello", encode_hello(1, Hello{0x9e3779b9u, "fnv1a64:0123", "c"}));
  seeds.emplace_back(
      "welcome",
      encode_welcome(
          2, Welcome{"fnv1a64:0123", "graph:01", "cpu", "cpu device", 1 << 30, 1 << 30, {3, 7}}));
  seeds.emplace_back(
      "compile",
      encode_compile(3, CompileRequest{"", "graph:01", "isq4+bitshuffle+lz4", {0, 1, 2, 5}}));
  seeds.emplace_back("compiled", encode_compiled(4, Compiled{1, {0, 4}, {9}, 4096}));
  std::vector<float> relu(3 * 7 * 9);
  for (size_t i = 0; i < relu.size(); ++i) relu[i] = (i % 3 == 0) ? 0.0f : 0.1f * (i % 17);
  std::vector<Tensor> tensors = {Tensor::from_floats(Shape{3, 7, 9}, relu),
                                 Tensor::from_int64s(Shape{2}, std::vector<int64_t>{1, -1})};
  seeds.emplace_back("run_raw", encode_run(5, 1, 100, true, tensors, TensorEncoding{}).value());
  seeds.emplace_back(
      "run_packed",
      encode_run(6, 1, 0, false, tensors, TensorEncoding{true, PackPolicy{4}}).value());
  seeds.emplace_back(
      "result",
      encode_result(7, 1.5, std::vector<double>{0.5, 1.0}, tensors, TensorEncoding{}).value());
  seeds.emplace_back("release", encode_release(8, 1));
  seeds.emplace_back("released", encode_empty(8, MsgType::kReleased));
  seeds.emplace_back("ping", encode_ping(9, 64, 32));
  seeds.emplace_back("pong", encode_pong(9, 64));
  seeds.emplace_back("error", encode_error(10, invalid_argument("bad")));
  seeds.emplace_back("bye", encode_empty(11, MsgType::kBye));
  for (const auto& [name, bytes] : seeds) {
    const std::string path = dir + "/" + name + ".trm";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
    std::fclose(f);
  }
  std::printf("wrote %zu seeds to %s\n", seeds.size(), dir.c_str());
  return 0;
}
