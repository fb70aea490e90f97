#include "scheduler/cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>

#include "energy/power_model.h"
#include "ops/op.h"

namespace tessera {

namespace {

// The round trip of a remote device's link: its transfer fits are Pings, each a request and its
// reply, so each holds one (the smaller at no bytes, i.e. at the fits' smallest message).
double round_trip_ms(const LevelProfile& lp) {
  return std::min(lp.upload.ms(0, 1), lp.download.ms(0, 1));
}

// The round trip counted twice when an upload of `up` ms and a download of `down` ms are one
// request and its reply: `shared`, at most the smaller of the two; 0 unless both move tensors.
double shared_part(double up, double down, int in_count, int out_count, double shared) {
  if (shared <= 0 || in_count <= 0 || out_count <= 0) return 0;
  return std::min({shared, up, down});
}

// ---- regression ----

struct Sample {
  double flops = 0;
  double bytes = 0;
  double ms = 0;
  std::string op;
};

// Solves the n x n system a x = b (n <= 3) by Gaussian elimination with partial pivoting.
bool solve(std::array<std::array<double, 3>, 3> a, std::array<double, 3> b, int n,
           std::array<double, 3>* x) {
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    }
    if (std::abs(a[p][c]) < 1e-12) return false;
    std::swap(a[c], a[p]);
    std::swap(b[c], b[p]);
    for (int r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (int k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (int c = n - 1; c >= 0; --c) {
    double s = b[c];
    for (int k = c + 1; k < n; ++k) s -= a[c][k] * (*x)[k];
    (*x)[c] = s / a[c][c];
  }
  return true;
}

// Weighted least squares minimising sum ((pred - y) / y)^2 over the features chosen by `mask`
// (bit 0 flops, bit 1 bytes, bit 2 constant). Features are scaled to [0, 1] for conditioning.
bool fit_mask(const std::vector<const Sample*>& s, int mask, RegressionFit* out) {
  double fmax = 1, bmax = 1;
  for (const Sample* x : s) {
    fmax = std::max(fmax, x->flops);
    bmax = std::max(bmax, x->bytes);
  }
  std::vector<int> cols;
  for (int c = 0; c < 3; ++c) {
    if (mask & (1 << c)) cols.push_back(c);
  }
  const int n = static_cast<int>(cols.size());
  if (static_cast<int>(s.size()) < n) return false;
  std::array<std::array<double, 3>, 3> ata{};
  std::array<double, 3> atb{};
  for (const Sample* x : s) {
    const double w = 1.0 / x->ms;
    const double feat[3] = {x->flops / fmax * w, x->bytes / bmax * w, w};
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) ata[i][j] += feat[cols[i]] * feat[cols[j]];
      atb[i] += feat[cols[i]] * 1.0;  // y / y
    }
  }
  std::array<double, 3> coef{};
  if (!solve(ata, atb, n, &coef)) return false;
  RegressionFit f = *out;
  f.a_ms_per_flop = f.b_ms_per_byte = f.c_ms = 0;
  for (int i = 0; i < n; ++i) {
    if (cols[i] == 0) f.a_ms_per_flop = coef[i] / fmax;
    if (cols[i] == 1) f.b_ms_per_byte = coef[i] / bmax;
    if (cols[i] == 2) f.c_ms = coef[i];
  }
  // A negative coefficient would predict negative times for some layer shapes: reject the fit.
  if (f.a_ms_per_flop < 0 || f.b_ms_per_byte < 0 || f.c_ms < 0) return false;
  *out = f;
  return true;
}

RegressionFit fit_samples(const std::vector<const Sample*>& s, const std::string& op) {
  RegressionFit f;
  f.op = op;
  f.samples = static_cast<int>(s.size());
  // Richest model first, then simpler ones; the constant (mean relative) model always works.
  for (int mask : {7, 5, 3, 6, 1, 2, 4}) {
    if (fit_mask(s, mask, &f)) return f;
  }
  f.c_ms = 0;
  for (const Sample* x : s) f.c_ms += x->ms;
  f.c_ms = s.empty() ? 0 : f.c_ms / static_cast<double>(s.size());
  return f;
}

double predict(const RegressionFit& f, double flops, double bytes) {
  return std::max(1e-6, f.a_ms_per_flop * flops + f.b_ms_per_byte * bytes + f.c_ms);
}

constexpr int kMinPerOp = 4;

// Per-op fits plus the pooled fit (last), trained on `train`.
std::vector<RegressionFit> fit_all(const std::vector<const Sample*>& train) {
  std::map<std::string, std::vector<const Sample*>> by_op;
  for (const Sample* s : train) by_op[s->op].push_back(s);
  std::vector<RegressionFit> fits;
  for (const auto& [op, v] : by_op) {
    if (static_cast<int>(v.size()) >= kMinPerOp) fits.push_back(fit_samples(v, op));
  }
  fits.push_back(fit_samples(train, ""));
  return fits;
}

const RegressionFit& choose(const std::vector<RegressionFit>& fits, const std::string& op) {
  for (const RegressionFit& f : fits) {
    if (f.op == op) return f;
  }
  return fits.back();
}

// k-fold cross-validation: fills each fit's cv_error and returns the overall error.
double cross_validate(const std::vector<Sample>& samples, std::vector<RegressionFit>* fits) {
  const int n = static_cast<int>(samples.size());
  if (n < 3) {
    for (RegressionFit& f : *fits) f.cv_error = std::nan("");
    return std::nan("");
  }
  const int k = std::min(5, n);
  std::map<std::string, std::pair<double, int>> per_op;  // sum of errors, count
  double total = 0;
  for (int fold = 0; fold < k; ++fold) {
    std::vector<const Sample*> train;
    for (int i = 0; i < n; ++i) {
      if (i % k != fold) train.push_back(&samples[static_cast<size_t>(i)]);
    }
    const std::vector<RegressionFit> trained = fit_all(train);
    for (int i = fold; i < n; i += k) {
      const Sample& s = samples[static_cast<size_t>(i)];
      const double err = std::abs(predict(choose(trained, s.op), s.flops, s.bytes) - s.ms) / s.ms;
      total += err;
      auto& e = per_op[choose(*fits, s.op).op];
      e.first += err;
      e.second += 1;
    }
  }
  for (RegressionFit& f : *fits) {
    auto it = per_op.find(f.op);
    f.cv_error = it == per_op.end() ? std::nan("") : it->second.first / it->second.second;
  }
  return total / n;
}

// ---- per-slice overhead ----

// One calibration run: measured ms, the part the model already prices exactly (layers timed in
// a chain + eq. 1-2 transfers), the exec of layers timed alone, and the boundary bytes. Where
// the run also timed its own layers, `priced` holds those (the overhead is then measured
// directly, free of how the layers' times alone differ from their times in the chain), and
// `predicted` what the cost model prices for the same layers (for the reported error).
struct OverheadSample {
  double ms = 0;
  double priced = 0;
  double alone = 0;
  double bytes = 0;
  double predicted = 0;
  double chained = 0;       // the in-chain times of the slice's layers, all of them chained
  double layers = 0;        // the run's own layer times (layers_ms), 0 when not recorded
  double chain_before = 0;  // the same layers in the chain runs right before (chain_ms), or 0
};

// Layers run as a slice after another program (every calibration run follows the rest of the
// model, as a plan's stage follows the other stages) find their weights and activations evicted
// from the caches that a chain run after itself finds them in: the ratio of the runs' own layer
// times to the same layers' times in the chain runs right before them (chain_ms; the profile's
// in-chain times where the profile has none), weighted least squares on the relative error of
// the slice totals, at least 1 (a ratio below 1 is noise, not a warm cache). 1 when no run
// timed its layers.
double fit_cold_scale(const std::vector<OverheadSample>& s) {
  double num = 0, den = 0;
  for (const OverheadSample& x : s) {
    const double chained = x.chain_before > 0 ? x.chain_before : x.chained;
    if (chained <= 0 || x.layers <= 0 || x.alone > 0) continue;
    const double w = 1.0 / (x.ms * x.ms);
    num += w * chained * x.layers;
    den += w * chained * chained;
  }
  if (den <= 0) return 1;
  return std::clamp(num / den, 1.0, 10.0);
}

// Weighted least squares (relative error of the slice total) of
//   ms - priced = chain_scale * alone + fixed_ms + ms_per_byte * bytes
// over the terms chosen: `scale` fits chain_scale (else 1), `per_byte` fits ms_per_byte (else 0).
bool fit_overhead(const std::vector<OverheadSample>& s, bool scale, bool per_byte,
                  SliceOverhead* out) {
  double bmax = 1;
  for (const OverheadSample& x : s) bmax = std::max(bmax, x.bytes);
  std::vector<int> cols;
  if (scale) cols.push_back(0);
  cols.push_back(1);
  if (per_byte) cols.push_back(2);
  const int n = static_cast<int>(cols.size());
  if (static_cast<int>(s.size()) < n + (n > 1 ? 1 : 0)) return false;
  std::array<std::array<double, 3>, 3> ata{};
  std::array<double, 3> atb{};
  for (const OverheadSample& x : s) {
    const double w = 1.0 / x.ms;
    const double feat[3] = {x.alone * w, w, x.bytes / bmax * w};
    const double y = (x.ms - x.priced - (scale ? 0 : x.alone)) * w;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) ata[i][j] += feat[cols[i]] * feat[cols[j]];
      atb[i] += feat[cols[i]] * y;
    }
  }
  std::array<double, 3> coef{};
  if (!solve(ata, atb, n, &coef)) return false;
  SliceOverhead f;
  for (int i = 0; i < n; ++i) {
    if (cols[i] == 0) f.chain_scale = coef[i];
    if (cols[i] == 1) f.fixed_ms = coef[i];
    if (cols[i] == 2) f.ms_per_byte = coef[i] / bmax;
  }
  // A layer alone may be faster (hot caches) or slower (an NPU pays its subgraph launch per
  // layer) than in a chain, but not by an order of magnitude; a boundary byte never saves time.
  if (f.chain_scale < 0.1 || f.chain_scale > 10 || f.ms_per_byte < 0) return false;
  f.samples = static_cast<int>(s.size());
  double err = 0;
  for (const OverheadSample& x : s) {
    const double pred =
        x.predicted + f.chain_scale * x.alone + f.ms(static_cast<uint64_t>(x.bytes));
    err += std::abs(pred - x.ms) / x.ms;
  }
  f.error = err / static_cast<double>(s.size());
  *out = f;
  return true;
}

