#include "ops/split_rule.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "ops/conv_pool_util.h"

namespace tessera {

namespace {

constexpr const char* kMethodNames[] = {"fc-out",       "fc-in",       "conv-channel",
                                        "conv-spatial", "conv-filter", "conv-grid"};

bool is_unary_activation(OpKind k) {
  switch (k) {
    case OpKind::kRelu:
    case OpKind::kLeakyRelu:
    case OpKind::kSigmoid:
    case OpKind::kHardSigmoid:
    case OpKind::kHardSwish:
    case OpKind::kTanh:
      return true;
    default:
      return false;
  }
}

bool is_binary_elementwise(OpKind k) {
  return k == OpKind::kAdd || k == OpKind::kSub || k == OpKind::kMul || k == OpKind::kDiv;
}

Status no_rule(const OpContext& ctx, SplitMethod m, const std::string& why) {
  return ctx.unsupported(std::string("cannot split with ") + split_method_name(m) + ": " + why);
}

// The layer's output (every op split here has one).
Result<TensorInfo> output_of(const OpContext& ctx) {
  std::vector<TensorInfo> outs;
  RETURN_IF_ERROR(infer_node(ctx, 1, &outs));
  return outs[0];
}

// Element-wise ops (unary, and binaries whose inputs all have the output's shape) split along
// any axis: every input is cut like the output.
Status check_same_shape_inputs(const OpContext& ctx, SplitMethod m, const Shape& out) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i) && ctx.input(i).shape != out) {
      return no_rule(ctx, m,
                     "input " + std::to_string(i) + " has shape " + ctx.input(i).shape.to_string() +
                         ", not the output's " + out.to_string() +
                         " (broadcasting inputs are not split)");
    }
  }
  return Status();
}

struct Dims {
  int64_t group = 1;
  int64_t cout_g = 0;
  int64_t cin_g = 0;
};

Result<Dims> conv_group_dims(const OpContext& ctx) {
  Dims d;
  Result<int64_t> group = ctx.attrs().int_or("group", 1);
  if (!group.ok()) return ctx.wrap(group.status());
  d.group = *group;
  d.cout_g = ctx.input(1).shape[0] / d.group;
  d.cin_g = ctx.input(1).shape[1];
  return d;
}

// Gemm's K and N, and where they sit in A and B.
struct GemmDims {
  bool trans_a = false;
  bool trans_b = false;
  int64_t k = 0;
  int64_t n = 0;
};

Result<GemmDims> gemm_dims(const OpContext& ctx) {
  GemmDims d;
  ASSIGN_OR_RETURN(d.trans_a, read_flag(ctx, "transA"));
  ASSIGN_OR_RETURN(d.trans_b, read_flag(ctx, "transB"));
  const Shape& a = ctx.input(0).shape;
  const Shape& b = ctx.input(1).shape;
  d.k = d.trans_a ? a[0] : a[1];
  d.n = d.trans_b ? b[0] : b[1];
  return d;
}

// The window of a Conv / MaxPool / AveragePool along its spatial dims.
Result<WindowGeometry> window_of(const OpContext& ctx, bool* ceil_mode) {
  const Shape& x = ctx.input(0).shape;
  const int rank = x.rank() - 2;
  const std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  ForwardWindowOptions opts;
  std::vector<int64_t> kernel;
  if (ctx.kind() == OpKind::kConv) {
    const Shape& w = ctx.input(1).shape;
    kernel.assign(w.dims().begin() + 2, w.dims().end());
  } else {
    ASSIGN_OR_RETURN(kernel, read_pool_kernel(ctx, rank));
    ASSIGN_OR_RETURN(opts.ceil_mode, read_flag(ctx, "ceil_mode"));
    opts.pads_below_kernel = true;
  }
  *ceil_mode = opts.ceil_mode;
  return forward_window(ctx, in, kernel, opts);
}

// A piece of a concat split: every input whole, output whole; callers narrow them.
SplitPiece whole_piece(const OpContext& ctx, const TensorInfo& out) {
  SplitPiece p;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    p.present.push_back(ctx.has_input(i));
    p.inputs.push_back(ctx.has_input(i) ? Region::whole(ctx.input(i).shape) : Region{});
  }
  p.attrs = ctx.attrs();
  p.output = Region::whole(out.shape);
  return p;
}

