#include "scheduler/planners/slice.h"

#include <algorithm>
#include <cmath>

namespace tessera {

namespace {

template <typename CostFn>
double sum_costs(const std::vector<Slice>& slices, CostFn cost) {
  double total = 0;
  for (const Slice& s : slices) total += cost(s.option, s.first, s.last);
  return total;
}

}  // namespace

double slicing_cost(const SliceCosts& costs, const std::vector<Slice>& slices) {
  return sum_costs(slices, [&](int o, int f, int l) { return costs.cost(o, f, l); });
}

double slicing_cost(const SliceTable& table, const std::vector<Slice>& slices) {
  return sum_costs(slices, [&](int o, int f, int l) { return table.cost(o, f, l); });
}

namespace {

// Charge per slice of the communication-oblivious baseline: execution alone, plus a negligible
// charge per slice so that equal execution prefers fewer slices (an oblivious planner has no
// reason to cut).
double oblivious(double exec) {
  return exec < kInfiniteCost ? exec * (1 + 1e-12) + 1e-12 : exec;
}

// Offers best[l] the candidate cost c of slice `id`; keeps the first of equal costs. Branch-free
// (written so that the compiler keeps it so): whether a candidate improves is data-dependent,
// and a mispredicted branch costs more than the update.
inline void offer(double c, int id, double* best, int* pick, int l) {
  const double old = best[l];
  const int better = -static_cast<int>(c < old);
  pick[l] ^= (pick[l] ^ id) & better;
  best[l] = std::min(old, c);
}

// Algorithm 1 (eq. 9), pushed forward: best[k] is the cheapest way to run layers [0, k); once
// it is final, every feasible slice [k, l) on every option relaxes best[l]. For one l the
// candidates arrive in order of k, then option, so keeping the first of equal costs picks the
// lowest k and then the lowest option, like the recurrence read left to right.
//
// `rows` prices the slices starting at a cut: rows.start(k) once per cut, then
// rows.relax(o, k, base, id, best, pick) offers best[l] the candidate base + C(o, k, l) for every
// feasible l. Feasibility is monotone (SliceCosts contract), so the feasible slices from k on o
// are a run of l and nothing past the first infeasible one is priced. `rows.priced` counts the
// slice costs evaluated.
template <typename Rows>
Slicing dp(int L, int D, Rows& rows) {
  std::vector<double> best(static_cast<size_t>(L) + 1, kInfiniteCost);
  std::vector<int> pick(static_cast<size_t>(L) + 1, -1);  // k * D + o of the last slice
  best[0] = 0;
  for (int k = 0; k < L; ++k) {
    const double base = best[static_cast<size_t>(k)];
    if (!(base < kInfiniteCost)) continue;
    rows.start(k);
    for (int o = 0; o < D; ++o) rows.relax(o, k, base, k * D + o, best.data(), pick.data());
  }
  Slicing s;
  s.priced = rows.priced;
  if (!(best[static_cast<size_t>(L)] < kInfiniteCost)) return s;
  s.cost = best[static_cast<size_t>(L)];
  for (int l = L; l > 0;) {
    const int id = pick[static_cast<size_t>(l)];
    s.slices.push_back(Slice{id / D, l, id % D});
    l = id / D;
  }
  std::reverse(s.slices.begin(), s.slices.end());
  return s;
}

// Rows of a SliceCosts, one query per slice, probing until the first infeasible one.
template <typename CostFn>
struct QueryRows {
  int L;
  CostFn cost;
  int64_t priced = 0;
  void start(int) {}
  void relax(int o, int k, double base, int id, double* best, int* pick) {
    for (int l = k + 1; l <= L; ++l) {
      ++priced;
      const double c = cost(o, k, l);
      if (!(c < kInfiniteCost)) break;
      offer(base + c, id, best, pick, l);
    }
  }
};

template <typename CostFn>
Slicing dp_by_query(int L, int D, CostFn cost) {
  QueryRows<CostFn> rows{L, cost};
  return dp(L, D, rows);
}

// Rows of a SliceTable: per cut, one transfer row per transfer group; per option, the exec
// prefix difference plus the scaled transfer row, over the feasible run only.
struct TableRows {
  const SliceTable& t;
  bool exec_only;                // the communication-oblivious baseline
  std::vector<double> transfer;  // [group][l]
  std::vector<int> last;         // per group, at the current cut
  int64_t priced = 0;

