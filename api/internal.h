// What Tessera's own tools and tests need of a Model beyond the public API (api/tessera.h): its
// graph. Not installed; users of the library never see a Graph.
#pragma once

#include "api/tessera.h"
#include "graph/graph.h"

namespace tessera {

// The model's graph (shape-inferred and folded); valid while the model lives.
const Graph& model_graph(const Model& model);

}  // namespace tessera