void narrow(Region* r, int axis, int64_t begin, int64_t end) {
  r->begin[static_cast<size_t>(axis)] = begin;
  r->end[static_cast<size_t>(axis)] = end;
}

// Outputs [r0, r1) along spatial axis `d` (0: rows, 1: columns) of a window op: the input range
// from the first to the last position a tap of its windows reads and, in *pads (the ONNX pads of
// every spatial axis, begins then ends), the explicit pads that stand for the part of the window
// outside the input.
Status spatial_piece(const OpContext& ctx, SplitMethod method, const WindowGeometry& geo, int d,
                     int64_t r0, int64_t r1, SplitPiece* p, std::vector<int64_t>* pads) {
  const size_t a = static_cast<size_t>(d);
  const int64_t s = geo.strides[a], dil = geo.dilations[a], k = geo.kernel[a], n = geo.input[a];
  const int64_t lo = r0 * s - geo.pads_begin[a];
  const int64_t hi = (r1 - 1) * s - geo.pads_begin[a] + geo.effective_kernel(d);
  // The first and last input positions a tap of these windows reads (with dilation, a window
  // reaching into the padding may skip the input's first or last positions): the exact halo.
  int64_t clo = INT64_MAX, chi = INT64_MIN;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t start = r * s - geo.pads_begin[a];
    if (start >= 0) {
      clo = std::min(clo, start);
      break;  // later windows start further on
    }
    const int64_t j = (-start + dil - 1) / dil;  // the first tap at or past 0
    if (j < k) clo = std::min(clo, start + j * dil);
  }
  for (int64_t r = r1 - 1; r >= r0; --r) {
    const int64_t start = r * s - geo.pads_begin[a];
    const int64_t end = start + (k - 1) * dil;  // the last tap
    if (end < n) {
      chi = std::max(chi, end + 1);
      break;  // earlier windows end before
    }
    if (start < n) chi = std::max(chi, start + (n - 1 - start) / dil * dil + 1);
  }
  if (clo == INT64_MAX || chi == INT64_MIN || chi <= clo) {
    return ctx.unsupported(std::string("cannot split with ") + split_method_name(method) +
                           ": output " + (d == 0 ? "rows" : "columns") + " [" + std::to_string(r0) +
                           ", " + std::to_string(r1) +
                           ") read only padding; use fewer pieces or other ratios");
  }
  narrow(&p->inputs[0], 2 + d, clo, chi);
  (*pads)[a] = clo - lo;
  (*pads)[static_cast<size_t>(geo.rank) + a] = hi - chi;
  narrow(&p->output, 2 + d, r0, r1);
  return Status();
}

// The explicit pads a window op's pieces start from (the layer's own, begins then ends).
std::vector<int64_t> layer_pads(const WindowGeometry& geo) {
  std::vector<int64_t> pads(geo.pads_begin.begin(), geo.pads_begin.end());
  pads.insert(pads.end(), geo.pads_end.begin(), geo.pads_end.end());
  return pads;
}

// Sets a window piece's pads; its window count is exact without ceil_mode:
// (hi - lo - ek) / s + 1 = r1 - r0 along every split axis.
void set_piece_pads(SplitPiece* p, std::vector<int64_t> pads) {
  p->attrs.set("pads", std::move(pads));
  p->attrs.set("auto_pad", std::string("NOTSET"));
  p->attrs.erase("ceil_mode");
}

// The grid of conv-grid for n pieces: rows x cols with rows the largest divisor of n not above
// sqrt(n) (2 -> 1x2, 4 -> 2x2, 6 -> 2x3, 9 -> 3x3; a prime n is one row of n columns).
std::pair<int64_t, int64_t> grid_of(int64_t n) {
  int64_t rows = 1;
  for (int64_t r = 1; r * r <= n; ++r) {
    if (n % r == 0) rows = r;
  }
  return {rows, n / rows};
}

}  // namespace

const char* split_method_name(SplitMethod m) {
  return kMethodNames[static_cast<int>(m)];
}

