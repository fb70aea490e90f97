#include "scheduler/plan.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "backends/registry.h"
#include "core/json.h"

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

Result<std::string> Placement::device_name() const {
  if (devices.empty()) return invalid_argument("placement names no device");
  if (single()) return devices[0].device;
  if (split.empty())
    return invalid_argument(quote_name(label()) + ": several devices but no split method");
  SplitSpec spec;
  ASSIGN_OR_RETURN(spec.method, parse_split_method(split));
  for (const DeviceShare& d : devices) {
    spec.devices.push_back(d.device);
    spec.ratios.push_back(d.ratio);
  }
  return split_device_name(spec);
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
  std::string n = s.placement.label();
  if (s.contiguous()) {
    n += "[" + std::to_string(s.first()) + "]";
  } else {
    n += "{";
    for (size_t i = 0; i < s.layers.size(); ++i) {
      n += (i ? "," : "") + std::to_string(s.layers[i]);
    }
    n += "}";
  }
  if (s.actor >= 0) n += "#a" + std::to_string(s.actor);
  return n;
}

// "cpu:0-3@1800" -> ("cpu:0-3", 1800).
Result<DeviceShare> parse_label(const std::string& label) {
  DeviceShare d;
  const size_t at = label.rfind('@');
  d.device = label.substr(0, at);
  if (at != std::string::npos) {
    const std::string f = label.substr(at + 1);
    if (f.empty() || f.size() > 6 || !std::all_of(f.begin(), f.end(), ::isdigit)) {
      return invalid_argument(quote_name(label) + ": the DVFS level after '@' must be MHz");
    }
    d.mhz = std::stoi(f);
  }
  if (d.device.empty()) return invalid_argument(quote_name(label) + ": no device name");
  return d;
}

}  // namespace

std::string Plan::stage_name(size_t i) const {
  // The notation holds device names from the plan file: escaped and bounded as quote_name does,
  // without its quotes so that messages keep the form "stage 1 (npu:0[1])".
  const std::string quoted = quote_name(stage_notation(stages[i]));
  return "stage " + std::to_string(i) + " (" + quoted.substr(1, quoted.size() - 2) + ")";
}

std::vector<int> Plan::stage_actors() const {
  std::vector<int> actor(stages.size(), 0);
  if (mode != PlanMode::kStreaming) return actor;
  std::map<int, int> named;
  int next = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const int a = stages[i].actor;
    if (a < 0) {
      actor[i] = next++;
    } else {
      auto it = named.find(a);
      if (it == named.end()) it = named.emplace(a, next++).first;
      actor[i] = it->second;
    }
  }
  return actor;
}

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
    const std::string where = "slice " + std::to_string(i) + " " +
                              quote_name(starts[i].second + "[" + std::to_string(first) + "]");
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