// The richest fit the samples support: scale (when some layers were timed alone) and per-byte
// terms first, then without them; no samples: no overhead.
SliceOverhead fit_overhead(const std::vector<OverheadSample>& s) {
  bool any_alone = false;
  for (const OverheadSample& x : s) any_alone = any_alone || x.alone > 0;
  SliceOverhead f;
  for (const auto& [scale, per_byte] :
       {std::pair{true, true}, {true, false}, {false, true}, {false, false}}) {
    if (scale && !any_alone) continue;
    if (fit_overhead(s, scale, per_byte, &f)) return f;
  }
  return f;
}

}  // namespace

// ---- build ----

Result<CostModel> CostModel::build(const Profile& profile, const LayerGraph& lg) {
  RETURN_IF_ERROR(profile.check_matches(lg));
  CostModel m;
  m.profile_ = profile;
  m.lg_ = &lg;
  const int L = lg.num_layers();
  m.L_ = L;
  const Graph& g = lg.graph();

  // Boundary tables: inputs grow with `last` for a fixed `first`; outputs accumulate downward
  // in `first` for a fixed `last`.
  const size_t cells = static_cast<size_t>(L + 1) * static_cast<size_t>(L + 1);
  m.in_bytes_.assign(cells, 0);
  m.out_bytes_.assign(cells, 0);
  m.in_count_.assign(cells, 0);
  m.out_count_.assign(cells, 0);
  std::vector<int> produced(g.num_values(), -1), last_use(g.num_values(), -1);
  for (int i = 0; i < L; ++i) {
    for (ValueId v : lg.layer(i).outputs) produced[static_cast<size_t>(v)] = i;
    for (ValueId v : lg.layer(i).inputs) {
      last_use[static_cast<size_t>(v)] = std::max(last_use[static_cast<size_t>(v)], i);
    }
  }
  for (ValueId v : lg.cut(L).live) last_use[static_cast<size_t>(v)] = L;  // model outputs
  auto bytes_of = [&](ValueId v) { return g.value(v).info.byte_size(); };
  for (int first = 0; first < L; ++first) {
    std::vector<char> seen(g.num_values(), 0);
    uint64_t bytes = 0;
    int count = 0;
    for (int last = first + 1; last <= L; ++last) {
      for (ValueId v : lg.layer(last - 1).inputs) {
        if (produced[static_cast<size_t>(v)] < first && !seen[static_cast<size_t>(v)]) {
          seen[static_cast<size_t>(v)] = 1;
          bytes += bytes_of(v);
          ++count;
        }
      }
      m.in_bytes_[m.range(first, last)] = bytes;
      m.in_count_[m.range(first, last)] = count;
    }
  }
  for (int last = 1; last <= L; ++last) {
    uint64_t bytes = 0;
    int count = 0;
    for (int first = last - 1; first >= 0; --first) {
      for (ValueId v : lg.layer(first).outputs) {
        if (last_use[static_cast<size_t>(v)] >= last) {
          bytes += bytes_of(v);
          ++count;
        }
      }
      m.out_bytes_[m.range(first, last)] = bytes;
      m.out_count_[m.range(first, last)] = count;
    }
  }
  // The largest live set over cuts first..last, so that a slice's memory is O(1) to price
  // (the planners ask for it O(L^2 D) times).
  m.live_max_.assign(cells, 0);
  for (int first = 0; first <= L; ++first) {
    uint64_t live = 0;
    for (int last = first; last <= L; ++last) {
      live = std::max(live, profile.cut_live_bytes[static_cast<size_t>(last)]);
      m.live_max_[m.range(first, last)] = live;
    }
  }
  m.weight_prefix_.assign(static_cast<size_t>(L + 1), 0);
  m.touched_prefix_.assign(static_cast<size_t>(L + 1), 0);
  for (int i = 0; i < L; ++i) {
    const OpCost& c = lg.layer(i).cost;
    m.touched_prefix_[static_cast<size_t>(i + 1)] =
        m.touched_prefix_[static_cast<size_t>(i)] +
        static_cast<double>(c.input_bytes + c.weight_bytes + c.output_bytes);
  }
  const double touched = m.touched_prefix_[static_cast<size_t>(L)];
  m.inv_touched_total_ = touched > 0 ? 1 / touched : 0;
  for (int i = 0; i < L; ++i) {
    m.weight_prefix_[static_cast<size_t>(i + 1)] =
        m.weight_prefix_[static_cast<size_t>(i)] + lg.layer(i).cost.weight_bytes;
  }

  // Virtual devices: every platform level of every profiled device.
  for (const DeviceProfile& dp : profile.devices) {
    const PlatformDevice* pd = profile.platform.find(dp.device);
    if (pd == nullptr) {
      return invalid_argument("profile device " + quote_name(dp.device) +
                              " is not in its platform");
    }
    const int di = static_cast<int>(m.devices_.size());
    m.devices_.push_back(*pd);
    for (size_t lv = 0; lv < pd->dvfs.size(); ++lv) {
      VirtualDevice vd;
      vd.device = dp.device;
      vd.mhz = pd->dvfs[lv].mhz;
      vd.device_index = di;
      vd.level = static_cast<int>(lv);
      vd.top = lv + 1 == pd->dvfs.size();
      vd.measured = dp.level(vd.mhz) != nullptr;
      vd.label = pd->dvfs.size() > 1 ? dp.device + "@" + std::to_string(vd.mhz) : dp.device;
      m.vds_.push_back(std::move(vd));
    }
  }
  const size_t V = m.vds_.size();
  m.exec_ms_.assign(V * static_cast<size_t>(L), kInfiniteCost);
  m.power_w_.assign(V * static_cast<size_t>(L), 0);
  m.estimated_.assign(V * static_cast<size_t>(L), 0);
  m.transfer_level_.assign(V, nullptr);
  m.hop_shared_.assign(V, 0);
  m.overhead_.assign(V, SliceOverhead{});
  m.gamma_eps_.assign(m.devices_.size(), {});
  m.regression_.assign(m.devices_.size(), {});
  m.regression_error_.assign(m.devices_.size(), std::nan(""));

  for (size_t di = 0; di < m.devices_.size(); ++di) {
    const DeviceProfile& dp = m.profile_.devices[di];  // the copy the model keeps
    const PlatformDevice& pd = m.devices_[di];
    // Transfer fits per virtual device: the measured level, else the nearest measured one.
    for (size_t v = 0; v < V; ++v) {
      if (m.vds_[v].device_index != static_cast<int>(di)) continue;
      const LevelProfile* best = &dp.levels.front();
      for (const LevelProfile& l : dp.levels) {
        if (std::abs(l.mhz - m.vds_[v].mhz) < std::abs(best->mhz - m.vds_[v].mhz)) best = &l;
      }
      m.transfer_level_[v] = best;
      if (pd.kind == "remote") m.hop_shared_[v] = round_trip_ms(*best);
    }
    // A remote level's layer and slice runs are one request and its reply each: their transfers
    // hold one round trip, where upload + download count two.
    auto shared_at = [&](const LevelProfile& lp) {
      return pd.kind == "remote" ? round_trip_ms(lp) : 0.0;
    };
    // Execution per measured level: the time in a chain where the layer was timed in one;
    // else the measured total alone minus the layer's own transfers (scaled by the level's
    // fitted chain_scale in exec_at).
    auto chain_at = [](const LevelProfile& lp, int l) -> const std::optional<double>* {
      if (lp.layer_chain_ms.empty() || !lp.layer_chain_ms[static_cast<size_t>(l)]) return nullptr;
      return &lp.layer_chain_ms[static_cast<size_t>(l)];
    };
    auto has_time = [&](const LevelProfile& lp, int l) {
      return chain_at(lp, l) != nullptr || lp.layer_ms[static_cast<size_t>(l)].has_value();
    };
    auto alone_at = [&](const LevelProfile& lp, int l) -> double {
      const double total = *lp.layer_ms[static_cast<size_t>(l)];
      const int n_in = m.in_count_[m.range(l, l + 1)], n_out = m.out_count_[m.range(l, l + 1)];
      const double c_in = lp.upload.ms(m.in_bytes_[m.range(l, l + 1)], n_in);
      const double c_out = lp.download.ms(m.out_bytes_[m.range(l, l + 1)], n_out);
      return std::max(0.0,
                      total - c_in - c_out + shared_part(c_in, c_out, n_in, n_out, shared_at(lp)));
    };
    // Per measured level: the per-slice overhead fitted on its calibration runs.
    std::vector<SliceOverhead> level_overhead;
    for (const LevelProfile& lp : dp.levels) {
      std::vector<OverheadSample> samples;
      for (const SliceRun& r : lp.slice_runs) {
        OverheadSample x;
        x.ms = r.ms;
        bool complete = true;
        for (int l = r.first; l < r.last && complete; ++l) {
          if (const auto* c = chain_at(lp, l)) {
            x.priced += **c;
          } else if (lp.layer_ms[static_cast<size_t>(l)]) {
            x.alone += alone_at(lp, l);
          } else {
            complete = false;
          }
        }
        if (!complete) continue;
        const int n_in = m.in_count_[m.range(r.first, r.last)];
        const int n_out = m.out_count_[m.range(r.first, r.last)];
        const double up = lp.upload.ms(m.in_bytes_[m.range(r.first, r.last)], n_in);
        const double down = lp.download.ms(m.out_bytes_[m.range(r.first, r.last)], n_out);
        const double transfers = up + down - shared_part(up, down, n_in, n_out, shared_at(lp));
        x.chained = x.priced;
        x.layers = r.layers_ms;
        x.chain_before = r.chain_ms;
        // The run timed its own layers (all of them chained here): fit the overhead on what the
        // run spent beyond them.
        x.priced = (r.layers_ms > 0 && x.alone == 0 ? r.layers_ms : x.priced) + transfers;
        x.predicted = transfers;
        x.bytes = static_cast<double>(m.in_bytes_[m.range(r.first, r.last)] +
                                      m.out_bytes_[m.range(r.first, r.last)]);
        samples.push_back(x);
      }
      // Every calibration run follows another program, so the error of the fit prices its
      // layers cold.
      const double cold = fit_cold_scale(samples);
      for (OverheadSample& x : samples) x.predicted += cold * x.chained;
      SliceOverhead f = fit_overhead(samples);
      f.cold_scale = cold;
      level_overhead.push_back(f);
    }
    auto exec_at = [&](const LevelProfile& lp, int l) -> double {
      if (const auto* c = chain_at(lp, l)) return **c;
      return level_overhead[static_cast<size_t>(&lp - dp.levels.data())].chain_scale *
             alone_at(lp, l);
    };
    for (size_t v = 0; v < V; ++v) {
      if (m.vds_[v].device_index != static_cast<int>(di)) continue;
      m.overhead_[v] = level_overhead[static_cast<size_t>(m.transfer_level_[v] - dp.levels.data())];
    }
    // Regression samples from the top measured level.
    const LevelProfile& ref = dp.levels.back();
    std::vector<Sample> samples;
    for (int l = 0; l < L; ++l) {
      if (dp.unsupported.count(l) || !has_time(ref, l)) continue;
      const double e = exec_at(ref, l);
      if (e <= 0) continue;
      const ProfileLayer& pl = profile.layers[static_cast<size_t>(l)];
      samples.push_back(
          Sample{pl.flops, static_cast<double>(pl.input_bytes + pl.weight_bytes + pl.output_bytes),
                 e, pl.op});
    }
    std::vector<const Sample*> all;
    for (const Sample& s : samples) all.push_back(&s);
    if (!all.empty()) {
      m.regression_[di] = fit_all(all);
      m.regression_error_[di] = cross_validate(samples, &m.regression_[di]);
    }

    // Eq. 3 per layer.
    m.gamma_eps_[di].assign(static_cast<size_t>(L), {0.0, 0.0});
    std::vector<char> regressed(static_cast<size_t>(L), 0);
    for (int l = 0; l < L; ++l) {
      if (dp.unsupported.count(l)) continue;
      std::vector<std::pair<int, double>> pts;  // mhz, exec ms
      for (const LevelProfile& lp : dp.levels) {
        if (has_time(lp, l)) pts.emplace_back(lp.mhz, exec_at(lp, l));
      }
      double gamma = 0, eps = 0;
      if (pts.empty()) {
        if (m.regression_[di].empty()) continue;  // nothing measured on this device at all
        const ProfileLayer& pl = profile.layers[static_cast<size_t>(l)];
        const double e =
            predict(choose(m.regression_[di], pl.op), pl.flops,
                    static_cast<double>(pl.input_bytes + pl.weight_bytes + pl.output_bytes));
        pts.emplace_back(ref.mhz, e);
        regressed[static_cast<size_t>(l)] = 1;
      }
      const auto [f_lo, t_lo] = pts.front();
      const auto [f_hi, t_hi] = pts.back();
      if (pts.size() >= 2 && f_lo > 0 && f_hi > f_lo) {
        gamma = (t_lo - t_hi) / (1.0 / f_lo - 1.0 / f_hi);
        eps = t_hi - gamma / f_hi;
        if (gamma < 0) {  // noise: slower at the higher level; no frequency dependence
          gamma = 0;
          eps = 0.5 * (t_lo + t_hi);
        } else if (eps < 0) {  // superlinear: all of it scales with 1/f
          gamma = t_hi * f_hi;
          eps = 0;
        }
      } else if (f_hi > 0) {
        gamma = t_hi * f_hi;
      } else {
        eps = t_hi;
      }
      m.gamma_eps_[di][static_cast<size_t>(l)] = {gamma, eps};
      for (size_t v = 0; v < V; ++v) {
        const VirtualDevice& vd = m.vds_[v];
        if (vd.device_index != static_cast<int>(di)) continue;
        const LevelProfile* lp = dp.level(vd.mhz);
        double e;
        if (lp != nullptr && has_time(*lp, l)) {
          e = exec_at(*lp, l);
        } else if (vd.mhz > 0) {
          e = gamma / vd.mhz + eps;
        } else {
          e = t_hi;
        }
        m.exec_ms_[m.cell(static_cast<int>(v), l)] = e;
        m.estimated_[m.cell(static_cast<int>(v), l)] = regressed[static_cast<size_t>(l)];
      }
    }

    // Power per layer (eq. 4-5): measured dynamic power at the top level, or back-scaled from a
    // lower measured level, or the platform's.
    for (int l = 0; l < L; ++l) {
      double dyn_max = -1;
      for (auto it = dp.levels.rbegin(); it != dp.levels.rend() && dyn_max < 0; ++it) {
        if (it->layer_dynamic_w.empty() || !it->layer_dynamic_w[static_cast<size_t>(l)]) continue;
        auto idx = pd.level_index(it->mhz);
        if (!idx.ok()) continue;
        const double scale = dynamic_power_scale(pd, *idx);
        if (scale > 0) dyn_max = *it->layer_dynamic_w[static_cast<size_t>(l)] / scale;
      }
      for (size_t v = 0; v < V; ++v) {
        if (m.vds_[v].device_index != static_cast<int>(di)) continue;
        m.power_w_[m.cell(static_cast<int>(v), l)] = tessera::power_w(pd, m.vds_[v].level, dyn_max);
      }
    }
  }

  // Prefix sums.
  m.exec_prefix_.assign(V, std::vector<double>(static_cast<size_t>(L + 1), 0));
  m.energy_prefix_.assign(V, std::vector<double>(static_cast<size_t>(L + 1), 0));
  m.unsupported_prefix_.assign(V, std::vector<int>(static_cast<size_t>(L + 1), 0));
  for (size_t v = 0; v < V; ++v) {
    for (int l = 0; l < L; ++l) {
      const double e = m.exec_ms_[m.cell(static_cast<int>(v), l)];
      const bool ok = std::isfinite(e);
      const size_t i = static_cast<size_t>(l);
      m.exec_prefix_[v][i + 1] = m.exec_prefix_[v][i] + (ok ? e : 0);
      m.energy_prefix_[v][i + 1] =
          m.energy_prefix_[v][i] + (ok ? e * m.power_w_[m.cell(static_cast<int>(v), l)] : 0);
      m.unsupported_prefix_[v][i + 1] = m.unsupported_prefix_[v][i] + (ok ? 0 : 1);
    }
  }

  // Split calibration points per virtual device: its level's piece runs, or else those of its
  // device's level nearest in frequency (a piece's time relative to its layer hardly depends on
  // the clock).
  for (size_t v = 0; v < V; ++v) {
    const VirtualDevice& vd = m.vds_[v];
    const DeviceProfile& dp = profile.devices[static_cast<size_t>(vd.device_index)];
    const LevelProfile* src = nullptr;
    for (const LevelProfile& lp : dp.levels) {
      if (lp.piece_runs.empty()) continue;
      if (src == nullptr || std::abs(lp.mhz - vd.mhz) < std::abs(src->mhz - vd.mhz)) src = &lp;
    }
    if (src == nullptr) continue;
    for (const PieceRun& r : src->piece_runs) {
      auto method = parse_split_method(r.method);
      if (!method.ok() || r.layer < 0 || r.layer >= L || r.whole_ms <= 0) continue;
      const double ratio = m.regression_ratio(static_cast<int>(v), r.layer, r.flops, r.bytes);
      if (!(ratio > 0)) continue;
      const double share = m.piece_share(r.layer, r.flops, r.bytes);
      if (!(share > 0 && share < 1)) continue;
      m.piece_points_[{static_cast<int>(v), r.layer, static_cast<int>(*method)}].emplace_back(
          share, (r.ms / r.whole_ms) / ratio);
    }
  }
  for (auto& [key, pts] : m.piece_points_) std::sort(pts.begin(), pts.end());
  return m;
}