Result<SplitMethod> parse_split_method(std::string_view name) {
  for (SplitMethod m : kAllSplitMethods) {
    if (name == split_method_name(m)) return m;
  }
  return invalid_argument("unknown split method " + quote_name(name) +
                          ": expected fc-out, fc-in, conv-channel, conv-spatial, conv-filter or "
                          "conv-grid");
}

Region Region::whole(const Shape& s) {
  Region r;
  r.begin.assign(static_cast<size_t>(s.rank()), 0);
  r.end.assign(s.dims().begin(), s.dims().end());
  return r;
}

Shape Region::shape() const {
  std::vector<int64_t> d(begin.size());
  for (size_t i = 0; i < begin.size(); ++i) d[i] = end[i] - begin[i];
  return Shape(std::move(d));
}

int64_t Region::numel() const {
  int64_t n = 1;
  for (size_t i = 0; i < begin.size(); ++i) n *= end[i] - begin[i];
  return n;
}

bool Region::covers(const Shape& s) const {
  return *this == whole(s);
}

Result<std::vector<int64_t>> apportion(int64_t total, std::span<const double> ratios) {
  const int64_t n = static_cast<int64_t>(ratios.size());
  if (n == 0) return invalid_argument("a split needs at least one piece");
  double sum = 0;
  for (double r : ratios) {
    if (!(r > 0) || !std::isfinite(r)) {
      return invalid_argument("split ratio " + std::to_string(r) + " must be positive");
    }
    sum += r;
  }
  if (total < n) {
    return invalid_argument("cannot cut " + std::to_string(total) + " units into " +
                            std::to_string(n) + " pieces");
  }
  // Largest remainder on total x ratio (each piece its exact share rounded down, the units
  // left to the largest fractions), then every empty piece takes one unit from the largest.
  std::vector<int64_t> share(static_cast<size_t>(n), 0);
  std::vector<std::pair<double, int64_t>> frac;
  int64_t given = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double exact = static_cast<double>(total) * ratios[static_cast<size_t>(i)] / sum;
    const int64_t whole = std::min(total, static_cast<int64_t>(std::floor(exact)));
    share[static_cast<size_t>(i)] = whole;
    given += whole;
    frac.emplace_back(exact - static_cast<double>(whole), i);
  }
  std::stable_sort(frac.begin(), frac.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (int64_t j = 0; given < total; ++j, ++given) {
    ++share[static_cast<size_t>(frac[static_cast<size_t>(j % n)].second)];
  }
  for (int64_t i = 0; i < n; ++i) {
    while (share[static_cast<size_t>(i)] == 0) {
      const auto largest = std::max_element(share.begin(), share.end());
      --*largest;
      ++share[static_cast<size_t>(i)];
    }
  }
  return share;
}

