// Dataflow models of a CNN (seed 003, wave2-spec Sect. 3): the SDF graph of Algorithm 1, the CSDF
// graph of Algorithm 2 for a mapping of layers onto processors, the check that its phases can run
// without deadlock (and the repair where Algorithm 2 as printed leaves a deadlock), and the
// streaming Plan the executor runs.
//
// SDF (Algorithm 1): one actor a_i per LayerGraph layer l_i, one channel per edge (layer j reads a
// tensor layer i produces), with production rate U_ij = elements of the tensor l_i writes to it
// and consumption rate V_ij = elements of the tensor l_j reads from it (one token per element).
// Algorithm 1 writes V_ij = W*H*C of X_j, the whole input of l_j; the paper's own example (c_32
// of Fig. 1c consumes 22500 tokens, one of the two inputs of a concatenation) counts the part of
// X_j that comes through the edge, and so does Tessera: U_ij = V_ij. Graph inputs and outputs are
// not actors here (Tessera's layers are the paper's non-data layers).
//
// CSDF (Algorithm 2): one actor per processor that has layers; its execution sequence is a list
// of phases, each a set of layers run as one program. The phases come from the paper's
// mapping-aware BFS: start a phase at the lowest unvisited layer of the processor, add its
// same-processor children breadth first, and stop growing at a layer that has a child on another
// processor (its output edges leave the phase; the printed `break` would record only one). A
// channel joins two actors for every edge between them, with the production sequence u(p) =
// U at the producing phase and 0 elsewhere, and the consumption sequence alike. An edge between
// two phases of one actor (l8 -> l9 in Fig. 1c) stays in the actor's memory: it is listed in
// `local`, not as a self-channel.
//
// Deadlock freedom. One iteration (one frame) of the CSDF graph runs when each actor can fire its
// phases in order: check_deadlock_free() executes that symbolically (a phase fires once every
// layer outside it that it reads has fired) and names the actors that cannot go on otherwise.
// The graph is deadlock-free for any queue capacity >= 1 exactly when that iteration completes:
// with it, the phases have a topological order consistent with every actor's sequence, and the
// executor (executor.h, "Why no deadlock") streams any number of frames in that order.
// Algorithm 2 as printed fails on some DAGs (it adds a same-processor child without looking at
// the child's other parents; l1 -> {l2, l3}, l2 -> l4, l4 -> l5, l3 -> l5 with l4 alone on a
// second processor puts l5 in l1's phase although l5 needs l4, which needs l2's output of that
// phase). make_deadlock_free() repairs it:
//   1. while the phase graph (phase -> phase where a layer of one reads a layer of the other)
//      has a cycle: take a strongly connected component S, the phase Q of S holding the lowest
//      layer of S, and split Q into the layers that do not depend (transitively, through any
//      layers) on another phase of S, then the rest. Both parts are non-empty (the lowest layer
//      depends on nothing in S; a cycle enters Q), the first never reads the second, so every
//      split makes progress and at most |L| - |phases| splits happen;
//   2. the phase graph is then acyclic; where an actor's phase sequence still contradicts it,
//      each actor's phases are reordered along one topological order of it (the lowest first
//      layer first among the ready ones).
// build_csdf() runs Algorithm 2, the check, and the repair only when the check fails, so a
// mapping that Algorithm 2 handles keeps the paper's phases (Table 1 gives Fig. 1c exactly).
//
// Thread rule: plain data and pure functions; safe to use from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/layer_graph.h"
#include "scheduler/plan.h"

namespace tessera {

struct SdfChannel {
  int src = 0;  // producing layer (actor)
  int dst = 0;  // consuming layer (actor)
  ValueId value = kNoValue;
  uint64_t production = 0;   // U, tokens (elements) per firing of src
  uint64_t consumption = 0;  // V, tokens per firing of dst
  uint64_t bytes = 0;        // the tensor's size
};

struct SdfGraph {
  int num_actors = 0;  // = layers
  std::vector<SdfChannel> channels;
  std::vector<std::vector<int>> in_channels;   // by actor: channels it reads
  std::vector<std::vector<int>> out_channels;  // by actor: channels it writes
};

// Algorithm 1. Errors when a tensor's shape is unknown (the graph must be shape-inferred).
Result<SdfGraph> build_sdf(const LayerGraph& lg);

struct CsdfActor {
  int processor = 0;                     // index into the mapping's processors
  std::vector<std::vector<int>> phases;  // the execution sequence: layer sets, each ascending
};

struct CsdfChannel {
  int src_actor = 0;
  int dst_actor = 0;
  int sdf_channel = 0;                // the SDF channel (edge) it carries
  std::vector<uint64_t> production;   // u(p), one per phase of src_actor
  std::vector<uint64_t> consumption;  // v(p), one per phase of dst_actor
};

struct CsdfGraph {
  std::vector<CsdfActor> actors;      // in processor order; processors without layers have none
  std::vector<CsdfChannel> channels;  // edges between actors
  std::vector<int> local;             // SDF channels between two phases of one actor
  int splits = 0;                     // phases added by make_deadlock_free()
  bool reordered = false;             // make_deadlock_free() reordered some actor's phases

  // Where layer l runs: (actor, phase).
  std::vector<std::pair<int, int>> locate(int num_layers) const;
  // "a0: {0-6} | a1: {7} {8,9,12} | ..." for messages and tests.
  std::string describe() const;
};

// Algorithm 2 as printed (with the `break` fix): `mapping[l]` is the processor of layer l, in
// 0..num_processors-1. Errors on a mapping of the wrong length or out of range.
Result<CsdfGraph> csdf_algorithm2(const LayerGraph& lg, const SdfGraph& sdf,
                                  const std::vector<int>& mapping, int num_processors);

// The symbolic run of one iteration: OK, or FailedPrecondition naming each stuck actor, its
// next phase and a layer that phase waits for.
Status check_deadlock_free(const SdfGraph& sdf, const CsdfGraph& csdf);

// Splits and reorders phases until check_deadlock_free() passes (see the header comment), and
// recomputes the channels' rate sequences.
void make_deadlock_free(const SdfGraph& sdf, CsdfGraph* csdf);

// Algorithm 2, then make_deadlock_free() where the check fails; the result always passes it.
Result<CsdfGraph> build_csdf(const LayerGraph& lg, const SdfGraph& sdf,
                             const std::vector<int>& mapping, int num_processors);

// The streaming Plan of a deadlock-free CSDF graph: one stage per phase, on the device of its
// actor's processor (`devices[processor]`), Stage::actor = the CSDF actor's index, stages in a
// topological order of the phases that keeps every actor's sequence (a valid sequential order,
// which the executor needs). Estimates are left to price_plan.
Result<Plan> csdf_to_plan(const SdfGraph& sdf, const CsdfGraph& csdf,
                          const std::vector<std::string>& devices, int num_layers);

}  // namespace tessera
