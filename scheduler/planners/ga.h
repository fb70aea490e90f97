// The genetic mapper (seed 003 Sect. 4.2, wave2-spec Sect. 3.3): which processor runs each actor
// of the SDF graph (scheduler/dataflow.h), then the CSDF actors with phases of Algorithm 2 as a
// streaming Plan.
//
// Processors. Each device of the request is one processor (the paper's cpu_i). A processor that
// drives an accelerator is occupied by it, as in the paper: list the accelerator (npu:0), not
// the core that drives it; every actor mapped there computes on the accelerator and that core
// runs nothing else. So {cpu:0, npu:0} on this machine is the paper's n = 2, m = 1 (core 1 runs
// the NPU's reference driver), and {cpu:0, cpu:1} is n = 2, m = 0. No layer is split: a GPU's
// "data parallelism" is the GPU running whole layers (wave2-spec Sect. 3.1).
//
// Chromosome: gene k = the processor of actor (layer) a_k (Fig. 4). A gene only takes
// processors that can run the layer (op support and memory of the cost model).
//
// Fitness, minimised (eq. 1-4):
//   tau_i     = tau^t_i + tau^com_i                                               (2)
//   tau^t_i   = sum over the actors on processor i of their execution time there (3)
//   tau^com_i = sum over those actors of (writing every channel they produce + reading every
//               channel they consume)                                             (4)
//   phi       = sum over ordered pairs (i, j) of processors of |tau_i - tau_j|    (1)
// Execution times are CostModel::exec_ms at the device's top level. Eq. 4 charges tau_w per
// token written and tau_r per token read; Tessera charges the device's fitted transfer cost of
// the channel's tensor, download_ms (write) and upload_ms (read) of eq. 1-2 of seed 000, which is
// tau_w U + beta per channel with tau_w the fit's alpha times the element size. Two variants:
//   comm = all    eq. 4 as printed: every channel, also between actors on one processor (the
//                 total is then almost constant and co-locating neighbours earns nothing);
//   comm = cross  only channels whose two actors are on different processors.
// and two objectives:
//   balance       phi, the paper's fitness (it rewards balance, not throughput);
//   max           max_i tau_i, the period the mapping would have if every actor could overlap
//                 frames;
//   period        what the CSDF actors of the mapping allow (docs/dataflow.md, finding 3): an
//                 actor takes frame f+1 only after its last phase of frame f, so the period is
//                 at least each actor's span, from the start of its first phase to the end of
//                 its last in one frame. The fitness runs Algorithm 2 on the chromosome,
//                 schedules one frame's phases as soon as their inputs and their actor are free
//                 (each phase costs its layers' tau plus GaProblem::phase_ms of its processor),
//                 and takes max(max_i tau_i (phases included), max over actors of the span).
//                 A mapping whose Algorithm-2 phases deadlock scores +inf. About 3-5x the cost
//                 of the other objectives per evaluation.
//
// The GA (parameters of Sect. 5 where the paper gives them):
//   population 1000 random chromosomes (each gene uniform over the layer's processors); no
//               other planner's answer is in it unless GaOptions::initial is given (a separate,
//               labelled option: the plan's planner is then "ga+seeded");
//   epochs     at most 500; stop after 50 epochs without improvement of the best fitness;
//   selection  binary tournament (the fitter of two chromosomes drawn uniformly); elitism of 1
//               (the best chromosome survives unchanged, so the best never gets worse);
//   crossover  with probability 0.9 (the paper gives none; 0.9 is the textbook default), one-point
//               crossover of two tournament winners at a uniform cut in 1..|A|-1 (children take
//               the genes before the cut from one parent, after it from the other); otherwise
//               the children copy the parents;
//   mutation   each gene of a child, with probability 0.05, moves to another processor that can
//               run it (uniform among them). The paper's "single-gene mutation" with "mutation
//               probability 5%" also reads as one gene per child with probability 0.05
//               (GaOptions::mutate_each_gene = false); on the exhaustive-search instances of
//               tests/scheduler/ga_test.cc that reading found the optimum less often (phi: 25
//               of 40 instances against 34 of 40; max load: 39 of 40 against 40 of 40), so
//               per-gene mutation is the default;
//   restarts   GaOptions::restarts independent runs (default 5; Tessera's, not the paper's),
//               the best kept. On the exhaustive-search instances of ga_test.cc one run misses
//               phi's optimum in about 1 of 7 (its best lies 5-8 genes away, in another basin:
//               no small move reaches it, and 2 or 3 of 5 other seeds find it), so a few
//               independent runs do what a longer single run does not;
//   local search after the runs (GaOptions::local_search, on by default; Tessera's, not the
//               paper's): from the best chromosome, move one layer to another processor or
//               swap the processors of two layers while that lowers the fitness (draws
//               nothing). best_by_epoch is the best run's, plus one entry when this improved it.
// epochs and evaluations count every run.
// One std::mt19937_64 seeded with GaOptions::seed draws everything, so a seed gives the same
// mapping on every run and machine (the draws use Tessera's own integer and real mappings, not
// the library's distributions).
//
// Thread rule: run_ga() and make_ga_plan() are pure functions of their arguments; they may run
// concurrently on different arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/layer_graph.h"
#include "scheduler/cost_model.h"
#include "scheduler/dataflow.h"
#include "scheduler/plan.h"