  TableRows(const SliceTable& table, bool oblivious_only)
      : t(table),
        exec_only(oblivious_only),
        transfer(static_cast<size_t>(table.num_groups()) *
                 static_cast<size_t>(table.num_layers() + 1)) {}

  double* transfer_of(int g) {
    return &transfer[static_cast<size_t>(g) * static_cast<size_t>(t.num_layers() + 1)];
  }
  void start(int k) {
    if (exec_only) return;
    // Each group's row as far as its furthest-reaching option.
    last.assign(static_cast<size_t>(t.num_groups()), k);
    for (int o = 0; o < t.num_options(); ++o) {
      int& g_last = last[static_cast<size_t>(t.group(o))];
      g_last = std::max(g_last, t.reach(o, k));
    }
    for (int g = 0; g < t.num_groups(); ++g) {
      t.transfer_row(g, k, last[static_cast<size_t>(g)], transfer_of(g));
      priced += last[static_cast<size_t>(g)] - k;
    }
  }
  void relax(int o, int k, double base, int id, double* best, int* pick) {
    const int reach = t.reach(o, k);
    const double* p = t.prefix(o);
    const double pk = p[k];
    priced += reach - k;
    // The execution runs cold by the share of the model that runs in between:
    // SliceTable::cold_scale = 1 + ce * (1 - (tb[l] - tb[k]) * inv) = a - b * tb[l] (equal to
    // rounding).
    const double ce = t.cold_excess(o);
    const double* tb = t.touched();
    const double inv = t.inv_touched_total();
    const double a = 1 + ce * (1 + tb[k] * inv);
    const double b = ce * inv;
    if (exec_only) {
      for (int l = k + 1; l <= reach; ++l) {
        offer(base + oblivious((p[l] - pk) * (a - b * tb[l])), id, best, pick, l);
      }
      return;
    }
    const double* tr = transfer_of(t.group(o));
    const double w = t.transfer_scale(o);
    for (int l = k + 1; l <= reach; ++l) {
      offer(base + ((p[l] - pk) * (a - b * tb[l]) + tr[l] * w), id, best, pick, l);
    }
  }
};

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
      ++best->priced;
      const double c = costs.cost(o, first, last);
      if (!(c < kInfiniteCost)) continue;
      cur->push_back(Slice{first, last, o});
      exhaust(costs, last, so_far + c, cur, best);
      cur->pop_back();
    }
  }
}

// Device-preferred slicing over `reach(o, k)` (the last layer + 1 that a slice starting at k
// on option o can extend to; k when none), priced by `cost`.
template <typename ReachFn, typename CostFn>
Slicing preferred(int L, const std::vector<int>& order, ReachFn reach, CostFn cost) {
  Slicing s;
  std::vector<Slice>& slices = s.slices;
  if (order.empty()) return s;
  const int pref = order.front();
  int l = 0;
  while (l < L) {
    const int last = reach(pref, l);
    if (last > l) {
      slices.push_back(Slice{l, last, pref});
      l = last;
      continue;
    }
    bool placed = false;
    for (size_t i = 1; i < order.size() && !placed; ++i) {
      if (reach(order[i], l) > l) {
        slices.push_back(Slice{l, l + 1, order[i]});
        placed = true;
      }
    }
    if (!placed) return Slicing{};
    ++l;
  }
  s.cost = sum_costs(slices, cost);
  return s;
}

}  // namespace

