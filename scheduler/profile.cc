#include "scheduler/profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "backends/registry.h"
#include "core/json.h"
#include "ops/op.h"
#include "ops/split_rule.h"

namespace tessera {

using json::Json;

// ---- transfer fit ----

Result<TransferFit> TransferFit::fit(std::vector<std::pair<uint64_t, double>> points) {
  TransferFit f;
  std::set<uint64_t> sizes;
  for (const auto& [b, ms] : points) {
    if (!std::isfinite(ms) || ms < 0) return invalid_argument("transfer time must be >= 0");
    sizes.insert(b);
  }
  if (sizes.size() < 2) {
    return invalid_argument("a transfer fit needs at least two distinct sizes");
  }
  // Ordinary least squares on (x = bytes, y = ms).
  const double n = static_cast<double>(points.size());
  double sx = 0, sy = 0;
  for (const auto& [b, ms] : points) {
    sx += static_cast<double>(b);
    sy += ms;
  }
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0, syy = 0;
  for (const auto& [b, ms] : points) {
    const double dx = static_cast<double>(b) - mx, dy = ms - my;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  f.alpha_ms_per_byte = sxy / sxx;
  f.beta_ms = my - f.alpha_ms_per_byte * mx;
  double ss_res = 0;
  for (const auto& [b, ms] : points) {
    const double r = ms - (f.alpha_ms_per_byte * static_cast<double>(b) + f.beta_ms);
    ss_res += r * r;
  }
  f.r2 = syy > 0 ? 1 - ss_res / syy : 1;
  // A negative intercept (fixed cost below measurement noise) would make small transfers free or
  // negative: clamp it at zero; likewise a negative slope.
  if (f.beta_ms < 0) f.beta_ms = 0;
  if (f.alpha_ms_per_byte < 0) f.alpha_ms_per_byte = 0;
  f.points = std::move(points);
  f.sort_points();
  return f;
}

void TransferFit::sort_points() {
  std::stable_sort(points.begin(), points.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
}

double TransferFit::measured_ms(double bytes) const {
  const auto& p = points;
  if (bytes <= static_cast<double>(p.front().first)) return p.front().second;
  // The first point above `bytes` (the last one when none is) and the point before it.
  size_t hi = 1;
  while (hi + 1 < p.size() && static_cast<double>(p[hi].first) < bytes) ++hi;
  size_t lo = hi - 1;
  while (lo > 0 && p[lo].first == p[hi].first) --lo;
  const double x0 = static_cast<double>(p[lo].first), x1 = static_cast<double>(p[hi].first);
  if (x1 <= x0) return p[hi].second;
  double slope = (p[hi].second - p[lo].second) / (x1 - x0);
  if (bytes > x1) slope = std::max(0.0, slope);  // above the sweep: never cheaper than its end
  return std::max(0.0, p[lo].second + slope * (bytes - x0));
}

// ---- lookup ----

const LevelProfile* DeviceProfile::level(int mhz) const {
  for (const LevelProfile& l : levels) {
    if (l.mhz == mhz) return &l;
  }
  return nullptr;
}

const DeviceProfile* Profile::find(const std::string& device) const {
  for (const DeviceProfile& d : devices) {
    if (d.device == device) return &d;
  }
  return nullptr;
}

void Profile::describe_model(const LayerGraph& lg) {
  layers.clear();
  for (const Layer& l : lg.layers()) {
    ProfileLayer p;
    p.name = l.name;
    p.op = op_name(l.kind);
    p.flops = l.cost.flops;
    p.input_bytes = l.cost.input_bytes;
    p.weight_bytes = l.cost.weight_bytes;
    p.output_bytes = l.cost.output_bytes;
    layers.push_back(std::move(p));
  }
  cut_live_bytes.clear();
  for (const Cut& c : lg.cuts()) cut_live_bytes.push_back(c.live_bytes);
}

Status Profile::check_matches(const LayerGraph& lg) const {
  if (lg.num_layers() != num_layers()) {
    return invalid_argument("profile has " + std::to_string(num_layers()) + " layers, the model " +
                            std::to_string(lg.num_layers()));
  }
  for (int i = 0; i < num_layers(); ++i) {
    const ProfileLayer& p = layers[static_cast<size_t>(i)];
    if (p.name != lg.layer(i).name || p.op != op_name(lg.layer(i).kind)) {
      return invalid_argument("model.layers[" + std::to_string(i) + "]: profile has " +
                              quote_name(p.name) + " (" + quote_name(p.op) + "), the model " +
                              quote_name(lg.layer(i).name) + " (" + op_name(lg.layer(i).kind) +
                              ")");
    }
  }
  return Status();
}

// ---- JSON ----

namespace {

Json fit_json(const TransferFit& f) {
  Json pts = Json::array();
  for (const auto& [b, ms] : f.points) pts.push_back({b, ms});
  return {{"alpha_ms_per_byte", f.alpha_ms_per_byte},
          {"beta_ms", f.beta_ms},
          {"r2", f.r2},
          {"points", pts}};
}

Json optional_array(const std::vector<std::optional<double>>& v) {
  Json a = Json::array();
  for (const auto& x : v) {
    if (x) {
      a.push_back(*x);
    } else {
      a.push_back(nullptr);
    }
  }
  return a;
}

Result<TransferFit> read_fit(const Json& obj, const std::string& path) {
  TransferFit f;
  RETURN_IF_ERROR(json::require_object(obj, path));
  ASSIGN_OR_RETURN(f.alpha_ms_per_byte, json::number_field(obj, path, "alpha_ms_per_byte", 0, 1));
  ASSIGN_OR_RETURN(f.beta_ms, json::number_field(obj, path, "beta_ms", 0, 1e6));
  ASSIGN_OR_RETURN(f.r2, json::number_field(obj, path, "r2", -1e9, 1));
  ASSIGN_OR_RETURN(const Json* pts, json::array_field(obj, path, "points", false));
  if (pts != nullptr) {
    for (size_t i = 0; i < pts->size(); ++i) {
      const Json& p = (*pts)[i];
      const std::string pp = json::index_path(path + ".points", i);
      if (!p.is_array() || p.size() != 2 || !p[0].is_number_unsigned() || !p[1].is_number() ||
          !std::isfinite(p[1].get<double>()) || p[1].get<double>() < 0) {
        return invalid_argument(pp + ": expected [bytes, ms] with ms >= 0");
      }
      f.points.emplace_back(p[0].get<uint64_t>(), p[1].get<double>());
    }
    f.sort_points();
  }
  return f;
}

Result<std::vector<std::optional<double>>> read_optional_array(const Json& obj,
                                                               const std::string& path,
                                                               const char* key, size_t n,
                                                               double max, bool required) {
  std::vector<std::optional<double>> out;
  ASSIGN_OR_RETURN(const Json* a, json::array_field(obj, path, key, required));
  if (a == nullptr) return out;
  const std::string ap = json::member_path(path, key);
  if (a->size() != n) {
    return invalid_argument(ap + ": has " + std::to_string(a->size()) + " entries, the model has " +
                            std::to_string(n) + " layers");
  }
  for (size_t i = 0; i < a->size(); ++i) {
    const Json& x = (*a)[i];
    if (x.is_null()) {
      out.emplace_back();
      continue;
    }
    if (!x.is_number() || !std::isfinite(x.get<double>()) || x.get<double>() < 0 ||
        x.get<double>() > max) {
      return invalid_argument(json::index_path(ap, i) + ": expected a number in [0, " +
                              std::to_string(max) + "] or null, got " + x.dump());
    }
    out.emplace_back(x.get<double>());
  }
  return out;
}

Result<std::vector<PieceRun>> read_piece_runs(const Json& obj, const std::string& path,
                                              const std::vector<ProfileLayer>& layers) {
  std::vector<PieceRun> out;
  ASSIGN_OR_RETURN(const Json* a, json::array_field(obj, path, "piece_runs", false));
  if (a == nullptr) return out;
  const int64_t n = static_cast<int64_t>(layers.size());
  for (size_t i = 0; i < a->size(); ++i) {
    const Json& r = (*a)[i];
    const std::string rp = json::index_path(path + ".piece_runs", i);
    RETURN_IF_ERROR(json::require_object(r, rp));
    PieceRun run;
    ASSIGN_OR_RETURN(int64_t layer, json::int_field(r, rp, "layer", 0, n - 1));
    run.layer = static_cast<int>(layer);
    ASSIGN_OR_RETURN(run.method, json::string_field(r, rp, "method"));
    if (!parse_split_method(run.method).ok()) {
      return invalid_argument(json::member_path(rp, "method") + ": " + quote_name(run.method) +
                              " is not a split method");
    }
    const ProfileLayer& pl = layers[static_cast<size_t>(layer)];
    const double layer_bytes =
        static_cast<double>(pl.input_bytes + pl.weight_bytes + pl.output_bytes);
    // A piece reads a halo beyond its share, never more than the whole layer touches twice.
    ASSIGN_OR_RETURN(run.flops, json::number_field(r, rp, "flops", 0, std::max(pl.flops, 0.0)));
    ASSIGN_OR_RETURN(run.bytes, json::number_field(r, rp, "bytes", 0, 2 * layer_bytes));
    ASSIGN_OR_RETURN(run.ms, json::number_field(r, rp, "ms", 1e-9, 1e9));
    ASSIGN_OR_RETURN(run.whole_ms, json::number_field(r, rp, "whole_ms", 1e-9, 1e9));
    out.push_back(std::move(run));
  }
  return out;
}

Result<std::vector<SliceRun>> read_slice_runs(const Json& obj, const std::string& path, size_t n) {
  std::vector<SliceRun> out;
  ASSIGN_OR_RETURN(const Json* a, json::array_field(obj, path, "slice_runs", false));
  if (a == nullptr) return out;
  for (size_t i = 0; i < a->size(); ++i) {
    const Json& r = (*a)[i];
    const std::string rp = json::index_path(path + ".slice_runs", i);
    if (!r.is_array() || r.size() < 3 || r.size() > 5 || !r[0].is_number_integer() ||
        !r[1].is_number_integer() || !r[2].is_number() || (r.size() >= 4 && !r[3].is_number()) ||
        (r.size() == 5 && !r[4].is_number())) {
      return invalid_argument(rp +
                              ": expected [first, last, ms], [first, last, ms, layers_ms] or "
                              "[first, last, ms, layers_ms, chain_ms]");
    }
    SliceRun run{r[0].get<int>(), r[1].get<int>(), r[2].get<double>(),
                 r.size() >= 4 ? r[3].get<double>() : 0.0,
                 r.size() == 5 ? r[4].get<double>() : 0.0};
    if (run.first < 0 || run.last <= run.first || static_cast<size_t>(run.last) > n) {
      return invalid_argument(rp + ": [" + std::to_string(run.first) + ", " +
                              std::to_string(run.last) + ") is not a layer range of the " +
                              std::to_string(n) + " layers");
    }
    if (!std::isfinite(run.ms) || run.ms <= 0 || run.ms > 1e9) {
      return invalid_argument(rp + ": ms must be positive, got " + r[2].dump());
    }
    if (!std::isfinite(run.layers_ms) || run.layers_ms < 0 || run.layers_ms > run.ms) {
      return invalid_argument(rp + ": layers_ms must be in [0, ms], got " + r[3].dump());
    }
    if (!std::isfinite(run.chain_ms) || run.chain_ms < 0 || run.chain_ms > 1e9 ||
        (run.chain_ms > 0 && run.layers_ms == 0)) {
      return invalid_argument(rp + ": chain_ms must be >= 0 (and given with layers_ms), got " +
                              r[4].dump());
    }
    out.push_back(run);
  }
  return out;
}

}  // namespace

std::string Profile::to_json_text() const {
  Json j;
  j["format"] = "tessera-profile";
  j["version"] = kVersion;
  Json model;
  model["name"] = model_name;
  model["hash"] = model_hash;
  Json ls = Json::array();
  for (const ProfileLayer& l : layers) {
    ls.push_back({{"name", l.name},
                  {"op", l.op},
                  {"flops", l.flops},
                  {"input_bytes", l.input_bytes},
                  {"weight_bytes", l.weight_bytes},
                  {"output_bytes", l.output_bytes}});
  }
  model["layers"] = ls;
  model["cut_live_bytes"] = cut_live_bytes;
  j["model"] = model;
  j["platform"] = Json::parse(platform.to_json_text());
  j["conditions"] = {{"threads", conditions.threads},
                     {"repeat", conditions.repeat},
                     {"warmup", conditions.warmup},
                     {"statistic", conditions.statistic},
                     {"date", conditions.date},
                     {"host", conditions.host},
                     {"tessera_version", conditions.tessera_version},
                     {"profiling_seconds", conditions.profiling_seconds}};
  Json devs = Json::array();
  for (const DeviceProfile& d : devices) {
    Json jd;
    jd["device"] = d.device;
    jd["description"] = d.description;
    jd["memory_bytes"] = d.memory_bytes;
    Json un = Json::object();
    for (const auto& [i, why] : d.unsupported) un[std::to_string(i)] = why;
    jd["unsupported"] = un;
    if (d.corun_scale > 0) jd["corun_scale"] = d.corun_scale;
    if (!d.layer_error.empty()) jd["layer_error"] = optional_array(d.layer_error);
    if (!d.layer_output_error.empty()) {
      jd["layer_output_error"] = optional_array(d.layer_output_error);
    }
    if (d.model_error) jd["model_error"] = *d.model_error;
    Json levels = Json::array();
    for (const LevelProfile& l : d.levels) {
      Json jl;
      jl["mhz"] = l.mhz;
      jl["set_by_governor"] = l.set_by_governor;
      jl["energy_source"] = l.energy_source;
      jl["layer_ms"] = optional_array(l.layer_ms);
      if (!l.layer_chain_ms.empty()) jl["layer_chain_ms"] = optional_array(l.layer_chain_ms);
      Json runs = Json::array();
      for (const SliceRun& r : l.slice_runs) {
        runs.push_back(r.chain_ms > 0    ? Json{r.first, r.last, r.ms, r.layers_ms, r.chain_ms}
                       : r.layers_ms > 0 ? Json{r.first, r.last, r.ms, r.layers_ms}
                                         : Json{r.first, r.last, r.ms});
      }
      jl["slice_runs"] = runs;
      if (!l.piece_runs.empty()) {
        Json pieces = Json::array();
        for (const PieceRun& r : l.piece_runs) {
          pieces.push_back(Json{{"layer", r.layer},
                                {"method", r.method},
                                {"flops", r.flops},
                                {"bytes", r.bytes},
                                {"ms", r.ms},
                                {"whole_ms", r.whole_ms}});
        }
        jl["piece_runs"] = pieces;
      }
      if (!l.layer_dynamic_w.empty()) jl["layer_dynamic_w"] = optional_array(l.layer_dynamic_w);
      jl["upload"] = fit_json(l.upload);
      jl["download"] = fit_json(l.download);
      levels.push_back(std::move(jl));
    }
    jd["levels"] = levels;
    devs.push_back(std::move(jd));
  }
  j["devices"] = devs;
  return j.dump(1) + "\n";
}

Status Profile::save(const std::string& path) const {
  return json::write_text_file(path, to_json_text());
}

namespace {

Result<Profile> parse_profile(const Json& j, const std::string& expected_hash) {
  Profile p;
  RETURN_IF_ERROR(json::require_object(j, ""));
  ASSIGN_OR_RETURN(std::string format, json::string_field(j, "", "format"));
  if (format != "tessera-profile") {
    return invalid_argument("format: " + quote_name(format) + " is not 'tessera-profile'");
  }
  ASSIGN_OR_RETURN(int64_t version, json::int_field(j, "", "version", 0, INT32_MAX));
  if (version < Profile::kOldestVersion || version > Profile::kVersion) {
    return invalid_argument(
        "version: " + std::to_string(version) + " is not supported (this Tessera reads versions " +
        std::to_string(Profile::kOldestVersion) + " to " + std::to_string(Profile::kVersion) +
        (version < Profile::kOldestVersion ? "; profile the model again with this tessera)" : ")"));
  }
  ASSIGN_OR_RETURN(const Json* model, json::object_field(j, "", "model"));
  ASSIGN_OR_RETURN(p.model_name, json::string_field(*model, "model", "name", false));
  ASSIGN_OR_RETURN(p.model_hash, json::string_field(*model, "model", "hash"));
  if (!expected_hash.empty() && p.model_hash != expected_hash) {
    return invalid_argument("model.hash: the profile is of model " + quote_name(p.model_hash) +
                            ", this model is " + expected_hash + " (profile it again)");
  }
  ASSIGN_OR_RETURN(const Json* layers, json::array_field(*model, "model", "layers"));
  if (layers->empty()) return invalid_argument("model.layers: empty");
  for (size_t i = 0; i < layers->size(); ++i) {
    const std::string lp = json::index_path("model.layers", i);
    const Json& l = (*layers)[i];
    ProfileLayer pl;
    ASSIGN_OR_RETURN(pl.name, json::string_field(l, lp, "name"));
    ASSIGN_OR_RETURN(pl.op, json::string_field(l, lp, "op"));
    ASSIGN_OR_RETURN(pl.flops, json::number_field(l, lp, "flops", 0, 1e18));
    ASSIGN_OR_RETURN(int64_t ib, json::int_field(l, lp, "input_bytes", 0, INT64_MAX));
    ASSIGN_OR_RETURN(int64_t wb, json::int_field(l, lp, "weight_bytes", 0, INT64_MAX));
    ASSIGN_OR_RETURN(int64_t ob, json::int_field(l, lp, "output_bytes", 0, INT64_MAX));
    pl.input_bytes = static_cast<uint64_t>(ib);
    pl.weight_bytes = static_cast<uint64_t>(wb);
    pl.output_bytes = static_cast<uint64_t>(ob);
    p.layers.push_back(std::move(pl));
  }
  const size_t n = p.layers.size();
  ASSIGN_OR_RETURN(const Json* cuts, json::array_field(*model, "model", "cut_live_bytes"));
  if (cuts->size() != n + 1) {
    return invalid_argument("model.cut_live_bytes: has " + std::to_string(cuts->size()) +
                            " entries, expected layers + 1 = " + std::to_string(n + 1));
  }
  for (size_t i = 0; i < cuts->size(); ++i) {
    if (!(*cuts)[i].is_number_unsigned()) {
      return invalid_argument(json::index_path("model.cut_live_bytes", i) +
                              ": expected a byte count");
    }
    p.cut_live_bytes.push_back((*cuts)[i].get<uint64_t>());
  }
  ASSIGN_OR_RETURN(const Json* platform, json::object_field(j, "", "platform"));
  auto plat = Platform::from_json_text(platform->dump(), "platform");
  if (!plat.ok()) return plat.status();
  p.platform = std::move(*plat);

  ASSIGN_OR_RETURN(const Json* cond, json::object_field(j, "", "conditions"));
  ASSIGN_OR_RETURN(int64_t threads, json::int_field(*cond, "conditions", "threads", 1, 4096));
  ASSIGN_OR_RETURN(int64_t repeat, json::int_field(*cond, "conditions", "repeat", 1, 1 << 30));
  ASSIGN_OR_RETURN(int64_t warmup, json::int_field(*cond, "conditions", "warmup", 0, 1 << 30));
  p.conditions.threads = static_cast<int>(threads);
  p.conditions.repeat = static_cast<int>(repeat);
  p.conditions.warmup = static_cast<int>(warmup);
  ASSIGN_OR_RETURN(p.conditions.statistic,
                   json::string_field(*cond, "conditions", "statistic", false, "median"));
  if (p.conditions.statistic != "median" && p.conditions.statistic != "min" &&
      p.conditions.statistic != "mean") {
    return invalid_argument("conditions.statistic: " + quote_name(p.conditions.statistic) +
                            " is not median, min or mean");
  }
  ASSIGN_OR_RETURN(p.conditions.date, json::string_field(*cond, "conditions", "date"));
  ASSIGN_OR_RETURN(p.conditions.host, json::string_field(*cond, "conditions", "host", false));
  ASSIGN_OR_RETURN(p.conditions.tessera_version,
                   json::string_field(*cond, "conditions", "tessera_version", false));
  ASSIGN_OR_RETURN(p.conditions.profiling_seconds,
                   json::number_field(*cond, "conditions", "profiling_seconds", 0, 1e9, false));

  ASSIGN_OR_RETURN(const Json* devices, json::array_field(j, "", "devices"));
  std::set<std::string> seen;
  for (size_t di = 0; di < devices->size(); ++di) {
    const std::string dp = json::index_path("devices", di);
    const Json& jd = (*devices)[di];
    DeviceProfile d;
    ASSIGN_OR_RETURN(d.device, json::string_field(jd, dp, "device"));
    if (p.platform.find(d.device) == nullptr) {
      return invalid_argument(dp + ".device: " + quote_name(d.device) +
                              " is not a device of the profile's platform " +
                              quote_name(p.platform.name));
    }
    if (!seen.insert(d.device).second) {
      return invalid_argument(dp + ".device: " + quote_name(d.device) + " is profiled twice");
    }
    ASSIGN_OR_RETURN(d.description, json::string_field(jd, dp, "description", false));
    ASSIGN_OR_RETURN(int64_t mem, json::int_field(jd, dp, "memory_bytes", 0, INT64_MAX, false));
    d.memory_bytes = static_cast<uint64_t>(mem);
    auto un = jd.find("unsupported");
    if (un != jd.end()) {
      if (!un->is_object()) return invalid_argument(dp + ".unsupported: expected an object");
      for (const auto& [k, why] : un->items()) {
        int idx = -1;
        try {
          size_t pos = 0;
          idx = std::stoi(k, &pos);
          if (pos != k.size()) idx = -1;
        } catch (...) {
          idx = -1;
        }
        if (idx < 0 || static_cast<size_t>(idx) >= n) {
          return invalid_argument(dp + ".unsupported: key " + quote_name(k) +
                                  " is not a layer index below " + std::to_string(n));
        }
        if (!why.is_string()) {  // k is a layer index here: safe to print as it is
          return invalid_argument(dp + ".unsupported." + k + ": expected a reason string");
        }
        d.unsupported[idx] = why.get<std::string>();
      }
    }
    if (jd.contains("corun_scale")) {
      ASSIGN_OR_RETURN(d.corun_scale, json::number_field(jd, dp, "corun_scale", 1, kMaxCorunScale));
    }
    if (version >= 3) {
      // Errors: of a precision level (or a device with reduced arithmetic of its own); a device
      // name whose level this Tessera does not know is refused with the name.
      if (jd.contains("layer_error") || jd.contains("layer_output_error") ||
          jd.contains("model_error")) {
        if (auto parsed = parse_device_name(d.device); !parsed.ok()) {
          return invalid_argument(dp + ".device: '" + d.device +
                                  "' has errors recorded but is no device name this Tessera "
                                  "reads: " +
                                  parsed.status().message());
        }
      }
      ASSIGN_OR_RETURN(d.layer_error,
                       read_optional_array(jd, dp, "layer_error", n, kMaxLayerError, false));
      ASSIGN_OR_RETURN(d.layer_output_error,
                       read_optional_array(jd, dp, "layer_output_error", n, kMaxLayerError, false));
      if (jd.contains("model_error")) {
        ASSIGN_OR_RETURN(double e, json::number_field(jd, dp, "model_error", 0, kMaxLayerError));
        d.model_error = e;
      }
    }
    ASSIGN_OR_RETURN(const Json* levels, json::array_field(jd, dp, "levels"));
    if (levels->empty()) return invalid_argument(dp + ".levels: a device needs a level");
    for (size_t li = 0; li < levels->size(); ++li) {
      const std::string lp = json::index_path(dp + ".levels", li);
      const Json& jl = (*levels)[li];
      LevelProfile l;
      ASSIGN_OR_RETURN(int64_t mhz, json::int_field(jl, lp, "mhz", 0, 100000));
      l.mhz = static_cast<int>(mhz);
      if (!d.levels.empty() && l.mhz <= d.levels.back().mhz) {
        return invalid_argument(lp + ".mhz: levels must ascend");
      }
      auto sbg = jl.find("set_by_governor");
      l.set_by_governor = sbg != jl.end() && sbg->is_boolean() && sbg->get<bool>();
      ASSIGN_OR_RETURN(l.energy_source, json::string_field(jl, lp, "energy_source", false));
      ASSIGN_OR_RETURN(l.layer_ms, read_optional_array(jl, lp, "layer_ms", n, 1e9, true));
      ASSIGN_OR_RETURN(l.layer_chain_ms,
                       read_optional_array(jl, lp, "layer_chain_ms", n, 1e9, false));
      ASSIGN_OR_RETURN(l.layer_dynamic_w,
                       read_optional_array(jl, lp, "layer_dynamic_w", n, 1000, false));
      ASSIGN_OR_RETURN(l.slice_runs, read_slice_runs(jl, lp, n));
      ASSIGN_OR_RETURN(l.piece_runs, read_piece_runs(jl, lp, p.layers));
      ASSIGN_OR_RETURN(const Json* up, json::object_field(jl, lp, "upload"));
      ASSIGN_OR_RETURN(l.upload, read_fit(*up, lp + ".upload"));
      ASSIGN_OR_RETURN(const Json* down, json::object_field(jl, lp, "download"));
      ASSIGN_OR_RETURN(l.download, read_fit(*down, lp + ".download"));
      d.levels.push_back(std::move(l));
    }
    p.devices.push_back(std::move(d));
  }
  return p;
}

}  // namespace

Result<Profile> Profile::from_json_text(const std::string& text, const std::string& origin,
                                        const std::string& expected_hash) {
  ASSIGN_OR_RETURN(Json j, json::parse(text, origin));
  auto p = parse_profile(j, expected_hash);
  if (!p.ok()) return p.status().with_context(origin);
  return p;
}

Result<Profile> Profile::load(const std::string& path, const std::string& expected_hash) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open profile");
  std::ostringstream ss;
  ss << in.rdbuf();
  return from_json_text(ss.str(), path, expected_hash);
}

std::string bytes_hash(const void* data, size_t size) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Result<std::string> model_file_hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  return bytes_hash(bytes.data(), bytes.size());
}

}  // namespace tessera
