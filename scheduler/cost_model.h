// CostModel: execution, transfer, power and energy estimates from a Profile (seed 000 Sect. V-B),
// in the shape the planners consume (scheduler/ planners, issue "Scheduler I").
//
// The unit a planner chooses between is a VirtualDevice: one device at one DVFS level (seed 000
// treats "the same physical device at different frequencies as different devices", eq. 6-7).
// Every level of the platform's DVFS table is a virtual device; levels the profiler did not
// measure are estimated with eq. 3.
//
//   transfer   c_in  = alpha_d,f * T_in  + beta_d,f  (eq. 1)   upload fit of the device/level
//              c_out = alpha_d,f * T_out + beta_d,f  (eq. 2)   download fit
//              Each tensor moved pays beta once.
//   execution  e_l,d,f = the time of layer l measured inside a chained run (profile.h), or,
//              where the backend cannot time layers in a run, chain_scale x (measured total of
//              layer l alone - c_in(l) - c_out(l))   (Sect. V-B 2)
//              t_l,d,f = gamma_l,d / f + eps_l,d                               (eq. 3)
//              fitted from the minimum and maximum levels where both were measured; from one
//              level at frequency f0, eps = 0 and gamma = t0 * f0 (time scales with 1/f).
//              Layers not measured on a device: per-op-type regression on FLOPs and bytes
//              (weighted least squares on relative error, cross-validated; see regression()).
//   power      P = P_static(d,f) + (V_f^2 f)/(V_fmax^2 fmax) * P_dyn(l,d,fmax)   (eq. 4-5)
//              P_dyn measured per layer where a meter existed, else the platform's dynamic_w.
//   slice      C_m,n,d = k_d sum_k e_k,d + c_in(m) + c_out(n) + o_d(T_in + T_out)   (eq. 8 plus
//              the cold factor k_d of a slice run after other programs, 1 for the whole model, and
//              the per-slice overhead o_d = fixed + per boundary byte, see SliceOverhead, which
//              eq. 8 leaves out and which is what keeps many-slice plans honest), infinite when a
//              layer cannot run on d or the slice does not fit its memory. c_in(m) moves the
//              tensors the slice reads from outside, c_out(n) those it produces for later layers or
//              as model outputs: subsets of the LayerGraph's live tensors at cuts m and n, so skip
//              connections crossing a boundary are priced.
//   energy     exec_ms * P(l) + (transfer + overhead ms) * P_transfer(d,f), in millijoules (ms x
//   W), where
//              P_transfer uses the platform's device-wide dynamic power.
//
// Slices are half-open layer ranges [first, last). All queries are O(1) after build (prefix sums
// and per-range boundary tables). A planner that prices O(L^2 D) slices asks for a SliceTable
// instead (below): the same eq. 8 laid out as flat per-option arrays, so that the dynamic program
// reads contiguous memory rather than making one query per slice.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/status.h"
#include "graph/layer_graph.h"
#include "ops/split_rule.h"
#include "scheduler/profile.h"

namespace tessera {

inline constexpr double kInfiniteCost = std::numeric_limits<double>::infinity();

// What a planner minimises: latency in ms, or energy in mJ.
enum class Objective { kLatency, kEnergy };

class SliceTable;

struct VirtualDevice {
  std::string device;     // backend device name
  int mhz = 0;            // 0: fixed level of unknown frequency
  int device_index = 0;   // into CostModel::devices()
  int level = 0;          // index into the platform device's DVFS table
  bool top = false;       // the device's maximum level (the latency set, eq. 6)
  bool measured = false;  // profiled at this level; otherwise estimated with eq. 3
  // "cpu:4-7@2362"; the bare device name when the device has one level.
  std::string label;
};

// One regression line: ms = a * flops + b * bytes + c (bytes: activations read + weights +
// activations written) for one op type on one device, or pooled over all ops.
struct RegressionFit {
  std::string op;  // "" for the pooled fit
  int samples = 0;
  double a_ms_per_flop = 0;
  double b_ms_per_byte = 0;
  double c_ms = 0;
  // Mean absolute relative error of k-fold cross-validation (k = min(5, samples)); NaN when
  // there are too few samples to validate.
  double cv_error = 0;
};

// What running layers as one slice costs beyond their execution and eq. 1-2 transfers: the
// program launch and the copy (and, on cpu, the NCHW<->NHWC conversion) of the boundary tensors,
// fitted per device and level on the profile's calibration runs (weighted least squares on the
// relative error of the slice totals). Layers that were timed alone, not in a chain, are
// multiplied by chain_scale, fitted on the same runs.
//
// cold_scale multiplies the in-chain times of a slice's layers: the profile times its chains back
// to back, so their weights and activations stay in the caches, while a slice in a plan (and
// every calibration run) follows other programs that evicted them. Fitted on the calibration
// runs' own layer times against their in-chain times (at least 1). The device's whole model
// [0, L) is exempt: a single-stage plan runs after itself, as the chains were timed.
struct SliceOverhead {
  double chain_scale = 1;
  double cold_scale = 1;
  double fixed_ms = 0;
  double ms_per_byte = 0;  // per byte of the slice's boundary tensors, in and out
  int samples = 0;         // calibration runs fitted
  // Mean absolute relative error of the fitted model on its calibration runs; NaN when none.
  double error = std::numeric_limits<double>::quiet_NaN();

