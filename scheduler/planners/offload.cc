#include "scheduler/planners/offload.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "backends/remote/packing.h"
#include "scheduler/pricer.h"

namespace tessera {

namespace {

constexpr struct {
  OffloadMetric m;
  const char* name;
} kMetricNames[] = {
    {OffloadMetric::kLatency, "latency"},       {OffloadMetric::kPeriod, "period"},
    {OffloadMetric::kThroughput, "throughput"}, {OffloadMetric::kDeviceMs, "device_ms"},
    {OffloadMetric::kServerMs, "server_ms"},    {OffloadMetric::kBytes, "bytes"},
    {OffloadMetric::kFidelity, "fidelity"},     {OffloadMetric::kRelL2, "rel_l2"},
};

std::string metric_list() {
  std::string s;
  for (const auto& e : kMetricNames) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

Result<double> parse_number(std::string_view text, std::string_view what) {
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v)) {
    return invalid_argument(std::string(what) + ": " + quote_name(s) + " is not a finite number");
  }
  return v;
}

}  // namespace

const char* offload_metric_name(OffloadMetric m) {
  for (const auto& e : kMetricNames) {
    if (e.m == m) return e.name;
  }
  return "?";
}

Result<OffloadMetric> parse_offload_metric(std::string_view name) {
  for (const auto& e : kMetricNames) {
    if (name == e.name) return e.m;
  }
  return invalid_argument("unknown offload metric '" + std::string(name) + "': expected " +
                          metric_list());
}

Result<OffloadConstraint> parse_offload_constraint(std::string_view text) {
  for (const char* op : {"<=", ">="}) {
    const size_t at = text.find(op);
    if (at == std::string_view::npos) continue;
    OffloadConstraint c;
    ASSIGN_OR_RETURN(c.metric, parse_offload_metric(text.substr(0, at)));
    c.at_most = op[0] == '<';
    ASSIGN_OR_RETURN(c.threshold,
                     parse_number(text.substr(at + 2), "constraint '" + std::string(text) + "'"));
    return c;
  }
  return invalid_argument("constraint '" + std::string(text) +
                          "': expected METRIC<=VALUE or METRIC>=VALUE (metrics: " + metric_list() +
                          ")");
}

Result<OffloadTarget> parse_offload_target(std::string_view text) {
  const size_t at = text.rfind(':');
  if (at == std::string_view::npos) {
    return invalid_argument("target '" + std::string(text) +
                            "': expected METRIC:min or METRIC:max");
  }
  OffloadTarget t;
  ASSIGN_OR_RETURN(t.metric, parse_offload_metric(text.substr(0, at)));
  const std::string_view dir = text.substr(at + 1);
  if (dir != "min" && dir != "max") {
    return invalid_argument("target '" + std::string(text) + "': the direction must be min or max");
  }
  t.maximise = dir == "max";
  return t;
}

double OffloadMetrics::get(OffloadMetric m) const {
  switch (m) {
    case OffloadMetric::kLatency:
      return latency_ms;
    case OffloadMetric::kPeriod:
      return period_ms;
    case OffloadMetric::kThroughput:
      return throughput;
    case OffloadMetric::kDeviceMs:
      return device_ms;
    case OffloadMetric::kServerMs:
      return server_ms;
    case OffloadMetric::kBytes:
      return bytes;
    case OffloadMetric::kFidelity:
      return fidelity;
    case OffloadMetric::kRelL2:
      return rel_l2;
  }
  return 0;
}

