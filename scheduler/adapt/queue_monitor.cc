#include "scheduler/adapt/queue_monitor.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "scheduler/cost_model.h"

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
  // Mean busy ms per step over the window's frames, and per member of a split step.
  std::vector<double> step_ms(steps.size(), 0);
  std::vector<int> step_n(steps.size(), 0);
  std::vector<std::vector<double>> member_ms(steps.size());
  std::vector<int> member_n(steps.size(), 0);
  for (const StepRun& r : ex.step_runs()) {
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

  // Per actor: devices and busy time; per device: single-step latency against the estimate.
  std::map<std::string, DeviceLatency> lat;
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
      d.measured_ms += step_ms[i];
    } else if (st.first_stage == st.last_stage && member_n[i] > 0 &&
               member_ms[i].size() == first.placement.devices.size() &&
               first.estimate.member_ms.size() == first.placement.devices.size()) {
      // A split stage: each member's piece, measured against its own prediction.
      for (size_t k = 0; k < member_ms[i].size(); ++k) {
        const std::string name = base_device(first.placement.devices[k].label());
        DeviceLatency& d = lat[name];
        d.device = name;
        d.predicted_ms += first.estimate.member_ms[k];
        d.measured_ms += member_ms[i][k];
      }
    }
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
  for (const StepRun& r : ex.step_runs()) {
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

// Streams warmup + window + `slots` frames through `ex` from this thread, keeping every frame
// slot in use (a frame is submitted as soon as one comes out), so the queues fill as they would
// behind a source that always has a frame; the last `slots` frames keep the queues full while
// the window's frames finish. `before` and `after` get the queue histograms when the last
// warm-up frame and the last window frame are out. Returns the first frame's error, if any.
Status stream_frames(Executor& ex, int warmup, int window,
                     const std::function<std::vector<Tensor>()>& make_frame,
                     const std::function<void(const FrameResult&)>& on_frame,
                     std::vector<QueueOccupancy>* before, std::vector<QueueOccupancy>* after) {
  const int slots = ex.num_slots();
  const int total = warmup + window + slots;
  int submitted = 0;
  Status first_error;
  for (int out = 0; out < total; ++out) {
    while (submitted < total && submitted - out < slots) {
      auto id = ex.submit(make_frame());
      if (!id.ok()) {
        ex.close();
        return id.status();
      }
      ++submitted;
    }
    auto r = ex.next();
    if (!r.ok()) {
      ex.close();
      return r.status();
    }
    if (!r->status.ok() && first_error.ok())
      first_error = r->status.with_context("frame " + std::to_string(r->frame));
    if (on_frame) on_frame(*r);
    if (out == warmup - 1) *before = ex.queue_occupancy();
    if (out == warmup + window - 1) *after = ex.queue_occupancy();
  }
  ex.close();
  return first_error;
}

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
  for (int it = 0; it < options.max_iterations; ++it) {
    const std::string where = "queue monitor, iteration " + std::to_string(it);
    // Step 2 on the profile corrected by what the monitor measured.
    ASSIGN_OR_RETURN(Profile scaled, scale_profile(profile, slowdown));
    ASSIGN_OR_RETURN(CostModel cm, CostModel::build(scaled, lg));
    auto made = make_split_plan(cm, lg, request);
    if (!made.ok()) return made.status().with_context(where);
    Plan next = std::move(*made);
    next.mode = PlanMode::kStreaming;
    next.queue_capacity = options.queue_capacity;
    if (it > 0 && next.stages == plan.stages) {
      rep.iterations.back().decision += "; re-planning gives the same plan: converged";
      rep.converged = true;
      break;
    }
    plan = std::move(next);

    // Step 3: deploy and monitor.
    auto ex = Executor::create(lg, plan, executor_options);
    if (!ex.ok()) return ex.status().with_context(where);
    const int warmup = options.warmup > 0 ? options.warmup : (*ex)->num_slots();
    std::vector<QueueOccupancy> before, after;
    Status ran = stream_frames(**ex, warmup, options.window, make_frame, on_frame, &before, &after);
    if (!ran.ok()) return ran.with_context(where);
    RebalanceIteration iter;
    iter.plan = plan;
    iter.slowdown = slowdown;
    iter.window = read_queue_window(**ex, before, after, warmup, warmup + options.window - 1,
                                    options.queue_capacity, options.full_share);
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
  return plan;
}

}  // namespace tessera