// ---- queries ----

std::vector<int> CostModel::latency_devices() const {
  std::vector<int> out;
  for (size_t v = 0; v < vds_.size(); ++v) {
    if (vds_[v].top) out.push_back(static_cast<int>(v));
  }
  return out;
}

std::vector<int> CostModel::energy_devices() const {
  std::vector<int> out;
  for (size_t v = 0; v < vds_.size(); ++v) out.push_back(static_cast<int>(v));
  return out;
}

Result<int> CostModel::find(const std::string& name) const {
  for (size_t v = 0; v < vds_.size(); ++v) {
    if (vds_[v].label == name || (vds_[v].top && vds_[v].device == name) ||
        vds_[v].device + "@" + std::to_string(vds_[v].mhz) == name) {
      return static_cast<int>(v);
    }
  }
  std::string all;
  for (const VirtualDevice& vd : vds_) all += (all.empty() ? "" : ", ") + vd.label;
  return not_found("the profile has no device " + quote_name(name) + " (it has " + all + ")");
}

bool CostModel::can_run(int vd, int layer) const {
  return std::isfinite(exec_ms_[cell(vd, layer)]);
}

double CostModel::exec_ms(int vd, int layer) const {
  return exec_ms_[cell(vd, layer)];
}

double CostModel::piece_share(int layer, double flops, double bytes) const {
  const ProfileLayer& pl = profile_.layers[static_cast<size_t>(layer)];
  const double layer_bytes =
      static_cast<double>(pl.input_bytes + pl.weight_bytes + pl.output_bytes);
  return pl.flops > 0 ? flops / pl.flops : (layer_bytes > 0 ? bytes / layer_bytes : 1.0);
}