Result<std::vector<OffloadOption>> offload_options(const CostModel& cm, const LayerGraph& lg,
                                                   const CutProfile& cuts,
                                                   const OffloadRequest& request) {
  const int L = lg.num_layers();
  if (cm.num_layers() != L) {
    return invalid_argument("offload: the cost model is for " + std::to_string(cm.num_layers()) +
                            " layers, the model has " + std::to_string(L));
  }
  RETURN_IF_ERROR(cuts.validate(L));
  if (request.device.empty() || request.remote.empty()) {
    return invalid_argument("offload: name the client device and the remote device");
  }
  auto client = cm.find(request.device);
  if (!client.ok()) return client.status().with_context("offload: client device");
  auto remote = cm.find(request.remote);
  if (!remote.ok()) return remote.status().with_context("offload: remote device");
  if (*client == *remote) {
    return invalid_argument("offload: the client and the remote device are both " +
                            quote_name(request.device));
  }

  std::vector<OffloadOption> out;
  // Device-only.
  if (cm.can_run_slice(*client, 0, L)) {
    OffloadOption o;
    o.cut = L;
    o.device_only = true;
    o.client_ms = cm.slice_ms(*client, 0, L);
    out.push_back(o);
  }
  for (size_t c = 0; c < cuts.cuts.size(); ++c) {
    const int k = cuts.cuts[c];
    if (request.relu_cuts_only && k != 0 && !cuts.relu[c]) continue;
    if (k > 0 && !cm.can_run_slice(*client, 0, k)) continue;
    if (!cm.can_run_slice(*remote, k, L)) continue;
    OffloadOption base;
    base.cut = k;
    base.client_ms = k > 0 ? cm.slice_ms(*client, 0, k) : 0;
    const uint64_t in_bytes = cm.slice_input_bytes(k, L);
    const int in_count = cm.slice_input_count(k, L);
    const uint64_t out_bytes = cm.slice_output_bytes(k, L);
    const int out_count = cm.slice_output_count(k, L);
    const double raw_up = cm.upload_ms(*remote, in_bytes, in_count);
    base.down_bytes = static_cast<double>(out_bytes);
    base.down_ms = cm.download_ms(*remote, out_bytes, out_count);
    base.down_wire_ms = base.down_ms - cm.download_ms(*remote, 0, out_count);
    const double up_latency = cm.upload_ms(*remote, 0, in_count);
    // The round trip both fits hold, counted once per hop (CostModel::hop_shared_ms).
    const auto shared = [&](double up) {
      return in_count > 0 && out_count > 0 ? std::min({cm.hop_shared_ms(*remote), up, base.down_ms})
                                           : 0.0;
    };
    base.server_ms = cm.slice_ms(*remote, k, L) - (raw_up + base.down_ms - shared(raw_up));
    if (request.raw) {
      OffloadOption o = base;
      o.up_bytes = static_cast<double>(in_bytes);
      o.up_ms = raw_up;
      o.up_wire_ms = raw_up - up_latency;
      o.shared_ms = shared(raw_up);
      out.push_back(o);
    }
    for (size_t w = 0; w < cuts.bits.size(); ++w) {
      const CutBits& e = cuts.entries[c * cuts.bits.size() + w];
      OffloadOption o = base;
      o.bits = e.bits;
      const uint64_t packed = static_cast<uint64_t>(std::llround(e.bytes_mean));
      o.up_bytes = static_cast<double>(packed);
      o.up_ms = cm.upload_ms(*remote, packed, in_count);
      o.up_wire_ms = o.up_ms - up_latency;
      o.shared_ms = shared(raw_up);
      o.pack_ms = e.pack_ms;
      o.unpack_ms = e.unpack_ms;
      o.fidelity = e.top1;
      o.rel_l2 = e.rel_l2;
      out.push_back(o);
    }
  }
  if (out.empty()) {
    return failed_precondition("offload: no candidate: the client cannot run the model and the " +
                               std::string("remote device no tail of a profiled cut"));
  }
  return out;
}

