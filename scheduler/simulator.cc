// Discrete-event simulation of a Plan (simulator.h).
//
// Phases: price every stage (pricer.h) and derive the stage graph the executor would run
// (actors, dependencies, devices); draw the per-(frame, stage) time factors; then schedule
// tasks in order of their start times; then summarise the steady state.
#include "scheduler/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "scheduler/pricer.h"

namespace tessera {

namespace {

constexpr double kUnknown = -1;

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

Result<SimulationResult> simulate_plan(const CostModel& cm, const LayerGraph& lg, const Plan& plan,
                                       const SimulationOptions& options) {
  if (options.frames < 1 || options.frames > 10'000'000) {
    return invalid_argument("simulate: frames " + std::to_string(options.frames) +
                            " is outside 1..10000000");
  }
  if (options.warmup < 0 || options.warmup >= options.frames) {
    return invalid_argument("simulate: warm-up " + std::to_string(options.warmup) +
                            " must be at least 0 and fewer than the frames (" +
                            std::to_string(options.frames) + ")");
  }
  if (!(options.arrival_interval_ms >= 0) || !std::isfinite(options.arrival_interval_ms)) {
    return invalid_argument("simulate: the arrival interval must be a finite number >= 0 ms");
  }
  if (!(options.jitter_cv >= 0) || options.jitter_cv > 10) {
    return invalid_argument("simulate: the jitter's coefficient of variation must be in 0..10");
  }
  for (const auto& [device, factor] : options.load) {
    if (!(factor > 0) || !std::isfinite(factor)) {
      return invalid_argument("simulate: load factor of " + quote_name(device) +
                              " must be a finite number > 0");
    }
  }

  // ---- the stage graph: prices, devices, actors, dependencies ----
  Plan priced = plan;
  if (options.queue_capacity > 0) priced.queue_capacity = options.queue_capacity;
  RETURN_IF_ERROR(price_plan(cm, lg, &priced));
  for (const auto& [device, factor] : options.load) {
    bool used = false;
    for (const Stage& s : priced.stages) used = used || s.placement.devices[0].device == device;
    if (!used)
      return invalid_argument("simulate: --load names " + quote_name(device) +
                              ", which no stage uses");
  }
  const size_t n = priced.stages.size();
  const bool streaming = priced.mode == PlanMode::kStreaming;
  std::vector<double> base_ms(n), base_mj(n);
  std::vector<int> device_of(n), level_of(n);
  for (size_t i = 0; i < n; ++i) {
    const Stage& s = priced.stages[i];
    const std::string& name = s.placement.devices[0].device;
    const double load = options.load.count(name) ? options.load.at(name) : 1.0;
    base_ms[i] = (s.estimate.exec_ms + s.estimate.transfer_ms) * load;
    base_mj[i] = s.estimate.energy_mj * load;
    ASSIGN_OR_RETURN(int vd, cm.find(s.placement.devices[0].label()));
    const VirtualDevice& v = cm.virtual_devices()[static_cast<size_t>(vd)];
    device_of[i] = v.device_index;
    level_of[i] = v.level;
  }
  // Actors as the executor numbers them (sequential plans: every stage on the caller's thread).
  const std::vector<int> actor_of = priced.stage_actors();
  const size_t num_actors =
      n == 0 ? 0 : static_cast<size_t>(*std::max_element(actor_of.begin(), actor_of.end())) + 1;
  std::vector<std::vector<int>> actor_stages(num_actors);
  for (size_t i = 0; i < n; ++i) {
    actor_stages[static_cast<size_t>(actor_of[i])].push_back(static_cast<int>(i));
  }
  // deps[i]: the stages whose outputs stage i reads (same frame).
  const std::vector<std::vector<int>> deps = stage_dependencies(lg, priced);

  // ---- time factors, drawn up front so that they do not depend on the scheduling order ----
  const size_t frames = static_cast<size_t>(options.frames);
  std::vector<double> factor;
  if (options.jitter_cv > 0) {
    const double sigma2 = std::log1p(options.jitter_cv * options.jitter_cv);
    std::mt19937_64 rng(options.seed);
    std::normal_distribution<double> normal(-sigma2 / 2, std::sqrt(sigma2));
    factor.resize(frames * n);
    for (double& f : factor) f = std::exp(normal(rng));
  }
  auto time_of = [&](size_t f, size_t i) {
    return factor.empty() ? base_ms[i] : base_ms[i] * factor[f * n + i];
  };

  // ---- scheduling ----
  SimulationResult r;
  r.frames = options.frames;
  r.slots = streaming ? std::max(2, priced.queue_capacity + static_cast<int>(num_actors)) : 1;
  const size_t slots = static_cast<size_t>(r.slots);
  std::vector<double> finish(frames * n, kUnknown);
  std::vector<double> start(frames * n, kUnknown);
  std::vector<int> stages_left(frames, static_cast<int>(n));
  r.enter_ms.assign(frames, kUnknown);
  r.leave_ms.assign(frames, kUnknown);
  std::vector<double> arrival(frames, 0);
  std::vector<double> actor_free(num_actors, 0), device_free(cm.devices().size(), 0);
  std::vector<size_t> next_frame(num_actors, 0), next_pos(num_actors, 0);
  std::vector<std::vector<int64_t>> waiting(num_actors);

  // When frame f enters (kUnknown until the frame whose slot it takes has left).
  auto enter_time = [&](size_t f) -> double {
    if (r.enter_ms[f] != kUnknown) return r.enter_ms[f];
    double t =
        options.arrival_interval_ms > 0 ? static_cast<double>(f) * options.arrival_interval_ms : 0;
    if (f >= slots) {
      const double freed = r.leave_ms[f - slots];
      if (freed == kUnknown) return kUnknown;
      t = std::max(t, freed);
    }
    if (options.arrival_interval_ms <= 0 && f > 0) {
      // Saturated: the next submit() follows the previous one.
      if (r.enter_ms[f - 1] == kUnknown) return kUnknown;
      t = std::max(t, r.enter_ms[f - 1]);
    }
    r.enter_ms[f] = t;
    arrival[f] =
        options.arrival_interval_ms > 0 ? static_cast<double>(f) * options.arrival_interval_ms : t;
    return t;
  };
  // When task (f, stage i) can start, ignoring its device; kUnknown when a producer is not
  // scheduled yet.
  auto ready_time = [&](size_t f, size_t i, size_t a) -> double {
    double t = enter_time(f);
    if (t == kUnknown) return kUnknown;
    t = std::max(t, actor_free[a]);
    for (int d : deps[i]) {
      const double fin = finish[f * n + static_cast<size_t>(d)];
      if (fin == kUnknown) return kUnknown;
      t = std::max(t, fin);
    }
    return t;
  };

  size_t scheduled = 0;
  const size_t total = frames * n;
  while (scheduled < total) {
    int best = -1;
    double best_start = std::numeric_limits<double>::infinity();
    double best_ready = best_start;
    for (size_t a = 0; a < num_actors; ++a) {
      if (next_frame[a] >= frames) continue;
      const size_t f = next_frame[a];
      const size_t i = static_cast<size_t>(actor_stages[a][next_pos[a]]);
      const double ready = ready_time(f, i, a);
      if (ready == kUnknown) continue;
      const double s = std::max(ready, device_free[static_cast<size_t>(device_of[i])]);
      if (s < best_start || (s == best_start && ready < best_ready)) {
        best = static_cast<int>(a);
        best_start = s;
        best_ready = ready;
      }
    }
    if (best < 0) {
      return internal_error("simulate: no stage can start (a stage reads a later stage's output)");
    }
    const size_t a = static_cast<size_t>(best);
    const size_t f = next_frame[a];
    const size_t i = static_cast<size_t>(actor_stages[a][next_pos[a]]);
    if (next_pos[a] == 0) {
      // Frames after f ready for this actor when it takes f (the executor's queue occupancy).
      int64_t ready_after = 0;
      for (size_t g = f + 1; g < frames; ++g) {
        const double e = enter_time(g);
        if (e == kUnknown || e > best_start) break;
        bool deps_done = true;
        for (int d : deps[i]) {
          const double fin = finish[g * n + static_cast<size_t>(d)];
          deps_done = deps_done && fin != kUnknown && fin <= best_start;
        }
        if (!deps_done) break;
        ++ready_after;
      }
      auto& h = waiting[a];
      if (h.size() <= static_cast<size_t>(ready_after))
        h.resize(static_cast<size_t>(ready_after) + 1);
      ++h[static_cast<size_t>(ready_after)];
    }
    const double end = best_start + time_of(f, i);
    start[f * n + i] = best_start;
    finish[f * n + i] = end;
    actor_free[a] = end;
    device_free[static_cast<size_t>(device_of[i])] = end;
    if (--stages_left[f] == 0) {
      double leave = 0;
      for (size_t k = 0; k < n; ++k) leave = std::max(leave, finish[f * n + k]);
      r.leave_ms[f] = leave;
    }
    if (++next_pos[a] == actor_stages[a].size()) {
      next_pos[a] = 0;
      ++next_frame[a];
    }
    ++scheduled;
  }

  // ---- the steady state: frames from the warm-up on ----
  const size_t w = static_cast<size_t>(options.warmup);
  const size_t steady = frames - w;
  r.makespan_ms = *std::max_element(r.leave_ms.begin(), r.leave_ms.end());
  if (steady >= 2) {
    r.period_ms = (r.leave_ms[frames - 1] - r.leave_ms[w]) / static_cast<double>(steady - 1);
  } else {
    r.period_ms = r.leave_ms[frames - 1] - r.enter_ms[frames - 1];
  }
  r.frames_per_s = r.period_ms > 0 ? 1000.0 / r.period_ms : 0;
  std::vector<double> latency;
  for (size_t f = w; f < frames; ++f) latency.push_back(r.leave_ms[f] - arrival[f]);
  double sum = 0;
  for (double l : latency) sum += l;
  r.latency_mean_ms = sum / static_cast<double>(latency.size());
  r.latency_p50_ms = percentile(latency, 0.5);
  r.latency_p90_ms = percentile(latency, 0.9);
  r.latency_p99_ms = percentile(latency, 0.99);
  r.latency_max_ms = *std::max_element(latency.begin(), latency.end());

  r.stage_busy_ms.assign(n, 0);
  std::vector<double> device_busy(cm.devices().size(), 0);
  double stage_energy = 0;
  for (size_t f = w; f < frames; ++f) {
    for (size_t i = 0; i < n; ++i) {
      const double t = finish[f * n + i] - start[f * n + i];
      r.stage_busy_ms[i] += t;
      device_busy[static_cast<size_t>(device_of[i])] += t;
      stage_energy += base_ms[i] > 0 ? base_mj[i] * t / base_ms[i] : 0;
    }
  }
  for (double& b : r.stage_busy_ms) b /= static_cast<double>(steady);
  r.energy_per_frame_mj = stage_energy / static_cast<double>(steady);
  // Each device idles for the rest of the period, at the level of its first stage.
  const double period = streaming ? r.period_ms : r.latency_mean_ms;
  for (size_t d = 0; d < cm.devices().size(); ++d) {
    int first = -1;
    for (size_t i = 0; i < n && first < 0; ++i) {
      if (device_of[i] == static_cast<int>(d)) first = static_cast<int>(i);
    }
    if (first < 0) continue;
    const PlatformDevice& pd = cm.devices()[d];
    const double busy = device_busy[d] / static_cast<double>(steady);
    SimulatedDevice sd{pd.device, busy, period > 0 ? std::min(1.0, busy / period) : 0};
    r.devices.push_back(sd);
    if (streaming) {
      r.energy_per_frame_mj +=
          pd.dvfs[static_cast<size_t>(level_of[static_cast<size_t>(first)])].static_w *
          std::max(0.0, period - busy);
    }
  }
  for (size_t a = 0; a < num_actors; ++a) {
    SimulatedActor sa;
    sa.actor = static_cast<int>(a);
    sa.stages = actor_stages[a];
    for (int i : sa.stages) sa.busy_ms += r.stage_busy_ms[static_cast<size_t>(i)];
    int64_t count = 0, total_waiting = 0;
    for (size_t k = 0; k < waiting[a].size(); ++k) {
      count += waiting[a][k];
      total_waiting += static_cast<int64_t>(k) * waiting[a][k];
    }
    sa.mean_frames_waiting =
        count > 0 ? static_cast<double>(total_waiting) / static_cast<double>(count) : 0;
    r.actors.push_back(std::move(sa));
  }
  return r;
}

}  // namespace tessera