Result<int64_t> split_extent(const OpContext& ctx, SplitMethod method) {
  ASSIGN_OR_RETURN(TensorInfo out, output_of(ctx));
  const OpKind k = ctx.kind();
  switch (method) {
    case SplitMethod::kFcOut:
    case SplitMethod::kFcIn: {
      if (k == OpKind::kGemm) {
        if (ctx.constant(1) == nullptr) return no_rule(ctx, method, "B is not a constant");
        ASSIGN_OR_RETURN(GemmDims d, gemm_dims(ctx));
        return method == SplitMethod::kFcOut ? d.n : d.k;
      }
      if (k == OpKind::kMatMul) {
        const Shape& b = ctx.input(1).shape;
        if (ctx.constant(1) == nullptr || b.rank() != 2 || ctx.input(0).shape.rank() < 2) {
          return no_rule(ctx, method, "MatMul splits need A of rank >= 2 and a constant 2-D B");
        }
        return method == SplitMethod::kFcOut ? b[1] : b[0];
      }
      return no_rule(ctx, method, "only Gemm and MatMul have fc rules");
    }
    case SplitMethod::kConvChannel: {
      if (out.shape.rank() < 2) return no_rule(ctx, method, "the output has no channel axis");
      if (k == OpKind::kConv) {
        if (ctx.constant(1) == nullptr) return no_rule(ctx, method, "W is not a constant");
        ASSIGN_OR_RETURN(Dims d, conv_group_dims(ctx));
        return d.group == 1 ? out.shape[1] : d.group;
      }
      if (k == OpKind::kMaxPool || k == OpKind::kAveragePool || k == OpKind::kGlobalAveragePool ||
          k == OpKind::kGlobalMaxPool || k == OpKind::kBatchNormalization) {
        return out.shape[1];
      }
      if (is_unary_activation(k) || is_binary_elementwise(k)) {
        RETURN_IF_ERROR(check_same_shape_inputs(ctx, method, out.shape));
        return out.shape[1];
      }
      return no_rule(ctx, method, "no channel rule for this op");
    }
    case SplitMethod::kConvSpatial: {
      if (out.shape.rank() < 3) return no_rule(ctx, method, "the output has no spatial axis");
      if (k == OpKind::kConv) {
        if (ctx.constant(1) == nullptr) return no_rule(ctx, method, "W is not a constant");
        return out.shape[2];
      }
      if (k == OpKind::kMaxPool || k == OpKind::kAveragePool) {
        if (k == OpKind::kAveragePool) {
          ASSIGN_OR_RETURN(bool ceil, read_flag(ctx, "ceil_mode"));
          ASSIGN_OR_RETURN(bool include, read_flag(ctx, "count_include_pad"));
          if (ceil && include) {
            return no_rule(ctx, method,
                           "AveragePool with ceil_mode and count_include_pad counts taps a piece "
                           "cannot see");
          }
        }
        return out.shape[2];
      }
      if (is_unary_activation(k) || is_binary_elementwise(k)) {
        RETURN_IF_ERROR(check_same_shape_inputs(ctx, method, out.shape));
        return out.shape[2];
      }
      return no_rule(ctx, method, "no spatial rule for this op");
    }
    case SplitMethod::kConvGrid: {
      if (out.shape.rank() != 4) return no_rule(ctx, method, "the output has not 2 spatial axes");
      ASSIGN_OR_RETURN(const int64_t rows, split_extent(ctx, SplitMethod::kConvSpatial));
      return rows * out.shape[3];
    }
    case SplitMethod::kConvFilter: {
      if (k != OpKind::kConv) return no_rule(ctx, method, "only Conv has a filter rule");
      if (ctx.constant(1) == nullptr) return no_rule(ctx, method, "W is not a constant");
      ASSIGN_OR_RETURN(Dims d, conv_group_dims(ctx));
      if (d.group != 1) {
        return no_rule(ctx, method,
                       "group " + std::to_string(d.group) + " (filter splits need group 1)");
      }
      return ctx.input(0).shape[1];
    }
  }
  return no_rule(ctx, method, "unknown method");
}

