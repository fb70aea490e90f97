// The genetic mapper (scheduler/planners/ga.h): the fitness of eq. 1-4 by hand, both
// communication variants, determinism per seed, infeasible genes, and the GA against exhaustive
// search on random small instances.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "scheduler/planners/ga.h"

namespace tessera {
namespace {

// A random chain-with-skips problem: L layers, P processors, execution times in [0.5, 5) ms,
// channels l -> l+1 and some l -> l+2, each with per-processor write and read costs.
GaProblem random_problem(int L, int P, std::mt19937& rng, double infeasible_share = 0) {
  std::uniform_real_distribution<double> t(0.5, 5), c(0.01, 0.6), u(0, 1);
  GaProblem pr;
  pr.num_layers = L;
  pr.num_processors = P;
  pr.exec_ms.resize(static_cast<size_t>(L * P));
  for (int l = 0; l < L; ++l) {
    for (int p = 0; p < P; ++p) {
      // Processor 0 can run everything; the others lose a share of the layers.
      pr.exec_ms[static_cast<size_t>(l * P + p)] =
          p > 0 && u(rng) < infeasible_share ? kInfiniteCost : t(rng);
    }
  }
  for (int l = 0; l + 1 < L; ++l) {
    for (int d : {l + 1, l + 2}) {
      if (d >= L || (d == l + 2 && u(rng) < 0.6)) continue;
      GaProblem::Channel ch;
      ch.src = l;
      ch.dst = d;
      const double tokens = c(rng);
      for (int p = 0; p < P; ++p) {
        ch.write_ms.push_back(tokens * (0.5 + 0.2 * p));
        ch.read_ms.push_back(tokens * (0.4 + 0.1 * p));
      }
      pr.channels.push_back(std::move(ch));
    }
  }
  return pr;
}

TEST(GaTest, FitnessIsEquation1OverEquations2To4) {
  // 3 layers on 3 processors; channels 0 -> 1 and 1 -> 2.
  GaProblem pr;
  pr.num_layers = 3;
  pr.num_processors = 3;
  pr.exec_ms = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // [layer][processor]
  for (auto [s, d] : {std::pair{0, 1}, std::pair{1, 2}}) {
    GaProblem::Channel ch;
    ch.src = s;
    ch.dst = d;
    ch.write_ms = {0.1, 0.2, 0.3};
    ch.read_ms = {0.01, 0.02, 0.03};
    pr.channels.push_back(ch);
  }
  GaOptions o;
  std::vector<double> loads;
  // Layers 0, 1 on processor 0, layer 2 on processor 2.
  // all:   tau_0 = 1 + 4 + (0.1 + 0.01) + 0.1 = 5.21; tau_1 = 0; tau_2 = 9 + 0.03 = 9.03
  // cross: tau_0 = 5 + 0.1 = 5.1;                      tau_2 = 9.03
  const std::vector<int> mapping = {0, 0, 2};
  const double phi = ga_fitness(pr, mapping, o, &loads);
  ASSERT_EQ(loads.size(), 3u);
  EXPECT_NEAR(loads[0], 5.21, 1e-12);
  EXPECT_EQ(loads[1], 0);
  EXPECT_NEAR(loads[2], 9.03, 1e-12);
  // Every ordered pair: 2 * (|5.21 - 0| + |5.21 - 9.03| + |0 - 9.03|).
  EXPECT_NEAR(phi, 2 * (5.21 + 3.82 + 9.03), 1e-9);
  o.comm = GaComm::kCross;
  ga_fitness(pr, mapping, o, &loads);
  EXPECT_NEAR(loads[0], 5.1, 1e-12);
  o.objective = GaObjective::kMaxLoad;
  EXPECT_NEAR(ga_fitness(pr, mapping, o), 9.03, 1e-12);
  // Everything on one processor: no channel crosses, so the cross variant charges none.
  ga_fitness(pr, {1, 1, 1}, o, &loads);
  EXPECT_NEAR(loads[1], 2 + 5 + 8, 1e-12);
}

// On a chain, the period objective sees what max load cannot: an actor whose phases interleave
// with another's along the chain waits for the whole frame.
TEST(GaTest, PeriodObjectiveChargesInterleavedPhases) {
  GaProblem pr;
  pr.num_layers = 8;
  pr.num_processors = 2;
  pr.exec_ms.assign(16, 1.0);
  pr.phase_ms = {0.1, 0.1};
  for (int l = 0; l + 1 < 8; ++l) {
    GaProblem::Channel ch;
    ch.src = l;
    ch.dst = l + 1;
    ch.write_ms = {0, 0};
    ch.read_ms = {0, 0};
    pr.channels.push_back(ch);
  }
  GaOptions o;
  o.objective = GaObjective::kPeriod;
  std::vector<double> loads;
  // Two contiguous halves: one phase each, spans 4.1.
  EXPECT_NEAR(ga_fitness(pr, {0, 0, 0, 0, 1, 1, 1, 1}, o, &loads), 4.1, 1e-12);
  EXPECT_NEAR(loads[0], 4.1, 1e-12);
  // Alternating: 4 phases each (load 4.4); processor 0 spans its first to its last phase, 7.7.
  EXPECT_NEAR(ga_fitness(pr, {0, 1, 0, 1, 0, 1, 0, 1}, o, &loads), 7.7, 1e-12);
  EXPECT_NEAR(loads[1], 4.4, 1e-12);
  o.objective = GaObjective::kMaxLoad;
  EXPECT_NEAR(ga_fitness(pr, {0, 1, 0, 1, 0, 1, 0, 1}, o), 4.0, 1e-12);
  o.objective = GaObjective::kPeriod;
  const GaResult r = run_ga(pr, o).value();
  EXPECT_NEAR(r.fitness, 4.1, 1e-12);
}

TEST(GaTest, SameSeedSameMappingAndRandomStart) {
  std::mt19937 rng(4);
  const GaProblem pr = random_problem(30, 4, rng);
  GaOptions o;
  o.population = 200;
  o.seed = 17;
  auto a = run_ga(pr, o).value();
  auto b = run_ga(pr, o).value();
  EXPECT_EQ(a.mapping, b.mapping);
  EXPECT_EQ(a.best_by_epoch, b.best_by_epoch);
  EXPECT_GT(a.epochs, o.patience - 1);
  // The best never gets worse (elitism), and the random start is improved on.
  for (size_t i = 1; i < a.best_by_epoch.size(); ++i) {
    EXPECT_LE(a.best_by_epoch[i], a.best_by_epoch[i - 1]);
  }
  EXPECT_LT(a.best_by_epoch.back(), a.best_by_epoch.front());
  // Another seed starts from another population.
  o.seed = 18;
  auto c = run_ga(pr, o).value();
  EXPECT_NE(c.best_by_epoch.front(), a.best_by_epoch.front());
}

TEST(GaTest, GenesOnlyTakeProcessorsThatCanRunTheLayer) {
  std::mt19937 rng(9);
  const GaProblem pr = random_problem(25, 3, rng, 0.5);
  GaOptions o;
  o.population = 100;
  o.mutation = 0.5;
  auto r = run_ga(pr, o).value();
  for (int l = 0; l < pr.num_layers; ++l) {
    EXPECT_TRUE(std::isfinite(pr.exec(l, r.mapping[static_cast<size_t>(l)]))) << "layer " << l;
  }
  GaProblem none = pr;
  for (int p = 0; p < 3; ++p) none.exec_ms[static_cast<size_t>(7 * 3 + p)] = kInfiniteCost;
  auto bad = run_ga(none, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("layer 7"), std::string::npos);
  o.initial = {std::vector<int>(25, 0)};
  o.initial[0][3] = 9;
  auto bad_init = run_ga(pr, o);
  ASSERT_FALSE(bad_init.ok());
  EXPECT_NE(bad_init.status().message().find("layer 3"), std::string::npos);
}

// The GA against the exact optimum on random instances of 10 layers on 3 processors (59049
// mappings), both communication variants: equal in >= 95% of the instances, within 2% in the
// others.
// One run at the paper's parameters misses phi's optimum (eq. 1) in about 1 of 7 instances:
// phi's optimum is a near-perfect balance close to 0, and the run's best lies 5-8 genes away in
// another basin (docs/dataflow.md); the period objective misses now and then too. The defaults
// (5 independent runs, then the local search) meet the criterion for every objective.
struct Gap {
  int equal = 0;
  int within = 0;  // within 2% (max, period) or 5% of a processor's mean load (balance)
  int total = 0;
};

Gap compare_with_exhaustive(GaObjective obj, GaComm comm, int instances, int restarts,
                            bool local_search, uint32_t instance_seed) {
  std::mt19937 rng(instance_seed);
  Gap gap;
  for (int i = 0; i < instances; ++i) {
    const GaProblem pr = random_problem(10, 3, rng, i % 3 == 0 ? 0.3 : 0);
    GaOptions o;
    o.objective = obj;
    o.comm = comm;
    o.seed = static_cast<uint64_t>(i + 1);
    o.restarts = restarts;
    o.local_search = local_search;
    const GaResult ga = run_ga(pr, o).value();
    const GaResult ex = exhaustive_mapping(pr, o).value();
    SCOPED_TRACE(std::string(ga_objective_name(obj)) + "/" + ga_comm_name(comm) + " instance " +
                 std::to_string(i));
    EXPECT_GE(ga.fitness, ex.fitness - 1e-9);
    EXPECT_LE(ga.fitness, ga.best_by_epoch.front());
    ++gap.total;
    if (ga.fitness <= ex.fitness * (1 + 1e-9) + 1e-12) {
      ++gap.equal;
      ++gap.within;
      continue;
    }
    if (obj != GaObjective::kBalance) {
      if (ga.fitness <= ex.fitness * 1.02) ++gap.within;
    } else {
      double sum = 0;
      for (double t : ex.load_ms) sum += t;
      if (ga.fitness - ex.fitness <= 0.05 * sum / 3) ++gap.within;
    }
  }
  std::printf("[ ga ] %s/%s, %d run(s)%s: equal to the exhaustive optimum in %d of %d\n",
              ga_objective_name(obj), ga_comm_name(comm), restarts,
              local_search ? " + local search" : "", gap.equal, gap.total);
  return gap;
}

TEST(GaTest, MatchesExhaustiveSearchOnSmallInstances) {
  const GaOptions defaults;
  for (GaObjective obj : {GaObjective::kMaxLoad, GaObjective::kBalance, GaObjective::kPeriod}) {
    for (GaComm comm : {GaComm::kAll, GaComm::kCross}) {
      const Gap gap = compare_with_exhaustive(
          obj, comm, obj == GaObjective::kBalance ? 20 : (obj == GaObjective::kPeriod ? 3 : 6),
          defaults.restarts, defaults.local_search,
          2020 + 7 * static_cast<uint32_t>(obj) + static_cast<uint32_t>(comm));
      EXPECT_GE(gap.equal * 100, gap.total * 95);
      EXPECT_EQ(gap.within, gap.total);
    }
  }
}

// The numbers of docs/dataflow.md (phi, 80 instances, by restarts and local search); too slow
// for the unit label: run with --gtest_also_run_disabled_tests.
TEST(GaTest, DISABLED_RestartAblation) {
  for (auto [restarts, ls] : {std::pair{1, false}, std::pair{1, true}, std::pair{3, true},
                              std::pair{4, true}, std::pair{5, true}}) {
    int equal = 0, total = 0;
    for (GaComm comm : {GaComm::kAll, GaComm::kCross}) {
      for (uint32_t set : {2020u, 77u}) {
        const Gap g = compare_with_exhaustive(GaObjective::kBalance, comm, 20, restarts, ls,
                                              set + static_cast<uint32_t>(comm));
        equal += g.equal;
        total += g.total;
      }
    }
    std::printf("[ ga ] phi: %d run(s), local search %s: %d of %d equal\n", restarts,
                ls ? "on" : "off", equal, total);
  }
}

TEST(GaTest, BadOptionsAreRefused) {
  std::mt19937 rng(1);
  const GaProblem pr = random_problem(5, 2, rng);
  GaOptions o;
  o.population = 1;
  EXPECT_FALSE(run_ga(pr, o).ok());
  o = GaOptions{};
  o.mutation = 1.5;
  EXPECT_FALSE(run_ga(pr, o).ok());
  o = GaOptions{};
  o.restarts = 0;
  auto no_runs = run_ga(pr, o);
  ASSERT_FALSE(no_runs.ok());
  EXPECT_NE(no_runs.status().message().find("restarts"), std::string::npos);
  EXPECT_FALSE(parse_ga_comm("some").ok());
  EXPECT_FALSE(parse_ga_objective("fast").ok());
  EXPECT_FALSE(exhaustive_mapping(random_problem(30, 3, rng), GaOptions{}).ok());
}

}  // namespace
}  // namespace tessera
