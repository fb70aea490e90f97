#include "scheduler/plan.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "energy/json_fields.h"

namespace tessera {

using json::Json;

const char* plan_mode_name(PlanMode mode) {
  return mode == PlanMode::kStreaming ? "streaming" : "sequential";
}

std::string DeviceShare::label() const {
  return mhz > 0 ? device + "@" + std::to_string(mhz) : device;
}

Placement Placement::on(std::string device, int mhz) {
  Placement p;
  p.devices.push_back(DeviceShare{std::move(device), mhz, 1.0});
  return p;
}

std::string Placement::label() const {
  std::string s;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (i) s += "+";
    s += devices[i].label();
  }
  if (!split.empty()) s += "/" + split;
  return s;
}

bool Stage::contiguous() const {
  for (size_t i = 1; i < layers.size(); ++i) {
    if (layers[i] != layers[i - 1] + 1) return false;
  }
  return true;
}

// ---- notation ----

namespace {

std::string stage_notation(const Stage& s) {
  return s.placement.label() + "[" + std::to_string(s.first()) + "]";
}

std::string stage_name(const Plan& p, size_t i) {
  return "stage " + std::to_string(i) + " (" + stage_notation(p.stages[i]) + ")";
}

// "cpu:0-3@1800" -> ("cpu:0-3", 1800).
Result<DeviceShare> parse_label(const std::string& label) {
  DeviceShare d;
  const size_t at = label.rfind('@');
  d.device = label.substr(0, at);
  if (at != std::string::npos) {
    const std::string f = label.substr(at + 1);
    if (f.empty() || f.size() > 6 || !std::all_of(f.begin(), f.end(), ::isdigit)) {
      return invalid_argument("'" + label + "': the DVFS level after '@' must be MHz");
    }
    d.mhz = std::stoi(f);
  }
  if (d.device.empty()) return invalid_argument("'" + label + "': no device name");
  return d;
}

}  // namespace

std::string Plan::notation() const {
  std::string s;
  for (size_t i = 0; i < stages.size(); ++i) {
    if (i) s += " ";
    s += stage_notation(stages[i]);
  }
  return s;
}

Result<Plan> plan_from_slices(int num_layers,
                              const std::vector<std::pair<int, std::string>>& starts) {
  Plan p;
  p.num_layers = num_layers;
  p.planner = "manual";
  for (size_t i = 0; i < starts.size(); ++i) {
    const int first = starts[i].first;
    const int last = i + 1 < starts.size() ? starts[i + 1].first : num_layers;
    const std::string where =
        "slice " + std::to_string(i) + " (" + starts[i].second + "[" + std::to_string(first) + "])";
    if (first < 0 || first >= num_layers || last <= first || last > num_layers) {
      return invalid_argument(where + ": first layers must ascend within 0.." +
                              std::to_string(num_layers - 1));
    }
    Stage s;
    for (int l = first; l < last; ++l) s.layers.push_back(l);
    auto d = parse_label(starts[i].second);
    if (!d.ok()) return d.status().with_context(where);
    s.placement.devices.push_back(*d);
    p.stages.push_back(std::move(s));
  }
  return p;
}

Result<Plan> parse_plan_notation(const std::string& text, int num_layers) {
  std::istringstream in(text);
  std::string tok;
  std::vector<std::pair<int, std::string>> starts;
  while (in >> tok) {
    const size_t open = tok.rfind('[');
    if (open == std::string::npos || tok.back() != ']' || open + 2 > tok.size() - 1) {
      return invalid_argument("plan notation: '" + tok +
                              "' is not DEVICE[first] or DEVICE@MHz[first]");
    }
    const std::string n = tok.substr(open + 1, tok.size() - open - 2);
    if (n.size() > 9 || !std::all_of(n.begin(), n.end(), ::isdigit)) {
      return invalid_argument("plan notation: '" + tok + "': the first layer must be a number");
    }
    starts.emplace_back(std::stoi(n), tok.substr(0, open));
  }
  if (starts.empty()) return invalid_argument("plan notation: no stages");
  if (starts.front().first != 0) {
    return invalid_argument("plan notation: the first stage must start at layer 0");
  }
  return plan_from_slices(num_layers, starts);
}

// ---- validation ----

