// LSTM (opsets 7-22, layout 0), as text recognisers use it: X [seq, batch, input], W [dirs, 4H,
// input], R [dirs, 4H, H], optional B [dirs, 8H] (input then recurrent biases), initial_h and
// initial_c [dirs, batch, H], peepholes P [dirs, 3H]; gates in ONNX order i, o, f, c:
//   i = sigmoid(x Wi' + h Ri' + Pi . c + Wbi + Rbi)
//   f = sigmoid(x Wf' + h Rf' + Pf . c + Wbf + Rbf)        (f = 1 - i with input_forget = 1)
//   g = tanh(x Wc' + h Rc' + Wbc + Rbc)
//   c' = f . c + i . g
//   o = sigmoid(x Wo' + h Ro' + Po . c' + Wbo + Rbo)
//   h' = o . tanh(c')
// with every gate pre-activation clipped to [-clip, clip] when clip is set. Outputs Y [seq, dirs,
// batch, H], Y_h and Y_c [dirs, batch, H]. The reverse direction reads the sequence backwards and
// writes Y at the original time index. See ops/recurrent.h for what is refused.
#include "ops/attr_util.h"
#include "ops/recurrent.h"
#include "ops/registry.h"

namespace tessera {

namespace {

const std::vector<std::string> kLstmActivations = {"Sigmoid", "Tanh", "Tanh"};

Result<RecurrentDims> lstm_dims(const OpContext& ctx) {
  ASSIGN_OR_RETURN(RecurrentDims d, recurrent_dims(ctx, 4, kLstmActivations));
  RETURN_IF_ERROR(check_state_input(ctx, 6, d, "initial_c"));
  if (ctx.has_input(7)) {
    RETURN_IF_ERROR(require_f32(ctx, 7));
    const Shape want{d.dirs, 3 * d.hidden};
    if (ctx.input(7).shape != want) {
      return ctx.error("input 7 (P) must have shape " + want.to_string() + ", has " +
                       ctx.input(7).shape.to_string());
    }
  }
  return d;
}

Status infer_lstm(const OpContext& ctx, int num_outputs, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(RecurrentDims d, lstm_dims(ctx));
  RETURN_IF_ERROR(int_attr(ctx, "input_forget", 0).status());
  recurrent_outputs(d, num_outputs, outputs);
  return Status();
}

OpCost cost_lstm(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  const Shape& x = ctx.input(0).shape;
  const Shape& r = ctx.input(2).shape;
  if (x.rank() == 3 && r.rank() == 3) {
    // Per step and direction: a [4H x (input + H)] matrix-vector product per batch entry.
    c.flops = 2.0 * static_cast<double>(x[0] * x[1]) * static_cast<double>(r[0] * r[1]) *
              static_cast<double>(x[2] + r[2]);
  }
  return c;
}

Status reference_lstm(const OpContext& ctx, std::span<const Tensor> inputs,
                      std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(RecurrentDims d, lstm_dims(ctx));
  ASSIGN_OR_RETURN(int64_t input_forget, int_attr(ctx, "input_forget", 0));
  const int64_t H = d.hidden, I = d.input, G = 4 * H;
  const float* x = inputs[0].data<float>();
  float* y = outputs.size() > 0 && outputs[0].raw() != nullptr ? outputs[0].data<float>() : nullptr;
  float* yh =
      outputs.size() > 1 && outputs[1].raw() != nullptr ? outputs[1].data<float>() : nullptr;
  float* yc =
      outputs.size() > 2 && outputs[2].raw() != nullptr ? outputs[2].data<float>() : nullptr;
  std::vector<float> gates(static_cast<size_t>(G)), h(static_cast<size_t>(H)),
      c(static_cast<size_t>(H));
  for (int dir = 0; dir < d.dirs; ++dir) {
    const bool backwards = d.reverse || dir == 1;
    const float* w = inputs[1].data<float>() + dir * G * I;
    const float* r = inputs[2].data<float>() + dir * G * H;
    const float* wb = ctx.has_input(3) ? inputs[3].data<float>() + dir * 2 * G : nullptr;
    const float* p = ctx.has_input(7) ? inputs[7].data<float>() + dir * 3 * H : nullptr;
    for (int64_t b = 0; b < d.batch; ++b) {
      const int64_t state = (dir * d.batch + b) * H;
      for (int64_t k = 0; k < H; ++k) {
        h[static_cast<size_t>(k)] = ctx.has_input(5) ? inputs[5].data<float>()[state + k] : 0.f;
        c[static_cast<size_t>(k)] = ctx.has_input(6) ? inputs[6].data<float>()[state + k] : 0.f;
      }
      for (int64_t step = 0; step < d.seq; ++step) {
        const int64_t t = backwards ? d.seq - 1 - step : step;
        for (int64_t g = 0; g < G; ++g) {
          gates[static_cast<size_t>(g)] = wb != nullptr ? wb[g] + wb[G + g] : 0.f;
        }
        matvec_add(w, x + (t * d.batch + b) * I, G, I, gates.data());
        matvec_add(r, h.data(), G, H, gates.data());
        const float* gi = gates.data();
        const float* go = gi + H;
        const float* gf = gi + 2 * H;
        const float* gc = gi + 3 * H;
        for (int64_t k = 0; k < H; ++k) {
          const size_t kk = static_cast<size_t>(k);
          const float cprev = c[kk];
          const float i = sigmoidf(clipped(gi[k] + (p ? p[k] * cprev : 0.f), d.clip));
          const float f = input_forget != 0
                              ? 1.f - i
                              : sigmoidf(clipped(gf[k] + (p ? p[2 * H + k] * cprev : 0.f), d.clip));
          const float g = std::tanh(clipped(gc[k], d.clip));
          const float cnew = f * cprev + i * g;
          const float o = sigmoidf(clipped(go[k] + (p ? p[H + k] * cnew : 0.f), d.clip));
          c[kk] = cnew;
          h[kk] = o * std::tanh(cnew);
        }
        if (y != nullptr) {
          float* yt = y + ((t * d.dirs + dir) * d.batch + b) * H;
          for (int64_t k = 0; k < H; ++k) yt[k] = h[static_cast<size_t>(k)];
        }
      }
      for (int64_t k = 0; k < H; ++k) {
        if (yh != nullptr) yh[state + k] = h[static_cast<size_t>(k)];
        if (yc != nullptr) yc[state + k] = c[static_cast<size_t>(k)];
      }
    }
  }
  return Status();
}

}  // namespace

const OpSchema kLSTMSchema = {
    .kind = OpKind::kLSTM,
    .min_inputs = 3,
    .max_inputs = 8,
    .min_outputs = 1,
    .max_outputs = 3,
    .accepts_fused_activation = false,
    .infer = infer_lstm,
    .cost = cost_lstm,
    .reference = reference_lstm,
};

}  // namespace tessera
