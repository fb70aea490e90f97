#include "scheduler/pricer.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "backends/remote/packing.h"
#include "backends/remote/remote_device.h"
#include "ops/split_rule.h"

namespace tessera {

namespace {

// The maximal ranges [first, last) of an ascending layer list.
std::vector<std::pair<int, int>> ranges(const std::vector<int>& layers) {
  std::vector<std::pair<int, int>> r;
  for (int l : layers) {
    if (!r.empty() && r.back().second == l) {
      ++r.back().second;
    } else {
      r.emplace_back(l, l + 1);
    }
  }
  return r;
}

}  // namespace

std::vector<std::vector<int>> stage_dependencies(const LayerGraph& lg, const Plan& plan) {
  const size_t n = plan.stages.size();
  std::vector<int> stage_of_layer(static_cast<size_t>(lg.num_layers()), -1);
  for (size_t i = 0; i < n; ++i) {
    for (int l : plan.stages[i].layers)
      stage_of_layer[static_cast<size_t>(l)] = static_cast<int>(i);
  }
  std::vector<std::vector<int>> deps(n);
  for (size_t i = 0; i < n; ++i) {
    for (int l : plan.stages[i].layers) {
      for (ValueId v : lg.layer(l).inputs) {
        const int p = lg.producer_layer(v);
        if (p < 0) continue;
        const int s = stage_of_layer[static_cast<size_t>(p)];
        if (s >= 0 && s != static_cast<int>(i) &&
            std::find(deps[i].begin(), deps[i].end(), s) == deps[i].end()) {
          deps[i].push_back(s);
        }
      }
    }
  }
  return deps;
}

namespace {

// Frames a remote stage has in flight in a stream (RemoteDevice's default).
constexpr int kRemoteFramesInFlight = remote::RemoteDevice::kDefaultFramesInFlight;

// What one stage costs, and which virtual devices it keeps busy for how long.
struct StagePrice {
  StageEstimate estimate;
  double busy_ms = 0;                           // the stage, end to end
  std::vector<std::pair<int, double>> vd_busy;  // (virtual device, ms it is busy)
  // A stage on a remote device runs overlapped in a stream (see price_plan): its actor is busy
  // packing (actor_ms), its server with the execution and unpacking (server_ms), and the hop
  // bounds the period by each direction's wire time and by busy_ms / frames in flight (pipe_ms).
  bool overlapped = false;
  double actor_ms = 0, server_ms = 0, pipe_ms = 0;
};

// A packed hop into a stage starting at cut `first` (see price_plan): the packed upload, pack
// and unpack, less the f32 upload slice_ms priced.
Result<double> packed_hop_delta(const CostModel& cm, int vd, const Stage& st, int first, int last,
                                const CutProfile& cuts, const std::string& where) {
  auto policy = parse_pack_policy(st.packing);
  if (!policy.ok()) return policy.status().with_context(where + ": packing");
  const CutBits* e = cuts.find(first, policy->bits);
  if (e == nullptr) {
    return failed_precondition(where + ": the cut profile has no entry for cut " +
                               std::to_string(first) + " at " + std::to_string(policy->bits) +
                               " bits");
  }
  const int n = cm.slice_input_count(first, last);
  return cm.upload_ms(vd, static_cast<uint64_t>(std::llround(e->bytes_mean)), n) -
         cm.upload_ms(vd, cm.slice_input_bytes(first, last), n) + e->pack_ms + e->unpack_ms;
}

Result<StagePrice> price_single(const CostModel& cm, const Stage& st, const std::string& where,
                                const CutProfile* cuts) {
  StagePrice p;
  auto vd = cm.find(st.placement.devices[0].label());
  if (!vd.ok()) return vd.status().with_context(where);
  for (const auto& [first, last] : ranges(st.layers)) {
    if (!cm.can_run_slice(*vd, first, last)) {
      return failed_precondition(where + ": the device cannot run layers " + std::to_string(first) +
                                 ".." + std::to_string(last - 1) + " (op support or memory)");
    }
    const double exec = cm.slice_exec_ms(*vd, first, last);
    p.estimate.exec_ms += exec;
    p.estimate.transfer_ms += cm.slice_ms(*vd, first, last) - exec;
    if (cuts != nullptr && !st.packing.empty()) {
      ASSIGN_OR_RETURN(double delta, packed_hop_delta(cm, *vd, st, first, last, *cuts, where));
      p.estimate.transfer_ms += delta;
    }
    p.estimate.energy_mj += cm.slice_energy_mj(*vd, first, last);
  }
  p.busy_ms = p.estimate.exec_ms + p.estimate.transfer_ms;
  p.vd_busy.emplace_back(*vd, p.busy_ms);
  const PlatformDevice& pd = cm.devices()[static_cast<size_t>(
      cm.virtual_devices()[static_cast<size_t>(*vd)].device_index)];
  if (pd.kind == "remote") {
    // The hop's parts: the upload and download (whole, and on the wire: less the fits' fixed
    // latency), packing on the client, unpacking on the server.
    p.overlapped = true;
    double up = 0, down = 0, up_wire = 0, down_wire = 0;
    for (const auto& [first, last] : ranges(st.layers)) {
      const int n = cm.slice_input_count(first, last), m = cm.slice_output_count(first, last);
      uint64_t bytes = cm.slice_input_bytes(first, last);
      if (cuts != nullptr && !st.packing.empty()) {
        ASSIGN_OR_RETURN(PackPolicy policy, parse_pack_policy(st.packing));
        if (const CutBits* e = cuts->find(first, policy.bits)) {
          bytes = static_cast<uint64_t>(std::llround(e->bytes_mean));
          p.actor_ms += e->pack_ms;
        }
      }
      const double u = cm.upload_ms(*vd, bytes, n),
                   d = cm.download_ms(*vd, cm.slice_output_bytes(first, last), m);
      up += u;
      down += d;
      // One request and its reply: the round trip once (CostModel::hop_shared_ms).
      if (n > 0 && m > 0) up -= std::min({cm.hop_shared_ms(*vd), u, d});
      up_wire += u - cm.upload_ms(*vd, 0, n);
      down_wire += d - cm.download_ms(*vd, 0, m);
    }
    p.server_ms = std::max(0.0, p.busy_ms - up - down - p.actor_ms);
    p.pipe_ms = std::max({up_wire, down_wire, p.busy_ms / kRemoteFramesInFlight});
  }
  return p;
}

// A split stage (seed 004; wave2-spec Sect. 6.3): the pieces as price_split_pieces prices them;
// the stage = max over pieces (scatter + exec + gather) + the host merge, each member loaded
// with its own piece.
Result<StagePrice> price_split(const CostModel& cm, const LayerGraph& lg, const Stage& st,
                               const std::string& where) {
  if (st.layers.size() != 1) {
    return invalid_argument(where + ": a split stage holds one layer, it has " +
                            std::to_string(st.layers.size()));
  }
  const int layer = st.layers[0];
  auto method = parse_split_method(st.placement.split);
  if (!method.ok()) return method.status().with_context(where);
  std::vector<double> ratios;
  std::vector<int> vds;
  for (const DeviceShare& d : st.placement.devices) {
    auto vd = cm.find(d.label());
    if (!vd.ok()) return vd.status().with_context(where);
    if (!cm.can_run(*vd, layer)) {
      return failed_precondition(where + ": " + d.label() + " cannot run layer " +
                                 std::to_string(layer));
    }
    vds.push_back(*vd);
    ratios.push_back(d.ratio);
  }
  auto priced = price_split_pieces(cm, lg, layer, *method, vds, ratios);
  if (!priced.ok()) return priced.status().with_context(where);
  StagePrice p;
  double slowest = 0, slowest_exec = 0;
  for (size_t i = 0; i < vds.size(); ++i) {
    const SplitPiecePrice& piece = priced->pieces[i];
    p.vd_busy.emplace_back(vds[i], piece.busy_ms());
    p.estimate.energy_mj += cm.power_w(vds[i], layer) * piece.exec_ms;
    if (piece.busy_ms() > slowest) {
      slowest = piece.busy_ms();
      slowest_exec = piece.exec_ms;
    }
  }
  p.estimate.exec_ms = slowest_exec;
  p.estimate.transfer_ms = slowest - slowest_exec + priced->merge_ms;
  p.busy_ms = slowest + priced->merge_ms;
  return p;
}

}  // namespace

Status price_plan(const CostModel& cm, const LayerGraph& lg, Plan* plan, const CutProfile* cuts) {
  if (lg.num_layers() != cm.num_layers()) {
    return invalid_argument("the cost model is for " + std::to_string(cm.num_layers()) +
                            " layers, the model has " + std::to_string(lg.num_layers()));
  }
  RETURN_IF_ERROR(plan->validate(cm.num_layers(), {}, false));
  const size_t n = plan->stages.size();
  std::vector<StagePrice> prices(n);
  std::vector<double> busy(n);  // exec + transfers of each stage, ms
  plan->estimated_energy_mj = 0;
  for (size_t i = 0; i < n; ++i) {
    const Stage& st = plan->stages[i];
    const std::string where = plan->stage_name(i);
    auto price =
        st.placement.single() ? price_single(cm, st, where, cuts) : price_split(cm, lg, st, where);
    if (!price.ok()) return price.status();
    prices[i] = std::move(*price);
  }
  // Co-running: in a streaming plan over two or more devices, every stage runs while other
  // devices run theirs, sharing caches and memory bandwidth; each stage's time (execution and
  // transfers, not its energy) is its device's co-run factor times its time alone.
  if (plan->mode == PlanMode::kStreaming) {
    std::vector<int> used;
    for (const StagePrice& p : prices) {
      for (const auto& [vd, ms] : p.vd_busy) {
        const int d = cm.virtual_devices()[static_cast<size_t>(vd)].device_index;
        if (std::find(used.begin(), used.end(), d) == used.end()) used.push_back(d);
      }
    }
    if (used.size() >= 2) {
      for (StagePrice& p : prices) {
        double f = 1;
        for (auto& [vd, ms] : p.vd_busy) {
          ms *= cm.corun_scale(vd);
          f = std::max(f, cm.corun_scale(vd));
        }
        p.busy_ms *= f;
        p.estimate.exec_ms *= f;
        p.estimate.transfer_ms *= f;
        p.actor_ms *= f;
        p.server_ms *= f;
        p.pipe_ms *= f;
      }
    }
  }
  // In a stream, a remote stage keeps its server busy only with its execution and unpacking
  // (the link and the packing overlap it on other frames).
  if (plan->mode == PlanMode::kStreaming) {
    for (StagePrice& p : prices) {
      if (p.overlapped) p.vd_busy.front().second = p.server_ms;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (!plan->stages[i].placement.single()) {
      for (const auto& [vd, ms] : prices[i].vd_busy) prices[i].estimate.member_ms.push_back(ms);
    }
    plan->stages[i].estimate = prices[i].estimate;
    busy[i] = prices[i].busy_ms;
    plan->estimated_energy_mj += prices[i].estimate.energy_mj;
  }

  // Load per device (all its levels together), in first-use order; a split stage loads each
  // member with its piece.
  std::vector<int> device_order;
  std::map<int, double> device_busy;
  std::map<int, int> device_level;  // the level of the device's first use
  for (size_t i = 0; i < n; ++i) {
    for (const auto& [vd, ms] : prices[i].vd_busy) {
      const VirtualDevice& v = cm.virtual_devices()[static_cast<size_t>(vd)];
      if (!device_busy.count(v.device_index)) {
        device_order.push_back(v.device_index);
        device_level[v.device_index] = v.level;
      }
      device_busy[v.device_index] += ms;
    }
  }
  plan->device_load.clear();
  for (int d : device_order) {
    plan->device_load.push_back(
        DeviceLoad{cm.devices()[static_cast<size_t>(d)].device, device_busy[d]});
  }

  if (plan->mode == PlanMode::kSequential) {
    plan->estimated_latency_ms = 0;
    for (size_t i = 0; i < n; ++i) plan->estimated_latency_ms += busy[i];
    plan->estimated_period_ms = plan->estimated_latency_ms;
    return Status();
  }

  // Streaming. Actors: own (-1) or shared ids.
  const std::vector<int> actor = plan->stage_actors();
  // An overlapped remote stage holds its actor only while it packs (the completion thread
  // waits for the reply).
  std::vector<double> occupies(n);
  for (size_t i = 0; i < n; ++i) occupies[i] = prices[i].overlapped ? prices[i].actor_ms : busy[i];
  std::map<int, double> actor_busy;
  for (size_t i = 0; i < n; ++i) actor_busy[actor[i]] += occupies[i];
  double period = 0;
  for (const auto& [d, b] : device_busy) period = std::max(period, b);
  for (const auto& [a, b] : actor_busy) period = std::max(period, b);
  for (const StagePrice& p : prices) {
    if (p.overlapped) period = std::max(period, p.pipe_ms);
  }

  // Critical path of one frame: a stage starts after its producers and its actor's previous
  // stage.
  const std::vector<std::vector<int>> deps = stage_dependencies(lg, *plan);
  std::vector<double> finish(n, 0);
  std::map<int, double> actor_free, actor_start;
  double latency = 0;
  for (size_t i = 0; i < n; ++i) {
    double start = actor_free[actor[i]];
    for (int s : deps[i]) start = std::max(start, finish[static_cast<size_t>(s)]);
    if (!actor_start.count(actor[i])) actor_start[actor[i]] = start;
    finish[i] = start + busy[i];
    actor_free[actor[i]] = start + occupies[i];
    latency = std::max(latency, finish[i]);
  }
  plan->estimated_latency_ms = latency;
  // An actor takes the next frame only after its last stage of this one: where its stages wait
  // for other actors in between (CSDF phases spread along the model), its span bounds the
  // period too.
  for (const auto& [a, start] : actor_start) period = std::max(period, actor_free[a] - start);
  plan->estimated_period_ms = period;

  // Static power of each device over its idle share of the period, at the level of its first
  // stage (mJ = W x ms).
  for (int d : device_order) {
    const int level = device_level[d];
    const PlatformDevice& pd = cm.devices()[static_cast<size_t>(d)];
    const double idle = std::max(0.0, period - device_busy[d]);
    plan->estimated_energy_mj += pd.dvfs[static_cast<size_t>(level)].static_w * idle;
  }
  return Status();
}

double SplitPrice::stage_ms() const {
  double slowest = 0;
  for (const SplitPiecePrice& p : pieces) slowest = std::max(slowest, p.busy_ms());
  return slowest + merge_ms;
}

// Each piece's execution from CostModel::piece_exec_ms (the regression on its FLOPs and bytes,
// calibrated by the profiled layer and the split calibration); its scatter and gather from the
// exact byte counts through the member's transfer fits (eq. 1-2); the merge priced as a download
// of the bytes it touches on the first member's fit.
Result<SplitPrice> price_split_pieces(const CostModel& cm, const LayerGraph& lg, int layer,
                                      SplitMethod method, const std::vector<int>& vds,
                                      const std::vector<double>& ratios) {
  if (layer < 0 || layer >= lg.num_layers()) {
    return invalid_argument("layer " + std::to_string(layer) + " is not a layer of the model");
  }
  if (vds.empty() || vds.size() != ratios.size()) {
    return invalid_argument("a split needs one ratio per device, got " +
                            std::to_string(ratios.size()) + " for " + std::to_string(vds.size()));
  }
  const Graph& g = lg.graph();
  NodeContext nc(g, g.node(lg.layer(layer).node));
  ASSIGN_OR_RETURN(SplitRule rule, split_node(nc.ctx(), method, ratios));
  const SplitTraffic traffic = split_traffic(nc.ctx(), rule);
  SplitPrice out;
  for (size_t i = 0; i < vds.size(); ++i) {
    const OpCost c = split_piece_cost(nc.ctx(), rule, i);
    SplitPiecePrice piece;
    piece.exec_ms =
        cm.piece_exec_ms(vds[i], layer, method, c.flops,
                         static_cast<double>(c.input_bytes + c.weight_bytes + c.output_bytes));
    piece.moved_ms = cm.upload_ms(vds[i], traffic.piece_scatter_bytes[i]) +
                     cm.download_ms(vds[i], traffic.piece_gather_bytes[i]);
    out.pieces.push_back(piece);
  }
  out.merge_ms = cm.download_ms(vds[0], split_merge_bytes(rule));
  return out;
}

}  // namespace tessera
