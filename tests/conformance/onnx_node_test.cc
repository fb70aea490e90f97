// ONNX's backend node test cases (onnx.backend.test.case.node) on every device.
//
// scripts/onnx_conformance.py generate writes the cases into TESSERA_ONNX_CASES_DIR (the build
// does, see tests/CMakeLists.txt): per case a model.onnx and test_data_set_N/{input,output}_K.pb
// with ONNX's reference outputs, and cases.tsv naming the op each case tests. For each device
// this test converts every case as `tessera convert` does (import, shape inference, the graph
// passes), runs it on the device and compares with ONNX's outputs. A case is in scope when
// Tessera knows all its op types; cases the importer refuses as "unsupported operators" are
// counted as missing and not checked (they come into scope when the op is added).
//
// Each in-scope (case, device) pair has an outcome: pass; frozen (refused as given because an
// input that must be a constant in Tessera - a Reshape shape, Slice starts, Pad pads, Resize
// scales, Clip bounds - is fed at run time, and passes with inputs 1.. made initializers holding
// each data set's values); refused (an error from conversion, compilation or the run: the
// message says why); or wrong (it ran, but an output differs from
// ONNX's by more than atol + rtol * |expected|, with ONNX's own rtol of 1e-3 and atol 1e-5 for
// float32 summation order). tests/data/onnx_conformance_expected.tsv lists the pairs that do not
// pass and why; any other outcome fails the test, an unexpected pass included, so the list says
// what Tessera does. scripts/onnx_conformance.py report prints pass rates and rewrites the list.
//
// Environment: TESSERA_CONFORMANCE_REPORT=PATH appends every outcome to PATH (case, op, device,
// outcome, reason: tab-separated); TESSERA_CONFORMANCE_DEVICES=a,b replaces the device list.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "api/tessera.h"
#include "backends/registry.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes.h"
#include "onnx/onnx_pb.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-5;

struct CaseInfo {
  std::string name;
  std::string op;
};

std::vector<CaseInfo> read_cases(const std::string& dir) {
  std::vector<CaseInfo> cases;
  std::ifstream in(dir + "/cases.tsv");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name, op, expanded, kind;
    std::getline(fields, name, '\t');
    std::getline(fields, op, '\t');
    std::getline(fields, expanded, '\t');
    std::getline(fields, kind, '\t');
    if (kind == "tensor") cases.push_back({name, op});
  }
  return cases;
}

// One line of a message, cut to a length that reads in a table; tabs become spaces.
std::string one_line(std::string s) {
  s = s.substr(0, s.find('\n'));
  std::replace(s.begin(), s.end(), '\t', ' ');
  if (s.size() > 160) s = s.substr(0, 157) + "...";
  return s;
}

struct Outcome {
  std::string outcome;  // pass | refused | wrong | missing
  std::string reason;
};

// (case, device) -> expected outcome; pairs not listed must pass.
std::map<std::pair<std::string, std::string>, Outcome> read_expectations(const std::string& path) {
  std::map<std::pair<std::string, std::string>, Outcome> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, device, outcome, reason;
    std::getline(fields, name, '\t');
    std::getline(fields, device, '\t');
    std::getline(fields, outcome, '\t');
    std::getline(fields, reason);
    out[{name, device}] = {outcome, reason};
  }
  return out;
}

// A case converted as `tessera convert` converts, or why it could not be.
struct Converted {
  std::shared_ptr<const Model> model;
  Outcome failure;  // set when model is null
};

// The model of a case, with graph inputs 1.. made initializers holding the values of data set
// `frozen` when it is not empty (the case's shapes, axes, pads, scales and bounds are then
// constants, as Tessera's static shapes need).
Result<std::string> model_bytes(const std::string& dir, const std::string& frozen) {
  std::ifstream in(dir + "/model.onnx", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (frozen.empty()) return bytes;
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes)) return invalid_argument(dir + "/model.onnx does not parse");
  onnx::GraphProto* g = m.mutable_graph();
  while (g->input_size() > 1) {
    const std::string name = g->input(g->input_size() - 1).name();
    std::ifstream t(frozen + "/input_" + std::to_string(g->input_size() - 1) + ".pb",
                    std::ios::binary);
    std::string tb((std::istreambuf_iterator<char>(t)), std::istreambuf_iterator<char>());
    onnx::TensorProto* init = g->add_initializer();
    if (!init->ParseFromString(tb)) return invalid_argument("a frozen input does not parse");
    init->set_name(name);
    g->mutable_input()->RemoveLast();
  }
  return m.SerializeAsString();
}