  double ms(uint64_t boundary_bytes) const {
    return std::max(0.0, fixed_ms + ms_per_byte * static_cast<double>(boundary_bytes));
  }
};

class CostModel {
 public:
  // `lg` must be the model profiled (Profile::check_matches); it must outlive the CostModel.
  static Result<CostModel> build(const Profile& profile, const LayerGraph& lg);

  int num_layers() const { return L_; }
  const Profile& profile() const { return profile_; }
  // The profiled devices (platform entries) in profile order.
  const std::vector<PlatformDevice>& devices() const { return devices_; }
  const std::vector<VirtualDevice>& virtual_devices() const { return vds_; }
  // Seed 000 eq. 6: the top level of every device (latency); eq. 7: every level (energy).
  std::vector<int> latency_devices() const;
  std::vector<int> energy_devices() const;
  // A virtual device by "DEVICE" (its top level) or "DEVICE@MHz"; NotFound lists the choices.
  Result<int> find(const std::string& name) const;

  // ---- per layer ----
  bool can_run(int vd, int layer) const;
  // e_{l,d,f}: execution without transfers, ms; kInfiniteCost when the layer cannot run.
  double exec_ms(int vd, int layer) const;
  // A piece of a split layer (seed 004), cut by `method`: the layer's exec_ms scaled by the
  // per-op regression's ratio of the piece's FLOPs and bytes to the whole layer's (the profiled
  // layer calibrates the regression on this device), times the correction the profile's split
  // calibration measured for the layer and method ("the database", LevelProfile::piece_runs):
  // at each measured piece, correction = (measured piece / whole) / (the regression's ratio);
  // between measured shares (share = the piece's FLOPs over the layer's, or bytes for FLOP-free
  // ops) it is interpolated linearly, towards 1 at the whole layer, and held below the
  // smallest. Without runs for the layer and method the correction is 1. kInfiniteCost when the
  // layer cannot run.
  double piece_exec_ms(int vd, int layer, SplitMethod method, double piece_flops,
                       double piece_bytes) const;
  // The split calibration points of (vd, layer, method): (share, correction) by share; empty
  // when none was measured. Measured on vd's level, or else on its device's nearest level.
  const std::vector<std::pair<double, double>>& piece_corrections(int vd, int layer,
                                                                  SplitMethod method) const;
  // Whether exec_ms(vd, layer) comes from the regression (the layer was not measured).
  bool estimated(int vd, int layer) const;
  // Eq. 4-5, watts.
  double power_w(int vd, int layer) const;
  // gamma (ms * MHz) and eps (ms) of eq. 3 for a device and layer.
  std::pair<double, double> gamma_eps(int device_index, int layer) const;

  // ---- transfers ----
  double upload_ms(int vd, uint64_t bytes, int tensors = 1) const;    // eq. 1
  double download_ms(int vd, uint64_t bytes, int tensors = 1) const;  // eq. 2
  // A remote device's link round trip, which its upload and download fits each include (they
  // are Pings): a slice's inputs and outputs cross in one request and its reply, so its
  // transfers are upload + download less this once (at most the smaller of the two, and only
  // when both move tensors). 0 for other devices.
  double hop_shared_ms(int vd) const;
  // Bytes and tensor counts crossing the boundary of slice [first, last).
  uint64_t slice_input_bytes(int first, int last) const;
  int slice_input_count(int first, int last) const;
  uint64_t slice_output_bytes(int first, int last) const;
  int slice_output_count(int first, int last) const;
  // Weights of the slice plus the largest live set inside it: what must fit the device memory.
  uint64_t slice_memory_bytes(int first, int last) const;