Result<SplitRule> split_node(const OpContext& ctx, SplitMethod method,
                             std::span<const double> ratios) {
  ASSIGN_OR_RETURN(const int64_t extent, split_extent(ctx, method));
  SplitRule rule;
  rule.method = method;
  ASSIGN_OR_RETURN(rule.output, output_of(ctx));
  const OpKind k = ctx.kind();
  const int out_rank = rule.output.shape.rank();
  const bool partial_sums = method == SplitMethod::kFcIn || method == SplitMethod::kConvFilter;
  if (partial_sums) {
    rule.merge = SplitMerge::kSum;
    Result<Activation> act = parse_fused_activation(ctx.attrs());
    if (!act.ok()) return ctx.wrap(act.status());
    rule.activation = *act;
  }

  // Window geometry for spatial pieces (Conv and pools).
  WindowGeometry geo;
  const bool windowed = k == OpKind::kConv || k == OpKind::kMaxPool || k == OpKind::kAveragePool;
  const bool spatial = method == SplitMethod::kConvSpatial || method == SplitMethod::kConvGrid;
  if (spatial && windowed) {
    bool ceil_mode = false;
    ASSIGN_OR_RETURN(geo, window_of(ctx, &ceil_mode));
  }

  if (spatial) {
    // Piece i is the cell (i / cols, i % cols) of a rows x cols grid over the output's spatial
    // axes: conv-spatial is n x 1 (row strips, any spatial rank), conv-grid the paper's grid.
    // Each band of rows gets the summed ratios of its row of cells, each band of columns those
    // of its column (equal ratios give equal cells; unequal ones shift bands, not single cells).
    rule.axis = 2;  // concatenated along H (and W for conv-grid)
    const bool grid = method == SplitMethod::kConvGrid;
    const auto [rows, cols] =
        grid ? grid_of(static_cast<int64_t>(ratios.size()))
             : std::pair<int64_t, int64_t>{static_cast<int64_t>(ratios.size()), 1};
    std::vector<double> row_w(static_cast<size_t>(rows), 0.0),
        col_w(static_cast<size_t>(cols), 0.0);
    for (size_t i = 0; i < ratios.size(); ++i) {
      row_w[i / static_cast<size_t>(cols)] += ratios[i];
      col_w[i % static_cast<size_t>(cols)] += ratios[i];
    }
    // Band starts along each split axis (axis 2 + d of the output).
    std::vector<std::vector<int64_t>> starts;
    for (const std::vector<double>& w : {row_w, col_w}) {
      if (starts.size() == 1 && !grid) break;
      Result<std::vector<int64_t>> bands =
          apportion(rule.output.shape[2 + static_cast<int>(starts.size())], w);
      if (!bands.ok()) {
        return no_rule(ctx, method,
                       "a " + std::to_string(rows) + "x" + std::to_string(cols) + " grid of " +
                           rule.output.shape.to_string() + ": " + bands.status().message());
      }
      starts.push_back({0});
      for (int64_t b : *bands) starts.back().push_back(starts.back().back() + b);
    }
    for (size_t i = 0; i < ratios.size(); ++i) {
      const size_t cell[2] = {i / static_cast<size_t>(cols), i % static_cast<size_t>(cols)};
      SplitPiece p = whole_piece(ctx, rule.output);
      std::vector<int64_t> pads = windowed ? layer_pads(geo) : std::vector<int64_t>{};
      for (size_t d = 0; d < starts.size(); ++d) {
        const int64_t b0 = starts[d][cell[d]], b1 = starts[d][cell[d] + 1];
        const int axis = 2 + static_cast<int>(d);
        if (windowed) {
          RETURN_IF_ERROR(spatial_piece(ctx, method, geo, static_cast<int>(d), b0, b1, &p, &pads));
          continue;
        }
        for (int j = 0; j < ctx.num_inputs(); ++j) {
          if (ctx.has_input(j)) narrow(&p.inputs[static_cast<size_t>(j)], axis, b0, b1);
        }
        narrow(&p.output, axis, b0, b1);
      }
      if (windowed) set_piece_pads(&p, std::move(pads));
      rule.pieces.push_back(std::move(p));
    }
    return rule;
  }

  ASSIGN_OR_RETURN(std::vector<int64_t> shares, apportion(extent, ratios));
  int64_t u0 = 0;
  for (size_t i = 0; i < shares.size(); ++i) {
    const int64_t u1 = u0 + shares[i];
    SplitPiece p = whole_piece(ctx, rule.output);
    switch (method) {
      case SplitMethod::kFcOut: {
        rule.axis = out_rank - 1;
        if (k == OpKind::kGemm) {
          ASSIGN_OR_RETURN(GemmDims d, gemm_dims(ctx));
          narrow(&p.inputs[1], d.trans_b ? 0 : 1, u0, u1);
          // C broadcasts to [M, N]: slice its last axis when it runs along N.
          if (ctx.has_input(2)) {
            const Shape& c = ctx.input(2).shape;
            if (c.rank() >= 1 && c[c.rank() - 1] == d.n && d.n > 1) {
              narrow(&p.inputs[2], c.rank() - 1, u0, u1);
            }
          }
        } else {
          narrow(&p.inputs[1], 1, u0, u1);
        }
        narrow(&p.output, out_rank - 1, u0, u1);
        break;
      }
      case SplitMethod::kFcIn: {
        if (k == OpKind::kGemm) {
          ASSIGN_OR_RETURN(GemmDims d, gemm_dims(ctx));
          narrow(&p.inputs[0], d.trans_a ? 0 : 1, u0, u1);
          narrow(&p.inputs[1], d.trans_b ? 1 : 0, u0, u1);
          if (ctx.has_input(2) && i > 0) p.present[2] = false;  // C once, in the first piece
        } else {
          const int a_rank = ctx.input(0).shape.rank();
          narrow(&p.inputs[0], a_rank - 1, u0, u1);
          narrow(&p.inputs[1], 0, u0, u1);
        }
        set_fused_activation(&p.attrs, Activation{});
        break;
      }
      case SplitMethod::kConvChannel: {
        rule.axis = 1;
        if (k == OpKind::kConv) {
          ASSIGN_OR_RETURN(Dims d, conv_group_dims(ctx));
          const int64_t per = d.group == 1 ? 1 : d.cout_g;  // filters per unit
          narrow(&p.inputs[1], 0, u0 * per, u1 * per);
          if (ctx.has_input(2)) narrow(&p.inputs[2], 0, u0 * per, u1 * per);
          if (d.group > 1) {
            narrow(&p.inputs[0], 1, u0 * d.cin_g, u1 * d.cin_g);
            p.attrs.set("group", u1 - u0);
          }
          narrow(&p.output, 1, u0 * per, u1 * per);
        } else {
          // Per-channel ops: every input with a channel axis is cut along it; BatchNormalization's
          // [C] parameters are cut along their only axis.
          for (int j = 0; j < ctx.num_inputs(); ++j) {
            if (!ctx.has_input(j)) continue;
            const int axis = ctx.input(j).shape.rank() == 1 ? 0 : 1;
            narrow(&p.inputs[static_cast<size_t>(j)], axis, u0, u1);
          }
          narrow(&p.output, 1, u0, u1);
        }
        break;
      }
      case SplitMethod::kConvSpatial:
      case SplitMethod::kConvGrid:
        break;  // built above, with the bands of both
      case SplitMethod::kConvFilter: {
        narrow(&p.inputs[0], 1, u0, u1);
        narrow(&p.inputs[1], 1, u0, u1);
        if (ctx.has_input(2) && i > 0) p.present[2] = false;  // the bias once, in the first piece
        set_fused_activation(&p.attrs, Activation{});
        break;
      }
    }
    rule.pieces.push_back(std::move(p));
    u0 = u1;
  }
  return rule;
}

