// Slicing planners (seed 000 Sect. V-C and VI): cut a model into contiguous slices, one virtual
// device (a device at one DVFS level) per slice.
//
//   slice       Algorithm 1 / eq. 9: dynamic programming over the last slice,
//                 C_tot(0) = 0,  C_tot(l) = min_{0<=k<l, d} C_tot(k) + C(k, l, d)
//               where C is eq. 8 (execution plus the transfers of the live tensors at both cuts,
//               infinite when d cannot run a layer or the slice does not fit its memory).
//               O(L^2 D) slice costs. Over a CostModel the planners read a SliceTable (flat
//               per-option prefix sums, one transfer row per cut and transfer group, the
//               feasible run of every slice start), a few multiply-adds per slice.
//   exhaustive  every slicing and every assignment; exponential, for verification only.
//   hca         heterogeneity- and constraint-aware but communication-oblivious (Sect. VI-E):
//               minimises execution alone, then is priced with transfers.
//   preferred   the device-preferred versions (TF-X-P, Sect. VI-A): as many consecutive layers
//               as fit on the preferred device; a layer it cannot run goes alone to the first
//               device of the fallback order that can.
//
// The planners work on SliceCosts, so they can be verified on synthetic cost instances;
// CostModelSlices prices slices with a CostModel for one objective, one query per slice. The
// SliceTable overloads give the same plans (to rounding) from the table, which make_slice_plan
// uses; the exhaustive search keeps the per-query path, so it checks the table too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/cost_model.h"
#include "scheduler/plan.h"

namespace tessera {

// What a slicing planner chooses between.
class SliceCosts {
 public:
  virtual ~SliceCosts() = default;
  virtual int num_layers() const = 0;
  virtual int num_options() const = 0;
  // Eq. 8 for layers [first, last) on option `o`, in the objective's unit; kInfiniteCost when
  // the option cannot run the slice (op support, memory). Infeasibility must be monotone: a
  // slice that contains an infeasible slice is infeasible (true of op support and of memory,
  // since weights and the largest live set only grow); the planners prune on it.
  virtual double cost(int o, int first, int last) const = 0;
  // The execution part alone (no transfers), for the communication-oblivious baseline;
  // kInfiniteCost when the slice cannot run.
  virtual double exec_cost(int o, int first, int last) const = 0;
};

struct Slice {
  int first = 0;
  int last = 0;  // exclusive
  int option = 0;
  bool operator==(const Slice&) const = default;
};

struct Slicing {
  std::vector<Slice> slices;
  double cost = kInfiniteCost;  // kInfiniteCost: no feasible slicing
  int64_t priced = 0;           // slice costs the search evaluated (its work, noise-free)
  bool feasible() const { return cost < kInfiniteCost; }
};

// Sum of `costs.cost` over the slices (kInfiniteCost if any is infeasible).
double slicing_cost(const SliceCosts& costs, const std::vector<Slice>& slices);
double slicing_cost(const SliceTable& table, const std::vector<Slice>& slices);

Slicing plan_slice_dp(const SliceCosts& costs);
Slicing plan_slice_dp(const SliceTable& table);
Slicing plan_slice_exhaustive(const SliceCosts& costs);
Slicing plan_slice_hca(const SliceCosts& costs);
Slicing plan_slice_hca(const SliceTable& table);
// `order`: the preferred option first, then the fallback options in order.
Slicing plan_slice_preferred(const SliceCosts& costs, const std::vector<int>& order);
Slicing plan_slice_preferred(const SliceTable& table, const std::vector<int>& order);

Result<Objective> parse_objective(const std::string& name);
const char* objective_name(Objective o);

// Slices priced by a CostModel over a set of its virtual devices (the options).
class CostModelSlices : public SliceCosts {
 public:
  CostModelSlices(const CostModel& cm, Objective objective, std::vector<int> virtual_devices);
  int num_layers() const override { return cm_.num_layers(); }
  int num_options() const override { return static_cast<int>(vds_.size()); }
  double cost(int o, int first, int last) const override;
  double exec_cost(int o, int first, int last) const override;
  int virtual_device(int o) const { return vds_[static_cast<size_t>(o)]; }

 private:
  const CostModel& cm_;
  Objective objective_;
  std::vector<int> vds_;
  // Per option, for the energy objective: prefix sums of execution energy (mJ) per layer, 0 for
  // layers it cannot run (a slice holding one is refused before the sum is read).
  std::vector<std::vector<double>> exec_energy_prefix_;
};

struct SlicePlanRequest {
  std::string planner = "slice";  // slice | exhaustive | hca | preferred
  Objective objective = Objective::kLatency;
  // Device names to use ("cpu", or "cpu@1800" for one level); empty: every profiled device.
  // Latency uses each device's top level (eq. 6), energy every level (eq. 7), unless a level is
  // named. Every name must be in the profile.
  std::vector<std::string> devices;
  // For `preferred`: the preferred device then the fallback order (names as above).
  std::vector<std::string> preference;
};

// The options of a request: the virtual devices of `devices` (empty: every profiled device), at
// each device's top level, or at every level when `all_levels`; a name with @MHz gives that one
// level. NotFound names a device the profile lacks.
Result<std::vector<int>> select_virtual_devices(const CostModel& cm,
                                                const std::vector<std::string>& devices,
                                                bool all_levels);

// Runs a slicing planner and returns its Plan with per-stage estimates from the CostModel.
// An exhaustive search is refused beyond 16 layers.
Result<Plan> make_slice_plan(const CostModel& cm, const SlicePlanRequest& request);

// The Plan of a slicing over virtual devices `vds` (option o -> vds[o]), with estimates.
Plan slicing_to_plan(const CostModel& cm, const Slicing& s, const std::vector<int>& vds);

}  // namespace tessera
