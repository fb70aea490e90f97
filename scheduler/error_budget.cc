#include "scheduler/error_budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "backends/registry.h"

namespace tessera {

namespace {

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

// The device's time for `layer` at its fastest level: chained, else alone; nullopt when neither
// was measured.
std::optional<double> layer_time(const DeviceProfile& d, int layer) {
  if (d.levels.empty()) return std::nullopt;
  const LevelProfile& top = d.levels.back();
  const auto l = static_cast<size_t>(layer);
  if (l < top.layer_chain_ms.size() && top.layer_chain_ms[l]) return top.layer_chain_ms[l];
  if (l < top.layer_ms.size() && top.layer_ms[l]) return top.layer_ms[l];
  return std::nullopt;
}

// The device's gain (see error_budget.h): its whole-model error over the composition of all of
// its layers' errors; 1 when either is unknown or zero.
double error_gain(const DeviceProfile& d) {
  if (!d.model_error) return 1;
  double sum = 0;
  for (const auto& e : d.layer_error) {
    if (e) sum += *e * *e;
  }
  return sum > 0 && *d.model_error > 0 ? *d.model_error / std::sqrt(sum) : 1.0;
}

// The error device `d` adds to layer l at the model's outputs: its measured output error where the
// profile has one (DeviceProfile::layer_output_error), else its layer error times the device's
// gain; unset when neither was measured.
std::optional<double> output_error(const DeviceProfile& d, size_t l) {
  if (l < d.layer_output_error.size() && d.layer_output_error[l]) return d.layer_output_error[l];
  if (l < d.layer_error.size() && d.layer_error[l]) return error_gain(d) * *d.layer_error[l];
  return std::nullopt;
}

bool reduced_precision(const std::string& device) {
  const Result<DeviceName> name = parse_device_name(device);
  return name.ok() && name->precision != Precision::kF32;
}

}  // namespace

Result<double> compose_errors(std::span<const double> errors) {
  double sum = 0;
  for (size_t i = 0; i < errors.size(); ++i) {
    if (!std::isfinite(errors[i]) || errors[i] < 0) {
      return invalid_argument("error " + std::to_string(i) + " is " + number(errors[i]) +
                              ", not a finite number >= 0");
    }
    sum += errors[i] * errors[i];
  }
  return std::sqrt(sum);
}

Result<double> profiled_layer_error(const Profile& profile, const std::string& device, int layer) {
  if (layer < 0 || layer >= profile.num_layers()) {
    return invalid_argument("layer " + std::to_string(layer) + " is not a layer of the profile (" +
                            std::to_string(profile.num_layers()) + " layers)");
  }
  const DeviceProfile* d = profile.find(device);
  if (d == nullptr) return not_found("device " + quote_name(device) + " is not in the profile");
  const auto l = static_cast<size_t>(layer);
  if (const std::optional<double> e = output_error(*d, l)) return *e;
  if (!reduced_precision(device)) return 0.0;
  return failed_precondition("device " + quote_name(device) + " has no measured error for layer " +
                             std::to_string(layer) + " (" + profile.layers[l].name +
                             "): profile the model again with this tessera");
}

Result<double> plan_expected_error(const Profile& profile, const Plan& plan) {
  std::vector<double> errors;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& stage = plan.stages[s];
    for (int layer : stage.layers) {
      double worst = 0;
      for (const DeviceShare& share : stage.placement.devices) {
        auto e = profiled_layer_error(profile, share.device, layer);
        if (!e.ok()) return e.status().with_context(plan.stage_name(s));
        worst = std::max(worst, *e);
      }
      errors.push_back(worst);
    }
  }
  return compose_errors(errors);
}

