#include "scheduler/pricer.h"

#include <algorithm>
#include <map>

namespace tessera {

namespace {

// The maximal ranges [first, last) of an ascending layer list.
std::vector<std::pair<int, int>> ranges(const std::vector<int>& layers) {
  std::vector<std::pair<int, int>> r;
  for (int l : layers) {
    if (!r.empty() && r.back().second == l) {
      ++r.back().second;
    } else {
      r.emplace_back(l, l + 1);
    }
  }
  return r;
}

}  // namespace

std::vector<std::vector<int>> stage_dependencies(const LayerGraph& lg, const Plan& plan) {
  const size_t n = plan.stages.size();
  std::vector<int> stage_of_layer(static_cast<size_t>(lg.num_layers()), -1);
  for (size_t i = 0; i < n; ++i) {
    for (int l : plan.stages[i].layers)
      stage_of_layer[static_cast<size_t>(l)] = static_cast<int>(i);
  }
  std::vector<int> producer(static_cast<size_t>(lg.graph().num_values()), -1);
  for (int l = 0; l < lg.num_layers(); ++l) {
    for (ValueId v : lg.layer(l).outputs) producer[static_cast<size_t>(v)] = l;
  }
  std::vector<std::vector<int>> deps(n);
  for (size_t i = 0; i < n; ++i) {
    for (int l : plan.stages[i].layers) {
      for (ValueId v : lg.layer(l).inputs) {
        const int p = producer[static_cast<size_t>(v)];
        if (p < 0) continue;
        const int s = stage_of_layer[static_cast<size_t>(p)];
        if (s >= 0 && s != static_cast<int>(i) &&
            std::find(deps[i].begin(), deps[i].end(), s) == deps[i].end()) {
          deps[i].push_back(s);
        }
      }
    }
  }
  return deps;
}

Status price_plan(const CostModel& cm, const LayerGraph& lg, Plan* plan) {
  if (lg.num_layers() != cm.num_layers()) {
    return invalid_argument("the cost model is for " + std::to_string(cm.num_layers()) +
                            " layers, the model has " + std::to_string(lg.num_layers()));
  }
  RETURN_IF_ERROR(plan->validate(cm.num_layers(), {}, false));
  const size_t n = plan->stages.size();
  std::vector<int> vd_of(n), device_of(n);
  std::vector<double> busy(n);  // exec + transfers of each stage, ms
  plan->estimated_energy_mj = 0;
  for (size_t i = 0; i < n; ++i) {
    Stage& st = plan->stages[i];
    const std::string where = plan->stage_name(i);
    if (!st.placement.single()) return unimplemented(where + ": split placements are not priced");
    auto vd = cm.find(st.placement.devices[0].label());
    if (!vd.ok()) return vd.status().with_context(where);
    vd_of[i] = *vd;
    device_of[i] = cm.virtual_devices()[static_cast<size_t>(*vd)].device_index;
    st.estimate = StageEstimate{};
    for (const auto& [first, last] : ranges(st.layers)) {
      if (!cm.can_run_slice(*vd, first, last)) {
        return failed_precondition(where + ": the device cannot run layers " +
                                   std::to_string(first) + ".." + std::to_string(last - 1) +
                                   " (op support or memory)");
      }
      const double exec = cm.slice_exec_ms(*vd, first, last);
      st.estimate.exec_ms += exec;
      st.estimate.transfer_ms += cm.slice_ms(*vd, first, last) - exec;
      st.estimate.energy_mj += cm.slice_energy_mj(*vd, first, last);
    }
    busy[i] = st.estimate.exec_ms + st.estimate.transfer_ms;
    plan->estimated_energy_mj += st.estimate.energy_mj;
  }

  // Load per device (all its levels together), in first-use order.
  std::vector<int> device_order;
  std::map<int, double> device_busy;
  for (size_t i = 0; i < n; ++i) {
    if (!device_busy.count(device_of[i])) device_order.push_back(device_of[i]);
    device_busy[device_of[i]] += busy[i];
  }
  plan->device_load.clear();
  for (int d : device_order) {
    plan->device_load.push_back(
        DeviceLoad{cm.devices()[static_cast<size_t>(d)].device, device_busy[d]});
  }

  if (plan->mode == PlanMode::kSequential) {
    plan->estimated_latency_ms = 0;
    for (size_t i = 0; i < n; ++i) plan->estimated_latency_ms += busy[i];
    plan->estimated_period_ms = plan->estimated_latency_ms;
    return Status();
  }

  // Streaming. Actors: own (-1) or shared ids.
  const std::vector<int> actor = plan->stage_actors();
  std::map<int, double> actor_busy;
  for (size_t i = 0; i < n; ++i) actor_busy[actor[i]] += busy[i];
  double period = 0;
  for (const auto& [d, b] : device_busy) period = std::max(period, b);
  for (const auto& [a, b] : actor_busy) period = std::max(period, b);

  // Critical path of one frame: a stage starts after its producers and its actor's previous
  // stage.
  const std::vector<std::vector<int>> deps = stage_dependencies(lg, *plan);
  std::vector<double> finish(n, 0);
  std::map<int, double> actor_free, actor_start;
  double latency = 0;
  for (size_t i = 0; i < n; ++i) {
    double start = actor_free[actor[i]];
    for (int s : deps[i]) start = std::max(start, finish[static_cast<size_t>(s)]);
    if (!actor_start.count(actor[i])) actor_start[actor[i]] = start;
    finish[i] = start + busy[i];
    actor_free[actor[i]] = finish[i];
    latency = std::max(latency, finish[i]);
  }
  plan->estimated_latency_ms = latency;
  // An actor takes the next frame only after its last stage of this one: where its stages wait
  // for other actors in between (CSDF phases spread along the model), its span bounds the
  // period too.
  for (const auto& [a, start] : actor_start) period = std::max(period, actor_free[a] - start);
  plan->estimated_period_ms = period;

  // Static power of each device over its idle share of the period, at the level of its first
  // stage (mJ = W x ms).
  for (int d : device_order) {
    int level = 0;
    for (size_t i = 0; i < n; ++i) {
      if (device_of[i] == d) {
        level = cm.virtual_devices()[static_cast<size_t>(vd_of[i])].level;
        break;
      }
    }
    const PlatformDevice& pd = cm.devices()[static_cast<size_t>(d)];
    const double idle = std::max(0.0, period - device_busy[d]);
    plan->estimated_energy_mj += pd.dvfs[static_cast<size_t>(level)].static_w * idle;
  }
  return Status();
}

}  // namespace tessera
