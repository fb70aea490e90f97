// Adaptation of an offloaded plan at run time (seed 002 Sect. 3.4-3.5; wave2-spec Sect. 2.1,
// 2.4, 2.8): the scaling factor, the link estimator, and re-planning on drift.
//
//   ScalingFactor   SF = T_real(s) / T_offline(s): the client's measured time at the running
//                   cut against its profiled time, as an exponential moving average (weight
//                   `alpha` on the newest frame). Every other cut is then priced SF x T_offline
//                   (the paper's assumption, pitfall 7: one SF scales all cuts alike).
//   LinkEstimator   transfer = L + d / B (seed 002). Two estimates are kept: the real-time one,
//                   a moving average over the transfers seen, and a historical one per network
//                   type (a slower moving average of the real-time values, or values given). The
//                   real-time estimate is used only if a transfer was seen in the last 5 minutes
//                   (`realtime_window_s`); otherwise the historical one of the current network
//                   type. L comes from latency probes (observe_latency) and from transfers
//                   the latency dominates (what the current rates predict for their bytes is
//                   below L): the rest of their time is latency, averaged in. A transfer the
//                   bandwidth dominates updates the rates: the rates that explain its ms - L,
//                   one factor for both directions (one sample cannot tell them apart),
//                   averaged in. With no rate yet, the first transfer sets both to
//                   (d_up + d_down) / (ms - L).
//   OffloadAdapter  holds the candidates of the offload planner (offload.h, profiled once) and
//                   the figures its current choice was made with. Each frame feeds the client's
//                   measured time and, when the plan has a hop, the hop's measured time (less the
//                   profiled pack, unpack and server times: what the link took). maybe_replan()
//                   re-runs Algorithm 2 (lines 1-8) when SF or the link's latency or either rate
//                   has drifted by more than `drift` (5%) from the values of the last decision,
//                   and returns the new plan when the choice changed. The caller swaps it in at a
//                   frame boundary (AdaptiveStream::switch_plan: no frame is lost).
//
// Times are seconds on any clock the caller chooses (a steady clock in use, a counter in tests).
// Thread rule: none of these classes is thread-safe; one thread (the one reading the stream's
// results) drives each.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/planners/offload.h"

namespace tessera {

class ScalingFactor {
 public:
  explicit ScalingFactor(double alpha = 0.3) : alpha_(alpha) {}
  // One frame: the client's measured ms and its profiled ms at the same cut (ignored when either
  // is not > 0).
  void observe(double measured_ms, double profiled_ms);
  double value() const { return value_; }  // 1 until the first observation
  int samples() const { return samples_; }

 private:
  double alpha_;
  double value_ = 1;
  int samples_ = 0;
};

struct LinkEstimatorOptions {
  double alpha = 0.3;              // weight of the newest sample, real time
  double historical_alpha = 0.05;  // weight of the newest real-time value in the history
  double realtime_window_s = 300;  // seed 002: transfers in the last 5 minutes
};

class LinkEstimator {
 public:
  explicit LinkEstimator(std::string network_type = "default", LinkEstimatorOptions options = {});

  // The network type (e.g. "wifi", "4g"): its historical estimate is used when the real-time
  // one is stale. Switching type does not clear the real-time estimate.
  void set_network(std::string type) { network_ = std::move(type); }
  const std::string& network() const { return network_; }
  void set_historical(const std::string& type, const LinkEstimate& e) { history_[type] = e; }
  std::optional<LinkEstimate> historical(const std::string& type) const;

  // A latency probe at time t_s: `latency_ms` is L as the link model uses it (the caller's
  // measurement, e.g. a round trip of a tiny message).
  void observe_latency(double t_s, double latency_ms);
  // A transfer at time t_s: `up_bytes` sent, `down_bytes` received, `ms` on the link.
  void observe_transfer(double t_s, double up_bytes, double down_bytes, double ms);

  // Real-time when a transfer was seen within the window before t_s, else the historical
  // estimate of the current network type, else the real-time one (stale), else nullopt.
  std::optional<LinkEstimate> estimate(double t_s) const;
  bool realtime(double t_s) const;

 private:
  void update_history();

  std::string network_;
  LinkEstimatorOptions options_;
  std::optional<LinkEstimate> rt_;
  double last_transfer_s_ = -1e300;
  bool have_latency_ = false;
  std::map<std::string, LinkEstimate> history_;
};

struct OffloadAdaptOptions {
  double drift = 0.05;  // relative change of SF, L, B_up or B_down that re-runs the planner
  double sf_alpha = 0.3;
  LinkEstimatorOptions link;
};

// One decision of the adapter, for the log.
struct OffloadDecision {
  double t_s = 0;
  double sf = 1;
  std::optional<LinkEstimate> link;
  int cut = 0;
  int bits = 0;
  bool changed = false;
  std::string reason;
};

class OffloadAdapter {
 public:
  // Profiles the candidates once (offload_options) and makes the first choice with SF 1 and
  // `initial_link` (nullopt: the profile's transfer fits). `cm`, `lg` and `cuts` must outlive it.
  static Result<OffloadAdapter> create(const CostModel& cm, const LayerGraph& lg,
                                       const CutProfile& cuts, const OffloadRequest& request,
                                       const std::optional<LinkEstimate>& initial_link = {},
                                       const OffloadAdaptOptions& options = {},
                                       const std::string& network_type = "default");

  // One frame finished at t_s on the current plan: the client stage's ms (0 when it has none)
  // and the remote stage's ms (the hop: pack + link + unpack + server; 0 when none).
  void observe_frame(double t_s, double client_ms, double hop_ms);
  // A latency probe (see LinkEstimator::observe_latency).
  void observe_latency(double t_s, double latency_ms) { link_.observe_latency(t_s, latency_ms); }

  // Re-plans when a figure drifted by more than the threshold since the last decision; returns
  // the new result when the choice changed (its plan priced), nullopt otherwise.
  Result<std::optional<OffloadResult>> maybe_replan(double t_s);

  const OffloadResult& current() const { return current_; }
  double scaling_factor() const { return sf_.value(); }
  LinkEstimator& link() { return link_; }
  const std::vector<OffloadDecision>& decisions() const { return decisions_; }

 private:
  OffloadAdapter() = default;
  Result<OffloadResult> decide(double sf, const std::optional<LinkEstimate>& link) const;

  const CostModel* cm_ = nullptr;
  const LayerGraph* lg_ = nullptr;
  const CutProfile* cuts_ = nullptr;
  OffloadRequest request_;
  OffloadAdaptOptions options_;
  std::vector<OffloadOption> options_list_;
  ScalingFactor sf_;
  LinkEstimator link_;
  OffloadResult current_;
  double decided_sf_ = 1;
  std::optional<LinkEstimate> decided_link_;
  std::vector<OffloadDecision> decisions_;
};

}  // namespace tessera