namespace {

// One token of the notation: PLACEMENT[first] or PLACEMENT{l0,l1,...}, then optionally #aN.
struct NotationToken {
  std::string placement;
  bool listed = false;  // {..}: the layers are given; [..]: a range from `layers[0]`
  std::vector<int> layers;
  int actor = -1;
};

Result<int> parse_notation_number(const std::string& n, const std::string& tok, const char* what) {
  if (n.empty() || n.size() > 9 || !std::all_of(n.begin(), n.end(), ::isdigit)) {
    return invalid_argument("plan notation: " + quote_name(tok) + ": " + what +
                            " must be a number");
  }
  return std::stoi(n);
}

Result<NotationToken> parse_notation_token(const std::string& tok) {
  NotationToken t;
  std::string body = tok;
  const size_t hash = body.rfind("#a");
  if (hash != std::string::npos && hash > 0 && (body[hash - 1] == ']' || body[hash - 1] == '}')) {
    ASSIGN_OR_RETURN(t.actor, parse_notation_number(body.substr(hash + 2), tok, "the actor"));
    body.resize(hash);
  }
  const char close = body.empty() ? '\0' : body.back();
  const char open_ch = close == ']' ? '[' : '{';
  const size_t open = body.rfind(open_ch);
  if ((close != ']' && close != '}') || open == std::string::npos || open == 0) {
    return invalid_argument("plan notation: " + quote_name(tok) +
                            " is not DEVICE[first], DEVICE{l0,l1,..} or either with #aN");
  }
  t.placement = body.substr(0, open);
  const std::string inner = body.substr(open + 1, body.size() - open - 2);
  if (close == ']') {
    ASSIGN_OR_RETURN(int first, parse_notation_number(inner, tok, "the first layer"));
    t.layers.push_back(first);
    return t;
  }
  t.listed = true;
  std::istringstream in(inner);
  std::string n;
  while (std::getline(in, n, ',')) {
    ASSIGN_OR_RETURN(int l, parse_notation_number(n, tok, "every listed layer"));
    t.layers.push_back(l);
  }
  if (t.layers.empty())
    return invalid_argument("plan notation: " + quote_name(tok) + ": no layers listed");
  return t;
}

// "cpu:0+opencl:0@700/output_channels" -> devices with equal ratios (the notation has none).
Result<Placement> parse_placement_label(const std::string& label) {
  Placement p;
  std::string devices = label;
  const size_t slash = label.find('/');
  if (slash != std::string::npos) {
    p.split = label.substr(slash + 1);
    devices = label.substr(0, slash);
    if (p.split.empty())
      return invalid_argument(quote_name(label) + ": no split dimension after '/'");
  }
  std::istringstream in(devices);
  std::string d;
  while (std::getline(in, d, '+')) {
    ASSIGN_OR_RETURN(DeviceShare share, parse_label(d));
    p.devices.push_back(share);
  }
  if (p.devices.empty()) return invalid_argument(quote_name(label) + ": no device name");
  for (DeviceShare& share : p.devices) share.ratio = 1.0 / static_cast<double>(p.devices.size());
  return p;
}

}  // namespace

Result<Plan> parse_plan_notation(const std::string& text, int num_layers) {
  std::istringstream in(text);
  std::string tok;
  std::vector<NotationToken> tokens;
  while (in >> tok) {
    ASSIGN_OR_RETURN(NotationToken t, parse_notation_token(tok));
    tokens.push_back(std::move(t));
  }
  if (tokens.empty()) return invalid_argument("plan notation: no stages");
  const bool simple = std::all_of(tokens.begin(), tokens.end(), [](const NotationToken& t) {
    return !t.listed && t.actor < 0 && t.placement.find_first_of("+/") == std::string::npos;
  });
  if (simple) {  // seed 000's form: every stage runs to the next one's first layer
    std::vector<std::pair<int, std::string>> starts;
    for (const NotationToken& t : tokens) starts.emplace_back(t.layers[0], t.placement);
    if (starts.front().first != 0) {
      return invalid_argument("plan notation: the first stage must start at layer 0");
    }
    return plan_from_slices(num_layers, starts);
  }
  // The general form: a [first] stage runs from its first layer to the next [first] stage's
  // first layer (or the end), leaving out the layers that {..} stages list.
  std::set<int> listed;
  for (const NotationToken& t : tokens) {
    if (t.listed) listed.insert(t.layers.begin(), t.layers.end());
  }
  Plan p;
  p.num_layers = num_layers;
  p.planner = "manual";
  for (size_t i = 0; i < tokens.size(); ++i) {
    const NotationToken& t = tokens[i];
    const std::string where = "plan notation: stage " + std::to_string(i);
    Stage s;
    auto placement = parse_placement_label(t.placement);
    if (!placement.ok()) return placement.status().with_context(where);
    s.placement = std::move(placement).value();
    s.actor = t.actor;
    if (t.listed) {
      s.layers = t.layers;
    } else {
      int end = num_layers;
      for (size_t j = i + 1; j < tokens.size(); ++j) {
        if (!tokens[j].listed) {
          end = tokens[j].layers[0];
          break;
        }
      }
      if (t.layers[0] >= num_layers || end <= t.layers[0]) {
        return invalid_argument(where + ": first layers of [..] stages must ascend within 0.." +
                                std::to_string(num_layers - 1));
      }
      for (int l = t.layers[0]; l < end; ++l) {
        if (!listed.count(l)) s.layers.push_back(l);
      }
    }
    if (t.actor >= 0) p.mode = PlanMode::kStreaming;
    p.stages.push_back(std::move(s));
  }
  RETURN_IF_ERROR(p.validate(num_layers, {}, false).with_context("plan notation"));
  return p;
}

