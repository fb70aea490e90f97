#include "ops/recurrent.h"

#include <cctype>

#include "ops/attr_util.h"
#include "ops/data_movement.h"

namespace tessera {

Result<RecurrentDims> recurrent_dims(const OpContext& ctx, int gates,
                                     const std::vector<std::string>& defaults) {
  RecurrentDims d;
  for (int i : {0, 1, 2, 3, 5}) {
    if (ctx.has_input(i)) RETURN_IF_ERROR(require_f32(ctx, i));
  }
  Result<int64_t> hidden = ctx.attrs().get_int("hidden_size");
  if (!hidden.ok()) return ctx.wrap(hidden.status());
  if (*hidden < 1)
    return ctx.error("hidden_size = " + std::to_string(*hidden) + " must be positive");
  d.hidden = *hidden;
  ASSIGN_OR_RETURN(std::string dir, string_attr(ctx, "direction", "forward"));
  if (dir == "bidirectional") {
    d.dirs = 2;
  } else if (dir == "reverse") {
    d.reverse = true;
  } else if (dir != "forward") {
    return ctx.error("direction " + quote_name(dir) + " must be forward, reverse or bidirectional");
  }
  ASSIGN_OR_RETURN(int64_t layout, int_attr(ctx, "layout", 0));
  if (layout != 0) {
    return ctx.unsupported("layout = " + std::to_string(layout) +
                           " (batch-first) is not supported; export with layout 0 "
                           "([seq, batch, features])");
  }
  if (ctx.attrs().has("activations")) {
    // The ONNX importer keeps a list of strings as one string joined with ','.
    ASSIGN_OR_RETURN(std::string acts, string_attr(ctx, "activations", ""));
    std::string want;
    for (int r = 0; r < d.dirs; ++r) {
      for (const std::string& a : defaults) want += (want.empty() ? "" : ",") + a;
    }
    std::string got;
    for (char c : acts)
      got.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    std::string want_lower;
    for (char c : want)
      want_lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    if (got != want_lower) {
      return ctx.unsupported("activations " + quote_name(acts) + ": only the defaults (" + want +
                             ") are supported");
    }
    if (ctx.attrs().has("activation_alpha") || ctx.attrs().has("activation_beta")) {
      return ctx.unsupported("activation_alpha / activation_beta are not supported");
    }
  }
  ASSIGN_OR_RETURN(d.clip, float_attr(ctx, "clip", 0.f));
  if (d.clip < 0) return ctx.error("clip = " + std::to_string(d.clip) + " must be positive");

  const Shape& x = ctx.input(0).shape;
  if (x.rank() != 3) {
    return ctx.error("input 0 (X) must be [seq_length, batch_size, input_size], has shape " +
                     x.to_string());
  }
  d.seq = x[0];
  d.batch = x[1];
  d.input = x[2];
  const int64_t g = gates * d.hidden;
  const Shape w_want{d.dirs, g, d.input}, r_want{d.dirs, g, d.hidden}, b_want{d.dirs, 2 * g};
  if (ctx.input(1).shape != w_want) {
    return ctx.error("input 1 (W) must have shape " + w_want.to_string() + ", has " +
                     ctx.input(1).shape.to_string());
  }
  if (ctx.input(2).shape != r_want) {
    return ctx.error("input 2 (R) must have shape " + r_want.to_string() + ", has " +
                     ctx.input(2).shape.to_string());
  }
  if (ctx.has_input(3) && ctx.input(3).shape != b_want) {
    return ctx.error("input 3 (B) must have shape " + b_want.to_string() + ", has " +
                     ctx.input(3).shape.to_string());
  }
  if (ctx.has_input(4)) {
    const Tensor* lens = ctx.constant(4);
    if (lens == nullptr) {
      return ctx.unsupported(
          "sequence_lens is computed at run time; only a constant sequence_lens whose every "
          "entry equals the sequence length is supported");
    }
    const std::vector<int64_t> v = tensor_to_int64s(*lens);
    if (static_cast<int64_t>(v.size()) != d.batch) {
      return ctx.error("input 4 (sequence_lens) must hold " + std::to_string(d.batch) +
                       " values (one per batch entry), holds " + std::to_string(v.size()));
    }
    for (int64_t l : v) {
      if (l != d.seq) {
        return ctx.unsupported("sequence_lens " + ints_to_string(v) +
                               ": sequences shorter than seq_length = " + std::to_string(d.seq) +
                               " are not supported");
      }
    }
  }
  RETURN_IF_ERROR(check_state_input(ctx, 5, d, "initial_h"));
  return d;
}

Status check_state_input(const OpContext& ctx, int i, const RecurrentDims& d, const char* what) {
  if (!ctx.has_input(i)) return Status();
  RETURN_IF_ERROR(require_f32(ctx, i));
  const Shape want{d.dirs, d.batch, d.hidden};
  if (ctx.input(i).shape != want) {
    return ctx.error("input " + std::to_string(i) + " (" + what + ") must have shape " +
                     want.to_string() + ", has " + ctx.input(i).shape.to_string());
  }
  return Status();
}

void recurrent_outputs(const RecurrentDims& d, int num_outputs, std::vector<TensorInfo>* outputs) {
  outputs->push_back(TensorInfo{DType::kF32, Shape{d.seq, d.dirs, d.batch, d.hidden}});
  for (int o = 1; o < num_outputs; ++o) {
    outputs->push_back(TensorInfo{DType::kF32, Shape{d.dirs, d.batch, d.hidden}});
  }
}

}  // namespace tessera
