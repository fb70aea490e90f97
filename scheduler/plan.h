// Plan: how a model is spread over devices (ARCHITECTURE.md, "The one idea").
//
//   Plan      = ordered Stages + a Mode
//   Stage     = a set of layers (LayerGraph indices) + a Placement (+ a packing policy for a
//               remote hop, later)
//   Placement = one device at one DVFS level, or (later) a split of each layer across several
//               devices along a dimension with ratios
//   Mode      = sequential (one input at a time) | streaming (stages run concurrently)
//
// MOSAIC slicing (seed 000) produces a sequential Plan whose stages are contiguous layer ranges;
// pipelining, intra-layer splits and remote stages reuse the same types.
//
// A Plan is plain data: it prints as one line in the notation of seed 000 Tables III/IV, one
// entry per stage, DEVICE[first layer] with @MHz for a DVFS level, e.g.
//     cpu[0] opencl:0@600[5] cpu[12]
// A stage whose layers are not one range prints them all, DEVICE{0,2,5}; a stage on a shared
// actor (streaming, below) appends #aN: cpu:0[0]#a0 cpu:1[4] cpu:0[9]#a0.
// It saves as JSON (version 2; version 1 files, which have no actors, queue capacity or period,
// still load):
//   {"format": "tessera-plan", "version": 2, "model": {"name", "hash", "layers"},
//    "mode": "sequential"|"streaming", "planner", "objective", "queue_capacity",
//    "stages": [{"layers": [first, last) as {"first", "last"} or a list [..],
//                "placement": {"devices": [{"device", "mhz", "ratio"}], "split": ""},
//                "actor": -1, "packing": "",
//                "estimate": {"exec_ms", "transfer_ms", "energy_mj"}}],
//    "estimate": {"latency_ms", "energy_mj", "period_ms",
//                 "device_load": [{"device", "busy_ms"}], optional "error", "max_error"}}
//
// Streaming: every stage runs on an actor, one thread of the executor. A stage's actor is its
// own (-1) unless several stages name the same actor id: those run on one thread, in plan
// order, as the phases of one cyclo-static actor (seed 003). The order of `stages` is always a
// valid sequential order (every stage reads only what the same or earlier stages produce), which
// gives the sequential run and a deadlock-free stream.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera {

enum class PlanMode { kSequential, kStreaming };

const char* plan_mode_name(PlanMode mode);

// One device (at one DVFS level) taking part in a placement.
struct DeviceShare {
  std::string device;  // backend device name, e.g. "cpu:0-3", "opencl:0", "remote:h:5000"
  int mhz = 0;         // DVFS level; 0: the device's current or only level
  double ratio = 1.0;  // share of each layer's work when the placement splits layers

  // "cpu:0-3@1800", or the bare name when mhz is 0.
  std::string label() const;
  bool operator==(const DeviceShare&) const = default;
};

// Where a stage runs. One device share, or a split of the stage's one layer over several devices
// (seed 004): `split` names the method (fc-out, fc-in, conv-channel, conv-spatial, conv-filter,
// conv-grid; ops/split_rule.h) and each share's ratio is its part of the layer's work.
struct Placement {
  std::vector<DeviceShare> devices;
  std::string split;  // "" for a single device

  static Placement on(std::string device, int mhz = 0);
  bool single() const { return devices.size() == 1 && split.empty(); }
  // The single device's label, or "a+b/split" for a split.
  std::string label() const;
  // The device the executor opens for this placement: the single device's name, or for a split
  // the composite device split:METHOD:DEV=RATIO+... (backends/split/split_device.h). Fails on an
  // unknown split method (the message lists the methods).
  Result<std::string> device_name() const;
  bool operator==(const Placement&) const = default;
};

// What the cost model expects a stage to cost (0 when not estimated).
struct StageEstimate {
  double exec_ms = 0;
  double transfer_ms = 0;  // inputs in plus outputs out (eq. 1-2)
  double energy_mj = 0;
  // A split stage: each member's busy ms (its piece's scatter, execution and gather), in
  // placement order; empty for a stage on one device.
  std::vector<double> member_ms = {};
  bool operator==(const StageEstimate&) const = default;
};