double CostModel::regression_ratio(int vd, int layer, double flops, double bytes) const {
  const ProfileLayer& pl = profile_.layers[static_cast<size_t>(layer)];
  const auto& fits = regression_[static_cast<size_t>(vds_[static_cast<size_t>(vd)].device_index)];
  // No regression on this device: the piece's share of the FLOPs (or bytes for FLOP-free ops).
  if (fits.empty()) return piece_share(layer, flops, bytes);
  const double layer_bytes =
      static_cast<double>(pl.input_bytes + pl.weight_bytes + pl.output_bytes);
  const RegressionFit& f = choose(fits, pl.op);
  const double whole = predict(f, pl.flops, layer_bytes);
  if (!(whole > 0)) return piece_share(layer, flops, bytes);
  return predict(f, flops, bytes) / whole;
}

const std::vector<std::pair<double, double>>& CostModel::piece_corrections(
    int vd, int layer, SplitMethod method) const {
  static const std::vector<std::pair<double, double>> kNone;
  auto it = piece_points_.find({vd, layer, static_cast<int>(method)});
  return it == piece_points_.end() ? kNone : it->second;
}

double CostModel::piece_exec_ms(int vd, int layer, SplitMethod method, double piece_flops,
                                double piece_bytes) const {
  const double whole = exec_ms(vd, layer);
  if (!std::isfinite(whole)) return whole;
  const double ms = whole * regression_ratio(vd, layer, piece_flops, piece_bytes);
  const auto& pts = piece_corrections(vd, layer, method);
  if (pts.empty()) return ms;
  // Linear between the measured shares around the piece's, the whole layer (1, 1) closing the
  // list; held below the smallest.
  const double share = piece_share(layer, piece_flops, piece_bytes);
  const auto hi = std::lower_bound(pts.begin(), pts.end(), share,
                                   [](const auto& p, double s) { return p.first < s; });
  if (hi == pts.begin()) return ms * pts.front().second;
  const auto [s0, c0] = *(hi - 1);
  const auto [s1, c1] = hi == pts.end() ? std::pair<double, double>(1.0, 1.0) : *hi;
  const double c = share >= s1 ? c1 : c0 + (c1 - c0) * (share - s0) / std::max(1e-12, s1 - s0);
  return ms * c;
}

