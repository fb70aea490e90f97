// Re-partitioning while streaming (adaptive_stream.h).
//
// Phases of one frame out of next(): a drained frame of the previous plan is returned first;
// otherwise the current executor's next frame is taken, added to the measurement window, and a
// full window drives the monitor: a trigger, the next candidate of a running search, or the
// choice at its end. Compiles run on a std::async thread; the swap itself happens in submit(),
// the only place where the frame boundary is the caller's.
#include "scheduler/adapt/adaptive_stream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace tessera {

namespace {

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", ms);
  return buf;
}

}  // namespace

Result<std::unique_ptr<AdaptiveStream>> AdaptiveStream::create(
    const LayerGraph& lg, const Plan& plan, const ExecutorOptions& executor_options,
    const AdaptOptions& options) {
  const bool two_stages = plan.stages.size() == 2 && plan.stages[0].contiguous() &&
                          plan.stages[1].contiguous() && plan.stages[0].placement.single() &&
                          plan.stages[1].placement.single() && plan.stages[0].first() == 0;
  if (!options.search && plan.mode != PlanMode::kStreaming) {
    return invalid_argument("an adaptive stream runs a streaming plan; this plan is " +
                            std::string(plan_mode_name(plan.mode)) + " " +
                            quote_name(plan.notation()));
  }
  if (options.search && (plan.mode != PlanMode::kStreaming || !two_stages)) {
    return invalid_argument(
        "adaptation moves the cut of a streaming plan of two contiguous stages on single "
        "devices (seed 001 Algorithm 2); this plan is " +
        std::string(plan_mode_name(plan.mode)) + " " + quote_name(plan.notation()));
  }
  if (options.window < 2 || options.window > 100000) {
    return invalid_argument("adaptation window: " + std::to_string(options.window) +
                            " frames is outside 2..100000");
  }
  if (options.settle < 0 || !(options.drift > 0 && options.drift < 10) ||
      !(options.alpha > 0 && options.alpha <= 1)) {
    return invalid_argument("adaptation options: settle >= 0, 0 < drift < 10 and 0 < alpha <= 1");
  }
  std::unique_ptr<AdaptiveStream> s(new AdaptiveStream());
  s->lg_ = &lg;
  s->base_ = plan;
  s->executor_options_ = executor_options;
  s->options_ = options;
  if (options.search) {
    s->cut_ = plan.stages[1].first();
    ASSIGN_OR_RETURN(s->current_, s->compile(s->cut_));
  } else {
    // The plan as given, with its prices (for a monitor outside).
    RETURN_IF_ERROR(plan.validate(lg.num_layers(), {}, false));
    s->cut_ = plan.stages.size() >= 2 ? plan.stages.back().layers.front() : 0;
    ASSIGN_OR_RETURN(s->current_, s->compile_plan(plan, true));
  }
  s->reference_ms_ = plan.estimated_period_ms > 0 ? plan.estimated_period_ms : 0;
  return s;
}

AdaptiveStream::~AdaptiveStream() {
  close();
}

Result<std::unique_ptr<Executor>> AdaptiveStream::compile(int cut) const {
  Plan p = base_;
  const int n = lg_->num_layers();
  p.stages[0].layers.clear();
  p.stages[1].layers.clear();
  for (int l = 0; l < n; ++l) p.stages[l < cut ? 0 : 1].layers.push_back(l);
  return compile_plan(std::move(p));
}

Result<std::unique_ptr<Executor>> AdaptiveStream::compile_plan(Plan p, bool keep_estimates) const {
  if (!keep_estimates) {
    for (Stage& s : p.stages) s.estimate = StageEstimate{};
    p.estimated_period_ms = p.estimated_latency_ms = p.estimated_energy_mj = 0;
    p.device_load.clear();
  }
  return Executor::create(*lg_, p, executor_options_);
}

Status AdaptiveStream::switch_plan(const Plan& plan, const std::string& reason) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!current_) return failed_precondition("switch_plan(): the stream is closed");
  RETURN_IF_ERROR(plan.validate(lg_->num_layers(), {}, false));
  if (compiling_cut_) {
    compiling_.wait();
    if (compiling_plan_) {
      RETURN_IF_ERROR(swap_if_ready());  // an earlier switch goes in first, in order
    } else {
      compiling_ = {};  // a candidate of the search: dropped with the search
      compiling_cut_.reset();
    }
  }
  search_.reset();
  int cut = lg_->num_layers();
  if (plan.stages.size() >= 2) {
    cut = plan.stages.back().first();
  } else if (plan.stages[0].placement == base_.stages[1].placement) {
    cut = 0;
  }
  compiling_plan_ = plan;
  compiling_reason_ = reason;
  compiling_cut_ = cut;
  compiling_ = std::async(std::launch::async, [this, plan] { return compile_plan(plan, true); });
  return Status();
}

void AdaptiveStream::start_compile(int cut) {
  compiling_cut_ = cut;
  compiling_ = std::async(std::launch::async, [this, cut] { return compile(cut); });
}

