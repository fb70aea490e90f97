#include "backends/cpu/kernel_choice.h"

#include <cpuinfo.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <variant>

#include "backends/cpu/kernel_table.h"
#include "core/allocator.h"

namespace tessera::cpu {

namespace {

// The rules' own choice is kept unless another candidate is more than this much faster.
constexpr double kKeepRuleWithin = 0.03;
// Timed rounds per measurement (each round runs every candidate once, in turn): at least
// kMinRounds, more while the rounds are short, never more than kMaxRounds.
constexpr int kMinRounds = 3;
constexpr int kMaxRounds = 15;
constexpr double kTargetRoundsMs = 60;
// Bumped when the kernels change enough that cached decisions should be measured again.
constexpr std::string_view kFormat = "tessera-cpu-kernels-1";

// The ops whose kernel variants are alternatives for the same configurations: convolutions, and
// fully connected layers (Tessera's GEMV against XNNPACK's fully connected operator). The pools'
// second entry is an aliasing view for windows that copy their input, not an alternative.
bool measured_op(OpKind op) {
  return op == OpKind::kConv || op == OpKind::kGemm || op == OpKind::kMatMul;
}

std::string sanitize(std::string s) {
  for (char& c : s) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

const std::string& cpu_identity() {
  static const std::string id = [] {
    std::string name;
    if (cpuinfo_initialize() && cpuinfo_get_packages_count() > 0) {
      name = cpuinfo_get_package(0)->name;
    }
    if (name.empty()) {
      std::ifstream f("/proc/cpuinfo");
      std::string line;
      while (std::getline(f, line)) {
        if (line.rfind("model name", 0) == 0) {
          const size_t colon = line.find(':');
          if (colon != std::string::npos) name = line.substr(colon + 1);
          break;
        }
      }
    }
    name.erase(0, name.find_first_not_of(' '));
    if (name.empty()) name = "unknown cpu";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // Instrumented builds time Tessera's kernels (instrumented) against XNNPACK's (not): their
    // decisions are kept apart from those of normal builds.
    name += " (sanitizer build)";
#endif
    return sanitize(name);
  }();
  return id;
}

// Decisions of this process (key -> variant), loaded from the cache file on first use.
struct Decisions {
  std::mutex mu;
  bool loaded = false;
  std::string loaded_from;
  std::map<std::string, std::string> variant_of;
};

Decisions& decisions() {
  static Decisions d;
  return d;
}

// One line: format, cpu, key, variant, then what was measured (informative).
void load_locked(Decisions& d, const std::string& path) {
  if (d.loaded && d.loaded_from == path) return;
  d.loaded = true;
  d.loaded_from = path;
  if (path.empty()) return;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    std::vector<std::string> fields;
    std::stringstream ss(line);
    std::string field;
    while (std::getline(ss, field, '\t')) fields.push_back(field);
    if (fields.size() < 4 || fields[0] != kFormat || fields[1] != cpu_identity()) continue;
    d.variant_of[fields[2]] = fields[3];
  }
}

void append_line(const std::string& path, const std::string& line) {
  if (path.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  // One write() of a short line with O_APPEND: processes measuring at once never interleave
  // within a line; if two measure the same key, the later line wins on load.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;  // a read-only home: decisions stay in the process
  const ssize_t n = ::write(fd, line.data(), line.size());
  (void)n;
  ::close(fd);
}

// Scratch tensors a candidate is bound to while it is timed.
struct Scratch {
  std::vector<std::shared_ptr<uint8_t>> buffers;
  std::vector<Operand> inputs, outputs;
};

// "u8", "s8", with "z" where the zero point is not 0 (oneDNN picks other kernels for those).
std::string int8_label(QuantParam q) {
  return std::string(q.is_unsigned ? "u8" : "s8") + (q.zero_point != 0 ? "z" : "");
}

// How a reduced-precision kernel's input 0 and output 0 are held (keep_reduced_kernel).
struct ReducedIo {
  bool bf16 = false, int8 = false;
  QuantParam in, out;
  bool output = true;  // output 0 reduced too (an int8 classifier writes f32)
  NeighbourPrecision neighbours;
};

Result<Scratch> bind_scratch(const KernelRequest& req, Kernel& k,
                             const ReducedIo* reduced = nullptr) {
  const Graph& g = req.graph;
  const Node& n = req.node;
  std::vector<Layout> available(n.inputs.size(), Layout::kNCHW), wanted(n.inputs.size());
  std::vector<Layout> produced(n.outputs.size(), Layout::kNCHW);
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const ValueId v = n.inputs[i];
    if (v != kNoValue && !g.value(v).is_constant && g.value(v).info.shape.rank() == 4)
      available[i] = Layout::kNHWC;  // what the layers before a convolution normally produce
  }
  k.choose_layouts(available, wanted, produced);
  Scratch s;
  // `q`: held in the reduced precision (`reduced`), with this quantisation when int8.
  auto make = [&](const TensorInfo& info, Layout layout, const QuantParam* q) -> Result<Operand> {
    Operand o;
    o.dtype = info.dtype;
    o.shape = info.shape;
    o.layout = layout;
    if (q != nullptr) {
      o.bf16 = reduced->bf16;
      o.int8 = reduced->int8;
      if (o.int8) o.quant = *q;
    }
    const size_t elem = o.int8 ? 1 : o.bf16 ? 2 : dtype_size(info.dtype);
    // 64 bytes of readable padding past the end (XNNPACK reads up to 16).
    const size_t bytes = static_cast<size_t>(info.shape.numel()) * elem + 64;
    ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> buf, allocate_host(bytes));
    // Small values of both signs (a denormal-free, realistic activation range).
    uint32_t state = 12345;
    auto next = [&] {
      state = state * 1664525u + 1013904223u;
      return static_cast<float>(static_cast<int32_t>(state >> 8) % 2001 - 1000) * 1e-3f;
    };
    if (o.int8) {
      for (int64_t i = 0; i < info.shape.numel(); ++i)
        buf.get()[i] = static_cast<uint8_t>(state = state * 1664525u + 1013904223u) >> 24;
    } else if (o.bf16) {
      uint16_t* h = reinterpret_cast<uint16_t*>(buf.get());
      for (int64_t i = 0; i < info.shape.numel(); ++i) {
        const float f = next();
        uint32_t u;
        std::memcpy(&u, &f, 4);
        h[i] = static_cast<uint16_t>(u >> 16);
      }
    } else if (info.dtype == DType::kF32) {
      float* f = reinterpret_cast<float*>(buf.get());
      for (int64_t i = 0; i < info.shape.numel(); ++i) f[i] = next();
    }
    o.data = buf.get();
    s.buffers.push_back(std::move(buf));
    return o;
  };
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const ValueId v = n.inputs[i];
    if (v == kNoValue) {
      s.inputs.emplace_back();
      continue;
    }
    const Value& val = g.value(v);
    if (val.is_constant) {
      s.inputs.push_back(constant_operand(val.data));
      continue;
    }
    ASSIGN_OR_RETURN(Operand o, make(val.info, wanted[i],
                                     i == 0 && reduced != nullptr ? &reduced->in : nullptr));
    s.inputs.push_back(o);
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const bool red = i == 0 && reduced != nullptr && reduced->output;
    ASSIGN_OR_RETURN(Operand o,
                     make(g.value(n.outputs[i]).info, produced[i], red ? &reduced->out : nullptr));
    s.outputs.push_back(o);
  }
  RETURN_IF_ERROR(k.bind(s.inputs, s.outputs, req.pool));
  return s;
}