bool CostModel::estimated(int vd, int layer) const {
  return estimated_[cell(vd, layer)] != 0;
}

double CostModel::power_w(int vd, int layer) const {
  return power_w_[cell(vd, layer)];
}

std::pair<double, double> CostModel::gamma_eps(int device_index, int layer) const {
  return gamma_eps_[static_cast<size_t>(device_index)][static_cast<size_t>(layer)];
}

double CostModel::upload_ms(int vd, uint64_t bytes, int tensors) const {
  return transfer_level_[static_cast<size_t>(vd)]->upload.ms(bytes, tensors);
}

double CostModel::download_ms(int vd, uint64_t bytes, int tensors) const {
  return transfer_level_[static_cast<size_t>(vd)]->download.ms(bytes, tensors);
}

uint64_t CostModel::slice_input_bytes(int first, int last) const {
  return in_bytes_[range(first, last)];
}
int CostModel::slice_input_count(int first, int last) const {
  return in_count_[range(first, last)];
}
uint64_t CostModel::slice_output_bytes(int first, int last) const {
  return out_bytes_[range(first, last)];
}
int CostModel::slice_output_count(int first, int last) const {
  return out_count_[range(first, last)];
}

uint64_t CostModel::slice_memory_bytes(int first, int last) const {
  return weight_prefix_[static_cast<size_t>(last)] - weight_prefix_[static_cast<size_t>(first)] +
         live_max_[range(first, last)];
}