Status AdaptiveStream::swap_if_ready() {
  if (!compiling_cut_ ||
      compiling_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    return Status();
  }
  const int cut = *compiling_cut_;
  compiling_cut_.reset();
  auto next_executor = compiling_.get();
  std::optional<Plan> switched = std::move(compiling_plan_);
  compiling_plan_.reset();
  if (switched && !next_executor.ok()) {
    events_.push_back({submitted_, "refused", cut, 0, reference_ms_,
                       compiling_reason_ + ": " + next_executor.status().to_string()});
    return Status();
  }
  if (!next_executor.ok()) {
    // The candidate does not compile (e.g. a device refuses a layer): it cannot win.
    events_.push_back({submitted_, "candidate", cut, 0, reference_ms_,
                       "refused: " + next_executor.status().to_string()});
    if (search_) {
      search_->report(std::numeric_limits<double>::infinity());
      if (search_->candidate()) {
        start_compile(*search_->candidate());
      } else {
        const int best = search_->best_cut();
        events_.push_back({submitted_, "chosen", best, search_->best_period_ms(), reference_ms_,
                           "the best cut the search measured"});
        search_.reset();
        reference_ms_ = 0;  // the next window on the chosen cut gives the references
        reference_busy_.clear();
        if (best != cut_) start_compile(best);
      }
    }
    return Status();
  }
  // The frame boundary: what the old plan has in flight finishes and comes out first.
  while (current_->pending() > 0) {
    ASSIGN_OR_RETURN(FrameResult r, current_->next());
    r.frame += base_id_;
    drained_.push_back(std::move(r));
  }
  current_->close();
  current_ = std::move(next_executor).value();
  cut_ = cut;
  if (switched) {
    events_.push_back({submitted_, "switched", cut, 0, reference_ms_,
                       compiling_reason_ + " (" + switched->notation() + ")"});
    if (switched->stages.size() == 2 && switched->stages[0].contiguous() &&
        switched->stages[1].contiguous()) {
      base_ = *switched;  // the search (when on) moves this plan's cut
    }
    reference_ms_ = 0;
    reference_busy_.clear();
  }
  base_id_ = submitted_;
  since_swap_ = 0;
  window_frames_.clear();
  return Status();
}

Result<uint64_t> AdaptiveStream::submit(std::vector<Tensor> inputs, const SubmitOptions& options) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!current_) return failed_precondition("submit(): the stream is closed");
  RETURN_IF_ERROR(swap_if_ready());
  ASSIGN_OR_RETURN(uint64_t local, current_->submit(std::move(inputs), options));
  ++submitted_;
  return base_id_ + local;
}

Result<FrameResult> AdaptiveStream::next() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!drained_.empty()) {
    FrameResult r = std::move(drained_.front());
    drained_.pop_front();
    return r;
  }
  if (!current_) return out_of_range("next(): end of stream (the stream is closed)");
  ASSIGN_OR_RETURN(FrameResult r, current_->next());
  const uint64_t local = r.frame;
  r.frame += base_id_;
  if (r.status.ok()) measure(local);
  return r;
}

void AdaptiveStream::measure(uint64_t local_frame) {
  const int settle = options_.settle > 0 ? options_.settle : current_->num_slots();
  if (++since_swap_ <= settle) return;
  if (compiling_cut_) {
    window_frames_.clear();  // the plan is about to change: nothing to decide on this one
    return;
  }
  window_frames_.push_back(local_frame);
  if (static_cast<int>(window_frames_.size()) < options_.window) return;
  // Departure of each window frame (the end of its last step) and each step's busy time.
  const uint64_t first = window_frames_.front(), last = window_frames_.back();
  std::vector<double> leave(static_cast<size_t>(last - first + 1), 0);
  std::vector<double> busy(current_->steps().size(), 0);
  for (const StepRun& sr : current_->step_runs(static_cast<int>(first))) {
    const uint64_t f = static_cast<uint64_t>(sr.run);
    if (f < first || f > last) continue;
    double& l = leave[static_cast<size_t>(f - first)];
    l = std::max(l, sr.start_ms + sr.ms);
    busy[static_cast<size_t>(sr.step)] += sr.ms;
  }
  for (double& b : busy) b /= static_cast<double>(last - first + 1);
  window_frames_.clear();
  const double period = (leave.back() - leave.front()) / static_cast<double>(last - first);
  on_window(period, busy);
}