// A candidate's one run, inside a job of the pool; its wall time in ms.
Result<double> time_one_run(ThreadPool& pool, Kernel& k) {
  double ms = 0;
  RETURN_IF_ERROR(pool.run([&]() -> Status {
    const auto t0 = std::chrono::steady_clock::now();
    Status st = k.run(pool);
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return st;
  }));
  return ms;
}

// Kernels run one after another in one job of the pool (a layer and its conversions); the
// pool's workers are parked before a kernel that computes on OpenMP, as the program does.
Result<double> time_sequence(ThreadPool& pool, std::span<Kernel* const> ks) {
  double ms = 0;
  Status st = pool.run([&]() -> Status {
    const auto t0 = std::chrono::steady_clock::now();
    for (Kernel* k : ks) {
      if (k->runs_on_openmp()) pool.park_workers();
      Status s = k->run(pool);
      if (!s.ok()) return s;
    }
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return Status();
  });
  if (!st.ok()) return st;
  return ms;
}

// The best times of `reduced` alone and of `f32` with the conversions from and back to the
// reduced precision around it (f32_kernel_if_faster), in interleaved rounds on scratch tensors.
Result<std::pair<double, double>> time_reduced_and_f32(const KernelRequest& req, Kernel& reduced,
                                                       Kernel& f32, const ReducedIo& io,
                                                       PrecisionConversion::Reduced precision) {
  ASSIGN_OR_RETURN(Scratch rs, bind_scratch(req, reduced, &io));
  ASSIGN_OR_RETURN(Scratch fs, bind_scratch(req, f32));
  // f32 with its conversions: input 0 from the reduced kernel's input, output 0 into its output.
  const Operand& r_in = rs.inputs[0];
  const Operand& f_in = fs.inputs[0];
  // Input 0 is converted for the side that does not get it in its own precision, and output 0
  // for the readers where they want the other one (NeighbourPrecision).
  std::vector<Kernel*> f32_side{&f32}, reduced_side{&reduced};
  const bool in_f32 = io.neighbours.input_f32;
  PrecisionConversion in_conv(in_f32 ? f_in.layout : r_in.layout,
                              in_f32 ? r_in.layout : f_in.layout, precision,
                              /*to_reduced=*/in_f32);
  if (in_f32) {
    RETURN_IF_ERROR(in_conv.bind(std::span(&f_in, 1), std::span(&r_in, 1), req.pool));
    reduced_side.insert(reduced_side.begin(), &in_conv);
  } else {
    RETURN_IF_ERROR(in_conv.bind(std::span(&r_in, 1), std::span(&f_in, 1), req.pool));
    f32_side.insert(f32_side.begin(), &in_conv);
  }
  std::optional<PrecisionConversion> out_conv;
  if (io.output) {  // (an int8 classifier writes f32 on both sides: nothing to convert)
    const Operand& f_out = fs.outputs[0];
    const Operand& r_out = rs.outputs[0];
    const bool out_f32 = io.neighbours.output_f32;
    out_conv.emplace(out_f32 ? r_out.layout : f_out.layout, out_f32 ? f_out.layout : r_out.layout,
                     precision, /*to_reduced=*/!out_f32);
    if (out_f32) {
      RETURN_IF_ERROR(out_conv->bind(std::span(&r_out, 1), std::span(&f_out, 1), req.pool));
      reduced_side.push_back(&*out_conv);
    } else {
      RETURN_IF_ERROR(out_conv->bind(std::span(&f_out, 1), std::span(&r_out, 1), req.pool));
      f32_side.push_back(&*out_conv);
    }
  }

  // One untimed run each, then interleaved rounds (as build_measured_kernel).
  ASSIGN_OR_RETURN(double warm_r, time_sequence(req.pool, reduced_side));
  ASSIGN_OR_RETURN(double warm_f, time_sequence(req.pool, f32_side));
  const int rounds =
      std::clamp(static_cast<int>(std::ceil(kTargetRoundsMs / std::max(warm_r + warm_f, 1e-3))),
                 kMinRounds, kMaxRounds);
  double best_r = INFINITY, best_f = INFINITY;
  for (int r = 0; r < rounds; ++r) {
    ASSIGN_OR_RETURN(double ms_r, time_sequence(req.pool, reduced_side));
    ASSIGN_OR_RETURN(double ms_f, time_sequence(req.pool, f32_side));
    best_r = std::min(best_r, ms_r);
    best_f = std::min(best_f, ms_f);
  }
  return std::make_pair(best_r, best_f);
}