SplitTraffic split_traffic(const OpContext& ctx, const SplitRule& rule) {
  SplitTraffic t;
  const uint64_t out_size = dtype_size(rule.output.dtype);
  for (const SplitPiece& p : rule.pieces) {
    uint64_t scatter = 0;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      if (!p.present[static_cast<size_t>(i)]) continue;
      const uint64_t bytes = static_cast<uint64_t>(p.inputs[static_cast<size_t>(i)].numel()) *
                             dtype_size(ctx.input(i).dtype);
      (ctx.constant(i) != nullptr ? t.weight_bytes : scatter) += bytes;
    }
    const uint64_t gather = static_cast<uint64_t>(p.output.numel()) * out_size;
    t.scatter_bytes += scatter;
    t.gather_bytes += gather;
    t.piece_scatter_bytes.push_back(scatter);
    t.piece_gather_bytes.push_back(gather);
  }
  return t;
}

OpCost split_piece_cost(const OpContext& ctx, const SplitRule& rule, size_t piece) {
  const SplitPiece& p = rule.pieces[piece];
  std::vector<TensorInfo> infos;
  std::vector<const Tensor*> constants(static_cast<size_t>(ctx.num_inputs()), nullptr);
  auto present = std::make_unique<bool[]>(static_cast<size_t>(ctx.num_inputs()) + 1);
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const bool has = ctx.has_input(i) && p.present[static_cast<size_t>(i)];
    present[static_cast<size_t>(i)] = has;
    infos.push_back(has ? TensorInfo{ctx.input(i).dtype, p.inputs[static_cast<size_t>(i)].shape()}
                        : TensorInfo{});
  }
  // Cost functions read shapes only; constness only moves bytes between input and weight counts.
  OpContext pc(ctx.node_name(), ctx.kind(), p.attrs, infos, constants,
               std::span<const bool>(present.get(), static_cast<size_t>(ctx.num_inputs())));
  const TensorInfo out{rule.output.dtype, p.output.shape()};
  return node_cost(pc, std::span<const TensorInfo>(&out, 1));
}

uint64_t split_merge_bytes(const SplitRule& rule) {
  const uint64_t out = rule.output.byte_size();
  return rule.merge == SplitMerge::kConcat ? out : out * rule.pieces.size();
}

