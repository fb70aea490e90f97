// libFuzzer target: the .tsr reader (graph/format/model_file.h) on arbitrary bytes, and what
// follows a successful load: shape inference again, a run on the reference kernels when the
// model is small (fuzz/fuzz_graph.h), and serialise -> load, which must succeed and give a
// model computing bitwise the same outputs.
#include <cstdint>
#include <cstdio>
#include <span>

#include "fuzz/fuzz_graph.h"
#include "graph/format/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  Result<LoadedModel> loaded = load_model_file_from_memory(std::span<const uint8_t>(data, size));
  fuzz::check_refusal(loaded.status());
  if (!loaded.ok()) return 0;
  Graph& g = loaded->graph;
  const Status inferred = g.infer_shapes();
  fuzz::check_refusal(inferred);
  if (!inferred.ok()) return 0;

  std::vector<Tensor> outputs;
  const bool ran = fuzz::run_if_small(g, fuzz::RunBounds{}, &outputs);

  Result<std::vector<uint8_t>> bytes = serialize_model(g, loaded->metadata);
  fuzz::check_refusal(bytes.status());
  if (!bytes.ok()) return 0;
  Result<LoadedModel> again = load_model_file_from_memory(*bytes);
  if (!again.ok() || !again->graph.infer_shapes().ok()) {
    std::fprintf(stderr, "a loaded model does not load after saving: %s\n",
                 again.status().to_string().c_str());
    __builtin_trap();
  }
  if (ran) {
    std::vector<Tensor> outputs2;
    const Status s = fuzz::run_reference_graph(again->graph, &outputs2);
    if (!s.ok() || !fuzz::same_outputs(outputs, outputs2)) {
      std::fprintf(stderr, "the saved model computes something else: %s\n", s.to_string().c_str());
      __builtin_trap();
    }
  }
  return 0;
}