void offload_metrics(std::span<const OffloadOption> options, double sf,
                     const std::optional<LinkEstimate>& link, bool pipelined_hop,
                     std::vector<OffloadMetrics>* metrics, int frames_in_flight) {
  metrics->resize(options.size());
  // ms per byte from Mbit/s: 8 bits / (Mbit/s x 1000 bits per ms per Mbit/s).
  const double up_ms_per_byte = link && link->up_mbit_s > 0 ? 8.0 / (link->up_mbit_s * 1e3) : 0;
  const double down_ms_per_byte =
      link && link->down_mbit_s > 0 ? 8.0 / (link->down_mbit_s * 1e3) : 0;
  for (size_t i = 0; i < options.size(); ++i) {
    const OffloadOption& o = options[i];
    OffloadMetrics& m = (*metrics)[i];
    m.device_ms = sf * o.client_ms;
    m.fidelity = o.fidelity;
    m.rel_l2 = o.rel_l2;
    if (o.device_only) {
      m.server_ms = 0;
      m.net_ms = 0;
      m.bytes = 0;
      m.latency_ms = m.device_ms;
      m.period_ms = m.device_ms;
    } else {
      m.server_ms = o.server_ms;
      m.bytes = o.up_bytes;
      m.net_ms =
          link ? link->latency_ms + o.up_bytes * up_ms_per_byte + o.down_bytes * down_ms_per_byte
               : o.up_ms + o.down_ms - o.shared_ms;
      const double hop = o.pack_ms + m.net_ms + o.unpack_ms + o.server_ms;
      m.latency_ms = m.device_ms + hop;
      const double up_wire = link ? o.up_bytes * up_ms_per_byte : o.up_wire_ms;
      const double down_wire = link ? o.down_bytes * down_ms_per_byte : o.down_wire_ms;
      if (pipelined_hop) {
        m.period_ms = std::max({m.device_ms + o.pack_ms, m.net_ms, o.unpack_ms + o.server_ms});
      } else if (frames_in_flight <= 1) {
        m.period_ms = std::max(m.device_ms, hop);
      } else {
        m.period_ms = std::max({m.device_ms, o.pack_ms, o.unpack_ms + o.server_ms, up_wire,
                                down_wire, hop / frames_in_flight});
      }
    }
    m.throughput = m.period_ms > 0 ? 1000.0 / m.period_ms : kInfiniteCost;
  }
}

namespace {

bool meets(const OffloadMetrics& m, const OffloadConstraint& c) {
  const double v = m.get(c.metric);
  return c.at_most ? v <= c.threshold : v >= c.threshold;
}

double violation(const OffloadMetrics& m, const OffloadConstraint& c) {
  const double v = m.get(c.metric);
  return std::max(0.0, c.at_most ? v - c.threshold : c.threshold - v);
}

// Whether a ranks before b under the soft targets, then the smaller cut, then fewer bits.
struct Better {
  std::span<const OffloadOption> options;
  std::span<const OffloadMetrics> metrics;
  std::span<const OffloadTarget> targets;

  bool operator()(size_t a, size_t b) const {
    for (const OffloadTarget& t : targets) {
      const double x = metrics[a].get(t.metric), y = metrics[b].get(t.metric);
      if (x != y) return t.maximise ? x > y : x < y;
    }
    if (options[a].cut != options[b].cut) return options[a].cut < options[b].cut;
    return options[a].bits < options[b].bits;
  }
};

}  // namespace

OffloadChoice choose_offload(std::span<const OffloadOption> options,
                             std::span<const OffloadMetrics> metrics,
                             std::span<const OffloadConstraint> constraints,
                             std::span<const OffloadTarget> targets) {
  static const OffloadTarget kDefault[] = {{OffloadMetric::kThroughput, true},
                                           {OffloadMetric::kLatency, false}};
  if (targets.empty()) targets = kDefault;
  const Better better{options, metrics, targets};
  OffloadChoice choice;
  std::vector<size_t> set(options.size());
  for (size_t i = 0; i < set.size(); ++i) set[i] = i;
  std::vector<size_t> next;
  next.reserve(set.size());
  for (size_t ci = 0; ci < constraints.size(); ++ci) {
    const OffloadConstraint& c = constraints[ci];
    next.clear();
    for (size_t i : set) {
      if (meets(metrics[i], c)) next.push_back(i);
    }
    if (next.empty()) {  // best effort: the closest to C_i among those that met C_1..C_{i-1}
      size_t best = set[0];
      double best_v = violation(metrics[best], c);
      for (size_t i : set) {
        const double v = violation(metrics[i], c);
        if (v < best_v || (v == best_v && better(i, best))) {
          best = i;
          best_v = v;
        }
      }
      choice.index = static_cast<int>(best);
      choice.emptied_by = static_cast<int>(ci);
      choice.violation = best_v;
      return choice;
    }
    set.swap(next);
  }
  size_t best = set[0];
  for (size_t i : set) {
    if (better(i, best)) best = i;
  }
  choice.index = static_cast<int>(best);
  choice.feasible = true;
  choice.feasible_count = static_cast<int>(set.size());
  return choice;
}