Converted convert_case(const std::string& dir, const std::string& frozen = "") {
  Converted c;
  ImportOptions options;
  options.require_all_dims = true;
  Result<std::string> bytes = model_bytes(dir, frozen);
  if (!bytes.ok()) {
    c.failure = {"refused", one_line(bytes.status().message())};
    return c;
  }
  Result<ImportedModel> m = import_onnx_from_memory(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()),
      options);
  if (!m.ok()) {
    const bool missing = m.status().code() == StatusCode::kUnimplemented &&
                         m.status().message().find("unsupported operators") != std::string::npos;
    c.failure = {missing ? "missing" : "refused", one_line(m.status().message())};
    return c;
  }
  Status st = infer_onnx_shapes(*m);
  if (st.ok()) st = optimize_graph(m->graph);
  if (!st.ok()) {
    c.failure = {"refused", one_line(st.message())};
    return c;
  }
  Result<std::shared_ptr<const Model>> model = Model::from_graph(std::move(m->graph));
  if (!model.ok()) {
    c.failure = {"refused", one_line(model.status().message())};
    return c;
  }
  c.model = *model;
  return c;
}

// The largest error of `got` against `want`, or a description of a shape/dtype mismatch.
Outcome compare(const Tensor& got, const Tensor& want, int index) {
  const std::string which = "output " + std::to_string(index);
  if (got.shape() != want.shape()) {
    return {"wrong", which + " has shape " + got.shape().to_string() + ", expected " +
                         want.shape().to_string()};
  }
  if (got.dtype() != want.dtype()) {
    return {"wrong",
            which + " is " + dtype_name(got.dtype()) + ", expected " + dtype_name(want.dtype())};
  }
  const bool exact = want.dtype() != DType::kF32 && want.dtype() != DType::kF16;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double x = got.float_at(i), y = want.float_at(i);
    bool ok;
    if (std::isnan(y)) {
      ok = std::isnan(x);
    } else if (std::isinf(y) || exact) {
      ok = x == y;
    } else {
      ok = std::isfinite(x) && std::fabs(x - y) <= kAtol + kRtol * std::fabs(y);
    }
    if (!ok) {
      std::ostringstream s;
      s << which << " [" << i << "] is " << x << ", expected " << y;
      return {"wrong", s.str()};
    }
  }
  return {"pass", ""};
}

// Runs data set `only` (all when -1) of the case.
Outcome run_case(const Model& model, const std::shared_ptr<const Model>& shared,
                 const std::string& dir, const std::string& device, int only = -1) {
  Result<std::unique_ptr<Session>> session = Session::create(shared, device);
  if (!session.ok()) return {"refused", one_line(session.status().message())};
  int sets = 0;
  for (int k = 0; fs::exists(dir + "/test_data_set_" + std::to_string(k)); ++k) {
    if (only >= 0 && k != only) continue;
    ++sets;
    const std::string data = dir + "/test_data_set_" + std::to_string(k);
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < model.inputs().size(); ++i) {
      Result<Tensor> t = import_onnx_tensor_file(data + "/input_" + std::to_string(i) + ".pb");
      if (!t.ok()) return {"refused", one_line(t.status().message())};
      inputs.push_back(std::move(*t));
    }
    Result<std::vector<Tensor>> outs = (*session)->run(inputs);
    if (!outs.ok()) return {"refused", one_line(outs.status().message())};
    for (size_t o = 0; o < outs->size(); ++o) {
      Result<Tensor> want = import_onnx_tensor_file(data + "/output_" + std::to_string(o) + ".pb");
      if (!want.ok()) return {"refused", one_line(want.status().message())};
      Outcome c = compare((*outs)[o], *want, static_cast<int>(o));
      if (c.outcome != "pass") return c;
    }
  }
  if (sets == 0) return {"refused", "the case has no test_data_set_0"};
  return {"pass", ""};
}

