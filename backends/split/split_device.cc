#include "backends/split/split_device.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <exception>
#include <optional>
#include <thread>

#include "graph/split.h"

namespace tessera {

namespace {

class HostBuffer : public Buffer {
 public:
  explicit HostBuffer(Tensor t) : t_(std::move(t)) {}
  size_t byte_size() const override { return t_.byte_size(); }
  const Tensor& tensor() const { return t_; }

 private:
  Tensor t_;
};

// Runs f(0) on this thread and f(1..n-1) on threads of their own, then joins them all.
template <typename F>
Status run_concurrently(size_t n, F&& f) {
  std::vector<std::thread> threads;
  try {
    for (size_t i = 1; i < n; ++i) threads.emplace_back([&f, i] { f(i); });
  } catch (...) {
    for (auto& t : threads) t.join();
    return status_from_current_exception("split program: starting a piece thread");
  }
  f(0);
  for (auto& t : threads) t.join();
  return Status();
}

// A split layer compiled: one program per piece, on its member device.
class SplitProgram : public Program {
 public:
  SplitProgram(std::unique_ptr<SplitLayer> layer, std::vector<std::unique_ptr<Program>> pieces,
               std::vector<ValueId> inputs, std::vector<ValueId> outputs,
               std::vector<std::string> device_names)
      : layer_(std::move(layer)),
        pieces_(std::move(pieces)),
        inputs_(std::move(inputs)),
        outputs_(std::move(outputs)),
        device_names_(std::move(device_names)) {
    // For every piece program input: which input slot (and so which region) it is.
    for (size_t p = 0; p < pieces_.size(); ++p) {
      const Graph& pg = layer_->pieces[p].graph;
      std::vector<Feed> feeds;
      for (ValueId v : pieces_[p]->input_values()) {
        Feed f;
        for (size_t j = 0; j < pg.inputs().size(); ++j) {
          if (pg.inputs()[j] == v) f.slot = static_cast<int>(j);
        }
        for (size_t k = 0; k < inputs_.size(); ++k) {
          if (f.slot >= 0 && inputs_[k] == layer_->inputs[static_cast<size_t>(f.slot)]) {
            f.input = static_cast<int>(k);
          }
        }
        feeds.push_back(f);
      }
      feeds_.push_back(std::move(feeds));
    }
  }

  const std::vector<ValueId>& input_values() const override { return inputs_; }
  const std::vector<ValueId>& output_values() const override { return outputs_; }

  std::string describe() const override {
    std::string s = std::string("split ") + split_method_name(layer_->rule.method) + " of " +
                    std::to_string(pieces_.size()) + " pieces\n";
    for (size_t p = 0; p < pieces_.size(); ++p) {
      s += "piece " + std::to_string(p) + " on " + device_names_[p] + ": " +
           layer_->rule.pieces[p].output.shape().to_string() + "\n";
      const std::string d = pieces_[p]->describe();
      if (!d.empty()) s += d + (d.back() == '\n' ? "" : "\n");
    }
    return s;
  }

  uint64_t peak_memory_bytes() const override {
    uint64_t sum = 0;
    for (const auto& p : pieces_) sum += p->peak_memory_bytes();
    return sum;
  }

