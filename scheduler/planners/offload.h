// The offload planner: seed 002 (DynO) Algorithm 2, one split between a client device and a
// remote server (wave2-spec Sect. 2.4, 2.8).
//
// Candidates Sigma = {cuts k} x {bits}: the client runs layers [0, k), packs the tensors live
// across cut k at b bits (isq<b>+bitshuffle+lz4; bits 0: raw f32, no packing), sends them, and
// the server runs [k, L); k = L is device-only (no hop), k = 0 server-only (the input is sent).
// Per candidate, from the CostModel (a profile holding both devices) and the CutProfile
// (scheduler/cut_profile.h), profiled once (OffloadOption):
//   client_ms  the client's slice [0, k) (CostModel::slice_ms)
//   server_ms  the server's slice [k, L) without its eq. 1-2 transfers (execution + overhead)
//   pack_ms, unpack_ms, up_bytes (packed, side information included), down_bytes (the outputs,
//             sent back raw), fidelity (top-1 agreement on the profile's choose set), rel_l2
// and then, per decision (Algorithm 2 line 1, UpdateTimings: the scaling factor SF and the link
// estimate), the metrics M (OffloadMetrics):
//   device_ms = SF x client_ms
//   net_ms    = up(up_bytes) + down(down_bytes) - the round trip both fits hold
//               (CostModel::hop_shared_ms): the remote device's profiled transfer fits, or
//               with a link estimate L + up_bytes / B_up + down_bytes / B_down (seed 002)
//   hop_ms    = pack_ms + net_ms + unpack_ms + server_ms
//   latency   = device_ms + hop_ms
//   period    = the executor's two-stage stream, whose remote stage runs k frames overlapped
//               (executor.h; k = frames_in_flight, RemoteDevice's default 3): max(device_ms,
//               pack_ms, unpack_ms + server_ms, up_wire, down_wire, hop_ms / k), where the wire
//               times are the bytes / B of each direction (without the link's fixed latency);
//               k = 1: max(device_ms, hop_ms); with `pipelined_hop`, seed 002's three threads,
//               max(device_ms + pack_ms, net_ms, unpack_ms + server_ms)
//   throughput = 1000 / period (frames per second)
// (device-only: latency = period = device_ms.)
//
// Algorithm 2: the prioritised hard constraints C_1..C_n (metric op threshold) filter the set
// in order; when one empties it, the answer is best effort: among the candidates that met
// C_1..C_{i-1}, the one with the smallest violation of C_i (threshold - value for >=, value -
// threshold for <=, in the metric's unit), ties broken by the soft targets. Otherwise the ordered
// soft targets O_1..O_m (metric min|max) sort the feasible set lexicographically; remaining ties
// go to the smaller cut, then the smaller bitwidth. No targets: max throughput, then min latency.
//
// The ReLU-cut heuristic (option): only cuts whose live f32 tensors are all ReLU/clip outputs,
// plus device-only and server-only.
//
// The plan: a two-stage streaming Plan (local stage [0, k) on the client, remote stage [k, L) on
// the server with `packing` set), or a one-stage plan for device-only (sequential) or server-only
// (streaming: its frames overlap in the hop). Priced by price_plan with the CutProfile, its
// estimates equal the metrics above at SF 1 without a link estimate (tested).
//
// Thread rule: plain functions of their arguments; calls may run on several threads at once.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/remote/remote_device.h"
#include "core/status.h"
#include "graph/layer_graph.h"
#include "scheduler/cost_model.h"
#include "scheduler/cut_profile.h"
#include "scheduler/plan.h"

