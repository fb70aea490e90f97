#include "scheduler/planners/split.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "ops/split_rule.h"
#include "scheduler/planners/pipeline.h"
#include "scheduler/pricer.h"

namespace tessera {

namespace {

// The virtual devices of the request (top levels when unnamed).
Result<std::vector<int>> request_devices(const CostModel& cm, const SplitPlanRequest& req) {
  std::vector<int> vds;
  if (req.devices.empty()) return cm.latency_devices();
  for (const std::string& d : req.devices) {
    ASSIGN_OR_RETURN(int vd, cm.find(d));
    vds.push_back(vd);
  }
  return vds;
}

// Ratios summing to 1 exactly enough for Plan::validate (the last takes the rest).
void close_ratios(std::vector<DeviceShare>* shares) {
  double total = 0;
  for (size_t i = 0; i + 1 < shares->size(); ++i) total += (*shares)[i].ratio;
  shares->back().ratio = 1.0 - total;
}

// Equal-latency ratios: each device's share proportional to its speed on the layer.
std::vector<DeviceShare> balanced_shares(const CostModel& cm, const std::vector<int>& vds,
                                         int layer) {
  std::vector<DeviceShare> shares;
  double sum = 0;
  for (int vd : vds) {
    const double ms = std::max(1e-9, cm.exec_ms(vd, layer));
    sum += 1.0 / ms;
  }
  for (int vd : vds) {
    const VirtualDevice& v = cm.virtual_devices()[static_cast<size_t>(vd)];
    const double ms = std::max(1e-9, cm.exec_ms(vd, layer));
    shares.push_back(DeviceShare{v.device, v.mhz, (1.0 / ms) / sum});
  }
  close_ratios(&shares);
  return shares;
}

// Ratios for `method` that balance the pieces as the pricer prices them (execution with the
// split calibration's corrections, scatter and gather): from `start` (the speed ratios), each
// step gives every device a ratio proportional to its ratio over its piece's time (the speed its
// piece shows), which equalises the pieces when their times are proportional to their shares
// and moves towards it otherwise; the best of a few steps by the stage's priced time.
std::vector<DeviceShare> balance_pieces(const CostModel& cm, const LayerGraph& lg, int layer,
                                        SplitMethod method, const std::vector<int>& vds,
                                        const std::vector<DeviceShare>& start) {
  constexpr int kSteps = 6;
  constexpr double kMinRatio = 1e-3;
  std::vector<DeviceShare> best = start, cur = start;
  double best_ms = kInfiniteCost;
  for (int step = 0; step <= kSteps; ++step) {
    std::vector<double> ratios;
    for (const DeviceShare& d : cur) ratios.push_back(d.ratio);
    auto priced = price_split_pieces(cm, lg, layer, method, vds, ratios);
    if (!priced.ok()) break;
    const double ms = priced->stage_ms();
    if (ms < best_ms * (1 - 1e-9)) {
      best_ms = ms;
      best = cur;
    }
    double sum = 0;
    std::vector<double> next(cur.size());
    for (size_t i = 0; i < cur.size(); ++i) {
      const double t = priced->pieces[i].busy_ms();
      if (!(t > 0) || !std::isfinite(t)) return best;
      next[i] = cur[i].ratio / t;
      sum += next[i];
    }
    for (size_t i = 0; i < cur.size(); ++i) cur[i].ratio = std::max(kMinRatio, next[i] / sum);
    double total = 0;
    for (const DeviceShare& d : cur) total += d.ratio;
    for (DeviceShare& d : cur) d.ratio /= total;
    close_ratios(&cur);
  }
  return best;
}

// The largest memory of any piece of `layer` split by `method` over `shares` (weights, input
// and output regions), or an error when the method has no rule for the layer.
Result<uint64_t> largest_piece_bytes(const LayerGraph& lg, int layer, SplitMethod method,
                                     const std::vector<DeviceShare>& shares) {
  const Graph& g = lg.graph();
  NodeContext nc(g, g.node(lg.layer(layer).node));
  std::vector<double> ratios;
  for (const DeviceShare& s : shares) ratios.push_back(s.ratio);
  ASSIGN_OR_RETURN(SplitRule rule, split_node(nc.ctx(), method, ratios));
  uint64_t most = 0;
  for (size_t i = 0; i < rule.pieces.size(); ++i) {
    const OpCost c = split_piece_cost(nc.ctx(), rule, i);
    most = std::max(most, c.input_bytes + c.weight_bytes + c.output_bytes);
  }
  return most;
}

struct Candidate {
  Plan plan;
  double period = kInfiniteCost;
};

// The best split of `layer` over `vds` by any method (pieces within `cap` when cap > 0).
Result<Candidate> best_split(const CostModel& cm, const LayerGraph& lg, const Plan& plan, int layer,
                             const std::vector<int>& vds, uint64_t cap) {
  // Equal-latency shares first; equal shares too when a memory cap may not fit the faster
  // device's larger piece.
  std::vector<std::vector<DeviceShare>> share_sets = {balanced_shares(cm, vds, layer)};
  if (cap > 0) {
    std::vector<DeviceShare> equal = share_sets[0];
    for (DeviceShare& s : equal) s.ratio = 1.0 / static_cast<double>(equal.size());
    share_sets.push_back(equal);
  }
  Candidate best;
  std::string why;
  for (size_t set = 0; set < share_sets.size(); ++set)
    for (SplitMethod m : kAllSplitMethods) {
      // The speed ratios refined by the pieces' prices for this method; equal ones kept equal.
      const std::vector<DeviceShare> shares =
          set == 0 ? balance_pieces(cm, lg, layer, m, vds, share_sets[0]) : share_sets[set];
      auto piece = largest_piece_bytes(lg, layer, m, shares);
      if (!piece.ok()) continue;
      if (cap > 0 && *piece > cap) {
        why += std::string(" ") + split_method_name(m) + ": a piece needs " +
               std::to_string(*piece) + " bytes;";
        continue;
      }
      auto p = split_layer_in_plan(plan, layer, split_method_name(m), shares);
      if (!p.ok()) continue;
      Status priced = price_plan(cm, lg, &*p);
      if (!priced.ok()) {
        why += std::string(" ") + split_method_name(m) + ": " + priced.message() + ";";
        continue;
      }
      if (p->estimated_period_ms < best.period) {
        best.period = p->estimated_period_ms;
        best.plan = std::move(*p);
      }
    }
  if (!std::isfinite(best.period)) {
    return failed_precondition("layer " + std::to_string(layer) + " (" + lg.layer(layer).name +
                               "): no split over " + std::to_string(vds.size()) + " devices works" +
                               (why.empty() ? " (no rule for its op)" : ":" + why));
  }
  return best;
}

bool in_split_stage(const Plan& plan, int layer) {
  for (const Stage& s : plan.stages) {
    if (std::find(s.layers.begin(), s.layers.end(), layer) != s.layers.end()) {
      return !s.placement.single();
    }
  }
  return false;
}

}  // namespace

std::vector<DeviceShare> balanced_split_shares(const CostModel& cm, const LayerGraph& lg, int layer,
                                               SplitMethod method, const std::vector<int>& vds) {
  return balance_pieces(cm, lg, layer, method, vds, balanced_shares(cm, vds, layer));
}

Result<Plan> split_layer_in_plan(const Plan& plan, int layer, const std::string& method,
                                 const std::vector<DeviceShare>& devices) {
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const Stage& s = plan.stages[i];
    if (std::find(s.layers.begin(), s.layers.end(), layer) == s.layers.end()) continue;
    if (!s.placement.single()) {
      return invalid_argument(plan.stage_name(i) + ": layer " + std::to_string(layer) +
                              " is already split");
    }
    Stage before = s, mid, after = s;
    before.layers.clear();
    after.layers.clear();
    for (int l : s.layers) {
      if (l < layer) before.layers.push_back(l);
      if (l > layer) after.layers.push_back(l);
    }
    before.estimate = after.estimate = StageEstimate{};
    mid.layers = {layer};
    mid.placement.devices = devices;
    mid.placement.split = method;
    std::vector<Stage> repl;
    if (!before.layers.empty()) repl.push_back(before);
    repl.push_back(mid);
    if (!after.layers.empty()) repl.push_back(after);
    Plan out = plan;
    out.stages.erase(out.stages.begin() + static_cast<ptrdiff_t>(i));
    out.stages.insert(out.stages.begin() + static_cast<ptrdiff_t>(i), repl.begin(), repl.end());
    RETURN_IF_ERROR(out.validate(out.num_layers, {}, false));
    return out;
  }
  return invalid_argument("layer " + std::to_string(layer) + " is in no stage of the plan");
}

