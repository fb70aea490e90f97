// Model::import_onnx (api/tessera.h): an ONNX file to a Model, by the conversion `tessera
// convert` performs, without a .tsr file in between.
#include <span>

#include "api/tessera.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes.h"

namespace tessera {

namespace {

// Phase 2 and the passes, as convert_onnx() runs them; `where` names the source in errors.
Result<std::shared_ptr<const Model>> finish(ImportedModel m, const std::string& where,
                                            std::vector<std::string>* warnings) {
  RETURN_IF_ERROR(infer_onnx_shapes(m).with_context(where));
  RETURN_IF_ERROR(optimize_graph(m.graph).with_context(where));
  if (warnings != nullptr) *warnings = std::move(m.warnings);
  return Model::from_graph(std::move(m.graph));
}

}  // namespace

Result<std::shared_ptr<const Model>> Model::import_onnx(const std::string& path,
                                                        const ImportOptions& options,
                                                        std::vector<std::string>* warnings) {
  // import_onnx's own messages name the file.
  ASSIGN_OR_RETURN(ImportedModel m, tessera::import_onnx(path, options));
  return finish(std::move(m), path, warnings);
}

Result<std::shared_ptr<const Model>> Model::import_onnx_from_memory(
    const void* data, size_t size, const ImportOptions& options,
    std::vector<std::string>* warnings) {
  if (data == nullptr && size > 0) return invalid_argument("import_onnx_from_memory: null data");
  const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(data), size);
  ASSIGN_OR_RETURN(ImportedModel m, tessera::import_onnx_from_memory(bytes, options));
  return finish(std::move(m), "ONNX model in memory", warnings);
}

}  // namespace tessera
