#include "scheduler/adapt/queue_monitor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "scheduler/adapt/adaptive_stream.h"
#include "scheduler/cost_model.h"
#include "scheduler/pricer.h"

namespace tessera {

namespace {

std::string base_device(const std::string& label) {
  const size_t at = label.find('@');
  return at == std::string::npos ? label : label.substr(0, at);
}

}  // namespace

Result<Profile> scale_profile(const Profile& profile, const std::map<std::string, double>& factor) {
  Profile out = profile;
  for (const auto& [device, f] : factor) {
    if (!(f > 0) || !std::isfinite(f)) {
      return invalid_argument("slowdown of " + device + " must be a positive number, not " +
                              std::to_string(f));
    }
    bool found = false;
    for (DeviceProfile& dp : out.devices) {
      if (dp.device != device) continue;
      found = true;
      for (LevelProfile& lv : dp.levels) {
        for (auto& ms : lv.layer_ms)
          if (ms) *ms *= f;
        for (auto& ms : lv.layer_chain_ms)
          if (ms) *ms *= f;
        for (SliceRun& r : lv.slice_runs) {
          r.ms *= f;
          r.layers_ms *= f;
          r.chain_ms *= f;
        }
      }
    }
    if (!found) return not_found("the profile has no device " + device);
  }
  return out;
}

QueueWindow read_queue_window(const Executor& ex, const std::vector<QueueOccupancy>& before,
                              const std::vector<QueueOccupancy>& after, int first_frame,
                              int last_frame, int capacity, double full_share) {
  QueueWindow w;
  const Plan& plan = ex.plan();
  const std::vector<ExecutorStep>& steps = ex.steps();
  // One snapshot of the window's step runs (step_runs copies under the executor's lock).
  const std::vector<StepRun> runs = ex.step_runs(first_frame);
  // Mean busy ms per step over the window's frames, and per member of a split step.
  std::vector<double> step_ms(steps.size(), 0);
  std::vector<int> step_n(steps.size(), 0);
  std::vector<std::vector<double>> member_ms(steps.size());
  std::vector<int> member_n(steps.size(), 0);
  for (const StepRun& r : runs) {
    if (r.run < first_frame || r.run > last_frame || !r.ok) continue;
    const size_t i = static_cast<size_t>(r.step);
    step_ms[i] += r.ms;
    ++step_n[i];
    if (r.member_ms.empty()) continue;
    if (member_ms[i].empty()) member_ms[i].assign(r.member_ms.size(), 0.0);
    if (member_ms[i].size() != r.member_ms.size()) continue;
    for (size_t k = 0; k < r.member_ms.size(); ++k) member_ms[i][k] += r.member_ms[k];
    ++member_n[i];
  }
  for (size_t i = 0; i < step_ms.size(); ++i) {
    if (step_n[i] > 0) step_ms[i] /= step_n[i];
    for (double& m : member_ms[i]) m /= std::max(1, member_n[i]);
  }
  const int full_at = std::max(1, capacity - 1);

  // Queues.
  for (const QueueOccupancy& q : after) {
    ActorQueue a;
    a.actor = q.actor;
    std::vector<int64_t> h = q.histogram;
    for (const QueueOccupancy& b : before) {
      if (b.actor != q.actor) continue;
      for (size_t k = 0; k < b.histogram.size() && k < h.size(); ++k) h[k] -= b.histogram[k];
    }
    int64_t starts = 0, waiting = 0, full = 0;
    for (size_t k = 0; k < h.size(); ++k) {
      starts += h[k];
      waiting += static_cast<int64_t>(k) * h[k];
      if (static_cast<int>(k) >= full_at) full += h[k];
    }
    if (starts > 0) {
      a.mean_waiting = static_cast<double>(waiting) / static_cast<double>(starts);
      a.full_share = static_cast<double>(full) / static_cast<double>(starts);
    }
    w.actors.push_back(std::move(a));
  }

  // Per actor: devices and busy time; per device: its predicted time, and which steps (or which
  // member of a split step, k >= 0) it runs.
  std::map<std::string, DeviceLatency> lat;
  std::vector<std::vector<std::pair<std::string, int>>> step_devices(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    const ExecutorStep& st = steps[i];
    auto it = std::find_if(w.actors.begin(), w.actors.end(),
                           [&](const ActorQueue& a) { return a.actor == st.actor; });
    if (it == w.actors.end()) {
      w.actors.push_back(ActorQueue{st.actor, {}, false, 0, 0, 0});
      it = w.actors.end() - 1;
    }
    it->busy_ms += step_ms[i];
    double predicted = 0;
    bool single = true;
    for (int s = st.first_stage; s <= st.last_stage; ++s) {
      const Stage& stage = plan.stages[static_cast<size_t>(s)];
      predicted += stage.estimate.exec_ms + stage.estimate.transfer_ms;
      if (!stage.placement.single()) {
        single = false;
        it->split = true;
      }
      for (const DeviceShare& d : stage.placement.devices) {
        const std::string name = base_device(d.label());
        if (std::find(it->devices.begin(), it->devices.end(), name) == it->devices.end())
          it->devices.push_back(name);
      }
    }
    const Stage& first = plan.stages[static_cast<size_t>(st.first_stage)];
    if (single) {
      const std::string name = base_device(first.placement.devices[0].label());
      DeviceLatency& d = lat[name];
      d.device = name;
      d.predicted_ms += predicted;
      step_devices[i].emplace_back(name, -1);
    } else if (st.first_stage == st.last_stage && member_n[i] > 0 &&
               member_ms[i].size() == first.placement.devices.size() &&
               first.estimate.member_ms.size() == first.placement.devices.size()) {
      // A split stage: each member's piece, measured against its own prediction.
      for (size_t k = 0; k < member_ms[i].size(); ++k) {
        const std::string name = base_device(first.placement.devices[k].label());
        DeviceLatency& d = lat[name];
        d.device = name;
        d.predicted_ms += first.estimate.member_ms[k];
        step_devices[i].emplace_back(name, static_cast<int>(k));
      }
    }
  }
  // Each device's time per frame: the union of the intervals in which its steps (or its pieces)
  // ran, over the window's frames. Actors that share a device overlap in time and each waits for
  // the others' turns on it, so the sum of their wall times would count that wait as work.
  std::map<std::string, std::vector<std::pair<double, double>>> intervals;
  std::set<int> window_frames;
  for (const StepRun& r : runs) {
    if (r.run < first_frame || r.run > last_frame || !r.ok) continue;
    window_frames.insert(r.run);
    for (const auto& [name, k] : step_devices[static_cast<size_t>(r.step)]) {
      const double ms = k < 0 ? r.ms
                        : static_cast<size_t>(k) < r.member_ms.size()
                            ? r.member_ms[static_cast<size_t>(k)]
                            : r.ms;
      intervals[name].emplace_back(r.start_ms, r.start_ms + ms);
    }
  }
  for (auto& [name, iv] : intervals) {
    std::sort(iv.begin(), iv.end());
    double busy = 0, from = 0, to = -1;
    for (const auto& [a, b] : iv) {
      if (a > to) {
        busy += std::max(0.0, to - from);
        from = a;
        to = b;
      } else {
        to = std::max(to, b);
      }
    }
    busy += std::max(0.0, to - from);
    lat[name].measured_ms = busy / static_cast<double>(std::max<size_t>(1, window_frames.size()));
  }
  for (auto& [name, d] : lat) w.devices.push_back(d);

  double most = -1;
  for (size_t a = 0; a < w.actors.size(); ++a) {
    const ActorQueue& q = w.actors[a];
    const bool stays_full =
        q.full_share >= full_share || q.mean_waiting >= full_share * static_cast<double>(full_at);
    if (stays_full && q.mean_waiting > most) {
      most = q.mean_waiting;
      w.bottleneck = static_cast<int>(a);
    }
  }

  // Period: time between the first and last frame of the window leaving the pipeline.
  std::map<int, double> done;
  for (const StepRun& r : runs) {
    if (r.run < first_frame || r.run > last_frame) continue;
    double& t = done[r.run];
    t = std::max(t, r.start_ms + r.ms);
  }
  if (done.size() >= 2) {
    const double first = done.begin()->second, last = done.rbegin()->second;
    w.period_ms = (last - first) / static_cast<double>(done.size() - 1);
  }
  return w;
}

namespace {

// One stream for every iteration: frames are submitted as soon as a frame slot is free (a source
// that always has a frame) and taken out in order, each checked and handed to `on_frame`.
class Pump {
 public:
  Pump(AdaptiveStream& stream, const std::function<std::vector<Tensor>()>& make_frame,
       const std::function<void(const FrameResult&)>& on_frame)
      : stream_(stream), make_frame_(make_frame), on_frame_(on_frame) {}