Status Plan::validate(int nl, const std::vector<std::string>& available,
                      bool require_contiguous) const {
  if (nl != num_layers) {
    return invalid_argument("plan is for " + std::to_string(num_layers) +
                            " layers, the model has " + std::to_string(nl));
  }
  if (stages.empty()) return invalid_argument("plan has no stages");
  std::vector<int> owner(static_cast<size_t>(nl), -1);
  int prev_last = -1;
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage& s = stages[i];
    if (s.layers.empty()) {
      return invalid_argument("stage " + std::to_string(i) + ": no layers");
    }
    const std::string name = stage_name(*this, i);
    if (s.placement.devices.empty()) return invalid_argument(name + ": placement names no device");
    if (s.placement.devices.size() > 1 && s.placement.split.empty()) {
      return invalid_argument(name + ": several devices but no split dimension");
    }
    double ratio_sum = 0;
    for (const DeviceShare& d : s.placement.devices) {
      if (!(d.ratio > 0) || !std::isfinite(d.ratio)) {
        return invalid_argument(name + ": device " + d.device + " has ratio " +
                                std::to_string(d.ratio) + ", must be > 0");
      }
      ratio_sum += d.ratio;
      if (d.mhz < 0) return invalid_argument(name + ": negative MHz for " + d.device);
      if (!available.empty() &&
          std::find(available.begin(), available.end(), d.device) == available.end()) {
        std::string list;
        for (const std::string& a : available) list += (list.empty() ? "" : ", ") + a;
        return not_found(name + ": device '" + d.device + "' is not available (available: " + list +
                         ")");
      }
    }
    if (std::abs(ratio_sum - 1.0) > 1e-6) {
      return invalid_argument(name + ": device ratios sum to " + std::to_string(ratio_sum) +
                              ", not 1");
    }
    for (size_t k = 0; k < s.layers.size(); ++k) {
      const int l = s.layers[k];
      if (l < 0 || l >= nl) {
        return out_of_range(name + ": layer " + std::to_string(l) + " is outside 0.." +
                            std::to_string(nl - 1));
      }
      if (k > 0 && l <= s.layers[k - 1]) {
        return invalid_argument(name + ": layers must ascend (" + std::to_string(l) + " after " +
                                std::to_string(s.layers[k - 1]) + ")");
      }
      int& o = owner[static_cast<size_t>(l)];
      if (o >= 0) {
        return invalid_argument(name + ": layer " + std::to_string(l) + " is also in stage " +
                                std::to_string(o));
      }
      o = static_cast<int>(i);
    }
    if (require_contiguous) {
      if (!s.contiguous()) {
        return invalid_argument(name + ": layers are not one contiguous range");
      }
      if (s.layers.front() != prev_last + 1) {
        return invalid_argument(name + ": starts at layer " + std::to_string(s.layers.front()) +
                                ", expected " + std::to_string(prev_last + 1) +
                                " (stages must follow layer order)");
      }
      prev_last = s.layers.back();
    }
  }
  for (int l = 0; l < nl; ++l) {
    if (owner[static_cast<size_t>(l)] < 0) {
      return invalid_argument("layer " + std::to_string(l) + " is in no stage");
    }
  }
  return Status();
}

// ---- JSON ----

std::string Plan::to_json_text() const {
  Json j;
  j["format"] = "tessera-plan";
  j["version"] = kVersion;
  j["model"] = {{"name", model_name}, {"hash", model_hash}, {"layers", num_layers}};
  j["mode"] = plan_mode_name(mode);
  j["planner"] = planner;
  j["objective"] = objective;
  j["notation"] = notation();
  Json st = Json::array();
  for (const Stage& s : stages) {
    Json js;
    if (s.contiguous() && !s.layers.empty()) {
      js["layers"] = {{"first", s.layers.front()}, {"last", s.layers.back() + 1}};
    } else {
      js["layers"] = s.layers;
    }
    Json devs = Json::array();
    for (const DeviceShare& d : s.placement.devices) {
      devs.push_back({{"device", d.device}, {"mhz", d.mhz}, {"ratio", d.ratio}});
    }
    js["placement"] = {{"devices", devs}, {"split", s.placement.split}};
    js["packing"] = s.packing;
    js["estimate"] = {{"exec_ms", s.estimate.exec_ms},
                      {"transfer_ms", s.estimate.transfer_ms},
                      {"energy_mj", s.estimate.energy_mj}};
    st.push_back(std::move(js));
  }
  j["stages"] = std::move(st);
  j["estimate"] = {{"latency_ms", estimated_latency_ms}, {"energy_mj", estimated_energy_mj}};
  return j.dump(2) + "\n";
}

Status Plan::save(const std::string& path) const {
  return json::write_text_file(path, to_json_text());
}

