// A stream that re-partitions a two-stage pipeline while it runs (seed 001 Sect. V-A;
// wave2-spec Sect. 6.5: the adaptation step only ever swaps one Plan for another).
//
// Monitor. The frames coming out are measured in windows of `window` frames (after `settle`
// frames that let a new pipeline fill): the period of a window is the time between its first and
// last frame leaving the pipeline (from the executor's step runs), divided by the frames between,
// and each stage's busy time is its mean program time per frame. The references are the plan's
// estimated period (estimate.period_ms) when it has one, else the first window's period, and
// the first window's stage times. When the period or a stage's time drifts more than `drift`
// (5%) from its reference in two windows in a row, a CutSearch (repartition.h, Algorithm 2)
// starts at the current cut; the stage times catch a load that comes or goes on the device that
// is not the bottleneck, which the period alone does not show. After a search, the next window
// on the chosen cut gives the new references.
//
// Search. Algorithm 2, by default starting with one jump to the cut that balances the stages'
// measured time per FLOP (AdaptOptions::jump, repartition.h).
//
// Swap. Each candidate cut is a new plan, compiled in the background (a new Executor) while the
// current one keeps streaming. At the first submit() after it is ready, the swap happens at a
// frame boundary: the frames in flight in the old executor finish (next() returns them first),
// then new frames go to the new one. No frame is lost, duplicated or reordered across a swap,
// and each comes out with the outputs of the plan it ran on (every plan gives the sequential
// outputs). When the search ends, the best cut is swapped in (if it is not running already), its
// period becomes the reference, and the choice is logged with the reason (events()).
//
// Thread rule: submit(), next() and close() may be called from any thread; they serialise.
// As with the Executor, a submitted input must not be written until its frame is out.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/adapt/repartition.h"
#include "scheduler/executor/executor.h"

namespace tessera {

struct AdaptOptions {
  int window = 30;      // frames per measurement
  int settle = 0;       // frames skipped after a swap; 0: the new executor's frame slots
  double drift = 0.05;  // relative drift of the period that starts a search
  double alpha = 0.5;   // Algorithm 2's moving-average weight for cuts measured before
  // Start each search with a jump to the cut that balances the two stages' measured time per
  // FLOP (CutSearch's extension); false: plain Algorithm 2 from the current cut.
  bool jump = true;
  // Off: the stream measures but never searches; it runs the plans switch_plan() gives (a policy
  // outside, e.g. the offload adapter, scheduler/adapt/offload_adapt.h).
  bool search = true;
};

// One step of the adaptation, for the log.
struct AdaptEvent {
  uint64_t frame = 0;       // the first frame that runs on `plan` (or the frame that triggered)
  std::string what;         // "trigger", "candidate", "chosen"
  int cut = 0;              // the cut concerned (first layer of stage 1)
  double period_ms = 0;     // measured period behind the decision
  double reference_ms = 0;  // what it was compared with
  std::string reason;
};

class AdaptiveStream {
 public:
  // `plan`: a streaming plan of two contiguous stages on single devices (with
  // AdaptOptions::search off, any streaming plan: the stream then runs what switch_plan()
  // gives); `lg` outlives the stream. Compiles the plan (errors name the stage).
  static Result<std::unique_ptr<AdaptiveStream>> create(const LayerGraph& lg, const Plan& plan,
                                                        const ExecutorOptions& executor_options,
                                                        const AdaptOptions& options = {});
  ~AdaptiveStream();

  // As Executor::submit/next (ids 0, 1, ... across every plan the stream has run).
  Result<uint64_t> submit(std::vector<Tensor> inputs, const SubmitOptions& options = {});
  Result<FrameResult> next();
  // Swaps to `plan` (any plan of the model the Executor runs) at a frame boundary, as the
  // search's swaps: it compiles in the background while the current plan streams, and the
  // first submit() after it is ready drains the old plan's frames in flight and sends new frames
  // to the new one; no frame is lost. An earlier switch still compiling is waited for and
  // swapped in first; a search's candidate is dropped (a running search ends). A plan that does not
  // compile is logged ("refused") and the current one keeps running. Logged as "switched" with
  // `reason`; the cut is the first layer of the plan's last stage (0 for one stage on stage 1's
  // device of the first plan, else the layer count).
  Status switch_plan(const Plan& plan, const std::string& reason);
  // Ends the stream: waits for a background compile, closes the executor.
  void close();

  // Runs `f` on the executor running now, with the stream's id of that executor's frame 0
  // (its frame k is the stream's frame first_id + k), under the stream's lock: `f` must not call
  // the stream. For monitors that read the executor's step runs and queues
  // (scheduler/adapt/queue_monitor.h). After close() it is the last executor, closed.
  void inspect(const std::function<void(const Executor&, uint64_t first_id)>& f) const;

  // Frames in flight the current executor allows (its slots).
  int num_slots() const;
  // The plan running now, its cut, and every adaptation step so far.
  Plan plan() const;
  int cut() const;
  // Whether a search is running or a new plan is being compiled.
  bool adapting() const;
  std::vector<AdaptEvent> events() const;
  // Every window's measured period, with the cut it was measured at (for reports).
  std::vector<std::pair<int, double>> windows() const;

 private:
  AdaptiveStream() = default;
  Result<std::unique_ptr<Executor>> compile(int cut) const;
  // `keep_estimates`: a plan given by switch_plan() keeps its prices (a monitor compares the
  // executor's plan with what it measures); a cut of the base plan is priced by nobody.
  Result<std::unique_ptr<Executor>> compile_plan(Plan p, bool keep_estimates = false) const;
  void start_compile(int cut);
  Status swap_if_ready();
  void measure(uint64_t local_frame);
  void on_window(double period_ms, const std::vector<double>& busy_ms);
  // The cut that balances the stages if each device's time per FLOP stays what `busy_ms` (the
  // stages' measured times at the current cut) says.
  int balanced_cut(const std::vector<double>& busy_ms) const;
  // Windows in a row that must drift before a search starts (one noisy window does not).
  static constexpr int kDriftingWindows = 2;

  const LayerGraph* lg_ = nullptr;
  Plan base_;
  ExecutorOptions executor_options_;
  AdaptOptions options_;

  mutable std::mutex mu_;
  std::unique_ptr<Executor> current_;
  int cut_ = 0;
  uint64_t base_id_ = 0;             // global id of the current executor's frame 0
  uint64_t submitted_ = 0;           // global
  std::deque<FrameResult> drained_;  // finished frames of the previous executor, in order
  // Background compile of a candidate cut.
  std::optional<int> compiling_cut_;
  std::optional<Plan> compiling_plan_;  // switch_plan's plan, with its reason
  std::string compiling_reason_;
  std::future<Result<std::unique_ptr<Executor>>> compiling_;
  // Monitor.
  int since_swap_ = 0;
  std::vector<uint64_t> window_frames_;  // local ids of the frames in the window
  double reference_ms_ = 0;              // the period to hold (the plan's estimate, or measured)
  std::vector<double> reference_busy_;   // per step, ms/frame, measured; empty: take the next
  int drifting_windows_ = 0;
  std::optional<CutSearch> search_;
  std::map<int, double> history_;
  std::vector<AdaptEvent> events_;
  std::vector<std::pair<int, double>> windows_;
};

}  // namespace tessera