struct Stage {
  std::vector<int> layers;  // LayerGraph layer indices, ascending
  Placement placement;
  int actor = -1;       // streaming: -1 for an actor of its own, else an actor id shared by stages
  std::string packing;  // remote hop packing policy; "" for none
  StageEstimate estimate;

  // Whether the layers form one range [first, last).
  bool contiguous() const;
  int first() const { return layers.empty() ? -1 : layers.front(); }
  bool operator==(const Stage&) const = default;
};

// Busy time of one device per frame (the pricer's load table): where two stages share a device,
// its load is their sum, so a repeated-device bottleneck is visible.
struct DeviceLoad {
  std::string device;  // placement label, "cpu:0" or "cpu:0@1800"
  double busy_ms = 0;
  bool operator==(const DeviceLoad&) const = default;
};

struct Plan {
  static constexpr int kVersion = 2;
  static constexpr int kDefaultQueueCapacity = 2;
  static constexpr int kMaxActorId = 1 << 20;

  std::string model_name;
  std::string model_hash;
  int num_layers = 0;
  PlanMode mode = PlanMode::kSequential;
  std::string planner;    // which planner made it ("slice", "preferred", "hca", "manual"...)
  std::string objective;  // "latency" | "energy" | ""
  std::vector<Stage> stages;
  // Streaming: frames that may wait between actors (the executor keeps capacity + actors
  // frames in flight, each with its own boundary buffers).
  int queue_capacity = kDefaultQueueCapacity;
  double estimated_latency_ms = 0;  // one frame, end to end
  double estimated_energy_mj = 0;   // per frame
  double estimated_period_ms = 0;   // streaming: time between frames at steady state
  std::vector<DeviceLoad> device_load;
  // Fidelity (scheduler/error_budget.h): the expected relative L2 error of the outputs against
  // f32 (an estimate composed from the profile's per-layer errors), and the bound the plan was
  // made under (`tessera plan --max-error`); unset when not known / not bounded.
  std::optional<double> estimated_error;
  std::optional<double> max_error;

  // Seed 000 notation: "cpu[0] opencl:0@600[5] cpu[12]".
  std::string notation() const;
  // "stage 2 (opencl:0[5])": how every message about a stage names it.
  std::string stage_name(size_t i) const;
  // Dense actor index of every stage, as the executor numbers its threads: one actor in a
  // sequential plan; in a streaming plan each stage with actor -1 gets its own, stages naming
  // one id share it (numbered by first use).
  std::vector<int> stage_actors() const;

  // Checks the plan against a model of `num_layers` layers and the devices that may be used
  // (empty: any device name). Every layer in exactly one stage, every stage non-empty with
  // ascending layers, each placement naming an available device with ratios that sum to 1, and
  // (when `require_contiguous`) every stage a contiguous range, stages in layer order; actors
  // -1 or >= 0, the stages of one actor on one placement; a queue capacity of 1..1024. Messages
  // name the stage: "stage 2 (opencl:0[5]): layer 7 is also in stage 1".
  Status validate(int num_layers, const std::vector<std::string>& available_devices,
                  bool require_contiguous) const;

  std::string to_json_text() const;
  Status save(const std::string& path) const;
  static Result<Plan> from_json_text(const std::string& text, const std::string& origin);
  static Result<Plan> load(const std::string& path);

  bool operator==(const Plan&) const = default;
};

// A sequential plan of contiguous stages from (first layer, device label) pairs; each stage
// runs to the next one's first layer. Labels are "DEVICE" or "DEVICE@MHz".
Result<Plan> plan_from_slices(int num_layers,
                              const std::vector<std::pair<int, std::string>>& starts);

// Parses the one-line notation back ("cpu[0] opencl:0@600[5]") for a model of `num_layers`.
Result<Plan> parse_plan_notation(const std::string& text, int num_layers);

}  // namespace tessera