  // ---- slices (eq. 8) ----
  bool can_run_slice(int vd, int first, int last) const;
  // The share of the model's touched bytes (layer inputs, weights and outputs) outside
  // [first, last): what runs between two runs of the slice as a stage of a plan, and so how
  // much of its cached state is evicted; 0 for the whole model.
  double evicted_share(int first, int last) const;
  // 1 + (SliceOverhead::cold_scale - 1) x evicted_share: how much slower the slice's layers
  // run, as a stage of a plan, than in the chain.
  double cold_scale(int vd, int first, int last) const;
  // The co-run factor of the virtual device's physical device (DeviceProfile::corun_scale; 1
  // where the profile has none): what a stage of a streaming plan that keeps another device busy
  // at the same time costs, as a multiple of its price alone (scheduler/pricer.h).
  double corun_scale(int vd) const;
  // The layers' execution as a stage of a plan, cold_scale x their sum.
  double slice_exec_ms(int vd, int first, int last) const;
  // The per-slice overhead (SliceOverhead::ms of the boundary bytes), ms.
  double slice_overhead_ms(int vd, int first, int last) const;
  // Exec + eq. 1-2 transfers + overhead.
  double slice_ms(int vd, int first, int last) const;  // latency, ms
  // The slice run after other programs that evicted `evicted` (0-1) of its cached state
  // instead of as a stage of a plan: 1 right after the whole model on its device (as the
  // calibration runs and `tessera profile --check` time slices), 0 right after itself; ms.
  double slice_ms(int vd, int first, int last, double evicted) const;
  double slice_energy_mj(int vd, int first, int last) const;  // energy, mJ

  const SliceOverhead& slice_overhead(int vd) const { return overhead_[static_cast<size_t>(vd)]; }

  // Eq. 8 over virtual devices `vds` (option o -> vds[o]) for one objective, as flat arrays
  // for a planner (see SliceTable). O(L D) to build; the table refers to this CostModel, which
  // must outlive it and stay where it is (not be moved from).
  SliceTable slice_table(const std::vector<int>& vds, Objective objective) const;

  // The regression of a device: per-op fits and the pooled fit (op ""), with their errors.
  const std::vector<RegressionFit>& regression(int device_index) const {
    return regression_[static_cast<size_t>(device_index)];
  }
  // Cross-validated mean absolute relative error of the regression over all measured layers of
  // the device (what the estimates of unmeasured layers can be expected to miss by).
  double regression_error(int device_index) const {
    return regression_error_[static_cast<size_t>(device_index)];
  }

 private:
  size_t cell(int vd, int layer) const {
    return static_cast<size_t>(vd) * static_cast<size_t>(L_) + static_cast<size_t>(layer);
  }
  size_t range(int first, int last) const {
    return static_cast<size_t>(first) * static_cast<size_t>(L_ + 1) + static_cast<size_t>(last);
  }
  double transfer_power_w(int vd) const;
  // cold_scale when `evicted` of the slice's cached state was evicted (see evicted_share).
  double cold_at(int vd, double evicted) const;
  // slice_exec_ms at that cold_at.
  double exec_after(int vd, int first, int last, double evicted) const;
  // Uploads + downloads + per-slice overhead of [first, last) on vd, in ms.
  double slice_transfer_ms(int vd, int first, int last) const;
  // The share of layer `layer` a piece of `flops` and `bytes` computes (see piece_exec_ms).
  double piece_share(int layer, double flops, double bytes) const;
  // The regression's piece / whole ratio on vd's device (the share when it has no regression).
  double regression_ratio(int vd, int layer, double flops, double bytes) const;

  friend class SliceTable;

