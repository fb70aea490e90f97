#include "scheduler/planners/pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "scheduler/planners/slice.h"
#include "scheduler/pricer.h"

namespace tessera {

namespace {

// A plan with k + 1 stages replaces the k-stage one only when it is better by more than rounding.
constexpr double kStrictlyBetter = 1 - 1e-9;
// The search first bounds the objective by (1 + 0.01 x 2^pass) x the global lower bound,
// pass = 0..kWidenPasses-1 (up to 21.5x), while that is below the incumbent.
constexpr int kWidenPasses = 12;

std::string ms_text(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

double objective_value(double period, double latency, double energy, PipelineObjective o) {
  switch (o) {
    case PipelineObjective::kThroughput:
      return period;
    case PipelineObjective::kEnergy:
      return energy;
    case PipelineObjective::kLatency:
      return latency;
  }
  return period;
}

double objective_value(const Pipeline& p, PipelineObjective o) {
  return objective_value(p.period_ms, p.latency_ms, p.energy_mj, o);
}

// ---- what the search reads, built once per call ----

struct Instance {
  int L = 0;
  int D = 0;                                // options
  int P = 0;                                // physical devices among the options
  std::vector<int> vds;                     // option -> virtual device
  std::vector<int> dev;                     // option -> physical device, 0..P-1
  std::vector<double> static_w;             // option -> static power of its level, W
  std::vector<int> reach;                   // [o][c]: the largest e with [c, e) feasible on o
  std::vector<double> busy;                 // [o][c][e]: eq. 8 ms (CostModel::slice_ms)
  std::vector<double> energy;               // [o][c][e]: mJ (CostModel::slice_energy_mj)
  std::vector<std::vector<int>> producers;  // per layer: the layers whose outputs it reads
  std::vector<char> crosses;                // [n]: some layer >= n reads a layer < n
  bool chain = true;                        // every layer l >= 1 reads layer l - 1
  bool monotone = true;                     // no feasible busy time is negative (loads only grow)
  // The least summed busy time, energy, and energy less static power (at the device's highest
  // static power among the options) over r stages covering [c, L): [c][r], r = 0..kMaxStages.
  std::vector<double> rb, re, rn;

  size_t cell(int o, int c, int e) const {
    const size_t s = static_cast<size_t>(L) + 1;
    return (static_cast<size_t>(o) * s + static_cast<size_t>(c)) * s + static_cast<size_t>(e);
  }
  int reach_of(int o, int c) const {
    return reach[static_cast<size_t>(o) * (static_cast<size_t>(L) + 1) + static_cast<size_t>(c)];
  }
  double b(int o, int c, int e) const { return busy[cell(o, c, e)]; }
  double en(int o, int c, int e) const { return energy[cell(o, c, e)]; }
  size_t rc(int c, int r) const {
    return static_cast<size_t>(c) * (PipelineRequest::kMaxStages + 1) + static_cast<size_t>(r);
  }
};

// `scale` (one per option, or empty for 1): a multiplier of every busy time of the option (its
// device's co-run factor), not of its energy.
Instance build_instance(const CostModel& cm, const LayerGraph& lg, const std::vector<int>& vds,
                        const std::vector<double>& scale = {}) {
  Instance in;
  in.L = cm.num_layers();
  in.D = static_cast<int>(vds.size());
  in.vds = vds;
  const int L = in.L;
  std::vector<int> physical;  // CostModel device index -> 0..P-1
  for (int vd : vds) {
    const VirtualDevice& v = cm.virtual_devices()[static_cast<size_t>(vd)];
    auto it = std::find(physical.begin(), physical.end(), v.device_index);
    if (it == physical.end()) it = physical.insert(physical.end(), v.device_index);
    in.dev.push_back(static_cast<int>(it - physical.begin()));
    in.static_w.push_back(cm.devices()[static_cast<size_t>(v.device_index)]
                              .dvfs[static_cast<size_t>(v.level)]
                              .static_w);
  }
  in.P = static_cast<int>(physical.size());

  // Every feasible slice on every option, from the slicing planners' tables.
  const SliceTable ms = cm.slice_table(vds, Objective::kLatency);
  const SliceTable mj = cm.slice_table(vds, Objective::kEnergy);
  const size_t s = static_cast<size_t>(L) + 1;
  in.reach.assign(static_cast<size_t>(in.D) * s, 0);
  in.busy.assign(static_cast<size_t>(in.D) * s * s, kInfiniteCost);
  in.energy.assign(in.busy.size(), kInfiniteCost);
  for (int o = 0; o < in.D; ++o) {
    for (int c = 0; c < L; ++c) {
      const int r = ms.reach(o, c);
      in.reach[static_cast<size_t>(o) * s + static_cast<size_t>(c)] = r;
      for (int e = c + 1; e <= r; ++e) {
        const double b = ms.cost(o, c, e) * (scale.empty() ? 1 : scale[static_cast<size_t>(o)]);
        in.busy[in.cell(o, c, e)] = b;
        in.energy[in.cell(o, c, e)] = mj.cost(o, c, e);
        if (b < 0) in.monotone = false;
      }
    }
    in.reach[static_cast<size_t>(o) * s + static_cast<size_t>(L)] = L;
  }

  // Dependencies between layers, for the critical path (as price_plan walks it).
  in.producers.resize(static_cast<size_t>(L));
  std::vector<int> min_producer(static_cast<size_t>(L), L);
  for (int l = 0; l < L; ++l) {
    std::vector<int>& ps = in.producers[static_cast<size_t>(l)];
    for (ValueId v : lg.layer(l).inputs) {
      const int p = lg.producer_layer(v);
      if (p >= 0 && p != l && std::find(ps.begin(), ps.end(), p) == ps.end()) ps.push_back(p);
    }
    for (int p : ps)
      min_producer[static_cast<size_t>(l)] = std::min(min_producer[static_cast<size_t>(l)], p);
    if (l > 0 && std::find(ps.begin(), ps.end(), l - 1) == ps.end()) in.chain = false;
  }
  in.crosses.assign(s, 0);
  int suffix_min = L;
  for (int n = L - 1; n >= 0; --n) {
    suffix_min = std::min(suffix_min, min_producer[static_cast<size_t>(n)]);
    in.crosses[static_cast<size_t>(n)] = suffix_min < n;
  }

  // Lower bounds: the cheapest r-stage covers of every suffix, per measure.
  std::vector<double> smax(static_cast<size_t>(in.P), 0);
  for (int o = 0; o < in.D; ++o) {
    double& m = smax[static_cast<size_t>(in.dev[static_cast<size_t>(o)])];
    m = std::max(m, in.static_w[static_cast<size_t>(o)]);
  }
  std::vector<double> min_b(s * s, kInfiniteCost), min_e(s * s, kInfiniteCost),
      min_n(s * s, kInfiniteCost);
  for (int o = 0; o < in.D; ++o) {
    const double sw = smax[static_cast<size_t>(in.dev[static_cast<size_t>(o)])];
    for (int c = 0; c < L; ++c) {
      for (int e = c + 1; e <= in.reach_of(o, c); ++e) {
        const size_t i = static_cast<size_t>(c) * s + static_cast<size_t>(e);
        const double b = in.b(o, c, e), en = in.en(o, c, e);
        min_b[i] = std::min(min_b[i], b);
        min_e[i] = std::min(min_e[i], en);
        min_n[i] = std::min(min_n[i], en - sw * b);
      }
    }
  }
  const size_t rows = s * (PipelineRequest::kMaxStages + 1);
  for (auto* table : {&in.rb, &in.re, &in.rn}) table->assign(rows, kInfiniteCost);
  in.rb[in.rc(L, 0)] = in.re[in.rc(L, 0)] = in.rn[in.rc(L, 0)] = 0;
  for (int r = 1; r <= PipelineRequest::kMaxStages; ++r) {
    for (int c = L - 1; c >= 0; --c) {
      double vb = kInfiniteCost, ve = kInfiniteCost, vn = kInfiniteCost;
      for (int e = c + 1; e <= L; ++e) {
        const size_t i = static_cast<size_t>(c) * s + static_cast<size_t>(e);
        vb = std::min(vb, min_b[i] + in.rb[in.rc(e, r - 1)]);
        ve = std::min(ve, min_e[i] + in.re[in.rc(e, r - 1)]);
        vn = std::min(vn, min_n[i] + in.rn[in.rc(e, r - 1)]);
      }
      in.rb[in.rc(c, r)] = vb;
      in.re[in.rc(c, r)] = ve;
      in.rn[in.rc(c, r)] = vn;
    }
  }
  return in;
}

// ---- one search: the best k-stage pipeline whose objective is below a bound ----

class Search {
 public:
  Search(const Instance& in, const PipelineRequest& req, int k, double bound, int64_t budget)
      : in_(in),
        req_(req),
        k_(k),
        bound_(bound),
        budget_(budget),
        load_(static_cast<size_t>(in.P), 0),
        level_(static_cast<size_t>(in.P), -1),
        stage_of_(static_cast<size_t>(in.L), -1) {}

  Pipeline run() {
    if (k_ == 1) {
      one_stage();
    } else if (k_ == 2) {
      algorithm_1();
    } else {
      depth_first(0, 0, Acc{});
    }
    best_.visited = visited_;
    best_.proven_optimal = !exhausted_;
    return best_;
  }

 private:
  struct Acc {
    double sum_b = 0;       // summed busy time of the stages so far
    double sum_e = 0;       // summed stage energy
    double net = 0;         // sum of e_i - s_i b_i
    double max_load = 0;    // the busiest device (or stage) so far
    double max_finish = 0;  // the latest finish so far
    double static_sum = 0;  // static power of the devices used so far
    int used = 0;           // devices used so far
  };

  // A complete plan: `path_` holds its stages (option in `vd`), finish_ their finish times,
  // load_ and level_ the devices. Period and energy as price_plan computes them.
  void complete(double latency, double sum_e, double max_b) {
    double period = max_b;
    for (int d = 0; d < in_.P; ++d) {
      if (level_[static_cast<size_t>(d)] >= 0)
        period = std::max(period, load_[static_cast<size_t>(d)]);
    }
    double energy = sum_e;
    for (int d = 0; d < in_.P; ++d) {
      const int o = level_[static_cast<size_t>(d)];
      if (o < 0) continue;
      energy += in_.static_w[static_cast<size_t>(o)] *
                std::max(0.0, period - load_[static_cast<size_t>(d)]);
    }
    if (period > req_.max_period_ms || latency > req_.max_latency_ms) return;
    const double v = objective_value(period, latency, energy, req_.objective);
    if (!(v < bound_)) return;
    bound_ = v;
    best_.stages = path_;
    best_.period_ms = period;
    best_.latency_ms = latency;
    best_.energy_mj = energy;
  }

  // Whether option o may take a stage: its device is unused or already at o's level.
  bool allowed(int o) const {
    const int l = level_[static_cast<size_t>(in_.dev[static_cast<size_t>(o)])];
    return l < 0 || l == o;
  }

  void push(int o, int c, int e, double b) {
    const int d = in_.dev[static_cast<size_t>(o)];
    load_[static_cast<size_t>(d)] += b;
    pushed_new_.push_back(level_[static_cast<size_t>(d)] < 0);
    level_[static_cast<size_t>(d)] = o;
    path_.push_back(PipelineStage{c, e, o});
  }
  void pop(double b) {
    const PipelineStage st = path_.back();
    path_.pop_back();
    const int d = in_.dev[static_cast<size_t>(st.vd)];
    load_[static_cast<size_t>(d)] -= b;
    if (pushed_new_.back()) level_[static_cast<size_t>(d)] = -1;
    pushed_new_.pop_back();
  }

  void one_stage() {
    for (int o = 0; o < in_.D; ++o) {
      if (in_.reach_of(o, 0) < in_.L) continue;
      ++visited_;
      const double b = in_.b(o, 0, in_.L);
      push(o, 0, in_.L, b);
      complete(b, in_.en(o, 0, in_.L), b);
      pop(b);
    }
  }

  // Seed 001 Algorithm 1: for every ordered pair of options, one scan over the cut n (stage 0 =
  // [0, n), stage 1 = [n, L)), keeping the best. Both stages non-empty; stage 1 waits for stage
  // 0 when it reads what stage 0 produces; one device hosting both pays both.
  void algorithm_1() {
    const int L = in_.L;
    for (int o0 = 0; o0 < in_.D; ++o0) {
      for (int o1 = 0; o1 < in_.D; ++o1) {
        const bool same = in_.dev[static_cast<size_t>(o0)] == in_.dev[static_cast<size_t>(o1)];
        if (same && o0 != o1) continue;  // one level per device
        for (int n = 1; n < L && n <= in_.reach_of(o0, 0); ++n) {
          if (in_.reach_of(o1, n) < L) continue;
          ++visited_;
          const double b0 = in_.b(o0, 0, n), b1 = in_.b(o1, n, L);
          const double latency = in_.crosses[static_cast<size_t>(n)] ? b0 + b1 : std::max(b0, b1);
          push(o0, 0, n, b0);
          push(o1, n, L, b1);
          complete(latency, in_.en(o0, 0, n) + in_.en(o1, n, L), std::max(b0, b1));
          pop(b1);
          pop(b0);
        }
      }
    }
  }

  // Stage i starts at layer c; `acc` sums the stages before it.
  void depth_first(int i, int c, const Acc& acc) {
    const int L = in_.L;
    const int r = k_ - i;  // stages left, this one included
    if (visited_ >= budget_) {
      exhausted_ = true;
      return;
    }
    for (int o = 0; o < in_.D; ++o) {
      if (!allowed(o)) continue;
      const int d = in_.dev[static_cast<size_t>(o)];
      const bool fresh = level_[static_cast<size_t>(d)] < 0;
      const double s_o = in_.static_w[static_cast<size_t>(o)];
      const int hi = std::min(in_.reach_of(o, c), L - (r - 1));
      const int lo = r == 1 ? L : c + 1;
      double start = 0;  // when the stage's producers have finished
      for (int e = c + 1; e <= hi; ++e) {
        const int l = e - 1;
        for (int p : in_.producers[static_cast<size_t>(l)]) {
          if (p < c) {
            start =
                std::max(start, finish_[static_cast<size_t>(stage_of_[static_cast<size_t>(p)])]);
          }
        }
        stage_of_[static_cast<size_t>(l)] = i;
        if (e < lo) continue;
        ++visited_;
        const double b = in_.b(o, c, e);
        const double en = in_.en(o, c, e);
        const double finish = start + b;
        Acc next;
        next.sum_b = acc.sum_b + b;
        next.sum_e = acc.sum_e + en;
        next.net = acc.net + en - s_o * b;
        next.max_load = std::max({acc.max_load, load_[static_cast<size_t>(d)] + b, b});
        next.max_finish = std::max(acc.max_finish, finish);
        next.static_sum = acc.static_sum + (fresh ? s_o : 0);
        next.used = acc.used + (fresh ? 1 : 0);
        if (r == 1) {
          finish_.push_back(finish);
          push(o, c, e, b);
          max_b_.push_back(std::max(max_b_.empty() ? b : max_b_.back(), b));
          complete(next.max_finish, next.sum_e, max_b_.back());
          max_b_.pop_back();
          pop(b);
          finish_.pop_back();
          continue;
        }
        if (in_.monotone && prune(next, e, r - 1)) continue;
        finish_.push_back(finish);
        push(o, c, e, b);
        max_b_.push_back(std::max(max_b_.empty() ? b : max_b_.back(), b));
        depth_first(i + 1, e, next);
        max_b_.pop_back();
        pop(b);
        finish_.pop_back();
      }
    }
  }

  // Whether no completion of the partial plan `acc` by `rest` stages over [e, L) can meet the
  // constraints or beat the bound (admissible bounds; loads only grow).
  bool prune(const Acc& acc, int e, int rest) const {
    const double rb = in_.rb[in_.rc(e, rest)];
    if (!(rb < kInfiniteCost)) return true;
    const int devices = std::min(in_.P, acc.used + rest);
    const double period = std::max(acc.max_load, (acc.sum_b + rb) / devices);
    if (period > req_.max_period_ms) return true;
    const double latency = in_.chain ? acc.max_finish + rb : std::max(acc.max_finish, rb / rest);
    if (latency > req_.max_latency_ms) return true;
    double bound = 0;
    switch (req_.objective) {
      case PipelineObjective::kThroughput:
        bound = period;
        break;
      case PipelineObjective::kLatency:
        bound = latency;
        break;
      case PipelineObjective::kEnergy:
        bound = std::max(acc.sum_e + in_.re[in_.rc(e, rest)],
                         acc.net + in_.rn[in_.rc(e, rest)] + acc.max_load * acc.static_sum);
        break;
    }
    return bound >= bound_;
  }

  const Instance& in_;
  const PipelineRequest& req_;
  int k_;
  double bound_;
  int64_t budget_;
  bool exhausted_ = false;
  Pipeline best_;
  int64_t visited_ = 0;
  std::vector<double> load_;   // per physical device
  std::vector<int> level_;     // per physical device: its option, -1 unused
  std::vector<int> stage_of_;  // per layer on the current path
  std::vector<PipelineStage> path_;
  std::vector<char> pushed_new_;
  std::vector<double> finish_;  // per stage on the path
  std::vector<double> max_b_;   // the largest stage busy time up to each stage on the path
};

// A lower bound on the objective of any k-stage pipeline (0 when none is known).
double global_lower_bound(const Instance& in, PipelineObjective objective, int k) {
  if (!in.monotone) return 0;
  const double rb = in.rb[in.rc(0, k)];
  switch (objective) {
    case PipelineObjective::kThroughput:
      return rb / std::min(in.P, k);
    case PipelineObjective::kLatency:
      return in.chain ? rb : rb / k;
    case PipelineObjective::kEnergy:
      return std::max(in.re[in.rc(0, k)], in.rn[in.rc(0, k)]);
  }
  return 0;
}

// The best k-stage pipeline with an objective below `incumbent` (none: an infeasible Pipeline).
// A pass bounded by B finds the best plan below B if there is one, which is then the optimum;
// tight bounds first keep the branch and bound narrow.
Pipeline best_with_stages(const Instance& in, const PipelineRequest& req, int k, double incumbent,
                          int64_t budget) {
  if (k <= 2) return Search(in, req, k, incumbent, budget).run();
  int64_t visited = 0;
  const double lb = global_lower_bound(in, req.objective, k);
  if (lb > 0 && lb < kInfiniteCost) {
    for (int pass = 0; pass < kWidenPasses; ++pass) {
      const double bound = lb * (1 + 0.01 * std::ldexp(1.0, pass));
      if (!(bound < incumbent)) break;
      Pipeline p = Search(in, req, k, bound, budget - visited).run();
      visited += p.visited;
      if (p.feasible() || !p.proven_optimal) {
        p.visited = visited;
        return p;
      }
    }
  }
  Pipeline p = Search(in, req, k, incumbent, budget - visited).run();
  p.visited += visited;
  return p;
}

// What one request searches. A streaming plan over two or more devices pays each device's
// co-run factor on every stage (price_plan), a plan on one device does not. `alone` prices the
// stages as profiled; where some device has a co-run factor above 1 and the options span two or
// more devices, `corun` prices every stage at its device's factor and `single[p]` holds the
// options of physical device p alone, unscaled (`single_options[p]`: their indices among the
// request's options). The best k >= 2 stage plan is then the better of the best in `corun` that
// uses two or more devices (priced right there) and the best of each `single[p]`: a plan on one
// device that `corun` returns is overpriced, and the single search for its device finds it or
// a better one at its true price.
struct Instances {
  Instance alone;
  std::optional<Instance> corun;
  std::vector<Instance> single;
  std::vector<std::vector<int>> single_options;
};

Instances build_instances(const CostModel& cm, const LayerGraph& lg, const std::vector<int>& vds) {
  Instances is;
  is.alone = build_instance(cm, lg, vds);
  std::vector<double> scale;
  bool scaled = false;
  for (int vd : vds) {
    scale.push_back(cm.corun_scale(vd));
    if (scale.back() > 1) scaled = true;
  }
  if (!scaled || is.alone.P < 2) return is;
  is.corun = build_instance(cm, lg, vds, scale);
  is.single_options.resize(static_cast<size_t>(is.alone.P));
  for (int o = 0; o < is.alone.D; ++o) {
    is.single_options[static_cast<size_t>(is.alone.dev[static_cast<size_t>(o)])].push_back(o);
  }
  for (const std::vector<int>& options : is.single_options) {
    std::vector<int> sub;
    for (int o : options) sub.push_back(vds[static_cast<size_t>(o)]);
    is.single.push_back(build_instance(cm, lg, sub));
  }
  return is;
}

// best_with_stages over the instances of a request (see Instances).
Pipeline best_k(const Instances& is, const PipelineRequest& req, int k, double incumbent,
                int64_t budget) {
  if (k == 1 || !is.corun) return best_with_stages(is.alone, req, k, incumbent, budget);
  Pipeline best = best_with_stages(*is.corun, req, k, incumbent, budget);
  int64_t visited = best.visited;
  bool proven = best.proven_optimal;
  if (best.feasible()) {
    const int d0 = is.alone.dev[static_cast<size_t>(best.stages[0].vd)];
    bool one_device = true;
    for (const PipelineStage& st : best.stages) {
      if (is.alone.dev[static_cast<size_t>(st.vd)] != d0) one_device = false;
    }
    if (one_device) best = Pipeline{};  // overpriced here; its device's search prices it
  }
  for (size_t p = 0; p < is.single.size(); ++p) {
    if (k >= 3 && visited >= budget) {  // out of budget (k <= 2 costs no branch and bound)
      proven = false;
      break;
    }
    const double bound =
        best.feasible() ? std::min(incumbent, objective_value(best, req.objective)) : incumbent;
    Pipeline q = best_with_stages(is.single[p], req, k, bound, budget - visited);
    visited += q.visited;
    proven = proven && q.proven_optimal;
    if (q.feasible()) {
      for (PipelineStage& st : q.stages) st.vd = is.single_options[p][static_cast<size_t>(st.vd)];
      best = std::move(q);
    }
  }
  best.visited = visited;
  best.proven_optimal = proven;
  return best;
}

// The request's stage count, or the stopping rule over k.
Pipeline search(const Instances& in, const PipelineRequest& req) {
  if (req.stages > 0) return best_k(in, req, req.stages, kInfiniteCost, req.max_visits);
  Pipeline best;
  int64_t visited = 0;
  bool proven = true;
  const int k_max = std::min(in.alone.L, PipelineRequest::kMaxStages);
  for (int k = 1; k <= k_max; ++k) {
    const double incumbent =
        best.feasible() ? objective_value(best, req.objective) * kStrictlyBetter : kInfiniteCost;
    Pipeline p = best_k(in, req, k, incumbent, req.max_visits - visited);
    visited += p.visited;
    if (!p.proven_optimal) {
      proven = false;
      if (p.feasible()) best = std::move(p);  // better than k - 1 stages, not proven best
      break;
    }
    if (p.feasible()) {
      best = std::move(p);
    } else if (best.feasible()) {
      break;  // k stages find nothing better than k - 1
    }
  }
  best.visited = visited;
  best.proven_optimal = proven;
  return best;
}

}  // namespace

Result<PipelineObjective> parse_pipeline_objective(const std::string& name) {
  if (name == "throughput") return PipelineObjective::kThroughput;
  if (name == "energy") return PipelineObjective::kEnergy;
  if (name == "latency") return PipelineObjective::kLatency;
  return invalid_argument("objective " + quote_name(name) +
                          " is not throughput, energy or latency");
}

const char* pipeline_objective_name(PipelineObjective o) {
  switch (o) {
    case PipelineObjective::kThroughput:
      return "throughput";
    case PipelineObjective::kEnergy:
      return "energy";
    case PipelineObjective::kLatency:
      return "latency";
  }
  return "throughput";
}

Result<Pipeline> plan_pipeline(const CostModel& cm, const LayerGraph& lg,
                               const PipelineRequest& req) {
  const int L = cm.num_layers();
  if (lg.num_layers() != L) {
    return invalid_argument("pipeline: the cost model is for " + std::to_string(L) +
                            " layers, the model has " + std::to_string(lg.num_layers()));
  }
  if (req.stages < 0 || req.stages > PipelineRequest::kMaxStages) {
    return invalid_argument("pipeline: stages " + std::to_string(req.stages) +
                            " is not auto or 1.." + std::to_string(PipelineRequest::kMaxStages));
  }
  if (req.max_visits < 1) {
    return invalid_argument("pipeline: max_visits must be at least 1");
  }
  if (req.stages > L) {
    return invalid_argument("pipeline: " + std::to_string(req.stages) +
                            " stages need at least as many layers; the model has " +
                            std::to_string(L));
  }
  for (const auto& [name, v] : {std::pair<const char*, double>{"max latency", req.max_latency_ms},
                                {"max period", req.max_period_ms}}) {
    if (!(v > 0)) {
      return invalid_argument(std::string("pipeline: ") + name + " " + ms_text(v) +
                              " ms is not a positive number of milliseconds");
    }
  }
  const bool all_levels = req.objective == PipelineObjective::kEnergy;
  ASSIGN_OR_RETURN(std::vector<int> vds, select_virtual_devices(cm, req.devices, all_levels));
  const Instances in = build_instances(cm, lg, vds);
  Pipeline best = search(in, req);
  if (best.feasible()) {
    for (PipelineStage& st : best.stages) st.vd = vds[static_cast<size_t>(st.vd)];
    return best;
  }
  if (!best.proven_optimal) {
    return resource_exhausted("pipeline: the search priced " + std::to_string(best.visited) +
                              " stage candidates (its budget) without finding a plan that "
                              "meets the request; ask for fewer stages");
  }

  // Nothing feasible: say why.
  const std::string stages =
      req.stages > 0 ? std::to_string(req.stages) + "-stage" : "(stages auto)";
  PipelineRequest free_request = req;
  free_request.max_latency_ms = free_request.max_period_ms = kInfiniteCost;
  free_request.objective = PipelineObjective::kThroughput;
  const Pipeline fastest = search(in, free_request);
  if (!fastest.feasible()) {
    return failed_precondition("pipeline: no feasible " + stages +
                               " pipeline: some layer fits none of the devices (op support or "
                               "memory)");
  }
  if (req.max_period_ms < kInfiniteCost && fastest.period_ms > req.max_period_ms) {
    return failed_precondition("pipeline: no " + stages + " pipeline meets max period " +
                               ms_text(req.max_period_ms) + " ms: the smallest period is " +
                               ms_text(fastest.period_ms) + " ms");
  }
  free_request.objective = PipelineObjective::kLatency;
  const Pipeline quickest = search(in, free_request);
  if (req.max_latency_ms < kInfiniteCost && quickest.latency_ms > req.max_latency_ms) {
    return failed_precondition("pipeline: no " + stages + " pipeline meets max latency " +
                               ms_text(req.max_latency_ms) + " ms: the smallest latency is " +
                               ms_text(quickest.latency_ms) + " ms");
  }
  // Each constraint alone can be met, both together cannot.
  free_request.objective = PipelineObjective::kThroughput;
  free_request.max_latency_ms = req.max_latency_ms;
  const Pipeline joint = search(in, free_request);
  return failed_precondition("pipeline: no " + stages + " pipeline meets max latency " +
                             ms_text(req.max_latency_ms) + " ms and max period " +
                             ms_text(req.max_period_ms) +
                             " ms together: with latency <= " + ms_text(req.max_latency_ms) +
                             " ms the smallest period is " + ms_text(joint.period_ms) + " ms");
}

Plan pipeline_to_plan(const CostModel& cm, const Pipeline& p) {
  Plan plan;
  plan.model_name = cm.profile().model_name;
  plan.model_hash = cm.profile().model_hash;
  plan.num_layers = cm.num_layers();
  plan.mode = PlanMode::kStreaming;
  plan.planner = "pipeline";
  for (const PipelineStage& ps : p.stages) {
    const VirtualDevice& v = cm.virtual_devices()[static_cast<size_t>(ps.vd)];
    Stage st;
    for (int l = ps.first; l < ps.last; ++l) st.layers.push_back(l);
    st.placement = Placement::on(v.device, v.mhz);
    plan.stages.push_back(std::move(st));
  }
  return plan;
}

Result<Plan> make_pipeline_plan(const CostModel& cm, const LayerGraph& lg,
                                const PipelineRequest& req) {
  ASSIGN_OR_RETURN(Pipeline p, plan_pipeline(cm, lg, req));
  Plan plan = pipeline_to_plan(cm, p);
  plan.objective = pipeline_objective_name(req.objective);
  RETURN_IF_ERROR(price_plan(cm, lg, &plan));
  return plan;
}

}  // namespace tessera
