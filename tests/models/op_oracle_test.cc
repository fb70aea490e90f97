// The element-wise, comparison and shape-building ops against independent oracles: one-node ONNX
// models written by scripts/op_oracles.py with numpy's and PyTorch's outputs (the export runs as
// a ctest fixture into TESSERA_OP_ORACLE_DIR). Each model is converted as `tessera convert` does
// (import, shape inference, every pass) and run on the reference device, on `cpu` and on `cpu:0`:
//     max |tessera - oracle| <= 1e-5 * max(1, max |oracle|),   bit-exact for non-float outputs.
// Models of opsets this importer does not read yet (Mish: 18, Gelu: 20) are checked as one-node
// graphs built directly. The PyTorch GELU modules (exported at opset 17 as Erf and Tanh
// subgraphs) must convert to one Gelu node.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "backends/registry.h"
#include "core/npy.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes.h"
#include "tests/ops/op_test_util.h"

namespace tessera {
namespace {

std::string oracle_dir() {
  const char* d = std::getenv("TESSERA_OP_ORACLE_DIR");
  return d ? d : "";
}

struct OracleCase {
  std::string name;
  int num_inputs = 0;
  int64_t opset = 0;
  std::string expect_op;  // the op the converted graph must hold
};

std::vector<OracleCase> read_manifest() {
  std::vector<OracleCase> cases;
  std::ifstream f(oracle_dir() + "/MANIFEST");
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream is(line);
    OracleCase c;
    if (is >> c.name >> c.num_inputs >> c.opset >> c.expect_op) cases.push_back(c);
  }
  return cases;
}

Result<std::vector<Tensor>> run_on(const std::string& device, const Graph& g,
                                   const std::vector<Tensor>& feeds) {
  ASSIGN_OR_RETURN(std::unique_ptr<Device> dev, open_device(device));
  std::vector<NodeId> layers;
  for (NodeId i = 0; i < g.num_nodes(); ++i) layers.push_back(i);
  ASSIGN_OR_RETURN(std::unique_ptr<Program> p, dev->compile(g, layers));
  std::vector<Tensor> outs(g.outputs().size());
  RETURN_IF_ERROR(p->run(feeds, outs));
  return outs;
}

void expect_matches_oracle(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  if (want.dtype() != DType::kF32) {
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.byte_size()), 0) << what;
    return;
  }
  double max_ref = 0;
  for (float v : want.span<float>()) max_ref = std::max(max_ref, double{std::fabs(v)});
  const double bound = 1e-5 * std::max(1.0, max_ref);
  for (int64_t i = 0; i < want.numel(); ++i) {
    ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], bound) << what << " at " << i;
  }
}

TEST(OpOracles, EveryOpMatchesNumpyAndTorch) {
  if (oracle_dir().empty()) GTEST_SKIP() << "TESSERA_OP_ORACLE_DIR is not set";
  const std::vector<OracleCase> cases = read_manifest();
  ASSERT_GE(cases.size(), 29u) << "MANIFEST in " << oracle_dir();
  for (const OracleCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string base = oracle_dir() + "/" + c.name;
    std::vector<Tensor> feeds;
    for (int i = 0; i < c.num_inputs; ++i) {
      Result<Tensor> t = read_npy(base + ".in" + std::to_string(i) + ".npy");
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      feeds.push_back(std::move(*t));
    }
    Result<Tensor> want = read_npy(base + ".out.npy");
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    Graph g;
    if (c.opset > kMaxOnnxOpset) {
      // One node of the op on the same inputs.
      std::vector<testing::OpInput> in;
      for (const Tensor& t : feeds) in.push_back(testing::in(t));
      Attributes a;
      if (c.name.find("tanh") != std::string::npos) a.set("approximate", std::string("tanh"));
      g = testing::single_node_graph(*op_from_name(c.expect_op), a, in, 1);
      g.outputs() = g.node(0).outputs;
      ASSERT_TRUE(g.infer_shapes().ok());
    } else {
      PassStats stats;
      Result<ImportedModel> m = convert_onnx(base + ".onnx", {}, &stats);
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      g = std::move(m->graph);
      bool found = false;
      for (const Node& n : g.nodes()) found = found || op_name(n.kind) == c.expect_op;
      EXPECT_TRUE(found) << "no " << c.expect_op << " node after conversion";
      // The exported erf and tanh spellings (opset 17) fuse into one Gelu after the Gemm; the
      // opset-20 cases are one Gelu node already.
      if (c.expect_op == "Gelu" && c.name.find("pattern") != std::string::npos) {
        EXPECT_EQ(stats.fused_gelus, 1) << stats.to_string();
        EXPECT_EQ(g.num_nodes(), 2) << "Gemm and Gelu";
      }
    }
    for (const char* device : {"reference", "cpu", "cpu:0"}) {
      Result<std::vector<Tensor>> got = run_on(device, g, feeds);
      ASSERT_TRUE(got.ok()) << device << ": " << got.status().to_string();
      expect_matches_oracle((*got)[0], *want, c.name + " on " + device);
    }
  }
}

}  // namespace
}  // namespace tessera
