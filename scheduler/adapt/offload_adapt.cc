#include "scheduler/adapt/offload_adapt.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "scheduler/pricer.h"

namespace tessera {

namespace {

double ema(double old, double sample, double alpha) {
  return (1 - alpha) * old + alpha * sample;
}

// |a - b| / |b| > drift (a change from 0 counts as drift).
bool drifted(double a, double b, double drift) {
  if (b == 0) return a != 0;
  return std::abs(a - b) / std::abs(b) > drift;
}

std::string text(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

void ScalingFactor::observe(double measured_ms, double profiled_ms) {
  if (!(measured_ms > 0) || !(profiled_ms > 0) || !std::isfinite(measured_ms) ||
      !std::isfinite(profiled_ms)) {
    return;
  }
  const double r = measured_ms / profiled_ms;
  value_ = samples_ == 0 ? r : ema(value_, r, alpha_);
  ++samples_;
}

LinkEstimator::LinkEstimator(std::string network_type, LinkEstimatorOptions options)
    : network_(std::move(network_type)), options_(options) {}

std::optional<LinkEstimate> LinkEstimator::historical(const std::string& type) const {
  auto it = history_.find(type);
  if (it == history_.end()) return std::nullopt;
  return it->second;
}

void LinkEstimator::update_history() {
  if (!rt_ || !(rt_->up_mbit_s > 0)) return;
  auto it = history_.find(network_);
  if (it == history_.end()) {
    history_[network_] = *rt_;
    return;
  }
  const double a = options_.historical_alpha;
  it->second.latency_ms = ema(it->second.latency_ms, rt_->latency_ms, a);
  it->second.up_mbit_s = ema(it->second.up_mbit_s, rt_->up_mbit_s, a);
  it->second.down_mbit_s = ema(it->second.down_mbit_s, rt_->down_mbit_s, a);
}

void LinkEstimator::observe_latency(double t_s, double latency_ms) {
  (void)t_s;
  if (!(latency_ms >= 0) || !std::isfinite(latency_ms)) return;
  if (!rt_) {
    // Rates from the history of this network type until a transfer is seen.
    LinkEstimate e = historical(network_).value_or(LinkEstimate{});
    e.latency_ms = latency_ms;
    rt_ = e;
  } else {
    rt_->latency_ms = have_latency_ ? ema(rt_->latency_ms, latency_ms, options_.alpha) : latency_ms;
  }
  have_latency_ = true;
}

void LinkEstimator::observe_transfer(double t_s, double up_bytes, double down_bytes, double ms) {
  if (!(ms > 0) || !std::isfinite(ms) || !(up_bytes >= 0) || !(down_bytes >= 0) ||
      up_bytes + down_bytes <= 0) {
    return;
  }
  if (!rt_) {
    LinkEstimate e = historical(network_).value_or(LinkEstimate{});
    rt_ = e;
  }
  const double bits = 8 * (up_bytes + down_bytes);
  if (!(rt_->up_mbit_s > 0) || !(rt_->down_mbit_s > 0)) {
    // No rate yet: both from this transfer's bandwidth share (at least a tenth of it).
    const double bw_ms = std::max(ms - rt_->latency_ms, 0.1 * ms);
    rt_->up_mbit_s = rt_->down_mbit_s = bits / (bw_ms * 1e3);
  } else {
    // ms the current rates predict for these bytes.
    const double predicted =
        8 * up_bytes / (rt_->up_mbit_s * 1e3) + 8 * down_bytes / (rt_->down_mbit_s * 1e3);
    if (predicted >= rt_->latency_ms && ms - rt_->latency_ms > 0) {
      // A transfer the bandwidth dominates: the rates that explain it, one factor for both
      // directions, averaged in.
      const double factor = predicted / (ms - rt_->latency_ms);
      rt_->up_mbit_s = ema(rt_->up_mbit_s, rt_->up_mbit_s * factor, options_.alpha);
      rt_->down_mbit_s = ema(rt_->down_mbit_s, rt_->down_mbit_s * factor, options_.alpha);
    } else {
      // The latency dominates: what the rates do not explain is latency.
      rt_->latency_ms = ema(rt_->latency_ms, std::max(0.0, ms - predicted), options_.alpha);
    }
  }
  last_transfer_s_ = t_s;
  update_history();
}

bool LinkEstimator::realtime(double t_s) const {
  return rt_ && rt_->up_mbit_s > 0 && t_s - last_transfer_s_ <= options_.realtime_window_s;
}

std::optional<LinkEstimate> LinkEstimator::estimate(double t_s) const {
  if (realtime(t_s)) return rt_;
  if (auto h = historical(network_)) return h;
  if (rt_ && rt_->up_mbit_s > 0) return rt_;
  return std::nullopt;
}

Result<OffloadAdapter> OffloadAdapter::create(const CostModel& cm, const LayerGraph& lg,
                                              const CutProfile& cuts, const OffloadRequest& request,
                                              const std::optional<LinkEstimate>& initial_link,
                                              const OffloadAdaptOptions& options,
                                              const std::string& network_type) {
  if (!(options.drift > 0) || !(options.sf_alpha > 0 && options.sf_alpha <= 1) ||
      !(options.link.alpha > 0 && options.link.alpha <= 1) ||
      !(options.link.historical_alpha > 0 && options.link.historical_alpha <= 1) ||
      !(options.link.realtime_window_s > 0)) {
    return invalid_argument(
        "offload adaptation: drift > 0, moving-average weights in (0, 1] and a real-time window "
        "> 0 s");
  }
  OffloadAdapter a;
  a.cm_ = &cm;
  a.lg_ = &lg;
  a.cuts_ = &cuts;
  a.request_ = request;
  a.options_ = options;
  a.sf_ = ScalingFactor(options.sf_alpha);
  a.link_ = LinkEstimator(network_type, options.link);
  if (initial_link) a.link_.set_historical(network_type, *initial_link);
  ASSIGN_OR_RETURN(a.options_list_, offload_options(cm, lg, cuts, request));
  ASSIGN_OR_RETURN(a.current_, a.decide(1, initial_link));
  a.decided_sf_ = 1;
  a.decided_link_ = initial_link;
  a.decisions_.push_back(
      {0, 1, initial_link, a.current_.option.cut, a.current_.option.bits, true, "initial plan"});
  return a;
}

Result<OffloadResult> OffloadAdapter::decide(double sf,
                                             const std::optional<LinkEstimate>& link) const {
  std::vector<OffloadMetrics> metrics;
  offload_metrics(options_list_, sf, link, request_.pipelined_hop, &metrics,
                  request_.frames_in_flight);
  OffloadResult r;
  r.choice = choose_offload(options_list_, metrics, request_.constraints, request_.targets);
  r.candidates = static_cast<int>(options_list_.size());
  r.option = options_list_[static_cast<size_t>(r.choice.index)];
  r.metrics = metrics[static_cast<size_t>(r.choice.index)];
  ASSIGN_OR_RETURN(r.plan, offload_plan(*cm_, r.option, request_));
  RETURN_IF_ERROR(price_plan(*cm_, *lg_, &r.plan, cuts_));
  return r;
}

void OffloadAdapter::observe_frame(double t_s, double client_ms, double hop_ms) {
  const OffloadOption& o = current_.option;
  if (o.cut > 0 && client_ms > 0) sf_.observe(client_ms, o.client_ms);
  if (!o.device_only && hop_ms > 0) {
    // What the link took: the hop less the profiled pack, unpack and server times.
    const double link_ms = hop_ms - o.pack_ms - o.unpack_ms - o.server_ms;
    if (link_ms > 0) link_.observe_transfer(t_s, o.up_bytes, o.down_bytes, link_ms);
  }
}

Result<std::optional<OffloadResult>> OffloadAdapter::maybe_replan(double t_s) {
  const double sf = sf_.value();
  const std::optional<LinkEstimate> link = link_.estimate(t_s);
  std::string why;
  if (drifted(sf, decided_sf_, options_.drift)) why = "SF " + text("%.3f", sf);
  if (link && !decided_link_) {
    why += std::string(why.empty() ? "" : ", ") + "a link estimate";
  } else if (link && decided_link_) {
    if (drifted(link->latency_ms, decided_link_->latency_ms, options_.drift) ||
        drifted(link->up_mbit_s, decided_link_->up_mbit_s, options_.drift) ||
        drifted(link->down_mbit_s, decided_link_->down_mbit_s, options_.drift)) {
      why += std::string(why.empty() ? "" : ", ") + "link " + text("%.1f ms", link->latency_ms) +
             text(", %.2f", link->up_mbit_s) + text("/%.2f Mbit/s", link->down_mbit_s) +
             (link_.realtime(t_s) ? " (real time)" : " (historical)");
    }
  }
  if (why.empty()) return std::optional<OffloadResult>();
  ASSIGN_OR_RETURN(OffloadResult r, decide(sf, link));
  decided_sf_ = sf;
  decided_link_ = link;
  const bool changed = r.option.cut != current_.option.cut || r.option.bits != current_.option.bits;
  decisions_.push_back({t_s, sf, link, r.option.cut, r.option.bits, changed, "drift: " + why});
  if (!changed) return std::optional<OffloadResult>();
  current_ = r;
  return std::optional<OffloadResult>(std::move(r));
}

}  // namespace tessera