std::optional<Tensor> region_view(const Tensor& t, const Region& r) {
  const int rank = t.rank();
  if (static_cast<int>(r.begin.size()) != rank || static_cast<int>(r.end.size()) != rank) {
    return std::nullopt;
  }
  for (int d = 0; d < rank; ++d) {
    const size_t i = static_cast<size_t>(d);
    if (r.begin[i] < 0 || r.end[i] > t.dim(d) || r.begin[i] > r.end[i]) return std::nullopt;
  }
  if (r.covers(t.shape())) return t;
  if (t.numel() == 0) return std::nullopt;
  // Contiguous: the dims before the first narrowed or non-unit one are unit extents, the dims
  // after it whole.
  int d = 0;
  while (d < rank && r.begin[static_cast<size_t>(d)] == 0 &&
         r.end[static_cast<size_t>(d)] == t.dim(d) && t.dim(d) == 1) {
    ++d;
  }
  if (d == rank) return t;
  for (int e = d + 1; e < rank; ++e) {
    if (r.begin[static_cast<size_t>(e)] != 0 || r.end[static_cast<size_t>(e)] != t.dim(e)) {
      return std::nullopt;
    }
  }
  int64_t inner = 1;
  for (int e = d + 1; e < rank; ++e) inner *= t.dim(e);
  const size_t offset =
      static_cast<size_t>(r.begin[static_cast<size_t>(d)] * inner) * dtype_size(t.dtype());
  auto owner = std::make_shared<Tensor>(t);
  void* data = static_cast<unsigned char*>(const_cast<void*>(t.raw())) + offset;
  return Tensor::view(t.dtype(), r.shape(), data, std::move(owner), t.layout());
}

Result<Tensor> slice_region(const Tensor& t, const Region& r) {
  const int rank = t.rank();
  if (static_cast<int>(r.begin.size()) != rank || static_cast<int>(r.end.size()) != rank) {
    return invalid_argument("region of rank " + std::to_string(r.begin.size()) +
                            " for a tensor of shape " + t.shape().to_string());
  }
  for (int d = 0; d < rank; ++d) {
    const size_t i = static_cast<size_t>(d);
    if (r.begin[i] < 0 || r.end[i] > t.dim(d) || r.begin[i] > r.end[i]) {
      return invalid_argument("region dim " + std::to_string(d) + " [" +
                              std::to_string(r.begin[i]) + ", " + std::to_string(r.end[i]) +
                              ") is outside the tensor of shape " + t.shape().to_string());
    }
  }
  if (std::optional<Tensor> v = region_view(t, r)) return *v;  // shares the storage
  ASSIGN_OR_RETURN(Tensor out, Tensor::create(t.dtype(), r.shape(), t.layout()));
  if (out.numel() == 0) return out;
  // Copy runs of the innermost dims that the region keeps whole.
  const size_t es = dtype_size(t.dtype());
  int inner = rank;  // dims [inner, rank) are whole
  int64_t run = 1;
  while (inner > 0 && r.begin[static_cast<size_t>(inner - 1)] == 0 &&
         r.end[static_cast<size_t>(inner - 1)] == t.dim(inner - 1)) {
    run *= t.dim(inner - 1);
    --inner;
  }
  if (inner > 0)
    run *= r.end[static_cast<size_t>(inner - 1)] - r.begin[static_cast<size_t>(inner - 1)];
  const int outer = inner > 0 ? inner - 1 : 0;  // dims [0, outer) iterate
  std::vector<int64_t> stride(static_cast<size_t>(rank), 1);
  for (int d = rank - 2; d >= 0; --d) {
    stride[static_cast<size_t>(d)] = stride[static_cast<size_t>(d + 1)] * t.dim(d + 1);
  }
  std::vector<int64_t> idx(r.begin.begin(), r.begin.begin() + outer);
  const auto* src = static_cast<const unsigned char*>(t.raw());
  auto* dst = static_cast<unsigned char*>(out.raw());
  const int64_t count = out.numel() / run;
  for (int64_t c = 0; c < count; ++c) {
    int64_t off = 0;
    for (int d = 0; d < outer; ++d)
      off += idx[static_cast<size_t>(d)] * stride[static_cast<size_t>(d)];
    if (inner > 0)
      off += r.begin[static_cast<size_t>(inner - 1)] * stride[static_cast<size_t>(inner - 1)];
    std::memcpy(dst + static_cast<size_t>(c * run) * es, src + static_cast<size_t>(off) * es,
                static_cast<size_t>(run) * es);
    for (int d = outer - 1; d >= 0; --d) {
      const size_t i = static_cast<size_t>(d);
      if (++idx[i] < r.end[i]) break;
      idx[i] = r.begin[i];
    }
  }
  return out;
}