// The decisions map, shared by kernel variants and precision choices.
std::string cached_decision(const std::string& key) {
  Decisions& d = decisions();
  std::lock_guard<std::mutex> lock(d.mu);
  load_locked(d, kernel_choice_cache_path());
  auto it = d.variant_of.find(key);
  return it != d.variant_of.end() ? it->second : std::string();
}

void record_decision(const std::string& key, const std::string& variant,
                     const std::vector<KernelTiming>& measured) {
  std::ostringstream line;
  line << kFormat << '\t' << cpu_identity() << '\t' << key << '\t' << variant << '\t';
  for (const KernelTiming& t : measured) line << t.variant << '=' << t.ms << ' ';
  line << '\n';
  Decisions& d = decisions();
  std::lock_guard<std::mutex> lock(d.mu);
  d.variant_of[key] = variant;
  append_line(kernel_choice_cache_path(), line.str());
}

struct Candidate {
  const KernelEntry* entry;
  std::unique_ptr<Kernel> kernel;
  Scratch scratch;
  double best_ms = INFINITY;
};

}  // namespace

KernelChoice default_kernel_choice() {
  const char* v = std::getenv("TESSERA_CPU_KERNELS");
  if (v != nullptr && std::string_view(v) == "rules") return KernelChoice::kRules;
  return KernelChoice::kMeasured;
}