namespace {

constexpr int64_t kMaxLayers = 1 << 24;

Result<Plan> parse_plan(const Json& j) {
  RETURN_IF_ERROR(json::require_object(j, ""));
  ASSIGN_OR_RETURN(std::string format, json::string_field(j, "", "format"));
  if (format != "tessera-plan") {
    return invalid_argument("format: '" + format + "' is not tessera-plan");
  }
  ASSIGN_OR_RETURN(int64_t version, json::int_field(j, "", "version", 1, 1 << 20));
  if (version != Plan::kVersion) {
    return invalid_argument("version: " + std::to_string(version) + " is not supported (only " +
                            std::to_string(Plan::kVersion) + ")");
  }
  Plan p;
  ASSIGN_OR_RETURN(const Json* model, json::object_field(j, "", "model"));
  ASSIGN_OR_RETURN(p.model_name, json::string_field(*model, "model", "name", false));
  ASSIGN_OR_RETURN(p.model_hash, json::string_field(*model, "model", "hash", false));
  ASSIGN_OR_RETURN(int64_t nl, json::int_field(*model, "model", "layers", 1, kMaxLayers));
  p.num_layers = static_cast<int>(nl);
  ASSIGN_OR_RETURN(std::string mode, json::string_field(j, "", "mode", false, "sequential"));
  if (mode == "sequential") {
    p.mode = PlanMode::kSequential;
  } else if (mode == "streaming") {
    p.mode = PlanMode::kStreaming;
  } else {
    return invalid_argument("mode: '" + mode + "' is not sequential or streaming");
  }
  ASSIGN_OR_RETURN(p.planner, json::string_field(j, "", "planner", false));
  ASSIGN_OR_RETURN(p.objective, json::string_field(j, "", "objective", false));
  ASSIGN_OR_RETURN(const Json* stages, json::array_field(j, "", "stages"));
  for (size_t i = 0; i < stages->size(); ++i) {
    const std::string sp = json::index_path("stages", i);
    const Json& js = (*stages)[i];
    RETURN_IF_ERROR(json::require_object(js, sp));
    Stage s;
    const std::string lp = json::member_path(sp, "layers");
    auto it = js.find("layers");
    if (it == js.end()) return invalid_argument(lp + ": missing");
    if (it->is_object()) {
      ASSIGN_OR_RETURN(int64_t first, json::int_field(*it, lp, "first", 0, nl - 1));
      ASSIGN_OR_RETURN(int64_t last, json::int_field(*it, lp, "last", first + 1, nl));
      for (int64_t l = first; l < last; ++l) s.layers.push_back(static_cast<int>(l));
    } else if (it->is_array()) {
      for (size_t k = 0; k < it->size(); ++k) {
        const Json& e = (*it)[k];
        if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= nl) {
          return invalid_argument(json::index_path(lp, k) + ": must be a layer index in 0.." +
                                  std::to_string(nl - 1));
        }
        s.layers.push_back(e.get<int>());
      }
    } else {
      return invalid_argument(lp + ": must be {first, last} or a list of layer indices");
    }
    const std::string pp = json::member_path(sp, "placement");
    ASSIGN_OR_RETURN(const Json* pl, json::object_field(js, sp, "placement"));
    ASSIGN_OR_RETURN(const Json* devs, json::array_field(*pl, pp, "devices"));
    for (size_t k = 0; k < devs->size(); ++k) {
      const std::string dp = json::index_path(json::member_path(pp, "devices"), k);
      RETURN_IF_ERROR(json::require_object((*devs)[k], dp));
      DeviceShare d;
      ASSIGN_OR_RETURN(d.device, json::string_field((*devs)[k], dp, "device"));
      ASSIGN_OR_RETURN(int64_t mhz, json::int_field((*devs)[k], dp, "mhz", 0, 1000000, false));
      d.mhz = static_cast<int>(mhz);
      ASSIGN_OR_RETURN(d.ratio, json::number_field((*devs)[k], dp, "ratio", 0, 1, false, 1.0));
      s.placement.devices.push_back(std::move(d));
    }
    ASSIGN_OR_RETURN(s.placement.split, json::string_field(*pl, pp, "split", false));
    ASSIGN_OR_RETURN(s.packing, json::string_field(js, sp, "packing", false));
    if (auto e = js.find("estimate"); e != js.end()) {
      const std::string ep = json::member_path(sp, "estimate");
      ASSIGN_OR_RETURN(s.estimate.exec_ms, json::number_field(*e, ep, "exec_ms", 0, 1e12, false));
      ASSIGN_OR_RETURN(s.estimate.transfer_ms,
                       json::number_field(*e, ep, "transfer_ms", 0, 1e12, false));
      ASSIGN_OR_RETURN(s.estimate.energy_mj,
                       json::number_field(*e, ep, "energy_mj", 0, 1e15, false));
    }
    p.stages.push_back(std::move(s));
  }
  if (auto e = j.find("estimate"); e != j.end()) {
    ASSIGN_OR_RETURN(p.estimated_latency_ms,
                     json::number_field(*e, "estimate", "latency_ms", 0, 1e12, false));
    ASSIGN_OR_RETURN(p.estimated_energy_mj,
                     json::number_field(*e, "estimate", "energy_mj", 0, 1e15, false));
  }
  // Structure (not devices: the executor checks those against what it can open).
  RETURN_IF_ERROR(p.validate(p.num_layers, {}, false));
  return p;
}

}  // namespace

Result<Plan> Plan::from_json_text(const std::string& text, const std::string& origin) {
  ASSIGN_OR_RETURN(Json j, json::parse(text, origin));
  auto p = parse_plan(j);
  if (!p.ok()) return p.status().with_context(origin);
  return p;
}

Result<Plan> Plan::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open plan");
  std::ostringstream ss;
  ss << in.rdbuf();
  return from_json_text(ss.str(), path);
}

}  // namespace tessera