void AdaptiveStream::on_window(double period_ms, const std::vector<double>& busy_ms) {
  windows_.emplace_back(cut_, period_ms);
  if (!options_.search) return;
  if (search_) {
    search_->report(period_ms);
    if (search_->candidate()) {
      events_.push_back({submitted_, "candidate", *search_->candidate(), period_ms, reference_ms_,
                         "cut " + std::to_string(cut_) + " measured " + ms_text(period_ms)});
      start_compile(*search_->candidate());
      return;
    }
    const int best = search_->best_cut();
    events_.push_back({submitted_, "chosen", best, search_->best_period_ms(), reference_ms_,
                       "cut " + std::to_string(cut_) + " measured " + ms_text(period_ms) +
                           "; the best measured cut is " + std::to_string(best) + " at " +
                           ms_text(search_->best_period_ms())});
    search_.reset();
    reference_ms_ = 0;  // the next window on the chosen cut gives the references
    reference_busy_.clear();
    if (best != cut_) start_compile(best);
    return;
  }
  if (reference_busy_.empty()) {
    if (reference_ms_ <= 0) reference_ms_ = period_ms;
    reference_busy_ = busy_ms;
    drifting_windows_ = 0;
    // A plan's estimate is checked at once; a measured reference holds by definition.
    if (std::abs(period_ms - reference_ms_) <= options_.drift * reference_ms_) return;
  }
  // Drift: of the period, or of a stage's busy time (a load that comes or goes on a device that
  // is not the bottleneck changes its stage's time before it changes the period).
  std::string why;
  char buf[200];
  const double drift = (period_ms - reference_ms_) / reference_ms_;
  if (std::abs(drift) > options_.drift) {
    std::snprintf(buf, sizeof buf, "period %.3f ms is %+.1f%% off the reference %.3f ms", period_ms,
                  100 * drift, reference_ms_);
    why = buf;
  }
  for (size_t i = 0; i < busy_ms.size() && i < reference_busy_.size() && why.empty(); ++i) {
    const double ref = reference_busy_[i];
    if (ref <= 0) continue;
    const double d = (busy_ms[i] - ref) / ref;
    if (std::abs(d) > options_.drift) {
      std::snprintf(buf, sizeof buf, "stage %zu busy %.3f ms/frame is %+.1f%% off its %.3f ms", i,
                    busy_ms[i], 100 * d, ref);
      why = buf;
    }
  }
  if (why.empty()) {
    drifting_windows_ = 0;
    return;
  }
  if (++drifting_windows_ < kDriftingWindows) return;
  drifting_windows_ = 0;
  events_.push_back({submitted_, "trigger", cut_, period_ms, reference_ms_, why});
  std::optional<int> jump;
  if (options_.jump && busy_ms.size() == 2) jump = balanced_cut(busy_ms);
  if (jump) {
    events_.back().reason += "; jump to cut " + std::to_string(*jump) +
                             ", which balances the stages' measured time per FLOP";
  }
  search_.emplace(cut_, lg_->num_layers(), period_ms, &history_, options_.alpha, jump);
  if (search_->candidate()) {
    start_compile(*search_->candidate());
  } else {
    search_.reset();  // a one-layer model has no other cut
  }
}

int AdaptiveStream::balanced_cut(const std::vector<double>& busy_ms) const {
  const int n = lg_->num_layers();
  // Work per layer: its FLOPs, with a floor so that layers of no FLOPs (Concat, pools) count.
  std::vector<double> prefix(static_cast<size_t>(n) + 1, 0);
  const double floor = std::max(1.0, lg_->total_flops() / (100.0 * n));
  for (int l = 0; l < n; ++l) {
    prefix[static_cast<size_t>(l) + 1] =
        prefix[static_cast<size_t>(l)] + std::max(floor, lg_->layer(l).cost.flops);
  }
  const double f0 = prefix[static_cast<size_t>(cut_)];
  const double f1 = prefix[static_cast<size_t>(n)] - f0;
  if (!(f0 > 0 && f1 > 0 && busy_ms[0] > 0 && busy_ms[1] > 0)) return cut_;
  const double r0 = busy_ms[0] / f0, r1 = busy_ms[1] / f1;
  int best = cut_;
  double best_period = std::max(r0 * f0, r1 * f1);
  for (int c = 1; c < n; ++c) {
    const double f = prefix[static_cast<size_t>(c)];
    const double p = std::max(r0 * f, r1 * (prefix[static_cast<size_t>(n)] - f));
    if (p < best_period) {
      best_period = p;
      best = c;
    }
  }
  return best;
}

void AdaptiveStream::close() {
  std::lock_guard<std::mutex> lk(mu_);
  if (compiling_cut_) {
    compiling_.wait();
    compiling_cut_.reset();
    compiling_ = {};
  }
  if (current_) current_->close();
}

void AdaptiveStream::inspect(
    const std::function<void(const Executor&, uint64_t first_id)>& f) const {
  std::lock_guard<std::mutex> lk(mu_);
  f(*current_, base_id_);
}

int AdaptiveStream::num_slots() const {
  std::lock_guard<std::mutex> lk(mu_);
  return current_->num_slots();
}

Plan AdaptiveStream::plan() const {
  std::lock_guard<std::mutex> lk(mu_);
  return current_->plan();
}

int AdaptiveStream::cut() const {
  std::lock_guard<std::mutex> lk(mu_);
  return cut_;
}

bool AdaptiveStream::adapting() const {
  std::lock_guard<std::mutex> lk(mu_);
  return search_.has_value() || compiling_cut_.has_value();
}

std::vector<AdaptEvent> AdaptiveStream::events() const {
  std::lock_guard<std::mutex> lk(mu_);
  return events_;
}

std::vector<std::pair<int, double>> AdaptiveStream::windows() const {
  std::lock_guard<std::mutex> lk(mu_);
  return windows_;
}

}  // namespace tessera