std::string kernel_choice_cache_path() {
  if (const char* p = std::getenv("TESSERA_CPU_KERNEL_CACHE"); p != nullptr) {
    const std::string_view v(p);
    return v == "off" || v.empty() ? std::string() : std::string(v);
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && x[0] != '\0')
    return std::string(x) + "/tessera/cpu-kernels.tsv";
  if (const char* h = std::getenv("HOME"); h != nullptr && h[0] != '\0')
    return std::string(h) + "/.cache/tessera/cpu-kernels.tsv";
  return std::string();
}

std::string kernel_choice_key(const KernelRequest& req) {
  const Graph& g = req.graph;
  std::ostringstream key;
  key << op_name(req.node.kind);
  for (ValueId v : req.node.inputs) {
    key << '|';
    if (v == kNoValue) {
      key << '-';
      continue;
    }
    const Value& val = g.value(v);
    const Shape& s = val.is_constant ? val.data.shape() : val.info.shape;
    key << dtype_name(val.is_constant ? val.data.dtype() : val.info.dtype) << s.to_string()
        << (val.is_constant ? "c" : "");
  }
  for (const auto& [name, value] : req.node.attrs.all()) {
    key << '|' << name << '=';
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, Tensor>) {
            key << "tensor" << v.shape().to_string();
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>> ||
                               std::is_same_v<T, std::vector<float>>) {
            for (size_t i = 0; i < v.size(); ++i) key << (i ? "," : "") << v[i];
          } else {
            key << v;
          }
        },
        value);
  }
  key << "|cores " << req.pool.cores().to_string();
  if (req.output_to_concat) key << "|to concat";
  // The candidates this build offers the op: a decision made among other variants (an older
  // Tessera's) is measured again rather than reused.
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const KernelEntry& e : all_kernel_entries()) {
    if (e.op != req.node.kind || !e.measured_candidate || !entry_available(e)) continue;
    for (const char* c = e.variant; *c != 0; ++c)
      h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
    h = (h ^ ',') * 1099511628211ull;
  }
  key << "|variants " << std::hex << (h & 0xffffffffu);
  return sanitize(key.str());
}

void clear_kernel_choices_in_process() {
  Decisions& d = decisions();
  std::lock_guard<std::mutex> lock(d.mu);
  d.variant_of.clear();
  d.loaded = false;
}