 protected:
  Status execute(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                 const RunOptions& options) override {
    if (inputs.size() != inputs_.size() || outputs.size() != outputs_.size()) {
      return invalid_argument("split program: expected " + std::to_string(inputs_.size()) +
                              " inputs and " + std::to_string(outputs_.size()) + " outputs");
    }
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    const size_t n = pieces_.size();
    std::vector<std::vector<Tensor>> piece_in(n);
    // The layer's output, written in place where it can be: a concat piece whose region is a
    // contiguous run of the output (any region at batch 1 along C, H or the features) runs
    // straight into it; the first partial-sum piece runs into the whole output.
    const SplitRule& rule = layer_->rule;
    Tensor& y = outputs[0];
    if (!y.defined() || y.shape() != rule.output.shape || y.dtype() != rule.output.dtype) {
      ASSIGN_OR_RETURN(y, Tensor::create(rule.output.dtype, rule.output.shape));
    }
    std::vector<Tensor> piece_out(n);
    std::vector<const void*> in_place(n, nullptr);
    for (size_t p = 0; p < n; ++p) {
      std::optional<Tensor> view;
      if (rule.merge == SplitMerge::kConcat) view = region_view(y, rule.pieces[p].output);
      if (rule.merge == SplitMerge::kSum && p == 0) view = y;
      if (view) {
        piece_out[p] = *view;
        in_place[p] = view->raw();
      }
    }
    // Run: the pieces concurrently, the first on this thread, each scattering its own regions
    // of the inputs first; a concat piece that could not write in place pastes its region from
    // its own thread (regions are disjoint).
    RunOptions piece_options;
    piece_options.deadline = options.deadline;
    piece_options.cancel = options.cancel;
    std::vector<Status> status(n);
    std::vector<double> busy_ms(n, 0.0);
    // Piece p: scatter its regions, run it, paste its output where it did not write in place.
    auto piece_work = [&](size_t p) -> Status {
      for (const Feed& f : feeds_[p]) {
        if (f.slot < 0 || f.input < 0) return internal_error("split program: unmapped input");
        const int slot = layer_->input_slots[static_cast<size_t>(f.slot)];
        auto region = slice_region(inputs[static_cast<size_t>(f.input)],
                                   layer_->rule.pieces[p].inputs[static_cast<size_t>(slot)]);
        if (!region.ok()) return region.status().with_context("scattering its inputs");
        piece_in[p].push_back(std::move(*region));
      }
      RETURN_IF_ERROR(
          pieces_[p]->run(piece_in[p], std::span<Tensor>(&piece_out[p], 1), piece_options));
      if (rule.merge == SplitMerge::kConcat && piece_out[p].raw() != in_place[p]) {
        if (piece_out[p].shape() != rule.pieces[p].output.shape()) {
          return internal_error("produced " + piece_out[p].describe() + ", expected " +
                                rule.pieces[p].output.shape().to_string());
        }
        paste_region(piece_out[p], rule.pieces[p].output, &y);
      }
      return Status();
    };
    auto run_piece = [&](size_t p) {
      const auto piece_start = Clock::now();
      status[p] = piece_work(p);
      busy_ms[p] = std::chrono::duration<double, std::milli>(Clock::now() - piece_start).count();
    };
    RETURN_IF_ERROR(run_concurrently(n, run_piece));
    for (size_t p = 0; p < n; ++p) {
      if (!status[p].ok()) {
        return status[p].with_context("split piece " + std::to_string(p) + " on " +
                                      device_names_[p]);
      }
    }
    // Partial sums: y = sum of the pieces, then the activation, in n chunks on n threads.
    if (rule.merge == SplitMerge::kSum) {
      for (size_t p = 0; p < n; ++p) {
        if (piece_out[p].shape() != rule.output.shape || piece_out[p].dtype() != DType::kF32) {
          return internal_error("split piece " + std::to_string(p) + " produced " +
                                piece_out[p].describe() + ", expected " +
                                rule.output.shape.to_string());
        }
      }
      const int64_t total = y.numel();
      float* out = y.data<float>();
      auto reduce = [&](size_t c) {
        const int64_t b = total * static_cast<int64_t>(c) / static_cast<int64_t>(n);
        const int64_t e = total * static_cast<int64_t>(c + 1) / static_cast<int64_t>(n);
        const float* first = piece_out[0].data<float>();
        if (first != out) std::copy(first + b, first + e, out + b);
        for (size_t p = 1; p < n; ++p) {
          const float* x = piece_out[p].data<float>();
          for (int64_t j = b; j < e; ++j) out[j] += x[j];
        }
        apply_activation(rule.activation, out + b, e - b);
      };
      RETURN_IF_ERROR(run_concurrently(n, reduce));
    }
    if (options.layer_ms != nullptr) {
      options.layer_ms->assign(
          1, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    if (options.member_ms != nullptr) *options.member_ms = std::move(busy_ms);
    return Status();
  }

 private:
  struct Feed {
    int slot = -1;   // index into layer_->input_slots / the piece graph's inputs
    int input = -1;  // index into run()'s inputs
  };
  std::unique_ptr<SplitLayer> layer_;  // piece graphs outlive the piece programs
  std::vector<std::unique_ptr<Program>> pieces_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<std::string> device_names_;
  std::vector<std::vector<Feed>> feeds_;
};

class SplitDevice : public Device {
 public:
  SplitDevice(SplitSpec spec, std::vector<std::unique_ptr<Device>> members)
      : spec_(std::move(spec)), members_(std::move(members)), name_(split_device_name(spec_)) {}

  const std::string& name() const override { return name_; }
  std::string description() const override {
    std::string s = std::string("split (") + split_method_name(spec_.method) + ") over";
    for (size_t i = 0; i < members_.size(); ++i) {
      s += (i ? ", " : " ") + members_[i]->name() + " x" + format_ratio(spec_.ratios[i]);
    }
    return s;
  }

  DeviceInfo info() const override {
    DeviceInfo d;
    d.kind = DeviceKind::kSplit;
    d.host_visible_memory = true;
    for (const auto& m : members_) {
      const DeviceInfo mi = m->info();
      d.memory_bytes += mi.memory_bytes;
      d.host_visible_memory = d.host_visible_memory && mi.host_visible_memory;
    }
    d.concurrency = 1;
    return d;
  }

  Capability capabilities(const Graph& g, const Node& node) const override {
    NodeContext nc(g, node);
    auto extent = split_extent(nc.ctx(), spec_.method);
    if (!extent.ok()) return Capability::no(extent.status().message());
    if (*extent < static_cast<int64_t>(members_.size())) {
      return Capability::no(std::string(split_method_name(spec_.method)) + " splits " +
                            std::to_string(*extent) + " units, fewer than " +
                            std::to_string(members_.size()) + " pieces");
    }
    for (const auto& m : members_) {
      Capability c = m->capabilities(g, node);
      if (!c.supported) return Capability::no(m->name() + ": " + c.reason);
    }
    return Capability::yes();
  }

  uint64_t memory_capacity() const override { return info().memory_bytes; }

  Result<std::unique_ptr<Buffer>> upload(const Tensor& host) override {
    ASSIGN_OR_RETURN(Tensor copy, host.clone());
    return std::unique_ptr<Buffer>(new HostBuffer(std::move(copy)));
  }
  Status download(const Buffer& device, Tensor* host) override {
    const auto* hb = dynamic_cast<const HostBuffer*>(&device);
    if (hb == nullptr) return invalid_argument("buffer does not belong to " + name_);
    ASSIGN_OR_RETURN(*host, hb->tensor().clone());
    return Status();
  }

 protected:
  Result<std::unique_ptr<Program>> compile_program(const Graph& g, std::span<const NodeId> layers,
                                                   const CompileOptions& options) override {
    if (layers.size() != 1) {
      return invalid_argument(name_ + ": a split stage holds one layer, got " +
                              std::to_string(layers.size()));
    }
    RETURN_IF_ERROR(check_capabilities(*this, g, layers));
    auto layer = std::make_unique<SplitLayer>();
    ASSIGN_OR_RETURN(*layer, split_layer(g, layers[0], spec_.method, spec_.ratios));
    std::vector<std::unique_ptr<Program>> pieces;
    std::vector<std::string> names;
    for (size_t p = 0; p < members_.size(); ++p) {
      SplitLayer::Piece& piece = layer->pieces[p];
      const NodeId node = piece.node;
      auto prog = members_[p]->compile(piece.graph, std::span<const NodeId>(&node, 1), options);
      if (!prog.ok()) {
        return prog.status().with_context(name_ + ": piece " + std::to_string(p) + " on " +
                                          members_[p]->name());
      }
      pieces.push_back(std::move(*prog));
      names.push_back(members_[p]->name());
    }
    std::vector<ValueId> in, out;
    slice_boundary(g, layers, &in, &out);
    if (out.size() != 1 || out[0] != layer->output) {
      return invalid_argument(name_ + ": the split layer's output must leave the stage");
    }
    return std::unique_ptr<Program>(new SplitProgram(
        std::move(layer), std::move(pieces), std::move(in), std::move(out), std::move(names)));
  }

 private:
  SplitSpec spec_;
  std::vector<std::unique_ptr<Device>> members_;
  std::string name_;
};

}  // namespace

Result<std::unique_ptr<Device>> open_split_device(const SplitSpec& spec, const DeviceOpener& open) {
  if (spec.devices.size() < 2 || spec.devices.size() != spec.ratios.size()) {
    return invalid_argument("a split device needs 2 or more members, one ratio each");
  }
  std::vector<std::unique_ptr<Device>> members;
  for (const std::string& d : spec.devices) {
    if (d.rfind("split:", 0) == 0) {
      return invalid_argument("split member " + quote_name(d) +
                              ": a split cannot nest another split");
    }
    auto dev = open(d);
    if (!dev.ok()) return dev.status().with_context("split member " + quote_name(d));
    members.push_back(std::move(*dev));
  }
  return std::unique_ptr<Device>(new SplitDevice(spec, std::move(members)));
}

}  // namespace tessera