// A case refused because a shape, axes, pads, scales or bounds input is fed at run time: run
// each data set with inputs 1.. frozen to its values. Outcome "frozen" when all pass (the op
// computes right once those are constants); otherwise that run's failure, saying so.
Outcome run_frozen(const std::string& dir, const std::string& device, const std::string& why) {
  for (int k = 0; fs::exists(dir + "/test_data_set_" + std::to_string(k)); ++k) {
    Converted conv = convert_case(dir, dir + "/test_data_set_" + std::to_string(k));
    Outcome got = conv.model ? run_case(*conv.model, conv.model, dir, device, k) : conv.failure;
    if (got.outcome != "pass") {
      return {got.outcome == "missing" ? "refused" : got.outcome,
              one_line("inputs 1.. frozen: " + got.reason)};
    }
  }
  return {"frozen", why};
}

void append_report(const std::string& line) {
  const char* path = std::getenv("TESSERA_CONFORMANCE_REPORT");
  if (path == nullptr || *path == '\0') return;
  // One write per line with O_APPEND: device tests may run as parallel processes.
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const ssize_t n = ::write(fd, line.data(), line.size());
  (void)n;
  ::close(fd);
}

bool device_present(const std::string& name) {
  for (const DeviceListing& d : list_devices()) {
    if (d.name == name) return true;
  }
  return false;
}

class OnnxNodeCases : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxNodeCases, MatchExpectations) {
  const std::string device = GetParam();
  if (const char* only = std::getenv("TESSERA_CONFORMANCE_DEVICES")) {
    const std::string list = std::string(",") + only + ",";
    if (list.find("," + device + ",") == std::string::npos) GTEST_SKIP() << "not selected";
  }
  if (!device_present(device)) GTEST_SKIP() << device << " is not on this machine";
  const std::string root = TESSERA_ONNX_CASES_DIR;
  const std::vector<CaseInfo> cases = read_cases(root);
  ASSERT_GT(cases.size(), 500u) << "no ONNX node cases in " << root
                                << " (scripts/onnx_conformance.py generate)";
  const auto expected = read_expectations(TESSERA_CONFORMANCE_EXPECTED);
  int in_scope = 0, passed = 0;
  for (const CaseInfo& c : cases) {
    const std::string dir = root + "/" + c.name;
    Converted conv = convert_case(dir);
    Outcome got = conv.model ? run_case(*conv.model, conv.model, dir, device) : conv.failure;
    if (got.outcome == "refused" && got.reason.find("must be a constant") != std::string::npos) {
      got = run_frozen(dir, device, got.reason);
    }
    // Messages name the case's file: keep them free of this build's path.
    for (size_t at; (at = got.reason.find(root + "/")) != std::string::npos;)
      got.reason.erase(at, root.size() + 1);
    append_report(c.name + "\t" + c.op + "\t" + device + "\t" + got.outcome + "\t" + got.reason +
                  "\n");
    if (got.outcome == "missing") continue;
    ++in_scope;
    passed += got.outcome == "pass";
    auto it = expected.find({c.name, device});
    const Outcome want = it == expected.end() ? Outcome{"pass", ""} : it->second;
    if (got.outcome != want.outcome) {
      ADD_FAILURE() << c.name << " on " << device << ": " << got.outcome
                    << (got.reason.empty() ? "" : " (" + got.reason + ")") << ", expected "
                    << want.outcome << (want.reason.empty() ? "" : " (" + want.reason + ")")
                    << ". If this is the intended change, regenerate the list: scripts/"
                       "onnx_conformance.py report --tests <this program> --write-expectations";
    }
  }
  std::printf("%s: %d of %d in-scope ONNX node cases pass (%zu cases)\n", device.c_str(), passed,
              in_scope, cases.size());
}

INSTANTIATE_TEST_SUITE_P(Devices, OnnxNodeCases,
                         ::testing::Values("reference", "cpu", "opencl:0", "vulkan:0", "npu:0"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string s = p.param;
                           s.erase(std::remove(s.begin(), s.end(), ':'), s.end());
                           return s;
                         });

}  // namespace
}  // namespace tessera