  Profile profile_;
  const LayerGraph* lg_ = nullptr;
  int L_ = 0;
  std::vector<PlatformDevice> devices_;
  std::vector<VirtualDevice> vds_;
  // Per (vd, layer).
  std::vector<double> exec_ms_;
  std::vector<double> power_w_;
  std::vector<char> estimated_;
  // Per vd: prefix sums over layers of exec ms, exec energy mJ, and unsupported counts.
  std::vector<std::vector<double>> exec_prefix_;
  std::vector<std::vector<double>> energy_prefix_;
  std::vector<std::vector<int>> unsupported_prefix_;
  std::vector<const LevelProfile*> transfer_level_;  // per vd: the measured level priced
  std::vector<SliceOverhead> overhead_;              // per vd, from that level
  std::vector<double> hop_shared_;                   // per vd: hop_shared_ms
  // Per device, per layer: gamma, eps.
  std::vector<std::vector<std::pair<double, double>>> gamma_eps_;
  // Per (first, last) with first <= last.
  std::vector<uint64_t> in_bytes_, out_bytes_;
  std::vector<int> in_count_, out_count_;
  std::vector<uint64_t> live_max_;  // the largest live set at cuts first..last
  std::vector<uint64_t> weight_prefix_;
  std::vector<double> touched_prefix_;  // layer inputs + weights + outputs, bytes
  double inv_touched_total_ = 0;        // 1 / touched_prefix_[L], 0 when that is 0
  std::vector<std::vector<RegressionFit>> regression_;
  std::vector<double> regression_error_;
  // Split calibration: (vd, layer, method) -> (share, correction) sorted by share.
  std::map<std::tuple<int, int, int>, std::vector<std::pair<double, double>>> piece_points_;
};

// A CostModel's eq. 8 for one objective over a set of virtual devices (the options), laid out
// for the slicing planners, built once per planning call by CostModel::slice_table:
//
//   cost(o, k, l)    = cold_o(k, l) * (prefix_o[l] - prefix_o[k]) + scale_o * transfer_g(o)(k, l),
//                      for k < l <= reach_o[k] (else infinite)
//   cold_o(k, l)     = 1 + (the option's SliceOverhead::cold_scale - 1) * evicted(k, l)
//   evicted(k, l)    = CostModel::evicted_share(k, l), 0 for the whole model [0, L)
//   transfer_g(k, l) = upload(in bytes, in tensors) + download(out bytes, out tensors)
//                      + overhead(in bytes + out bytes)                                  (ms)
//
// prefix_o is the option's execution prefix sum (ms for latency, mJ for energy) and scale_o is 1
// for latency, the transfer power (W) for energy. Options whose transfers and overhead come from
// the same measured level (a device's DVFS levels priced by one level's fits) share a transfer
// group, so a planner computes transfer_g(k, .) once per group and cut, not once per option.
// Feasibility (op support and memory) is monotone: a slice containing an infeasible slice is
// infeasible, so the feasible slices starting at k on option o are exactly k < l <= reach_o[k].
//
// cost() agrees with CostModel::slice_energy_mj and slice_ms exactly (both sum the transfer
// terms before adding the execution).
class SliceTable {
 public:
  int num_layers() const { return L_; }
  int num_options() const { return D_; }
  Objective objective() const { return objective_; }
  int virtual_device(int o) const { return vds_[static_cast<size_t>(o)]; }

  // The largest l such that [k, l) is feasible on option o; k when [k, k + 1) is not.
  int reach(int o, int k) const {
    return reach_[static_cast<size_t>(o) * static_cast<size_t>(L_ + 1) + static_cast<size_t>(k)];
  }
  // Execution prefix of option o (L + 1 entries, the objective's unit); exec of a feasible
  // [k, l) is prefix(o)[l] - prefix(o)[k].
  const double* prefix(int o) const { return prefix_[static_cast<size_t>(o)]; }
  // Multiplier of the transfer group's ms in the objective's unit.
  double transfer_scale(int o) const { return scale_[static_cast<size_t>(o)]; }
  // Multiplier of the execution of [k, l) on option o (cold_o above).
  double cold_scale(int o, int k, int l) const {
    return 1 + cold_[static_cast<size_t>(o)] * evicted(k, l);
  }
  // cold_o(k, l) - 1 = cold_excess(o) * evicted(k, l); evicted(k, l) = 1 - (touched[l] -
  // touched[k]) * inv_touched_total(), with touched() the CostModel's prefix of touched bytes.
  double cold_excess(int o) const { return cold_[static_cast<size_t>(o)]; }
  const double* touched() const { return touched_; }
  double inv_touched_total() const { return inv_total_; }
  double evicted(int k, int l) const { return 1 - (touched_[l] - touched_[k]) * inv_total_; }
  int num_groups() const { return static_cast<int>(groups_.size()); }
  int group(int o) const { return group_[static_cast<size_t>(o)]; }
  // row[l] = transfer_g(k, l) for k < l <= last (row has at least last + 1 entries).
  void transfer_row(int g, int k, int last, double* row) const;

  // Eq. 8 for [k, l) on option o, kInfiniteCost when infeasible.
  double cost(int o, int k, int l) const;
  // The execution part alone, kInfiniteCost when infeasible.
  double exec_cost(int o, int k, int l) const;

 private:
  friend class CostModel;
  // transfer_g(k, l) for one slice.
  double transfer(int g, int k, int l) const;

  struct Group {
    const TransferFit* upload = nullptr;
    const TransferFit* download = nullptr;
    const SliceOverhead* overhead = nullptr;
    double shared = 0;  // CostModel::hop_shared_ms of the group's devices
  };

  const CostModel* cm_ = nullptr;
  Objective objective_ = Objective::kLatency;
  int L_ = 0;
  int D_ = 0;
  std::vector<int> vds_;
  std::vector<const double*> prefix_;  // per option, into the CostModel's prefix sums
  std::vector<double> scale_;          // per option
  std::vector<double> cold_;           // per option: cold_scale - 1
  const double* touched_ = nullptr;    // the CostModel's touched-bytes prefix
  double inv_total_ = 0;               // 1 / touched bytes of the model (0 when none)
  std::vector<int> group_;             // per option
  std::vector<Group> groups_;
  std::vector<int> reach_;  // [o][k], k = 0..L
};

}  // namespace tessera
