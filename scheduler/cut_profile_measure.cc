// measure_cut_profile (scheduler/cut_profile.h): runs the model on a device and measures, per cut
// and bit width, what packing the live tensors costs in bytes, time and fidelity. Apart from the
// profile's data and its reader (cut_profile.cc), which the fuzz build compiles without backends.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>

#include "backends/remote/packing.h"
#include "core/stats.h"
#include "scheduler/cut_profile.h"
#include "scheduler/fidelity.h"

namespace tessera {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

Status run_program(Program& p, const std::map<ValueId, Tensor>& values, const Graph& g,
                   std::vector<Tensor>* out) {
  std::vector<Tensor> in;
  for (ValueId v : p.input_values()) {
    auto it = values.find(v);
    if (it == values.end()) {
      return internal_error("tensor " + quote_name(g.value(v).name) + " was not computed");
    }
    in.push_back(it->second);
  }
  out->assign(p.output_values().size(), Tensor());
  return p.run(in, *out);
}

// Per (cut, bits) while frames are measured.
struct Acc {
  std::vector<double> bytes, pack_ms, unpack_ms;
  FidelityMeter choose, report;
};

}  // namespace

Result<CutProfile> measure_cut_profile(const LayerGraph& lg, Device& device,
                                       std::span<const std::vector<Tensor>> inputs,
                                       const CutProfileOptions& options) {
  const Graph& g = lg.graph();
  const int L = lg.num_layers();
  if (options.choose_inputs < 1 || static_cast<size_t>(options.choose_inputs) >= inputs.size()) {
    return invalid_argument("cut profile: " + std::to_string(inputs.size()) +
                            " frames, choose set " + std::to_string(options.choose_inputs) +
                            ": both the choose and the report set need at least one frame");
  }
  CutProfile prof;
  prof.num_layers = L;
  prof.device = device.name();
  prof.choose_inputs = options.choose_inputs;
  prof.report_inputs = static_cast<int>(inputs.size()) - options.choose_inputs;
  prof.date = utc_timestamp();
  prof.cuts = options.cuts;
  if (prof.cuts.empty()) {
    for (int k = 0; k < L; ++k) prof.cuts.push_back(k);
  }
  std::sort(prof.cuts.begin(), prof.cuts.end());
  prof.cuts.erase(std::unique(prof.cuts.begin(), prof.cuts.end()), prof.cuts.end());
  prof.bits = options.bits;
  std::sort(prof.bits.begin(), prof.bits.end());
  prof.bits.erase(std::unique(prof.bits.begin(), prof.bits.end()), prof.bits.end());
  for (int k : prof.cuts) {
    if (k < 0 || k >= L) {
      return invalid_argument("cut profile: cut " + std::to_string(k) + " is not in 0.." +
                              std::to_string(L - 1));
    }
    prof.relu.push_back(cut_is_relu(lg, k) ? 1 : 0);
  }
  for (int b : prof.bits) {
    if (!pack_bits_supported(b)) {
      return invalid_argument("cut profile: " + std::to_string(b) +
                              " bits is not a bitwidth of the codec (2..8, 16)");
    }
  }

  // Programs: the whole model (the reference), the segments between consecutive cuts, and the
  // tail [k, L) of every cut.
  auto nodes_of = [&](int first, int last) {
    std::vector<NodeId> n;
    for (int l = first; l < last; ++l) n.push_back(lg.layer(l).node);
    return n;
  };
  ASSIGN_OR_RETURN(auto whole, device.compile(g, nodes_of(0, L)));
  std::vector<std::unique_ptr<Program>> segment(prof.cuts.size()), tail(prof.cuts.size());
  for (size_t c = 0; c < prof.cuts.size(); ++c) {
    const int k = prof.cuts[c];
    const int prev = c == 0 ? 0 : prof.cuts[c - 1];
    if (k > prev) {
      ASSIGN_OR_RETURN(segment[c], device.compile(g, nodes_of(prev, k)));
    }
    ASSIGN_OR_RETURN(tail[c], device.compile(g, nodes_of(k, L)));
  }

  const size_t B = prof.bits.size();
  std::vector<Acc> acc(prof.cuts.size() * B);
  PackScratch scratch;
  for (size_t f = 0; f < inputs.size(); ++f) {
    const bool choose = static_cast<int>(f) < options.choose_inputs;
    const std::vector<Tensor>& frame = inputs[f];
    if (frame.size() != g.inputs().size()) {
      return invalid_argument("cut profile: frame " + std::to_string(f) + " has " +
                              std::to_string(frame.size()) + " tensors, the model " +
                              std::to_string(g.inputs().size()) + " inputs");
    }
    std::map<ValueId, Tensor> values;
    for (size_t i = 0; i < frame.size(); ++i) values[g.inputs()[i]] = frame[i];
    std::vector<Tensor> ref_out;
    RETURN_IF_ERROR(run_program(*whole, values, g, &ref_out));
    std::map<ValueId, Tensor> reference;
    for (size_t i = 0; i < ref_out.size(); ++i) reference[whole->output_values()[i]] = ref_out[i];

    for (size_t c = 0; c < prof.cuts.size(); ++c) {
      const int k = prof.cuts[c];
      if (segment[c]) {
        std::vector<Tensor> out;
        RETURN_IF_ERROR(run_program(*segment[c], values, g, &out));
        for (size_t i = 0; i < out.size(); ++i) values[segment[c]->output_values()[i]] = out[i];
      }
      for (size_t w = 0; w < B; ++w) {
        PackPolicy policy;
        policy.bits = prof.bits[w];
        Acc& a = acc[c * B + w];
        std::map<ValueId, Tensor> sent = values;
        double bytes = 0, pack = 0, unpack = 0;
        for (ValueId v : lg.cut(k).live) {
          auto it = values.find(v);
          if (it == values.end()) {
            return internal_error("cut " + std::to_string(k) + ": tensor " +
                                  quote_name(g.value(v).name) + " was not computed");
          }
          const Tensor& t = it->second;
          if (t.dtype() != DType::kF32) {  // shape tensors go raw
            bytes += static_cast<double>(t.numel() * dtype_size(t.dtype()));
            continue;
          }
          std::vector<uint8_t> packed;
          const auto t0 = Clock::now();
          RETURN_IF_ERROR(
              pack_f32(t.span<float>(), t.shape(), policy, g.value(v).name, &packed, &scratch));
          const auto t1 = Clock::now();
          ASSIGN_OR_RETURN(Tensor u, Tensor::create(DType::kF32, t.shape()));
          RETURN_IF_ERROR(unpack_f32(packed, UnpackCaps{}, u.span<float>(), &scratch));
          const auto t2 = Clock::now();
          pack += ms_between(t0, t1);
          unpack += ms_between(t1, t2);
          bytes += static_cast<double>(packed.size());
          sent[v] = std::move(u);
        }
        a.bytes.push_back(bytes);
        a.pack_ms.push_back(pack);
        a.unpack_ms.push_back(unpack);
        std::vector<Tensor> out;
        RETURN_IF_ERROR(run_program(*tail[c], sent, g, &out));
        std::vector<Tensor> got, want;
        for (size_t i = 0; i < out.size(); ++i) {
          const ValueId v = tail[c]->output_values()[i];
          auto r = reference.find(v);
          if (r == reference.end()) continue;  // an inner value the tail hands on: not a result
          got.push_back(out[i]);
          want.push_back(r->second);
        }
        if (!got.empty()) RETURN_IF_ERROR((choose ? a.choose : a.report).add(got, want));
      }
    }
  }

  for (size_t c = 0; c < prof.cuts.size(); ++c) {
    for (size_t w = 0; w < B; ++w) {
      const Acc& a = acc[c * B + w];
      CutBits e;
      e.cut = prof.cuts[c];
      e.bits = prof.bits[w];
      double sum = 0;
      for (double b : a.bytes) sum += b;
      e.bytes_mean = sum / static_cast<double>(a.bytes.size());
      e.bytes_p95 = nearest_rank_percentile(a.bytes, 95);
      e.pack_ms = median(a.pack_ms);
      e.unpack_ms = median(a.unpack_ms);
      const Fidelity fc = a.choose.result(), fr = a.report.result();
      e.top1 = fc.rows > 0 ? fc.top1_agreement : 1;
      e.rel_l2 = fc.relative_l2;
      e.report_top1 = fr.rows > 0 ? fr.top1_agreement : 1;
      e.report_rel_l2 = fr.relative_l2;
      prof.entries.push_back(e);
    }
  }
  return prof;
}

}  // namespace tessera