Result<ErrorBound> bound_profile_error(Profile* profile, double max_error) {
  if (!std::isfinite(max_error) || max_error < 0) {
    return invalid_argument("the error bound " + number(max_error) +
                            " is not a finite number >= 0");
  }
  const int L = profile->num_layers();
  struct Candidate {
    size_t device = 0;
    int layer = 0;
    double error = 0;
    double saving_ms = 0;
  };
  std::vector<Candidate> candidates;
  std::vector<std::pair<size_t, int>> refused;  // not measured, or over the budget
  for (size_t di = 0; di < profile->devices.size(); ++di) {
    const DeviceProfile& d = profile->devices[di];
    if (!reduced_precision(d.device)) continue;
    const Result<DeviceName> name = parse_device_name(d.device);
    const DeviceProfile* base = profile->find(name->base());
    for (int l = 0; l < L; ++l) {
      if (d.unsupported.count(l)) continue;
      const std::optional<double> e = output_error(d, static_cast<size_t>(l));
      if (!e) {
        refused.emplace_back(di, l);
        continue;
      }
      Candidate c{di, l, *e, 1.0};
      // Time saved against the same device at f32, where both were measured; a level profiled
      // without its f32 device is ranked by its error alone.
      const std::optional<double> t = layer_time(d, l);
      const std::optional<double> t32 =
          base != nullptr && !base->unsupported.count(l) ? layer_time(*base, l) : std::nullopt;
      if (t && t32) c.saving_ms = *t32 - *t;
      candidates.push_back(c);
    }
  }
  // Free pairs first, then by saving per squared error; ties by layer and device (a stable,
  // reproducible order).
  auto score = [](const Candidate& c) {
    return c.error > 0 ? c.saving_ms / (c.error * c.error) : INFINITY;
  };
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](const Candidate& a, const Candidate& b) { return score(a) > score(b); });
  const double budget = max_error * max_error;
  std::vector<double> reserved(static_cast<size_t>(L), 0);
  double total = 0;
  ErrorBound out;
  out.max_error = max_error;
  for (const Candidate& c : candidates) {
    const double e2 = c.error * c.error;
    const double more = std::max(0.0, e2 - reserved[static_cast<size_t>(c.layer)]);
    // A relative slack for the rounding of the sum.
    if (total + more <= budget * (1 + 1e-12)) {
      total += more;
      reserved[static_cast<size_t>(c.layer)] += more;
      ++out.admitted;
    } else {
      refused.emplace_back(c.device, c.layer);
    }
  }
  for (const auto& [di, l] : refused) {
    DeviceProfile& d = profile->devices[di];
    std::string why;
    if (const std::optional<double> e = output_error(d, static_cast<size_t>(l)); !e) {
      why = "no measured error against f32 (profile the model again with this tessera)";
    } else {
      why =
          "relative L2 error " + number(*e) + " does not fit the error bound " + number(max_error);
    }
    d.unsupported[l] = why;
    ++out.refused;
  }
  out.reserved = std::sqrt(total);
  return out;
}

Result<BoundedPlan> search_error_budget(
    const Profile& profile, double max_error,
    const std::function<Result<Plan>(const Profile& bounded)>& make_plan) {
  auto cost = [](const Plan& p) {
    if (p.objective == "energy") return p.estimated_energy_mj;
    if (p.mode == PlanMode::kStreaming && p.estimated_period_ms > 0) return p.estimated_period_ms;
    return p.estimated_latency_ms;
  };
  // The levels admitted: all of them, then each reduced-precision level alone (the greedy
  // admission may spend the budget on one level's best layers, where the other level alone
  // would run every layer within it).
  std::vector<std::string> levels;
  for (const DeviceProfile& d : profile.devices) {
    if (reduced_precision(d.device)) levels.push_back(d.device);
  }
  std::vector<std::string> only = {""};
  if (levels.size() > 1) only.insert(only.end(), levels.begin(), levels.end());
  std::optional<BoundedPlan> best;
  int tried = 0;
  for (const std::string& level : only) {
    for (double k : {1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0}) {
      const double budget = max_error * k;
      Profile bounded = profile;
      if (!level.empty()) {
        for (DeviceProfile& d : bounded.devices) {
          if (d.device == level || !reduced_precision(d.device)) continue;
          for (int l = 0; l < bounded.num_layers(); ++l) {
            d.unsupported.emplace(l, "the error bound's search admits " + level + " only");
          }
        }
      }
      ASSIGN_OR_RETURN(ErrorBound bound, bound_profile_error(&bounded, budget));
      ++tried;
      Result<Plan> plan = make_plan(bounded);
      if (!plan.ok()) {
        if (k == 1.0 && level.empty()) return plan.status();
        continue;
      }
      ASSIGN_OR_RETURN(double error, plan_expected_error(profile, *plan));
      if (error > max_error * (1 + 1e-12)) continue;
      if (!best || cost(*plan) < cost(best->plan)) {
        best = BoundedPlan{std::move(*plan), budget, bound, 0, tried - 1};
      }
      if (bound.refused == 0) break;  // larger budgets admit nothing more
    }
  }
  if (!best) return internal_error("no plan within the error bound (the first budget gave one)");
  best->tried = tried;
  return *best;
}

}  // namespace tessera
