#include "scheduler/planners/slice.h"

#include <algorithm>
#include <cmath>

namespace tessera {

double slicing_cost(const SliceCosts& costs, const std::vector<Slice>& slices) {
  double total = 0;
  for (const Slice& s : slices) total += costs.cost(s.option, s.first, s.last);
  return total;
}

namespace {

// Algorithm 1 over a slice-cost function `c(o, first, last)`: best[l] is the cheapest way to
// run layers [0, l); choice[l] its last slice. Ties keep the first found (lower k, lower o).
//
// Pruning (SliceCosts contract): a slice containing an infeasible slice is infeasible. So for
// each option the first feasible start kmin[o] of a slice ending at l only moves forward as l
// grows, and starts before it are never priced: an option that cannot run a layer, or whose
// memory a long slice would overflow, costs O(L) probes instead of O(L^2) queries.
template <typename CostFn>
Slicing dp(int L, int D, CostFn c) {
  std::vector<double> best(static_cast<size_t>(L) + 1, kInfiniteCost);
  std::vector<Slice> choice(static_cast<size_t>(L) + 1);
  std::vector<int> kmin(static_cast<size_t>(D), 0);
  best[0] = 0;
  for (int l = 1; l <= L; ++l) {
    int kfirst = l;
    for (int o = 0; o < D; ++o) {
      int& k = kmin[static_cast<size_t>(o)];
      while (k < l && !(c(o, k, l) < kInfiniteCost)) ++k;
      kfirst = std::min(kfirst, k);
    }
    double b = kInfiniteCost;
    Slice pick;
    for (int k = kfirst; k < l; ++k) {
      const double base = best[static_cast<size_t>(k)];
      if (!(base < kInfiniteCost)) continue;
      for (int o = 0; o < D; ++o) {
        if (k < kmin[static_cast<size_t>(o)]) continue;
        const double cost = base + c(o, k, l);
        if (cost < b) {
          b = cost;
          pick = Slice{k, l, o};
        }
      }
    }
    best[static_cast<size_t>(l)] = b;
    choice[static_cast<size_t>(l)] = pick;
  }
  Slicing s;
  if (!(best[static_cast<size_t>(L)] < kInfiniteCost)) return s;
  s.cost = best[static_cast<size_t>(L)];
  for (int l = L; l > 0; l = choice[static_cast<size_t>(l)].first) {
    s.slices.push_back(choice[static_cast<size_t>(l)]);
  }
  std::reverse(s.slices.begin(), s.slices.end());
  return s;
}

void exhaust(const SliceCosts& costs, int first, double so_far, std::vector<Slice>* cur,
             Slicing* best) {
  const int L = costs.num_layers();
  if (first == L) {
    if (so_far < best->cost) {
      best->cost = so_far;
      best->slices = *cur;
    }
    return;
  }
  for (int last = first + 1; last <= L; ++last) {
    for (int o = 0; o < costs.num_options(); ++o) {
      const double c = costs.cost(o, first, last);
      if (!(c < kInfiniteCost)) continue;
      cur->push_back(Slice{first, last, o});
      exhaust(costs, last, so_far + c, cur, best);
      cur->pop_back();
    }
  }
}

}  // namespace

Slicing plan_slice_dp(const SliceCosts& costs) {
  return dp(costs.num_layers(), costs.num_options(),
            [&](int o, int f, int l) { return costs.cost(o, f, l); });
}

Slicing plan_slice_exhaustive(const SliceCosts& costs) {
  Slicing best;
  std::vector<Slice> cur;
  exhaust(costs, 0, 0, &cur, &best);
  return best;
}

Slicing plan_slice_hca(const SliceCosts& costs) {
  // Execution alone, plus a negligible charge per slice so that equal execution prefers fewer
  // slices (an oblivious planner has no reason to cut).
  Slicing s = dp(costs.num_layers(), costs.num_options(), [&](int o, int f, int l) {
    const double e = costs.exec_cost(o, f, l);
    return e < kInfiniteCost ? e * (1 + 1e-12) + 1e-12 : e;
  });
  if (s.feasible()) s.cost = slicing_cost(costs, s.slices);
  return s;
}

Slicing plan_slice_preferred(const SliceCosts& costs, const std::vector<int>& order) {
  Slicing s;
  const int L = costs.num_layers();
  if (order.empty()) return s;
  const int pref = order.front();
  int l = 0;
  while (l < L) {
    if (costs.cost(pref, l, l + 1) < kInfiniteCost) {
      int last = l + 1;
      while (last < L && costs.cost(pref, l, last + 1) < kInfiniteCost) ++last;
      s.slices.push_back(Slice{l, last, pref});
      l = last;
      continue;
    }
    bool placed = false;
    for (size_t i = 1; i < order.size() && !placed; ++i) {
      if (costs.cost(order[i], l, l + 1) < kInfiniteCost) {
        s.slices.push_back(Slice{l, l + 1, order[i]});
        placed = true;
      }
    }
    if (!placed) return Slicing{};
    ++l;
  }
  s.cost = slicing_cost(costs, s.slices);
  return s;
}

Result<Objective> parse_objective(const std::string& name) {
  if (name == "latency") return Objective::kLatency;
  if (name == "energy") return Objective::kEnergy;
  return invalid_argument("objective '" + name + "' is not latency or energy");
}

const char* objective_name(Objective o) {
  return o == Objective::kEnergy ? "energy" : "latency";
}

double CostModelSlices::cost(int o, int first, int last) const {
  const int vd = vds_[static_cast<size_t>(o)];
  return objective_ == Objective::kEnergy ? cm_.slice_energy_mj(vd, first, last)
                                          : cm_.slice_ms(vd, first, last);
}

CostModelSlices::CostModelSlices(const CostModel& cm, Objective objective,
                                 std::vector<int> virtual_devices)
    : cm_(cm), objective_(objective), vds_(std::move(virtual_devices)) {
  if (objective_ != Objective::kEnergy) return;
  const int L = cm_.num_layers();
  for (int vd : vds_) {
    std::vector<double> prefix(static_cast<size_t>(L) + 1, 0);
    for (int l = 0; l < L; ++l) {
      const double e = cm_.can_run(vd, l) ? cm_.exec_ms(vd, l) * cm_.power_w(vd, l) : 0;
      prefix[static_cast<size_t>(l) + 1] = prefix[static_cast<size_t>(l)] + e;
    }
    exec_energy_prefix_.push_back(std::move(prefix));
  }
}

double CostModelSlices::exec_cost(int o, int first, int last) const {
  const int vd = vds_[static_cast<size_t>(o)];
  if (!cm_.can_run_slice(vd, first, last)) return kInfiniteCost;
  if (objective_ == Objective::kLatency) return cm_.slice_exec_ms(vd, first, last);
  const auto& p = exec_energy_prefix_[static_cast<size_t>(o)];
  return p[static_cast<size_t>(last)] - p[static_cast<size_t>(first)];
}

namespace {

StageEstimate estimate_stage(const CostModel& cm, int vd, int first, int last) {
  StageEstimate e;
  e.exec_ms = cm.slice_exec_ms(vd, first, last);
  e.transfer_ms = cm.slice_ms(vd, first, last) - e.exec_ms;
  e.energy_mj = cm.slice_energy_mj(vd, first, last);
  return e;
}

}  // namespace

Plan slicing_to_plan(const CostModel& cm, const Slicing& s, const std::vector<int>& vds) {
  Plan p;
  p.model_name = cm.profile().model_name;
  p.model_hash = cm.profile().model_hash;
  p.num_layers = cm.num_layers();
  p.mode = PlanMode::kSequential;
  for (const Slice& sl : s.slices) {
    const int vd = vds[static_cast<size_t>(sl.option)];
    const VirtualDevice& v = cm.virtual_devices()[static_cast<size_t>(vd)];
    Stage st;
    for (int l = sl.first; l < sl.last; ++l) st.layers.push_back(l);
    st.placement = Placement::on(v.device, v.mhz);
    st.estimate = estimate_stage(cm, vd, sl.first, sl.last);
    p.estimated_latency_ms += st.estimate.exec_ms + st.estimate.transfer_ms;
    p.estimated_energy_mj += st.estimate.energy_mj;
    p.stages.push_back(std::move(st));
  }
  return p;
}

Status estimate_plan(const CostModel& cm, Plan* plan) {
  RETURN_IF_ERROR(plan->validate(cm.num_layers(), {}, true));
  plan->estimated_latency_ms = 0;
  plan->estimated_energy_mj = 0;
  for (size_t i = 0; i < plan->stages.size(); ++i) {
    Stage& st = plan->stages[i];
    const std::string where = "stage " + std::to_string(i) + " (" + st.placement.label() + "[" +
                              std::to_string(st.first()) + "])";
    if (!st.placement.single()) return unimplemented(where + ": split placements are not priced");
    auto vd = cm.find(st.placement.devices[0].label());
    if (!vd.ok()) return vd.status().with_context(where);
    const int first = st.layers.front(), last = st.layers.back() + 1;
    if (!cm.can_run_slice(*vd, first, last)) {
      return failed_precondition(where +
                                 ": the device cannot run these layers (op support or memory)");
    }
    st.estimate = estimate_stage(cm, *vd, first, last);
    plan->estimated_latency_ms += st.estimate.exec_ms + st.estimate.transfer_ms;
    plan->estimated_energy_mj += st.estimate.energy_mj;
  }
  return Status();
}

Result<Plan> make_slice_plan(const CostModel& cm, const SlicePlanRequest& req) {
  // Options: the virtual devices of the requested devices.
  std::vector<int> vds;
  auto add = [&](int v) {
    if (std::find(vds.begin(), vds.end(), v) == vds.end()) vds.push_back(v);
  };
  const std::vector<int> all =
      req.objective == Objective::kEnergy ? cm.energy_devices() : cm.latency_devices();
  if (req.devices.empty()) {
    for (int v : all) add(v);
  } else {
    for (const std::string& name : req.devices) {
      ASSIGN_OR_RETURN(int top, cm.find(name));
      if (name.find('@') != std::string::npos || req.objective == Objective::kLatency) {
        add(top);
        continue;
      }
      for (int v : all) {
        if (cm.virtual_devices()[static_cast<size_t>(v)].device_index ==
            cm.virtual_devices()[static_cast<size_t>(top)].device_index) {
          add(v);
        }
      }
    }
  }
  CostModelSlices costs(cm, req.objective, vds);
  Slicing s;
  if (req.planner == "slice") {
    s = plan_slice_dp(costs);
  } else if (req.planner == "exhaustive") {
    if (cm.num_layers() > 16) {
      return invalid_argument("exhaustive: " + std::to_string(cm.num_layers()) +
                              " layers is too many to enumerate (at most 16)");
    }
    s = plan_slice_exhaustive(costs);
  } else if (req.planner == "hca") {
    s = plan_slice_hca(costs);
  } else if (req.planner == "preferred") {
    if (req.preference.empty()) {
      return invalid_argument("preferred: name the preferred device and its fallbacks");
    }
    std::vector<int> order;
    for (const std::string& name : req.preference) {
      ASSIGN_OR_RETURN(int v, cm.find(name));
      auto it = std::find(vds.begin(), vds.end(), v);
      if (it == vds.end()) {
        vds.push_back(v);
        it = vds.end() - 1;
      }
      order.push_back(static_cast<int>(it - vds.begin()));
    }
    CostModelSlices pref_costs(cm, req.objective, vds);
    s = plan_slice_preferred(pref_costs, order);
  } else {
    return invalid_argument("planner '" + req.planner +
                            "' is not slice, exhaustive, hca or preferred");
  }
  if (!s.feasible()) {
    return failed_precondition(req.planner +
                               ": no feasible plan: some layer fits none of the devices "
                               "(op support or memory)");
  }
  Plan p = slicing_to_plan(cm, s, vds);
  p.planner = req.planner;
  p.objective = objective_name(req.objective);
  return p;
}

}  // namespace tessera