void paste_region(const Tensor& piece, const Region& r, Tensor* out) {
  const int rank = out->rank();
  const size_t es = dtype_size(out->dtype());
  int inner = rank;
  int64_t run = 1;
  while (inner > 0 && r.begin[static_cast<size_t>(inner - 1)] == 0 &&
         r.end[static_cast<size_t>(inner - 1)] == out->dim(inner - 1)) {
    run *= out->dim(inner - 1);
    --inner;
  }
  if (inner > 0)
    run *= r.end[static_cast<size_t>(inner - 1)] - r.begin[static_cast<size_t>(inner - 1)];
  const int outer = inner > 0 ? inner - 1 : 0;
  std::vector<int64_t> stride(static_cast<size_t>(rank), 1);
  for (int d = rank - 2; d >= 0; --d) {
    stride[static_cast<size_t>(d)] = stride[static_cast<size_t>(d + 1)] * out->dim(d + 1);
  }
  std::vector<int64_t> idx(r.begin.begin(), r.begin.begin() + outer);
  const auto* src = static_cast<const unsigned char*>(piece.raw());
  auto* dst = static_cast<unsigned char*>(out->raw());
  const int64_t count = run == 0 ? 0 : piece.numel() / run;
  for (int64_t c = 0; c < count; ++c) {
    int64_t off = 0;
    for (int d = 0; d < outer; ++d)
      off += idx[static_cast<size_t>(d)] * stride[static_cast<size_t>(d)];
    if (inner > 0)
      off += r.begin[static_cast<size_t>(inner - 1)] * stride[static_cast<size_t>(inner - 1)];
    std::memcpy(dst + static_cast<size_t>(off) * es, src + static_cast<size_t>(c * run) * es,
                static_cast<size_t>(run) * es);
    for (int d = outer - 1; d >= 0; --d) {
      const size_t i = static_cast<size_t>(d);
      if (++idx[i] < r.end[i]) break;
      idx[i] = r.begin[i];
    }
  }
}

Status merge_split(const SplitRule& rule, std::span<const Tensor> piece_outputs, Tensor* out) {
  if (piece_outputs.size() != rule.pieces.size()) {
    return invalid_argument("merge of " + std::to_string(piece_outputs.size()) +
                            " outputs for a split of " + std::to_string(rule.pieces.size()) +
                            " pieces");
  }
  for (size_t i = 0; i < piece_outputs.size(); ++i) {
    const Tensor& t = piece_outputs[i];
    if (t.dtype() != rule.output.dtype || t.shape() != rule.pieces[i].output.shape()) {
      return internal_error("split piece " + std::to_string(i) + " produced " + t.describe() +
                            ", expected " + rule.pieces[i].output.shape().to_string());
    }
  }
  if (!out->defined() || out->shape() != rule.output.shape || out->dtype() != rule.output.dtype) {
    ASSIGN_OR_RETURN(*out, Tensor::create(rule.output.dtype, rule.output.shape));
  }
  if (rule.merge == SplitMerge::kConcat) {
    for (size_t i = 0; i < piece_outputs.size(); ++i) {
      paste_region(piece_outputs[i], rule.pieces[i].output, out);
    }
    return Status();
  }
  if (rule.output.dtype != DType::kF32) {
    return unimplemented("partial-sum merge of " + std::string(dtype_name(rule.output.dtype)));
  }
  float* y = out->data<float>();
  const int64_t n = out->numel();
  std::memcpy(y, piece_outputs[0].data<float>(), static_cast<size_t>(n) * sizeof(float));
  for (size_t i = 1; i < piece_outputs.size(); ++i) {
    const float* p = piece_outputs[i].data<float>();
    for (int64_t j = 0; j < n; ++j) y[j] += p[j];
  }
  apply_activation(rule.activation, y, n);
  return Status();
}

}  // namespace tessera