Slicing plan_slice_dp(const SliceCosts& costs) {
  return dp_by_query(costs.num_layers(), costs.num_options(),
                     [&](int o, int f, int l) { return costs.cost(o, f, l); });
}

Slicing plan_slice_dp(const SliceTable& table) {
  TableRows rows(table, false);
  return dp(table.num_layers(), table.num_options(), rows);
}

Slicing plan_slice_exhaustive(const SliceCosts& costs) {
  Slicing best;
  std::vector<Slice> cur;
  exhaust(costs, 0, 0, &cur, &best);
  return best;
}

Slicing plan_slice_hca(const SliceCosts& costs) {
  Slicing s = dp_by_query(costs.num_layers(), costs.num_options(),
                          [&](int o, int f, int l) { return oblivious(costs.exec_cost(o, f, l)); });
  if (s.feasible()) s.cost = slicing_cost(costs, s.slices);
  return s;
}

Slicing plan_slice_hca(const SliceTable& table) {
  TableRows rows(table, true);
  Slicing s = dp(table.num_layers(), table.num_options(), rows);
  if (s.feasible()) s.cost = slicing_cost(table, s.slices);
  return s;
}

Slicing plan_slice_preferred(const SliceCosts& costs, const std::vector<int>& order) {
  const int L = costs.num_layers();
  auto cost = [&](int o, int f, int l) { return costs.cost(o, f, l); };
  return preferred(
      L, order,
      [&](int o, int k) {
        int last = k;
        while (last < L && cost(o, k, last + 1) < kInfiniteCost) ++last;
        return last;
      },
      cost);
}

Slicing plan_slice_preferred(const SliceTable& table, const std::vector<int>& order) {
  return preferred(
      table.num_layers(), order, [&](int o, int k) { return table.reach(o, k); },
      [&](int o, int f, int l) { return table.cost(o, f, l); });
}

Result<Objective> parse_objective(const std::string& name) {
  if (name == "latency") return Objective::kLatency;
  if (name == "energy") return Objective::kEnergy;
  return invalid_argument("objective " + quote_name(name) + " is not latency or energy");
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
  return (p[static_cast<size_t>(last)] - p[static_cast<size_t>(first)]) *
         cm_.cold_scale(vd, first, last);
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

Result<std::vector<int>> select_virtual_devices(const CostModel& cm,
                                                const std::vector<std::string>& devices,
                                                bool all_levels) {
  std::vector<int> vds;
  auto add = [&](int v) {
    if (std::find(vds.begin(), vds.end(), v) == vds.end()) vds.push_back(v);
  };
  const std::vector<int> all = all_levels ? cm.energy_devices() : cm.latency_devices();
  if (devices.empty()) {
    for (int v : all) add(v);
    return vds;
  }
  for (const std::string& name : devices) {
    ASSIGN_OR_RETURN(int top, cm.find(name));
    if (name.find('@') != std::string::npos || !all_levels) {
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
  return vds;
}

Result<Plan> make_slice_plan(const CostModel& cm, const SlicePlanRequest& req) {
  // Options: the virtual devices of the requested devices.
  ASSIGN_OR_RETURN(std::vector<int> vds,
                   select_virtual_devices(cm, req.devices, req.objective == Objective::kEnergy));
  Slicing s;
  if (req.planner == "slice") {
    s = plan_slice_dp(cm.slice_table(vds, req.objective));
  } else if (req.planner == "exhaustive") {
    if (cm.num_layers() > 16) {
      return invalid_argument("exhaustive: " + std::to_string(cm.num_layers()) +
                              " layers is too many to enumerate (at most 16)");
    }
    // One query per slice, independent of the table the other planners read.
    s = plan_slice_exhaustive(CostModelSlices(cm, req.objective, vds));
  } else if (req.planner == "hca") {
    s = plan_slice_hca(cm.slice_table(vds, req.objective));
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
    s = plan_slice_preferred(cm.slice_table(vds, req.objective), order);
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