Result<std::unique_ptr<Kernel>> build_measured_kernel(const KernelRequest& req,
                                                      std::vector<KernelTiming>* timings) {
  if (timings != nullptr) timings->clear();
  if (!measured_op(req.node.kind)) return build_kernel(req);
  const std::string key = kernel_choice_key(req);
  const std::string cached = cached_decision(key);
  // Built outside the lock: packing weights must not serialise other threads' compiles.
  if (const KernelEntry* e = find_kernel_entry(req.node.kind, cached); e != nullptr) {
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, make_entry_kernel(*e, req, /*any_config=*/true));
    if (k) return k;
  }
  // No decision, a variant this build no longer has, or one that declines now: measure.

  // The rules' choice first (the first accepting entry), then every other accepting variant.
  const std::vector<KernelEntry>& entries = all_kernel_entries();
  std::vector<Candidate> cands;
  const KernelEntry* rule = nullptr;
  for (const KernelEntry& e : entries) {
    if (e.op != req.node.kind) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, make_entry_kernel(e, req, /*any_config=*/false));
    if (k) {
      rule = &e;
      cands.push_back(Candidate{&e, std::move(k), {}, INFINITY});
      break;
    }
  }
  for (const KernelEntry& e : entries) {
    if (e.op != req.node.kind || &e == rule || !e.measured_candidate) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, make_entry_kernel(e, req, /*any_config=*/true));
    if (k) cands.push_back(Candidate{&e, std::move(k), {}, INFINITY});
  }
  if (cands.empty()) return make_reference_kernel(req.node);
  if (cands.size() == 1) return std::move(cands[0].kernel);

  // Bind each to scratch tensors; one untimed run each (packs, pages, caches).
  double warm_ms = 0;
  for (Candidate& c : cands) {
    Result<Scratch> s = bind_scratch(req, *c.kernel);
    if (!s.ok()) {
      c.kernel.reset();  // cannot be set up for this node: not a candidate
      continue;
    }
    c.scratch = std::move(*s);
    Result<double> ms = time_one_run(req.pool, *c.kernel);
    if (!ms.ok()) {
      c.kernel.reset();
      continue;
    }
    warm_ms += *ms;
  }
  std::erase_if(cands, [](const Candidate& c) { return c.kernel == nullptr; });
  if (cands.empty()) return build_kernel(req);
  // The Concat's copy of the output, charged to the candidates that cannot write into its slice.
  const bool charge_copy =
      req.output_to_concat && std::any_of(cands.begin(), cands.end(), [](const Candidate& c) {
        return !c.kernel->writes_strided_output();
      });
  std::vector<std::byte> copy_from, copy_to;
  if (charge_copy) {
    const TensorInfo& out = req.graph.value(req.node.outputs[0]).info;
    const size_t bytes = static_cast<size_t>(out.shape.numel()) * dtype_size(out.dtype);
    copy_from.assign(bytes, std::byte{1});
    copy_to.assign(bytes, std::byte{0});
  }
  double copy_ms = INFINITY;
  volatile std::byte copy_sink{};  // keeps the timed copy
  if (cands.size() > 1) {
    const int rounds =
        std::clamp(static_cast<int>(std::ceil(kTargetRoundsMs / std::max(warm_ms, 1e-3))),
                   kMinRounds, kMaxRounds);
    for (int r = 0; r < rounds; ++r) {
      for (Candidate& c : cands) {
        ASSIGN_OR_RETURN(double ms, time_one_run(req.pool, *c.kernel));
        c.best_ms = std::min(c.best_ms, ms);
      }
      if (charge_copy) {
        const auto t0 = std::chrono::steady_clock::now();
        std::memcpy(copy_to.data(), copy_from.data(), copy_to.size());
        copy_sink = copy_to[static_cast<size_t>(r) % copy_to.size()];
        copy_ms = std::min(copy_ms, std::chrono::duration<double, std::milli>(
                                        std::chrono::steady_clock::now() - t0)
                                        .count());
      }
    }
    if (charge_copy) {
      for (Candidate& c : cands) {
        if (!c.kernel->writes_strided_output()) c.best_ms += copy_ms;
      }
    }
    (void)copy_sink;
  }
  Candidate* best = &cands[0];
  for (Candidate& c : cands) {
    if (c.best_ms < best->best_ms) best = &c;
  }
  Candidate* chosen = best;
  if (rule != nullptr && cands[0].entry == rule &&
      cands[0].best_ms <= best->best_ms * (1 + kKeepRuleWithin))
    chosen = &cands[0];
  const std::string variant = chosen->entry->variant;

  std::vector<KernelTiming> measured;
  for (const Candidate& c : cands) measured.push_back(KernelTiming{c.entry->variant, c.best_ms});
  record_decision(key, variant, measured);
  if (timings != nullptr) *timings = measured;
  // The timed kernel itself: bind() only records addresses and sizes scratch space, so the
  // program binding it again to its arena replaces the scratch tensors (they die with `cands`,
  // before the kernel ever runs again).
  return std::move(chosen->kernel);
}