Result<Plan> make_split_plan(const CostModel& cm, const LayerGraph& lg,
                             const SplitPlanRequest& request, SplitPlanReport* report) {
  SplitPlanReport local;
  SplitPlanReport& rep = report != nullptr ? *report : local;
  rep = SplitPlanReport{};
  ASSIGN_OR_RETURN(std::vector<int> vds, request_devices(cm, request));
  if (vds.size() < 2) return invalid_argument("the split planner needs at least 2 devices");

  // Step 0: the base pipeline.
  PipelineRequest preq;
  preq.objective = PipelineObjective::kThroughput;
  preq.stages = request.base_stages;
  for (int vd : vds) preq.devices.push_back(cm.virtual_devices()[static_cast<size_t>(vd)].label);
  ASSIGN_OR_RETURN(Plan plan, make_pipeline_plan(cm, lg, preq));
  rep.base_period_ms = plan.estimated_period_ms;

  // Step 1: layers over the memory cap must be split.
  if (request.memory_cap_bytes > 0) {
    for (int l = 0; l < lg.num_layers(); ++l) {
      if (cm.slice_memory_bytes(l, l + 1) <= request.memory_cap_bytes) continue;
      auto c = best_split(cm, lg, plan, l, vds, request.memory_cap_bytes);
      if (!c.ok())
        return c.status().with_context("memory cap " + std::to_string(request.memory_cap_bytes) +
                                       " bytes");
      plan = std::move(c->plan);
      rep.forced_layers.push_back(l);
    }
  }
  RETURN_IF_ERROR(price_plan(cm, lg, &plan));

  // Step 2: split the bottleneck device's heaviest layer while that lowers the period.
  std::vector<bool> tried(static_cast<size_t>(lg.num_layers()), false);
  for (int round = 0; round < request.max_rounds; ++round) {
    const auto worst = std::max_element(
        plan.device_load.begin(), plan.device_load.end(),
        [](const DeviceLoad& a, const DeviceLoad& b) { return a.busy_ms < b.busy_ms; });
    if (worst == plan.device_load.end()) break;
    int heaviest = -1;
    double heaviest_ms = 0;
    for (const Stage& s : plan.stages) {
      if (!s.placement.single() || s.placement.devices[0].device != worst->device) continue;
      auto vd = cm.find(s.placement.devices[0].label());
      if (!vd.ok()) continue;
      for (int l : s.layers) {
        const double ms = cm.exec_ms(*vd, l);
        if (!tried[static_cast<size_t>(l)] && !in_split_stage(plan, l) && ms > heaviest_ms) {
          heaviest = l;
          heaviest_ms = ms;
        }
      }
    }
    if (heaviest < 0) break;
    tried[static_cast<size_t>(heaviest)] = true;
    auto c = best_split(cm, lg, plan, heaviest, vds, request.memory_cap_bytes);
    if (!c.ok()) continue;
    if (c->period < 0.99 * plan.estimated_period_ms) {
      plan = std::move(c->plan);
      rep.balanced_layers.push_back(heaviest);
    }
  }
  plan.planner = "split";
  plan.objective = "throughput";
  rep.period_ms = plan.estimated_period_ms;
  return plan;
}

}  // namespace tessera