// ---- validation ----

Status Plan::validate(int nl, const std::vector<std::string>& available,
                      bool require_contiguous) const {
  if (nl != num_layers) {
    return invalid_argument("plan is for " + std::to_string(num_layers) +
                            " layers, the model has " + std::to_string(nl));
  }
  if (stages.empty() && nl > 0) return invalid_argument("plan has no stages");
  if (queue_capacity < 1 || queue_capacity > 1024) {
    return invalid_argument("queue_capacity: " + std::to_string(queue_capacity) +
                            " is outside 1..1024");
  }
  std::map<int, const Stage*> actor_first;  // by actor id: the first stage on it
  std::vector<int> owner(static_cast<size_t>(nl), -1);
  int prev_last = -1;
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage& s = stages[i];
    if (s.layers.empty()) {
      return invalid_argument("stage " + std::to_string(i) + ": no layers");
    }
    const std::string name = stage_name(i);
    if (s.placement.devices.empty()) return invalid_argument(name + ": placement names no device");
    if (s.placement.devices.size() > 1 && s.placement.split.empty()) {
      return invalid_argument(name + ": several devices but no split dimension");
    }
    double ratio_sum = 0;
    for (const DeviceShare& d : s.placement.devices) {
      if (!(d.ratio > 0) || !std::isfinite(d.ratio)) {
        return invalid_argument(name + ": device " + quote_name(d.device) + " has ratio " +
                                std::to_string(d.ratio) + ", must be > 0");
      }
      ratio_sum += d.ratio;
      if (d.mhz < 0) return invalid_argument(name + ": negative MHz for " + quote_name(d.device));
      if (!available.empty() &&
          std::find(available.begin(), available.end(), d.device) == available.end()) {
        std::string list;
        for (const std::string& a : available) list += (list.empty() ? "" : ", ") + a;
        return not_found(name + ": device " + quote_name(d.device) +
                         " is not available (available: " + list + ")");
      }
    }
    if (s.actor < -1 || s.actor > kMaxActorId) {
      return invalid_argument(name + ": actor " + std::to_string(s.actor) + " is outside -1.." +
                              std::to_string(kMaxActorId));
    }
    if (s.actor >= 0) {
      auto [it, inserted] = actor_first.emplace(s.actor, &s);
      if (!inserted && !(it->second->placement == s.placement)) {
        return invalid_argument(name + ": actor " + std::to_string(s.actor) +
                                " also runs a stage on " +
                                quote_name(it->second->placement.label()) +
                                "; the stages of one actor share one placement");
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
  j["queue_capacity"] = queue_capacity;
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
    js["actor"] = s.actor;
    js["packing"] = s.packing;
    js["estimate"] = {{"exec_ms", s.estimate.exec_ms},
                      {"transfer_ms", s.estimate.transfer_ms},
                      {"energy_mj", s.estimate.energy_mj}};
    if (!s.estimate.member_ms.empty()) js["estimate"]["member_ms"] = s.estimate.member_ms;
    st.push_back(std::move(js));
  }
  j["stages"] = std::move(st);
  Json load = Json::array();
  for (const DeviceLoad& d : device_load) {
    load.push_back({{"device", d.device}, {"busy_ms", d.busy_ms}});
  }
  j["estimate"] = {{"latency_ms", estimated_latency_ms},
                   {"energy_mj", estimated_energy_mj},
                   {"period_ms", estimated_period_ms},
                   {"device_load", std::move(load)}};
  if (estimated_error) j["estimate"]["error"] = *estimated_error;
  if (max_error) j["estimate"]["max_error"] = *max_error;
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
    return invalid_argument("format: " + quote_name(format) + " is not tessera-plan");
  }
  ASSIGN_OR_RETURN(int64_t version, json::int_field(j, "", "version", 1, 1 << 20));
  if (version != 1 && version != Plan::kVersion) {
    return invalid_argument("version: " + std::to_string(version) + " is not supported (1 or " +
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
    return invalid_argument("mode: " + quote_name(mode) + " is not sequential or streaming");
  }
  ASSIGN_OR_RETURN(p.planner, json::string_field(j, "", "planner", false));
  ASSIGN_OR_RETURN(p.objective, json::string_field(j, "", "objective", false));
  if (version >= 2) {
    ASSIGN_OR_RETURN(int64_t capacity, json::int_field(j, "", "queue_capacity", 1, 1024, false,
                                                       Plan::kDefaultQueueCapacity));
    p.queue_capacity = static_cast<int>(capacity);
  }
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
    if (version >= 2) {
      ASSIGN_OR_RETURN(int64_t actor,
                       json::int_field(js, sp, "actor", -1, Plan::kMaxActorId, false, -1));
      s.actor = static_cast<int>(actor);
    }
    if (auto e = js.find("estimate"); e != js.end()) {
      const std::string ep = json::member_path(sp, "estimate");
      ASSIGN_OR_RETURN(s.estimate.exec_ms, json::number_field(*e, ep, "exec_ms", 0, 1e12, false));
      ASSIGN_OR_RETURN(s.estimate.transfer_ms,
                       json::number_field(*e, ep, "transfer_ms", 0, 1e12, false));
      ASSIGN_OR_RETURN(s.estimate.energy_mj,
                       json::number_field(*e, ep, "energy_mj", 0, 1e15, false));
      ASSIGN_OR_RETURN(const Json* members, json::array_field(*e, ep, "member_ms", false));
      if (members != nullptr) {
        const std::string mp = json::member_path(ep, "member_ms");
        if (members->size() != s.placement.devices.size()) {
          return invalid_argument(mp + ": " + std::to_string(members->size()) + " entries for " +
                                  std::to_string(s.placement.devices.size()) + " devices");
        }
        for (size_t k = 0; k < members->size(); ++k) {
          const Json& x = (*members)[k];
          if (!x.is_number() || !std::isfinite(x.get<double>()) || x.get<double>() < 0 ||
              x.get<double>() > 1e12) {
            return invalid_argument(json::index_path(mp, k) + ": expected ms in [0, 1e12]");
          }
          s.estimate.member_ms.push_back(x.get<double>());
        }
      }
    }
    p.stages.push_back(std::move(s));
  }
  if (auto e = j.find("estimate"); e != j.end()) {
    ASSIGN_OR_RETURN(p.estimated_latency_ms,
                     json::number_field(*e, "estimate", "latency_ms", 0, 1e12, false));
    ASSIGN_OR_RETURN(p.estimated_energy_mj,
                     json::number_field(*e, "estimate", "energy_mj", 0, 1e15, false));
    if (version >= 2) {
      ASSIGN_OR_RETURN(p.estimated_period_ms,
                       json::number_field(*e, "estimate", "period_ms", 0, 1e12, false));
      if (e->contains("device_load")) {
        ASSIGN_OR_RETURN(const Json* load, json::array_field(*e, "estimate", "device_load"));
        for (size_t k = 0; k < load->size(); ++k) {
          const std::string lp = json::index_path("estimate.device_load", k);
          RETURN_IF_ERROR(json::require_object((*load)[k], lp));
          DeviceLoad d;
          ASSIGN_OR_RETURN(d.device, json::string_field((*load)[k], lp, "device"));
          ASSIGN_OR_RETURN(d.busy_ms, json::number_field((*load)[k], lp, "busy_ms", 0, 1e12));
          p.device_load.push_back(std::move(d));
        }
      }
    }
    for (const char* key : {"error", "max_error"}) {
      if (!e->contains(key)) continue;
      ASSIGN_OR_RETURN(double x, json::number_field(*e, "estimate", key, 0, 1e6));
      (std::string(key) == "error" ? p.estimated_error : p.max_error) = x;
    }
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