Result<Plan> offload_plan(const CostModel& cm, const OffloadOption& option,
                          const OffloadRequest& request) {
  const int L = cm.num_layers();
  if (option.cut < 0 || option.cut > L) {
    return invalid_argument("offload: cut " + std::to_string(option.cut) + " is not in 0.." +
                            std::to_string(L));
  }
  ASSIGN_OR_RETURN(int client, cm.find(request.device));
  ASSIGN_OR_RETURN(int remote, cm.find(request.remote));
  auto placement = [&](int vd) {
    const VirtualDevice& v = cm.virtual_devices()[static_cast<size_t>(vd)];
    return Placement::on(v.device, v.mhz);
  };
  Plan p;
  p.num_layers = L;
  p.planner = "offload";
  p.objective = "offload";
  p.mode = PlanMode::kStreaming;
  auto range = [](int first, int last) {
    std::vector<int> r;
    for (int l = first; l < last; ++l) r.push_back(l);
    return r;
  };
  if (option.cut > 0) {
    Stage s;
    s.layers = range(0, option.cut);
    s.placement = placement(client);
    p.stages.push_back(std::move(s));
  }
  if (option.cut < L) {
    Stage s;
    s.layers = range(option.cut, L);
    s.placement = placement(remote);
    if (option.bits > 0) {
      PackPolicy policy;
      policy.bits = option.bits;
      RETURN_IF_ERROR(validate_pack_policy(policy));
      s.packing = pack_policy_name(policy);
    }
    p.stages.push_back(std::move(s));
  }
  // Device-only runs frame by frame; server-only stays a stream, so that its frames overlap in
  // the hop (executor.h).
  if (option.cut == L) p.mode = PlanMode::kSequential;
  return p;
}

Result<OffloadResult> plan_offload(const CostModel& cm, const LayerGraph& lg,
                                   const CutProfile& cuts, const OffloadRequest& request, double sf,
                                   const std::optional<LinkEstimate>& link) {
  if (!(sf > 0) || !std::isfinite(sf)) {
    return invalid_argument("offload: the scaling factor must be finite and > 0, got " +
                            std::to_string(sf));
  }
  if (link && (!(link->up_mbit_s > 0) || !(link->down_mbit_s > 0) || !(link->latency_ms >= 0) ||
               !std::isfinite(link->latency_ms) || !std::isfinite(link->up_mbit_s) ||
               !std::isfinite(link->down_mbit_s))) {
    return invalid_argument("offload: a link estimate needs a latency >= 0 and rates > 0");
  }
  ASSIGN_OR_RETURN(std::vector<OffloadOption> options, offload_options(cm, lg, cuts, request));
  std::vector<OffloadMetrics> metrics;
  offload_metrics(options, sf, link, request.pipelined_hop, &metrics, request.frames_in_flight);
  OffloadResult r;
  r.choice = choose_offload(options, metrics, request.constraints, request.targets);
  r.candidates = static_cast<int>(options.size());
  r.option = options[static_cast<size_t>(r.choice.index)];
  r.metrics = metrics[static_cast<size_t>(r.choice.index)];
  ASSIGN_OR_RETURN(r.plan, offload_plan(cm, r.option, request));
  RETURN_IF_ERROR(price_plan(cm, lg, &r.plan, &cuts));
  return r;
}

}  // namespace tessera
