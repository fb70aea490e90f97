// GRU (opsets 7-22, layout 0), as text recognisers use it: X [seq, batch, input], W [dirs, 3H,
// input], R [dirs, 3H, H], optional B [dirs, 6H] (input then recurrent biases) and initial_h
// [dirs, batch, H]; gates in ONNX order z, r, h:
//   z = sigmoid(x Wz' + h Rz' + Wbz + Rbz)
//   r = sigmoid(x Wr' + h Rr' + Wbr + Rbr)
//   n = tanh(x Wh' + (r . h) Rh' + Rbh + Wbh)             linear_before_reset = 0 (default)
//   n = tanh(x Wh' + r . (h Rh' + Rbh) + Wbh)             linear_before_reset != 0 (PyTorch)
//   h' = (1 - z) . n + z . h
// with every gate pre-activation clipped to [-clip, clip] when clip is set. Outputs Y [seq, dirs,
// batch, H] and Y_h [dirs, batch, H]. See ops/recurrent.h for what is refused.
#include "ops/attr_util.h"
#include "ops/recurrent.h"
#include "ops/registry.h"

namespace tessera {

namespace {

const std::vector<std::string> kGruActivations = {"Sigmoid", "Tanh"};

Status infer_gru(const OpContext& ctx, int num_outputs, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(RecurrentDims d, recurrent_dims(ctx, 3, kGruActivations));
  RETURN_IF_ERROR(int_attr(ctx, "linear_before_reset", 0).status());
  recurrent_outputs(d, num_outputs, outputs);
  return Status();
}

OpCost cost_gru(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  const Shape& x = ctx.input(0).shape;
  const Shape& r = ctx.input(2).shape;
  if (x.rank() == 3 && r.rank() == 3) {
    c.flops = 2.0 * static_cast<double>(x[0] * x[1]) * static_cast<double>(r[0] * r[1]) *
              static_cast<double>(x[2] + r[2]);
  }
  return c;
}

Status reference_gru(const OpContext& ctx, std::span<const Tensor> inputs,
                     std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(RecurrentDims d, recurrent_dims(ctx, 3, kGruActivations));
  ASSIGN_OR_RETURN(int64_t lbr, int_attr(ctx, "linear_before_reset", 0));
  const int64_t H = d.hidden, I = d.input, G = 3 * H;
  const float* x = inputs[0].data<float>();
  float* y = outputs.size() > 0 && outputs[0].raw() != nullptr ? outputs[0].data<float>() : nullptr;
  float* yh =
      outputs.size() > 1 && outputs[1].raw() != nullptr ? outputs[1].data<float>() : nullptr;
  std::vector<float> xg(static_cast<size_t>(G)), hg(static_cast<size_t>(G)),
      h(static_cast<size_t>(H)), rh(static_cast<size_t>(H));
  for (int dir = 0; dir < d.dirs; ++dir) {
    const bool backwards = d.reverse || dir == 1;
    const float* w = inputs[1].data<float>() + dir * G * I;
    const float* r = inputs[2].data<float>() + dir * G * H;
    const float* wb = ctx.has_input(3) ? inputs[3].data<float>() + dir * 2 * G : nullptr;
    const float* rb = wb != nullptr ? wb + G : nullptr;
    for (int64_t b = 0; b < d.batch; ++b) {
      const int64_t state = (dir * d.batch + b) * H;
      for (int64_t k = 0; k < H; ++k) {
        h[static_cast<size_t>(k)] = ctx.has_input(5) ? inputs[5].data<float>()[state + k] : 0.f;
      }
      for (int64_t step = 0; step < d.seq; ++step) {
        const int64_t t = backwards ? d.seq - 1 - step : step;
        // xg = x W' + Wb (all three gates); hg = h R' + Rb (z and r, and h for lbr != 0).
        for (int64_t g = 0; g < G; ++g) {
          xg[static_cast<size_t>(g)] = wb != nullptr ? wb[g] : 0.f;
          hg[static_cast<size_t>(g)] = rb != nullptr ? rb[g] : 0.f;
        }
        matvec_add(w, x + (t * d.batch + b) * I, G, I, xg.data());
        const int64_t recurrent_rows = lbr != 0 ? G : 2 * H;
        matvec_add(r, h.data(), recurrent_rows, H, hg.data());
        std::vector<float> z(static_cast<size_t>(H)), rg(static_cast<size_t>(H));
        for (int64_t k = 0; k < H; ++k) {
          const size_t kk = static_cast<size_t>(k);
          z[kk] = sigmoidf(clipped(xg[kk] + hg[kk], d.clip));
          rg[kk] = sigmoidf(
              clipped(xg[static_cast<size_t>(H + k)] + hg[static_cast<size_t>(H + k)], d.clip));
        }
        if (lbr == 0) {
          // (r . h) Rh' + Rbh
          for (int64_t k = 0; k < H; ++k) {
            rh[static_cast<size_t>(k)] = rg[static_cast<size_t>(k)] * h[static_cast<size_t>(k)];
          }
          for (int64_t k = 0; k < H; ++k) {
            hg[static_cast<size_t>(2 * H + k)] = rb != nullptr ? rb[2 * H + k] : 0.f;
          }
          matvec_add(r + 2 * H * H, rh.data(), H, H, hg.data() + 2 * H);
        }
        for (int64_t k = 0; k < H; ++k) {
          const size_t kk = static_cast<size_t>(k);
          const float hh = hg[static_cast<size_t>(2 * H + k)];
          const float pre = xg[static_cast<size_t>(2 * H + k)] + (lbr != 0 ? rg[kk] * hh : hh);
          const float n = std::tanh(clipped(pre, d.clip));
          h[kk] = (1.f - z[kk]) * n + z[kk] * h[kk];
        }
        if (y != nullptr) {
          float* yt = y + ((t * d.dirs + dir) * d.batch + b) * H;
          for (int64_t k = 0; k < H; ++k) yt[k] = h[static_cast<size_t>(k)];
        }
      }
      if (yh != nullptr) {
        for (int64_t k = 0; k < H; ++k) yh[state + k] = h[static_cast<size_t>(k)];
      }
    }
  }
  return Status();
}

}  // namespace

const OpSchema kGRUSchema = {
    .kind = OpKind::kGRU,
    .min_inputs = 3,
    .max_inputs = 6,
    .min_outputs = 1,
    .max_outputs = 2,
    .accepts_fused_activation = false,
    .infer = infer_gru,
    .cost = cost_gru,
    .reference = reference_gru,
};

}  // namespace tessera