namespace tessera {

enum class GaComm { kAll, kCross };
enum class GaObjective { kBalance, kMaxLoad, kPeriod };

Result<GaComm> parse_ga_comm(const std::string& name);
Result<GaObjective> parse_ga_objective(const std::string& name);
const char* ga_comm_name(GaComm c);
const char* ga_objective_name(GaObjective o);

// The mapping problem as numbers: what the fitness reads.
struct GaProblem {
  int num_layers = 0;
  int num_processors = 0;
  std::vector<double> exec_ms;  // [layer * P + processor]; +inf where it cannot run
  struct Channel {
    int src = 0;
    int dst = 0;
    std::vector<double> write_ms;  // by processor: the producer's cost of writing it there
    std::vector<double> read_ms;   // by processor: the consumer's cost of reading it there
  };
  std::vector<Channel> channels;
  // By processor: the fixed cost of one phase (one program run: launch, boundary handling),
  // charged by the period objective only; empty: 0.
  std::vector<double> phase_ms;

  double exec(int layer, int p) const {
    return exec_ms[static_cast<size_t>(layer) * static_cast<size_t>(num_processors) +
                   static_cast<size_t>(p)];
  }
  // Checks sizes and that every layer has a processor that can run it; errors name the layer.
  Status validate() const;
};

struct GaOptions {
  int population = 1000;
  int epochs = 500;
  int patience = 50;  // epochs without improvement before stopping
  double mutation = 0.05;
  double crossover = 0.9;
  int tournament = 2;  // chromosomes drawn per selection; the fittest wins
  // Each gene of a child mutates with probability `mutation` (default); false: one gene of a
  // child, with probability `mutation` per child (the stricter reading of "single-gene").
  bool mutate_each_gene = true;
  // Independent runs of the GA (each at the parameters above, restart r seeded from seed and r);
  // the best is kept. 1: the paper's single run.
  int restarts = 5;
  // After the last run, hill-climb the best chromosome (Tessera's step, not the paper's):
  // single-layer moves and two-layer swaps of processors while one lowers the fitness.
  bool local_search = true;
  uint64_t seed = 1;
  GaComm comm = GaComm::kAll;
  GaObjective objective = GaObjective::kBalance;
  // Chromosomes put into the initial population before the random ones (another planner's
  // answer): an ablation, labelled in the plan. Empty for the acceptance runs.
  std::vector<std::vector<int>> initial;
};

struct GaResult {
  std::vector<int> mapping;     // processor of every layer
  double fitness = 0;           // the objective's value of `mapping`
  std::vector<double> load_ms;  // tau_i by processor
  double max_load_ms = 0;
  double phi = 0;
  int epochs = 0;                     // epochs run
  int64_t evaluations = 0;            // fitness evaluations
  std::vector<double> best_by_epoch;  // best fitness after each epoch (index 0: initial)
};

// tau_i of every processor, phi and max tau for a mapping (no checks: mapping must be valid).
void ga_loads(const GaProblem& problem, const std::vector<int>& mapping, GaComm comm,
              std::vector<double>* load_ms);
double ga_fitness(const GaProblem& problem, const std::vector<int>& mapping,
                  const GaOptions& options, std::vector<double>* load_ms = nullptr);

Result<GaResult> run_ga(const GaProblem& problem, const GaOptions& options);

// Every mapping (processors^layers of them; refused above 2e7): the exact optimum of the same
// fitness, for testing the GA on small instances.
Result<GaResult> exhaustive_mapping(const GaProblem& problem, const GaOptions& options);

// The problem of `lg` on `devices` (virtual device names of the cost model, "cpu:0" or
// "cpu:0@1800"; each one processor).
Result<GaProblem> ga_problem(const CostModel& cm, const LayerGraph& lg, const SdfGraph& sdf,
                             const std::vector<std::string>& devices);

struct GaPlan {
  Plan plan;           // streaming, planner "ga" (or "ga+seeded"), estimates by price_plan
  GaResult result;     // the GA's numbers
  CsdfGraph csdf;      // the actors and phases the plan runs
  double seconds = 0;  // wall time of the GA
};

// The whole planner: SDF, GA, CSDF (with the deadlock repair), Plan, priced. `devices` empty:
// every device of the profile at its top level.
Result<GaPlan> make_ga_plan(const CostModel& cm, const LayerGraph& lg,
                            std::vector<std::string> devices, const GaOptions& options);

}  // namespace tessera