bool CostModel::can_run_slice(int vd, int first, int last) const {
  if (first < 0 || last > L_ || first >= last) return false;
  const auto& un = unsupported_prefix_[static_cast<size_t>(vd)];
  if (un[static_cast<size_t>(last)] - un[static_cast<size_t>(first)] != 0) return false;
  const PlatformDevice& pd =
      devices_[static_cast<size_t>(vds_[static_cast<size_t>(vd)].device_index)];
  return slice_memory_bytes(first, last) <= pd.memory_bytes;
}

double CostModel::evicted_share(int first, int last) const {
  return 1 - (touched_prefix_[static_cast<size_t>(last)] -
              touched_prefix_[static_cast<size_t>(first)]) *
                 inv_touched_total_;
}

double CostModel::cold_at(int vd, double evicted) const {
  return 1 + (overhead_[static_cast<size_t>(vd)].cold_scale - 1) * evicted;
}

double CostModel::cold_scale(int vd, int first, int last) const {
  return cold_at(vd, evicted_share(first, last));
}

double CostModel::corun_scale(int vd) const {
  const VirtualDevice& v = vds_[static_cast<size_t>(vd)];
  const double f = profile_.devices[static_cast<size_t>(v.device_index)].corun_scale;
  return f > 1 ? f : 1;
}