namespace tessera {

enum class OffloadMetric {
  kLatency,     // ms
  kPeriod,      // ms
  kThroughput,  // frames per second
  kDeviceMs,    // client execution, ms (seed 002 "device cost")
  kServerMs,    // server execution, ms ("server cost")
  kBytes,       // bytes sent per frame
  kFidelity,    // top-1 agreement, 0..1
  kRelL2,       // relative L2 error of the outputs
};
// "latency", "period", "throughput", "device_ms", "server_ms", "bytes", "fidelity", "rel_l2".
const char* offload_metric_name(OffloadMetric m);
Result<OffloadMetric> parse_offload_metric(std::string_view name);

struct OffloadConstraint {
  OffloadMetric metric = OffloadMetric::kLatency;
  bool at_most = true;  // <= (else >=)
  double threshold = 0;
};
// "latency<=100", "fidelity>=0.99".
Result<OffloadConstraint> parse_offload_constraint(std::string_view text);

struct OffloadTarget {
  OffloadMetric metric = OffloadMetric::kThroughput;
  bool maximise = true;
};
// "throughput:max", "device_ms:min".
Result<OffloadTarget> parse_offload_target(std::string_view text);

// A link estimate: latency (one way, on the upload) and bandwidth each way.
struct LinkEstimate {
  double latency_ms = 0;
  double up_mbit_s = 0;
  double down_mbit_s = 0;
};

// One candidate's profiled, network-independent figures.
struct OffloadOption {
  int cut = 0;
  int bits = 0;              // 0: raw f32
  bool device_only = false;  // cut = L: no hop
  double client_ms = 0;
  double server_ms = 0;
  double pack_ms = 0;
  double unpack_ms = 0;
  double up_bytes = 0;
  double down_bytes = 0;
  double up_ms = 0;  // the profile's transfer fits on these bytes
  double down_ms = 0;
  double up_wire_ms = 0;  // the same less the fits' fixed latency: the link busy with the bytes
  double down_wire_ms = 0;
  // The round trip up_ms and down_ms both hold, counted once (CostModel::hop_shared_ms).
  double shared_ms = 0;
  double fidelity = 1;
  double rel_l2 = 0;
};

struct OffloadMetrics {
  double latency_ms = 0;
  double period_ms = 0;
  double throughput = 0;
  double device_ms = 0;
  double server_ms = 0;
  double net_ms = 0;
  double bytes = 0;
  double fidelity = 1;
  double rel_l2 = 0;

  double get(OffloadMetric m) const;
};

struct OffloadRequest {
  std::string device;  // the client (a profiled device label)
  std::string remote;  // the server (a profiled device label, usually remote:HOST:PORT)
  std::vector<OffloadConstraint> constraints;  // prioritised
  std::vector<OffloadTarget> targets;          // ordered; empty: throughput max, latency min
  bool relu_cuts_only = false;
  bool raw = true;  // also offer unpacked hops (bits 0)
  bool pipelined_hop = false;
  int frames_in_flight = remote::RemoteDevice::kDefaultFramesInFlight;
};

struct OffloadChoice {
  int index = -1;          // into the candidates
  bool feasible = false;   // met every constraint
  int emptied_by = -1;     // best effort: the constraint that emptied the set
  double violation = 0;    // by how much the choice misses it
  int feasible_count = 0;  // candidates left after every constraint (0 when best effort)
};

// The candidates of `request` (device-only first, then by cut and bits). Errors name a device
// that is not profiled, a cut profile of another model, or a remote device that cannot run a
// tail (such cuts are left out; none left is an error).
Result<std::vector<OffloadOption>> offload_options(const CostModel& cm, const LayerGraph& lg,
                                                   const CutProfile& cuts,
                                                   const OffloadRequest& request);

// Algorithm 2 line 1: the metrics of every option under scaling factor `sf` and the link
// (nullopt: the profiled transfer fits). `metrics` is resized to options.size().
void offload_metrics(std::span<const OffloadOption> options, double sf,
                     const std::optional<LinkEstimate>& link, bool pipelined_hop,
                     std::vector<OffloadMetrics>* metrics,
                     int frames_in_flight = remote::RemoteDevice::kDefaultFramesInFlight);

// Algorithm 2 lines 2-8 over the metrics (see the header comment). `metrics` and `options`
// are parallel; options give the final tie break (cut, bits). Needs at least one candidate.
OffloadChoice choose_offload(std::span<const OffloadOption> options,
                             std::span<const OffloadMetrics> metrics,
                             std::span<const OffloadConstraint> constraints,
                             std::span<const OffloadTarget> targets);

// The plan of one option (unpriced): see the header comment.
Result<Plan> offload_plan(const CostModel& cm, const OffloadOption& option,
                          const OffloadRequest& request);

struct OffloadResult {
  Plan plan;  // priced (price_plan with the cut profile)
  OffloadOption option;
  OffloadMetrics metrics;
  OffloadChoice choice;
  int candidates = 0;
};

// Everything above: options, metrics (sf, link), choice, the priced plan.
Result<OffloadResult> plan_offload(const CostModel& cm, const LayerGraph& lg,
                                   const CutProfile& cuts, const OffloadRequest& request,
                                   double sf = 1, const std::optional<LinkEstimate>& link = {});

}  // namespace tessera
