#include "scheduler/planners/ga.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "scheduler/pricer.h"

namespace tessera {

Result<GaComm> parse_ga_comm(const std::string& name) {
  if (name == "all") return GaComm::kAll;
  if (name == "cross") return GaComm::kCross;
  return invalid_argument("GA communication charge " + quote_name(name) +
                          ": expected all or cross");
}

Result<GaObjective> parse_ga_objective(const std::string& name) {
  if (name == "balance") return GaObjective::kBalance;
  if (name == "max") return GaObjective::kMaxLoad;
  if (name == "period") return GaObjective::kPeriod;
  return invalid_argument("GA objective " + quote_name(name) + ": expected balance, max or period");
}

const char* ga_comm_name(GaComm c) {
  return c == GaComm::kAll ? "all" : "cross";
}
const char* ga_objective_name(GaObjective o) {
  switch (o) {
    case GaObjective::kBalance:
      return "balance";
    case GaObjective::kMaxLoad:
      return "max";
    case GaObjective::kPeriod:
      return "period";
  }
  return "?";
}

Status GaProblem::validate() const {
  if (num_layers < 1) return invalid_argument("GA: the model has no layers");
  if (num_processors < 1) return invalid_argument("GA: no processors");
  if (exec_ms.size() != static_cast<size_t>(num_layers) * static_cast<size_t>(num_processors)) {
    return invalid_argument("GA: " + std::to_string(exec_ms.size()) + " execution times for " +
                            std::to_string(num_layers) + " layers x " +
                            std::to_string(num_processors) + " processors");
  }
  for (int l = 0; l < num_layers; ++l) {
    bool any = false;
    for (int p = 0; p < num_processors; ++p) {
      const double t = exec(l, p);
      if (std::isnan(t) || t < 0) {
        return invalid_argument("GA: layer " + std::to_string(l) + " has execution time " +
                                std::to_string(t) + " on processor " + std::to_string(p));
      }
      any = any || std::isfinite(t);
    }
    if (!any) {
      return invalid_argument("GA: no processor can run layer " + std::to_string(l));
    }
  }
  if (!phase_ms.empty() && phase_ms.size() != static_cast<size_t>(num_processors)) {
    return invalid_argument("GA: " + std::to_string(phase_ms.size()) + " phase costs for " +
                            std::to_string(num_processors) + " processors");
  }
  for (size_t c = 0; c < channels.size(); ++c) {
    const Channel& ch = channels[c];
    if (ch.src < 0 || ch.src >= num_layers || ch.dst < 0 || ch.dst >= num_layers ||
        ch.write_ms.size() != static_cast<size_t>(num_processors) ||
        ch.read_ms.size() != static_cast<size_t>(num_processors)) {
      return invalid_argument("GA: channel " + std::to_string(c) +
                              " has bad endpoints or cost vectors");
    }
  }
  return Status();
}

void ga_loads(const GaProblem& problem, const std::vector<int>& mapping, GaComm comm,
              std::vector<double>* load_ms) {
  load_ms->assign(static_cast<size_t>(problem.num_processors), 0.0);
  for (int l = 0; l < problem.num_layers; ++l) {
    const int p = mapping[static_cast<size_t>(l)];
    (*load_ms)[static_cast<size_t>(p)] += problem.exec(l, p);
  }
  for (const GaProblem::Channel& ch : problem.channels) {
    const int ps = mapping[static_cast<size_t>(ch.src)];
    const int pd = mapping[static_cast<size_t>(ch.dst)];
    if (comm == GaComm::kCross && ps == pd) continue;
    (*load_ms)[static_cast<size_t>(ps)] += ch.write_ms[static_cast<size_t>(ps)];
    (*load_ms)[static_cast<size_t>(pd)] += ch.read_ms[static_cast<size_t>(pd)];
  }
}

namespace {

double phi_of(const std::vector<double>& loads) {
  double phi = 0;
  for (size_t i = 0; i < loads.size(); ++i) {
    for (size_t j = 0; j < loads.size(); ++j) phi += std::fabs(loads[i] - loads[j]);
  }
  return phi;
}

double objective_of(const std::vector<double>& loads, GaObjective o) {
  if (o == GaObjective::kBalance) return phi_of(loads);
  return *std::max_element(loads.begin(), loads.end());
}

// The period objective (ga.h): Algorithm 2's phases of `mapping`, one frame scheduled as soon
// as possible, max(loads with phase costs, largest actor span). +inf when the phases deadlock.
double csdf_period(const GaProblem& pr, const std::vector<int>& mapping, GaComm comm,
                   std::vector<double>* loads) {
  const int L = pr.num_layers;
  const size_t P = static_cast<size_t>(pr.num_processors);
  std::vector<std::vector<int>> out(static_cast<size_t>(L)), in(static_cast<size_t>(L));
  std::vector<double> cost(static_cast<size_t>(L), 0);
  for (int l = 0; l < L; ++l)
    cost[static_cast<size_t>(l)] = pr.exec(l, mapping[static_cast<size_t>(l)]);
  for (size_t c = 0; c < pr.channels.size(); ++c) {
    const GaProblem::Channel& ch = pr.channels[c];
    out[static_cast<size_t>(ch.src)].push_back(ch.dst);
    in[static_cast<size_t>(ch.dst)].push_back(ch.src);
    const int ps = mapping[static_cast<size_t>(ch.src)], pd = mapping[static_cast<size_t>(ch.dst)];
    if (comm == GaComm::kCross && ps == pd) continue;
    cost[static_cast<size_t>(ch.src)] += ch.write_ms[static_cast<size_t>(ps)];
    cost[static_cast<size_t>(ch.dst)] += ch.read_ms[static_cast<size_t>(pd)];
  }
  // Algorithm 2: phases per processor, in discovery order.
  std::vector<int> phase_of(static_cast<size_t>(L), -1), phase_proc;
  std::vector<double> phase_cost;
  std::vector<std::vector<int>> proc_phases(P);
  std::vector<int> queue;
  for (size_t p = 0; p < P; ++p) {
    for (int k = 0; k < L; ++k) {
      if (mapping[static_cast<size_t>(k)] != static_cast<int>(p) ||
          phase_of[static_cast<size_t>(k)] >= 0)
        continue;
      const int id = static_cast<int>(phase_cost.size());
      phase_cost.push_back(pr.phase_ms.empty() ? 0 : pr.phase_ms[p]);
      phase_proc.push_back(static_cast<int>(p));
      proc_phases[p].push_back(id);
      queue.assign(1, k);
      phase_of[static_cast<size_t>(k)] = id;
      for (size_t q = 0; q < queue.size(); ++q) {
        const int j = queue[q];
        phase_cost[static_cast<size_t>(id)] += cost[static_cast<size_t>(j)];
        const auto& o = out[static_cast<size_t>(j)];
        if (std::any_of(o.begin(), o.end(), [&](int d) {
              return mapping[static_cast<size_t>(d)] != static_cast<int>(p);
            })) {
          continue;
        }
        for (int d : o) {
          if (phase_of[static_cast<size_t>(d)] < 0) {
            phase_of[static_cast<size_t>(d)] = id;
            queue.push_back(d);
          }
        }
      }
    }
  }
  loads->assign(P, 0.0);
  for (size_t ph = 0; ph < phase_cost.size(); ++ph) {
    (*loads)[static_cast<size_t>(phase_proc[ph])] += phase_cost[ph];
  }
  // One frame, phases in each processor's order, as soon as inputs are there.
  const size_t n = phase_cost.size();
  std::vector<std::vector<int>> deps(n);
  for (int l = 0; l < L; ++l) {
    for (int s : in[static_cast<size_t>(l)]) {
      const int a = phase_of[static_cast<size_t>(s)], b = phase_of[static_cast<size_t>(l)];
      if (a != b) deps[static_cast<size_t>(b)].push_back(a);
    }
  }
  std::vector<double> start(n, 0), end(n, -1);
  std::vector<size_t> next(P, 0);
  size_t done = 0;
  bool progress = true;
  while (done < n && progress) {
    progress = false;
    for (size_t p = 0; p < P; ++p) {
      while (next[p] < proc_phases[p].size()) {
        const int ph = proc_phases[p][next[p]];
        double t = next[p] > 0 ? end[static_cast<size_t>(proc_phases[p][next[p] - 1])] : 0.0;
        bool ready = true;
        for (int d : deps[static_cast<size_t>(ph)]) {
          if (end[static_cast<size_t>(d)] < 0) {
            ready = false;
            break;
          }
          t = std::max(t, end[static_cast<size_t>(d)]);
        }
        if (!ready) break;
        start[static_cast<size_t>(ph)] = t;
        end[static_cast<size_t>(ph)] = t + phase_cost[static_cast<size_t>(ph)];
        ++next[p];
        ++done;
        progress = true;
      }
    }
  }
  if (done < n) return kInfiniteCost;
  double period = *std::max_element(loads->begin(), loads->end());
  for (size_t p = 0; p < P; ++p) {
    if (proc_phases[p].empty()) continue;
    period = std::max(period, end[static_cast<size_t>(proc_phases[p].back())] -
                                  start[static_cast<size_t>(proc_phases[p].front())]);
  }
  return period;
}

// Tessera's own draws on the generator, so that a seed gives the same run everywhere.
struct Rng {
  std::mt19937_64 gen;
  explicit Rng(uint64_t seed) : gen(seed) {}
  // Uniform in [0, n) (the modulo's bias is below n / 2^64).
  size_t below(size_t n) { return static_cast<size_t>(gen() % n); }
  // Uniform in [0, 1).
  double real() { return static_cast<double>(gen() >> 11) * 0x1.0p-53; }
};

GaResult finish(const GaProblem& problem, std::vector<int> mapping, const GaOptions& options) {
  GaResult r;
  r.fitness = ga_fitness(problem, mapping, options, &r.load_ms);
  r.phi = phi_of(r.load_ms);
  r.max_load_ms = *std::max_element(r.load_ms.begin(), r.load_ms.end());
  r.mapping = std::move(mapping);
  return r;
}

std::vector<std::vector<int>> feasible_processors(const GaProblem& problem) {
  std::vector<std::vector<int>> f(static_cast<size_t>(problem.num_layers));
  for (int l = 0; l < problem.num_layers; ++l) {
    for (int p = 0; p < problem.num_processors; ++p) {
      if (std::isfinite(problem.exec(l, p))) f[static_cast<size_t>(l)].push_back(p);
    }
  }
  return f;
}

}  // namespace

double ga_fitness(const GaProblem& problem, const std::vector<int>& mapping,
                  const GaOptions& options, std::vector<double>* load_ms) {
  std::vector<double> local;
  std::vector<double>* loads = load_ms ? load_ms : &local;
  if (options.objective == GaObjective::kPeriod) {
    return csdf_period(problem, mapping, options.comm, loads);
  }
  ga_loads(problem, mapping, options.comm, loads);
  return objective_of(*loads, options.objective);
}

namespace {

// One run of the GA (no restarts, no local search): the best chromosome found.
Result<GaResult> ga_once(const GaProblem& problem, const GaOptions& options) {
  const int L = problem.num_layers;
  const auto feasible = feasible_processors(problem);
  Rng rng(options.seed);
  const size_t N = static_cast<size_t>(options.population);

  std::vector<std::vector<int>> pop;
  pop.reserve(N);
  for (size_t i = 0; i < options.initial.size() && pop.size() < N; ++i) {
    const std::vector<int>& c = options.initial[i];
    if (static_cast<int>(c.size()) != L) {
      return invalid_argument("GA: initial chromosome " + std::to_string(i) + " has " +
                              std::to_string(c.size()) + " genes, expected " + std::to_string(L));
    }
    for (int l = 0; l < L; ++l) {
      const int p = c[static_cast<size_t>(l)];
      if (p < 0 || p >= problem.num_processors || !std::isfinite(problem.exec(l, p))) {
        return invalid_argument("GA: initial chromosome " + std::to_string(i) + " puts layer " +
                                std::to_string(l) + " on processor " + std::to_string(p) +
                                ", which cannot run it");
      }
    }
    pop.push_back(c);
  }
  while (pop.size() < N) {
    std::vector<int> c(static_cast<size_t>(L));
    for (int l = 0; l < L; ++l) {
      const auto& f = feasible[static_cast<size_t>(l)];
      c[static_cast<size_t>(l)] = f[rng.below(f.size())];
    }
    pop.push_back(std::move(c));
  }

  GaResult result;
  std::vector<double> fit(N), loads;
  auto evaluate = [&](std::vector<std::vector<int>>& p, std::vector<double>& f) {
    for (size_t i = 0; i < p.size(); ++i) f[i] = ga_fitness(problem, p[i], options, &loads);
    result.evaluations += static_cast<int64_t>(p.size());
  };
  evaluate(pop, fit);
  size_t best = static_cast<size_t>(std::min_element(fit.begin(), fit.end()) - fit.begin());
  double best_fit = fit[best];
  std::vector<int> best_c = pop[best];
  result.best_by_epoch.push_back(best_fit);

  auto tournament = [&]() -> size_t {
    size_t w = rng.below(N);
    for (int k = 1; k < options.tournament; ++k) {
      const size_t c = rng.below(N);
      if (fit[c] < fit[w]) w = c;
    }
    return w;
  };
  auto mutate_gene = [&](std::vector<int>& c, size_t g) {
    const auto& f = feasible[g];
    if (f.size() < 2) return;
    // Another processor that can run the layer, uniformly.
    size_t k = rng.below(f.size() - 1);
    const size_t cur = static_cast<size_t>(std::find(f.begin(), f.end(), c[g]) - f.begin());
    if (k >= cur) ++k;
    c[g] = f[k];
  };
  auto mutate = [&](std::vector<int>& c) {
    if (options.mutate_each_gene) {
      for (size_t g = 0; g < c.size(); ++g) {
        if (rng.real() < options.mutation) mutate_gene(c, g);
      }
      return;
    }
    if (rng.real() >= options.mutation) return;
    mutate_gene(c, rng.below(static_cast<size_t>(L)));
  };

  std::vector<std::vector<int>> next(N);
  std::vector<double> next_fit(N);
  int stall = 0;
  for (int epoch = 1; epoch <= options.epochs && stall < options.patience; ++epoch) {
    next[0] = best_c;  // elitism
    size_t n = 1;
    while (n < N) {
      const size_t a = tournament(), b = tournament();
      std::vector<int> c1 = pop[a], c2 = pop[b];
      if (L >= 2 && rng.real() < options.crossover) {
        const size_t cut = 1 + rng.below(static_cast<size_t>(L - 1));
        std::swap_ranges(c1.begin() + static_cast<std::ptrdiff_t>(cut), c1.end(),
                         c2.begin() + static_cast<std::ptrdiff_t>(cut));
      }
      mutate(c1);
      mutate(c2);
      next[n++] = std::move(c1);
      if (n < N) next[n++] = std::move(c2);
    }
    std::swap(pop, next);
    evaluate(pop, fit);
    best = static_cast<size_t>(std::min_element(fit.begin(), fit.end()) - fit.begin());
    if (fit[best] < best_fit) {
      best_fit = fit[best];
      best_c = pop[best];
      stall = 0;
    } else {
      ++stall;
    }
    result.best_by_epoch.push_back(best_fit);
    result.epochs = epoch;
  }
  GaResult out = finish(problem, std::move(best_c), options);
  out.epochs = result.epochs;
  out.evaluations = result.evaluations;
  out.best_by_epoch = std::move(result.best_by_epoch);
  return out;
}

// Hill climbing (first improvement) from `mapping`: move one layer to another processor that
// can run it, or swap the processors of two layers, while that lowers the fitness.
void local_search(const GaProblem& problem, const GaOptions& options, std::vector<int>* mapping,
                  double* fitness, int64_t* evaluations) {
  const int L = problem.num_layers;
  const auto feasible = feasible_processors(problem);
  std::vector<int>& best_c = *mapping;
  double& best_fit = *fitness;
  std::vector<double> loads;
  bool improved = true;
  auto try_candidate = [&](const std::vector<int>& c) {
    const double f = ga_fitness(problem, c, options, &loads);
    ++*evaluations;
    if (f < best_fit * (1 - 1e-12) - 1e-12) {
      best_fit = f;
      best_c = c;
      improved = true;
    }
  };
  while (improved) {
    improved = false;
    for (size_t g = 0; g < static_cast<size_t>(L); ++g) {
      for (int p : feasible[g]) {
        if (p == best_c[g]) continue;
        std::vector<int> c = best_c;
        c[g] = p;
        try_candidate(c);
      }
    }
    for (size_t g = 0; g < static_cast<size_t>(L); ++g) {
      for (size_t h = g + 1; h < static_cast<size_t>(L); ++h) {
        const int pg = best_c[g], ph = best_c[h];
        if (pg == ph) continue;
        const auto& fg = feasible[g];
        const auto& fh = feasible[h];
        if (std::find(fg.begin(), fg.end(), ph) == fg.end() ||
            std::find(fh.begin(), fh.end(), pg) == fh.end())
          continue;
        std::vector<int> c = best_c;
        std::swap(c[g], c[h]);
        try_candidate(c);
      }
    }
  }
}

}  // namespace

Result<GaResult> run_ga(const GaProblem& problem, const GaOptions& options) {
  RETURN_IF_ERROR(problem.validate());
  if (options.population < 2) return invalid_argument("GA: the population must be at least 2");
  if (options.epochs < 0) return invalid_argument("GA: negative epochs");
  if (options.patience < 1) return invalid_argument("GA: the patience must be at least 1");
  if (options.tournament < 1) return invalid_argument("GA: the tournament must be at least 1");
  if (!(options.mutation >= 0 && options.mutation <= 1) ||
      !(options.crossover >= 0 && options.crossover <= 1)) {
    return invalid_argument("GA: mutation and crossover probabilities must be in [0, 1]");
  }
  if (options.restarts < 1) return invalid_argument("GA: restarts must be at least 1");
  GaResult best;
  int64_t evaluations = 0;
  int epochs = 0;
  for (int r = 0; r < options.restarts; ++r) {
    GaOptions o = options;
    // Restart r draws from its own stream; restart 0 is the plain GA of `seed`.
    o.seed = options.seed + static_cast<uint64_t>(r) * 0x9E3779B97F4A7C15ull;
    ASSIGN_OR_RETURN(GaResult g, ga_once(problem, o));
    evaluations += g.evaluations;
    epochs += g.epochs;
    if (r == 0 || g.fitness < best.fitness) best = std::move(g);
  }
  if (options.local_search) {
    double fit = best.fitness;
    std::vector<int> mapping = best.mapping;
    local_search(problem, options, &mapping, &fit, &evaluations);
    if (fit < best.fitness) {
      std::vector<double> by_epoch = std::move(best.best_by_epoch);
      best = finish(problem, std::move(mapping), options);
      by_epoch.push_back(best.fitness);
      best.best_by_epoch = std::move(by_epoch);
    }
  }
  best.evaluations = evaluations;
  best.epochs = epochs;
  return best;
}

Result<GaResult> exhaustive_mapping(const GaProblem& problem, const GaOptions& options) {
  RETURN_IF_ERROR(problem.validate());
  const auto feasible = feasible_processors(problem);
  double space = 1;
  for (const auto& f : feasible) space *= static_cast<double>(f.size());
  if (space > 2e7) {
    return invalid_argument("GA: " + std::to_string(space) +
                            " mappings are too many to enumerate (at most 2e7)");
  }
  const int L = problem.num_layers;
  std::vector<size_t> digit(static_cast<size_t>(L), 0);
  std::vector<int> c(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l) c[static_cast<size_t>(l)] = feasible[static_cast<size_t>(l)][0];
  std::vector<int> best_c = c;
  double best = kInfiniteCost;
  std::vector<double> loads;
  int64_t evaluations = 0;
  while (true) {
    const double f = ga_fitness(problem, c, options, &loads);
    ++evaluations;
    if (f < best) {
      best = f;
      best_c = c;
    }
    int l = 0;  // odometer over the feasible processors
    for (; l < L; ++l) {
      const size_t ls = static_cast<size_t>(l);
      if (++digit[ls] < feasible[ls].size()) {
        c[ls] = feasible[ls][digit[ls]];
        break;
      }
      digit[ls] = 0;
      c[ls] = feasible[ls][0];
    }
    if (l == L) break;
  }
  GaResult r = finish(problem, std::move(best_c), options);
  r.evaluations = evaluations;
  return r;
}

Result<GaProblem> ga_problem(const CostModel& cm, const LayerGraph& lg, const SdfGraph& sdf,
                             const std::vector<std::string>& devices) {
  if (devices.empty()) return invalid_argument("GA: no devices");
  if (cm.num_layers() != lg.num_layers() || sdf.num_actors != lg.num_layers()) {
    return invalid_argument("GA: the cost model, layer graph and SDF graph disagree on layers");
  }
  GaProblem pr;
  pr.num_layers = lg.num_layers();
  pr.num_processors = static_cast<int>(devices.size());
  std::vector<int> vds;
  for (size_t i = 0; i < devices.size(); ++i) {
    ASSIGN_OR_RETURN(int vd, cm.find(devices[i]));
    if (std::find(vds.begin(), vds.end(), vd) != vds.end()) {
      return invalid_argument("GA: device " + quote_name(devices[i]) + " is listed twice");
    }
    vds.push_back(vd);
  }
  pr.exec_ms.resize(static_cast<size_t>(pr.num_layers) * vds.size());
  for (int l = 0; l < pr.num_layers; ++l) {
    for (size_t p = 0; p < vds.size(); ++p) {
      pr.exec_ms[static_cast<size_t>(l) * vds.size() + p] =
          cm.can_run(vds[p], l) ? cm.exec_ms(vds[p], l) : kInfiniteCost;
    }
  }
  for (int vd : vds) pr.phase_ms.push_back(cm.slice_overhead(vd).fixed_ms);
  for (const SdfChannel& e : sdf.channels) {
    GaProblem::Channel ch;
    ch.src = e.src;
    ch.dst = e.dst;
    for (int vd : vds) {
      ch.write_ms.push_back(cm.download_ms(vd, e.bytes, 1));
      ch.read_ms.push_back(cm.upload_ms(vd, e.bytes, 1));
    }
    pr.channels.push_back(std::move(ch));
  }
  for (int l = 0; l < pr.num_layers; ++l) {
    bool any = false;
    for (int p = 0; p < pr.num_processors; ++p) any = any || std::isfinite(pr.exec(l, p));
    if (!any) {
      std::string names;
      for (const std::string& d : devices) names += (names.empty() ? "" : ", ") + d;
      return invalid_argument("GA: none of the devices (" + names + ") can run layer " +
                              std::to_string(l) + " " + quote_name(lg.layer(l).name));
    }
  }
  RETURN_IF_ERROR(pr.validate());
  return pr;
}

Result<GaPlan> make_ga_plan(const CostModel& cm, const LayerGraph& lg,
                            std::vector<std::string> devices, const GaOptions& options) {
  if (devices.empty()) {
    for (int vd : cm.latency_devices()) {
      devices.push_back(cm.virtual_devices()[static_cast<size_t>(vd)].label);
    }
  }
  ASSIGN_OR_RETURN(SdfGraph sdf, build_sdf(lg));
  ASSIGN_OR_RETURN(GaProblem problem, ga_problem(cm, lg, sdf, devices));
  GaPlan out;
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(out.result, run_ga(problem, options));
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSIGN_OR_RETURN(out.csdf, build_csdf(lg, sdf, out.result.mapping, problem.num_processors));
  ASSIGN_OR_RETURN(out.plan, csdf_to_plan(sdf, out.csdf, devices, lg.num_layers()));
  out.plan.planner = options.initial.empty() ? "ga" : "ga+seeded";
  out.plan.objective = ga_objective_name(options.objective);
  RETURN_IF_ERROR(price_plan(cm, lg, &out.plan));
  return out;
}

}  // namespace tessera