double CostModel::slice_exec_ms(int vd, int first, int last) const {
  return exec_after(vd, first, last, evicted_share(first, last));
}

double CostModel::exec_after(int vd, int first, int last, double evicted) const {
  if (!can_run_slice(vd, first, last)) return kInfiniteCost;
  const auto& p = exec_prefix_[static_cast<size_t>(vd)];
  return (p[static_cast<size_t>(last)] - p[static_cast<size_t>(first)]) * cold_at(vd, evicted);
}

double CostModel::slice_overhead_ms(int vd, int first, int last) const {
  return overhead_[static_cast<size_t>(vd)].ms(slice_input_bytes(first, last) +
                                               slice_output_bytes(first, last));
}

namespace {

// transfer_g(k, l) from a slice's boundary: upload + download + overhead, less the round trip
// both fits include once when the device's transfers are one request and its reply
// (CostModel::hop_shared_ms; 0 elsewhere).
inline double transfer_ms(const TransferFit& upload, const TransferFit& download,
                          const SliceOverhead& overhead, uint64_t in_bytes, int in_count,
                          uint64_t out_bytes, int out_count, double shared) {
  const double up = upload.ms(in_bytes, in_count), down = download.ms(out_bytes, out_count);
  return up + down - shared_part(up, down, in_count, out_count, shared) +
         overhead.ms(in_bytes + out_bytes);
}

}  // namespace

double CostModel::slice_transfer_ms(int vd, int first, int last) const {
  const LevelProfile& level = *transfer_level_[static_cast<size_t>(vd)];
  const size_t r = range(first, last);
  return transfer_ms(level.upload, level.download, overhead_[static_cast<size_t>(vd)], in_bytes_[r],
                     in_count_[r], out_bytes_[r], out_count_[r],
                     hop_shared_[static_cast<size_t>(vd)]);
}

double CostModel::hop_shared_ms(int vd) const {
  return hop_shared_[static_cast<size_t>(vd)];
}

double CostModel::slice_ms(int vd, int first, int last) const {
  const double e = slice_exec_ms(vd, first, last);
  if (!std::isfinite(e)) return kInfiniteCost;
  return e + slice_transfer_ms(vd, first, last);
}

