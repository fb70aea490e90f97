// libFuzzer target: the ONNX importer (graph/onnx/onnx_import.h) on arbitrary bytes, through the
// whole conversion `tessera convert` performs: import, shape inference with constant folding,
// the graph passes, serialising with the .tsr writer and loading what it wrote. A model that
// converts must load back and, when small (fuzz/fuzz_graph.h), compute bitwise the same outputs
// on the reference kernels before and after the round trip.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "fuzz/fuzz_graph.h"
#include "graph/format/model_file.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes.h"

// Constant folding gets a budget of 256 MiB (core/budget.h): a model folding more is refused,
// well below libFuzzer's 2 GiB memory limit.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("TESSERA_MEMORY_BUDGET", "256M", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  Result<ImportedModel> m = import_onnx_from_memory(std::span<const uint8_t>(data, size));
  fuzz::check_refusal(m.status());
  if (!m.ok()) return 0;
  Status s = infer_onnx_shapes(*m);
  fuzz::check_refusal(s);
  if (!s.ok()) return 0;
  s = optimize_graph(m->graph);  // folds again: within the same budget
  fuzz::check_refusal(s);
  if (!s.ok()) return 0;

  std::vector<Tensor> outputs;
  const bool ran = fuzz::run_if_small(m->graph, fuzz::RunBounds{}, &outputs);

  Result<std::vector<uint8_t>> bytes = serialize_model(m->graph, ModelMetadata{"fuzz", {}});
  fuzz::check_refusal(bytes.status());
  if (!bytes.ok()) return 0;
  Result<LoadedModel> again = load_model_file_from_memory(*bytes);
  if (!again.ok() || !again->graph.infer_shapes().ok()) {
    std::fprintf(stderr, "a converted model does not load: %s\n",
                 again.status().to_string().c_str());
    __builtin_trap();
  }
  if (ran) {
    std::vector<Tensor> outputs2;
    s = fuzz::run_reference_graph(again->graph, &outputs2);
    if (!s.ok() || !fuzz::same_outputs(outputs, outputs2)) {
      std::fprintf(stderr, "the saved model computes something else: %s\n", s.to_string().c_str());
      __builtin_trap();
    }
  }
  return 0;
}
