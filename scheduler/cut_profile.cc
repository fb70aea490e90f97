#include "scheduler/cut_profile.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "backends/remote/packing.h"
#include "core/json.h"
#include "ops/activation.h"

namespace tessera {

using json::Json;

namespace {

bool is_relu_output(const Graph& g, ValueId v) {
  const NodeId producer = g.value(v).producer;
  if (producer == kNoNode) return false;
  const Node& n = g.node(producer);
  if (n.kind == OpKind::kRelu) return true;
  auto act = parse_fused_activation(n.attrs);
  return act.ok() && (act->kind == ActivationKind::kRelu || act->kind == ActivationKind::kClip);
}

}  // namespace

bool cut_is_relu(const LayerGraph& lg, int k) {
  if (k <= 0 || k >= static_cast<int>(lg.cuts().size())) return false;
  const Graph& g = lg.graph();
  bool any = false;
  for (ValueId v : lg.cut(k).live) {
    if (g.value(v).info.dtype != DType::kF32) continue;
    if (!is_relu_output(g, v)) return false;
    any = true;
  }
  return any;
}

const CutBits* CutProfile::find(int cut, int b) const {
  const auto c = std::lower_bound(cuts.begin(), cuts.end(), cut);
  const auto w = std::lower_bound(bits.begin(), bits.end(), b);
  if (c == cuts.end() || *c != cut || w == bits.end() || *w != b) return nullptr;
  const size_t i =
      static_cast<size_t>(c - cuts.begin()) * bits.size() + static_cast<size_t>(w - bits.begin());
  return i < entries.size() ? &entries[i] : nullptr;
}

Status CutProfile::validate(int layers) const {
  if (num_layers != layers) {
    return invalid_argument("cut profile: it is for " + std::to_string(num_layers) +
                            " layers, the model has " + std::to_string(layers));
  }
  if (cuts.empty() || bits.empty()) return invalid_argument("cut profile: no cuts or no bits");
  for (size_t i = 0; i < cuts.size(); ++i) {
    if (cuts[i] < 0 || cuts[i] >= layers || (i > 0 && cuts[i] <= cuts[i - 1])) {
      return invalid_argument("cut profile: cuts[" + std::to_string(i) +
                              "] = " + std::to_string(cuts[i]) + " is not ascending in 0.." +
                              std::to_string(layers - 1));
    }
  }
  for (size_t i = 0; i < bits.size(); ++i) {
    if (!pack_bits_supported(bits[i]) || (i > 0 && bits[i] <= bits[i - 1])) {
      return invalid_argument("cut profile: bits[" + std::to_string(i) +
                              "] = " + std::to_string(bits[i]) +
                              " is not an ascending bitwidth of 2..8, 16");
    }
  }
  if (relu.size() != cuts.size()) {
    return invalid_argument("cut profile: relu has " + std::to_string(relu.size()) +
                            " entries, cuts " + std::to_string(cuts.size()));
  }
  if (entries.size() != cuts.size() * bits.size()) {
    return invalid_argument(
        "cut profile: " + std::to_string(entries.size()) +
        " entries, expected cuts x bits = " + std::to_string(cuts.size() * bits.size()));
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const CutBits& e = entries[i];
    const std::string where = "cut profile: entries[" + std::to_string(i) + "]";
    if (e.cut != cuts[i / bits.size()] || e.bits != bits[i % bits.size()]) {
      return invalid_argument(where + " is (cut " + std::to_string(e.cut) + ", " +
                              std::to_string(e.bits) + " bits), expected (cut " +
                              std::to_string(cuts[i / bits.size()]) + ", " +
                              std::to_string(bits[i % bits.size()]) + " bits)");
    }
    for (double v :
         {e.bytes_mean, e.bytes_p95, e.pack_ms, e.unpack_ms, e.rel_l2, e.report_rel_l2}) {
      if (!std::isfinite(v) || v < 0) {
        return invalid_argument(where + ": sizes, times and errors must be finite and >= 0");
      }
    }
    for (double v : {e.top1, e.report_top1}) {
      if (!(v >= 0 && v <= 1))
        return invalid_argument(where + ": top-1 agreement must be in [0, 1]");
    }
  }
  return Status();
}

std::string CutProfile::to_json_text() const {
  Json j;
  j["format"] = "tessera-cut-profile";
  j["version"] = kVersion;
  j["model"] = {{"name", model_name}, {"hash", model_hash}, {"layers", num_layers}};
  j["device"] = device;
  j["choose_inputs"] = choose_inputs;
  j["report_inputs"] = report_inputs;
  j["date"] = date;
  j["cuts"] = cuts;
  std::vector<int> r(relu.begin(), relu.end());
  j["relu"] = r;
  j["bits"] = bits;
  Json es = Json::array();
  for (const CutBits& e : entries) {
    es.push_back({{"cut", e.cut},
                  {"bits", e.bits},
                  {"bytes_mean", e.bytes_mean},
                  {"bytes_p95", e.bytes_p95},
                  {"pack_ms", e.pack_ms},
                  {"unpack_ms", e.unpack_ms},
                  {"top1", e.top1},
                  {"rel_l2", e.rel_l2},
                  {"report_top1", e.report_top1},
                  {"report_rel_l2", e.report_rel_l2}});
  }
  j["entries"] = std::move(es);
  return j.dump(1) + "\n";
}

Status CutProfile::save(const std::string& path) const {
  return json::write_text_file(path, to_json_text());
}

namespace {

Result<std::vector<int>> int_list(const Json& j, const char* key, int64_t lo, int64_t hi) {
  ASSIGN_OR_RETURN(const Json* a, json::array_field(j, "", key));
  std::vector<int> out;
  for (size_t i = 0; i < a->size(); ++i) {
    const Json& v = (*a)[i];
    const std::string path = json::index_path(key, i);
    if (!v.is_number_integer()) return invalid_argument(path + ": must be an integer");
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) {
      return invalid_argument(path + ": must be in " + std::to_string(lo) + ".." +
                              std::to_string(hi) + ", got " + std::to_string(x));
    }
    out.push_back(static_cast<int>(x));
  }
  return out;
}

Result<CutProfile> parse_cut_profile(const Json& j) {
  RETURN_IF_ERROR(json::require_object(j, ""));
  ASSIGN_OR_RETURN(std::string format, json::string_field(j, "", "format"));
  if (format != "tessera-cut-profile") {
    return invalid_argument("format: " + quote_name(format) + " is not tessera-cut-profile");
  }
  ASSIGN_OR_RETURN(int64_t version, json::int_field(j, "", "version", 1, 1 << 20));
  if (version != CutProfile::kVersion) {
    return invalid_argument("version: " + std::to_string(version) + " is not supported (this " +
                            "build reads version " + std::to_string(CutProfile::kVersion) + ")");
  }
  CutProfile p;
  ASSIGN_OR_RETURN(const Json* model, json::object_field(j, "", "model"));
  ASSIGN_OR_RETURN(p.model_name, json::string_field(*model, "model", "name", false));
  ASSIGN_OR_RETURN(p.model_hash, json::string_field(*model, "model", "hash", false));
  ASSIGN_OR_RETURN(int64_t layers, json::int_field(*model, "model", "layers", 1, 1 << 24));
  p.num_layers = static_cast<int>(layers);
  ASSIGN_OR_RETURN(p.device, json::string_field(j, "", "device", false));
  ASSIGN_OR_RETURN(int64_t choose, json::int_field(j, "", "choose_inputs", 0, 1 << 24));
  ASSIGN_OR_RETURN(int64_t report, json::int_field(j, "", "report_inputs", 0, 1 << 24));
  p.choose_inputs = static_cast<int>(choose);
  p.report_inputs = static_cast<int>(report);
  ASSIGN_OR_RETURN(p.date, json::string_field(j, "", "date", false));
  ASSIGN_OR_RETURN(p.cuts, int_list(j, "cuts", 0, layers - 1));
  ASSIGN_OR_RETURN(std::vector<int> relu, int_list(j, "relu", 0, 1));
  p.relu.assign(relu.begin(), relu.end());
  ASSIGN_OR_RETURN(p.bits, int_list(j, "bits", 2, 16));
  ASSIGN_OR_RETURN(const Json* es, json::array_field(j, "", "entries"));
  for (size_t i = 0; i < es->size(); ++i) {
    const Json& e = (*es)[i];
    const std::string path = json::index_path("entries", i);
    RETURN_IF_ERROR(json::require_object(e, path));
    CutBits c;
    ASSIGN_OR_RETURN(int64_t cut, json::int_field(e, path, "cut", 0, layers - 1));
    ASSIGN_OR_RETURN(int64_t bits, json::int_field(e, path, "bits", 2, 16));
    c.cut = static_cast<int>(cut);
    c.bits = static_cast<int>(bits);
    constexpr double kBig = 1e18;
    ASSIGN_OR_RETURN(c.bytes_mean, json::number_field(e, path, "bytes_mean", 0, kBig));
    ASSIGN_OR_RETURN(c.bytes_p95, json::number_field(e, path, "bytes_p95", 0, kBig));
    ASSIGN_OR_RETURN(c.pack_ms, json::number_field(e, path, "pack_ms", 0, kBig));
    ASSIGN_OR_RETURN(c.unpack_ms, json::number_field(e, path, "unpack_ms", 0, kBig));
    ASSIGN_OR_RETURN(c.top1, json::number_field(e, path, "top1", 0, 1));
    ASSIGN_OR_RETURN(c.rel_l2, json::number_field(e, path, "rel_l2", 0, kBig));
    ASSIGN_OR_RETURN(c.report_top1, json::number_field(e, path, "report_top1", 0, 1));
    ASSIGN_OR_RETURN(c.report_rel_l2, json::number_field(e, path, "report_rel_l2", 0, kBig));
    p.entries.push_back(c);
  }
  RETURN_IF_ERROR(p.validate(p.num_layers));
  return p;
}

}  // namespace

Result<CutProfile> CutProfile::from_json_text(const std::string& text, const std::string& origin) {
  ASSIGN_OR_RETURN(Json j, json::parse(text, origin));
  auto p = parse_cut_profile(j);
  if (!p.ok()) return p.status().with_context(origin);
  return p;
}

Result<CutProfile> CutProfile::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open cut profile");
  std::ostringstream ss;
  ss << in.rdbuf();
  return from_json_text(ss.str(), path);
}

}  // namespace tessera