double CostModel::slice_ms(int vd, int first, int last, double evicted) const {
  const double e = exec_after(vd, first, last, evicted);
  if (!std::isfinite(e)) return kInfiniteCost;
  return e + slice_transfer_ms(vd, first, last);
}

double CostModel::transfer_power_w(int vd) const {
  const VirtualDevice& v = vds_[static_cast<size_t>(vd)];
  return tessera::power_w(devices_[static_cast<size_t>(v.device_index)], v.level);
}

double CostModel::slice_energy_mj(int vd, int first, int last) const {
  if (!can_run_slice(vd, first, last)) return kInfiniteCost;
  const auto& p = energy_prefix_[static_cast<size_t>(vd)];
  const double exec =
      (p[static_cast<size_t>(last)] - p[static_cast<size_t>(first)]) * cold_scale(vd, first, last);
  return exec + slice_transfer_ms(vd, first, last) * transfer_power_w(vd);
}

// ---- the planners' table ----

SliceTable CostModel::slice_table(const std::vector<int>& vds, Objective objective) const {
  SliceTable t;
  t.cm_ = this;
  t.objective_ = objective;
  t.L_ = L_;
  t.touched_ = touched_prefix_.data();
  t.inv_total_ = inv_touched_total_;
  t.D_ = static_cast<int>(vds.size());
  t.vds_ = vds;
  const bool energy = objective == Objective::kEnergy;
  const size_t stride = static_cast<size_t>(L_) + 1;
  t.reach_.assign(vds.size() * stride, 0);
  for (size_t o = 0; o < vds.size(); ++o) {
    const size_t vd = static_cast<size_t>(vds[o]);
    t.prefix_.push_back(energy ? energy_prefix_[vd].data() : exec_prefix_[vd].data());
    t.scale_.push_back(energy ? transfer_power_w(static_cast<int>(vd)) : 1.0);
    t.cold_.push_back(overhead_[vd].cold_scale - 1);
    // Transfer group: the measured level whose fits price the option's transfers and overhead.
    const LevelProfile* level = transfer_level_[vd];
    int g = 0;
    while (g < t.num_groups() && t.groups_[static_cast<size_t>(g)].upload != &level->upload) ++g;
    if (g == t.num_groups())
      t.groups_.push_back({&level->upload, &level->download, &overhead_[vd], hop_shared_[vd]});
    t.group_.push_back(g);

    // Reach: an earlier option on the same device with the same unsupported layers has the same
    // (memory is the device's); else one two-pointer scan, since reach only grows with k.
    int* reach = &t.reach_[o * stride];
    const VirtualDevice& v = vds_[vd];
    bool shared = false;
    for (size_t p = 0; p < o && !shared; ++p) {
      const size_t pv = static_cast<size_t>(vds[p]);
      if (vds_[pv].device_index == v.device_index &&
          unsupported_prefix_[pv] == unsupported_prefix_[vd]) {
        std::copy_n(&t.reach_[p * stride], stride, reach);
        shared = true;
      }
    }
    if (shared) continue;
    const std::vector<int>& un = unsupported_prefix_[vd];
    const uint64_t memory = devices_[static_cast<size_t>(v.device_index)].memory_bytes;
    int l = 0;
    for (int k = 0; k < L_; ++k) {
      l = std::max(l, k);
      while (l < L_ && un[static_cast<size_t>(l) + 1] == un[static_cast<size_t>(k)] &&
             slice_memory_bytes(k, l + 1) <= memory) {
        ++l;
      }
      reach[k] = l;
    }
    reach[L_] = L_;
  }
  return t;
}

double SliceTable::transfer(int g, int k, int l) const {
  const Group& gr = groups_[static_cast<size_t>(g)];
  const size_t r = cm_->range(k, l);
  return transfer_ms(*gr.upload, *gr.download, *gr.overhead, cm_->in_bytes_[r], cm_->in_count_[r],
                     cm_->out_bytes_[r], cm_->out_count_[r], gr.shared);
}

void SliceTable::transfer_row(int g, int k, int last, double* row) const {
  const Group& gr = groups_[static_cast<size_t>(g)];
  const TransferFit& up = *gr.upload;
  const TransferFit& down = *gr.download;
  const SliceOverhead overhead = *gr.overhead;
  // Row k of the CostModel's boundary tables is contiguous in l.
  const size_t r = cm_->range(k, 0);
  const uint64_t* in_bytes = &cm_->in_bytes_[r];
  const uint64_t* out_bytes = &cm_->out_bytes_[r];
  const int* in_count = &cm_->in_count_[r];
  const int* out_count = &cm_->out_count_[r];
  for (int l = k + 1; l <= last; ++l) {
    row[l] = transfer_ms(up, down, overhead, in_bytes[l], in_count[l], out_bytes[l], out_count[l],
                         gr.shared);
  }
}

double SliceTable::exec_cost(int o, int k, int l) const {
  if (k < 0 || l > L_ || k >= l || l > reach(o, k)) return kInfiniteCost;
  return (prefix(o)[l] - prefix(o)[k]) * cold_scale(o, k, l);
}

double SliceTable::cost(int o, int k, int l) const {
  const double e = exec_cost(o, k, l);
  if (!(e < kInfiniteCost)) return kInfiniteCost;
  return e + transfer(group(o), k, l) * transfer_scale(o);
}

}  // namespace tessera