Result<std::unique_ptr<Kernel>> f32_kernel_if_faster(const KernelRequest& req, Kernel& reduced,
                                                     PrecisionConversion::Reduced precision,
                                                     QuantParam in_q, QuantParam out_q,
                                                     NeighbourPrecision neighbours,
                                                     std::vector<KernelTiming>* timings) {
  if (timings != nullptr) timings->clear();
  if (!measured_op(req.node.kind)) return std::unique_ptr<Kernel>();
  const bool int8 = precision == PrecisionConversion::Reduced::kInt8;
  const bool reduced_out = int8 ? reduced.int8_output() : true;
  // The revision of what a precision decision weighs (the conversions' kernels): decisions
  // cached before a revision are measured again. 2: AVX-512 quantisation (1 was scalar, 10x
  // slower, and kept layers in f32 that int8 now wins).
  constexpr int kPrecisionChoiceRevision = 2;
  std::string key = kernel_choice_key(req) + "|rev " + std::to_string(kPrecisionChoiceRevision) +
                    (int8 ? "|precision int8 " : "|precision bf16");
  if (int8) key += int8_label(in_q) + "->" + (reduced_out ? int8_label(out_q) : std::string("f32"));
  // The library of the reduced kernel (its description's first word: onednn, xnnpack, tessera):
  // a decision against oneDNN's kernel says nothing of XNNPACK's.
  const std::string what = reduced.describe();
  key += " " + what.substr(0, what.find(' '));
  key += std::string(neighbours.input_f32 ? "|in f32" : "|in reduced") +
         (neighbours.output_f32 ? "|out f32" : "|out reduced");
  if (const std::string cached = cached_decision(key); !cached.empty()) {
    if (cached != "f32") return std::unique_ptr<Kernel>();  // no f32 kernel built, nor packed
    return build_measured_kernel(req);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Kernel> f32_kernel, build_measured_kernel(req));
  Kernel& f32 = *f32_kernel;

  ReducedIo io;
  io.bf16 = !int8;
  io.int8 = int8;
  io.in = in_q;
  io.out = out_q;
  io.output = reduced_out;
  io.neighbours = neighbours;
  // A pair that cannot be set up or run on scratch tensors is not measured: the reduced kernel
  // stays, and nothing is cached (as build_measured_kernel drops such candidates).
  Result<std::pair<double, double>> ms = time_reduced_and_f32(req, reduced, f32, io, precision);
  if (!ms.ok()) return std::unique_ptr<Kernel>();
  const auto [best_r, best_f] = *ms;
  const bool keep = best_r <= best_f * (1 + kKeepRuleWithin);
  const std::vector<KernelTiming> measured{{"reduced", best_r}, {"f32", best_f}};
  record_decision(key, keep ? "reduced" : "f32", measured);
  if (timings != nullptr) *timings = measured;
  // The kernel kept is bound again by the program to its arena (bind() records addresses only).
  if (keep) return std::unique_ptr<Kernel>();
  return f32_kernel;
}

}  // namespace tessera::cpu
