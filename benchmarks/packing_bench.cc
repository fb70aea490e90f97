// Throughput of the packing codec of remote hops (backends/remote/packing.h) on real activation
// sizes: ResNet-18's layer3 output (256x14x14, 196 KiB of fp32, the ~200 KB tensor of seed 002
// Sect. 4.2.1) and its conv1 output (64x112x112, 3.06 MiB). The data are ReLU-like (coherent
// zero regions, 50% zeros as random weights give, 90% as trained deep layers give).
//
//   BM_Pack/<C>/<H>/<W>/<bits>/<zero%>     pack_f32 (quantise, bit planes, LZ4)
//   BM_Unpack/<C>/<H>/<W>/<bits>/<zero%>   unpack_f32 (LZ4_decompress_safe, planes, dequantise)
//
// bytes_per_second is fp32 bytes in (pack) or out (unpack), one thread; counter `ratio` is fp32
// bytes over packed bytes (headers included). Goals (issue 22): >= 1 GB/s per core, a 200 KB
// tensor in <= 0.2 ms.
//
// Run: build/benchmarks/tessera_packing_bench --benchmark_repetitions=5
//          --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include "backends/remote/packing.h"
#include "tests/backends/packing_test_util.h"

namespace tessera {
namespace {

struct Case {
  Shape shape;
  std::vector<float> values;
  PackPolicy policy;
};

Case make_case(const benchmark::State& state) {
  const int c = static_cast<int>(state.range(0)), h = static_cast<int>(state.range(1)),
            w = static_cast<int>(state.range(2));
  Case k;
  k.shape = Shape{1, c, h, w};
  k.values = relu_activation(c, h, w, static_cast<double>(state.range(4)) / 100.0, 1);
  k.policy.bits = static_cast<int>(state.range(3));
  return k;
}

void BM_Pack(benchmark::State& state) {
  const Case k = make_case(state);
  std::vector<uint8_t> packed;
  PackScratch scratch;
  for (auto _ : state) {
    Status st = pack_f32(k.values, k.shape, k.policy, "bench", &packed, &scratch);
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
    benchmark::DoNotOptimize(packed.data());
  }
  const auto fp32 = static_cast<int64_t>(k.values.size() * sizeof(float));
  state.SetBytesProcessed(state.iterations() * fp32);
  state.counters["ratio"] = static_cast<double>(fp32) / static_cast<double>(packed.size());
}

void BM_Unpack(benchmark::State& state) {
  const Case k = make_case(state);
  std::vector<uint8_t> packed;
  PackScratch scratch;
  if (Status st = pack_f32(k.values, k.shape, k.policy, "bench", &packed, &scratch); !st.ok()) {
    state.SkipWithError(st.to_string().c_str());
    return;
  }
  std::vector<float> out(k.values.size());
  for (auto _ : state) {
    Status st = unpack_f32(packed, UnpackCaps{}, out, &scratch);
    if (!st.ok()) state.SkipWithError(st.to_string().c_str());
    benchmark::DoNotOptimize(out.data());
  }
  const auto fp32 = static_cast<int64_t>(k.values.size() * sizeof(float));
  state.SetBytesProcessed(state.iterations() * fp32);
  state.counters["ratio"] = static_cast<double>(fp32) / static_cast<double>(packed.size());
}

void Shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"C", "H", "W", "bits", "zero%"});
  for (const auto& [c, h, w] : {std::tuple{256, 14, 14}, std::tuple{64, 112, 112}}) {
    for (int bits : {4, 8, 16}) {
      for (int zeros : {50, 90}) b->Args({c, h, w, bits, zeros});
    }
  }
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Pack)->Apply(Shapes);
BENCHMARK(BM_Unpack)->Apply(Shapes);

}  // namespace
}  // namespace tessera

BENCHMARK_MAIN();