  // Fills the free slots, then takes the next frame out. Errors: a submit or next() failing, a
  // frame out of order, or (as the first frame error) a frame that failed.
  Result<uint64_t> step() {
    while (submitted_ - received_ < static_cast<uint64_t>(stream_.num_slots())) {
      ASSIGN_OR_RETURN(uint64_t id, stream_.submit(make_frame_()));
      if (id != submitted_) {
        return internal_error("frame " + std::to_string(id) + " submitted as frame " +
                              std::to_string(submitted_));
      }
      ++submitted_;
    }
    return take();
  }
  // Takes every frame still in flight out (the end of the stream).
  Status drain() {
    while (received_ < submitted_) RETURN_IF_ERROR(take().status());
    return Status();
  }
  uint64_t submitted() const { return submitted_; }

 private:
  Result<uint64_t> take() {
    ASSIGN_OR_RETURN(FrameResult r, stream_.next());
    if (r.frame != received_) {
      return internal_error("frame " + std::to_string(r.frame) + " came out where frame " +
                            std::to_string(received_) + " was due");
    }
    ++received_;
    if (on_frame_) on_frame_(r);
    if (!r.status.ok()) return r.status.with_context("frame " + std::to_string(r.frame));
    return r.frame;
  }

  AdaptiveStream& stream_;
  const std::function<std::vector<Tensor>()>& make_frame_;
  const std::function<void(const FrameResult&)>& on_frame_;
  uint64_t submitted_ = 0, received_ = 0;
};

}  // namespace

Result<Plan> run_queue_rebalance(const Profile& profile, const LayerGraph& lg,
                                 const SplitPlanRequest& request,
                                 const ExecutorOptions& executor_options,
                                 const std::function<std::vector<Tensor>()>& make_frame,
                                 const std::function<void(const FrameResult&)>& on_frame,
                                 const QueueMonitorOptions& options, RebalanceReport* report) {
  RebalanceReport local;
  RebalanceReport& rep = report != nullptr ? *report : local;
  rep = RebalanceReport{};
  if (options.queue_capacity < 1 || options.window < 2 || options.warmup < 0 ||
      options.max_iterations < 1 || !(options.full_share > 0 && options.full_share <= 1) ||
      !(options.drift > 0)) {
    return invalid_argument(
        "queue monitor: needs a queue capacity >= 1, a window >= 2 frames, warm-up >= 0, "
        "iterations >= 1, a full share in (0, 1] and a drift > 0");
  }
  std::map<std::string, double> slowdown;
  for (const DeviceProfile& dp : profile.devices) slowdown[dp.device] = 1.0;
  Plan plan;
  std::unique_ptr<AdaptiveStream> stream;
  std::optional<Pump> pump;
  // Every error ends the stream; what was submitted is not waited for.
  auto fail = [&](const Status& st, const std::string& where) -> Status {
    if (stream) stream->close();
    return st.with_context(where);
  };
  for (int it = 0; it < options.max_iterations; ++it) {
    const std::string where = "queue monitor, iteration " + std::to_string(it);
    // Step 2 on the profile corrected by what the monitor measured.
    ASSIGN_OR_RETURN(Profile scaled, scale_profile(profile, slowdown));
    auto cm = CostModel::build(scaled, lg);
    if (!cm.ok()) return fail(cm.status(), where);
    auto made = make_split_plan(*cm, lg, request);
    if (!made.ok()) return fail(made.status(), where);
    Plan next = std::move(*made);
    next.mode = PlanMode::kStreaming;
    next.queue_capacity = options.queue_capacity;
    Status priced = price_plan(*cm, lg, &next);  // as streaming, with its queues
    if (!priced.ok()) return fail(priced, where);
    if (it > 0 && next.stages.size() == plan.stages.size() &&
        std::equal(next.stages.begin(), next.stages.end(), plan.stages.begin(),
                   [](const Stage& a, const Stage& b) {
                     return a.layers == b.layers && a.placement == b.placement &&
                            a.actor == b.actor;
                   })) {
      rep.iterations.back().decision += "; re-planning gives the same plan: converged";
      rep.converged = true;
      break;
    }
    plan = std::move(next);

    // Step 3: deploy (the first plan starts the stream; a later one is swapped in at a frame
    // boundary while the running plan keeps streaming) and monitor.
    uint64_t first_id = 0;
    if (!stream) {
      AdaptOptions ao;
      ao.search = false;
      auto created = AdaptiveStream::create(lg, plan, executor_options, ao);
      if (!created.ok()) return created.status().with_context(where);
      stream = std::move(*created);
      pump.emplace(*stream, make_frame, on_frame);
    } else {
      uint64_t old_id = 0;
      stream->inspect([&](const Executor&, uint64_t id) { old_id = id; });
      Status switched = stream->switch_plan(plan, "queue monitor, iteration " + std::to_string(it));
      if (!switched.ok()) return fail(switched, where);
      // Keep streaming until the new plan runs (its first frame is submitted).
      for (;;) {
        stream->inspect([&](const Executor&, uint64_t id) { first_id = id; });
        if (first_id != old_id) break;
        if (!stream->adapting()) {
          const std::vector<AdaptEvent> events = stream->events();
          return fail(failed_precondition(
                          "the re-planned plan " + quote_name(plan.notation()) +
                          " did not start: " + (events.empty() ? "" : events.back().reason)),
                      where);
        }
        auto out = pump->step();
        if (!out.ok()) return fail(out.status(), where);
      }
    }
    int warmup = options.warmup;
    if (warmup == 0)
      stream->inspect([&](const Executor& ex, uint64_t) { warmup = ex.num_slots(); });
    // The window: the new plan's frames [warmup, warmup + window), with frames behind it.
    const uint64_t before_at = first_id + static_cast<uint64_t>(warmup) - 1;
    const uint64_t after_at = before_at + static_cast<uint64_t>(options.window);
    std::vector<QueueOccupancy> before, after;
    RebalanceIteration iter;
    for (;;) {
      auto out = pump->step();
      if (!out.ok()) return fail(out.status(), where);
      if (*out == before_at || *out == after_at) {
        stream->inspect([&](const Executor& ex, uint64_t) {
          (*out == before_at ? before : after) = ex.queue_occupancy();
          if (*out == after_at) {
            iter.window = read_queue_window(ex, before, after, warmup, warmup + options.window - 1,
                                            options.queue_capacity, options.full_share);
          }
        });
        if (*out == after_at) break;
      }
    }
    iter.plan = plan;
    iter.slowdown = slowdown;
    const QueueWindow& w = iter.window;

    // Which device of the bottleneck runs slower than predicted?
    std::string slow;
    double worst = 0;
    if (w.bottleneck >= 0) {
      for (const std::string& d : w.actors[static_cast<size_t>(w.bottleneck)].devices) {
        for (const DeviceLatency& l : w.devices) {
          if (l.device != d || l.predicted_ms <= 0) continue;
          const double drift = std::abs(l.slowdown() - 1.0);
          if (drift > options.drift && drift > worst) {
            worst = drift;
            slow = d;
          }
        }
      }
    }
    if (w.bottleneck < 0) {
      iter.decision = "no queue stays full: converged";
      rep.converged = true;
    } else if (slow.empty()) {
      iter.decision = "actor " + std::to_string(w.bottleneck) +
                      "'s queue stays full as the plan predicts (no device drifts more than " +
                      std::to_string(options.drift) + "): converged";
      rep.converged = true;
    } else {
      double f = 1;
      for (const DeviceLatency& l : w.devices)
        if (l.device == slow) f = l.slowdown();
      slowdown[slow] *= f;
      iter.decision = "actor " + std::to_string(w.bottleneck) + "'s queue stays full; " + slow +
                      " runs " + std::to_string(f) + "x its prediction: re-plan with it " +
                      std::to_string(slowdown[slow]) + "x slower";
    }
    rep.iterations.push_back(std::move(iter));
    if (rep.converged) break;
  }
  // The plan that streamed fastest.
  for (size_t i = 0; i < rep.iterations.size(); ++i) {
    const double p = rep.iterations[i].window.period_ms;
    if (p > 0 &&
        (rep.best < 0 || p < rep.iterations[static_cast<size_t>(rep.best)].window.period_ms)) {
      rep.best = static_cast<int>(i);
    }
  }
  if (rep.best >= 0) plan = rep.iterations[static_cast<size_t>(rep.best)].plan;
  // The end of the stream: every frame in flight comes out.
  if (stream) {
    Status drained = pump->drain();
    stream->close();
    if (!drained.ok()) return drained.with_context("queue monitor, end of stream");
  }
  return plan;
}

}  // namespace tessera
