// What LSTM and GRU share: their attributes and input shapes (ONNX opsets 7-22, layout 0),
// checked one way. Pure functions; safe from any thread.
//
// Supported: direction forward, reverse or bidirectional; the default activations (given or
// not); clip; initial states; sequence_lens only as a constant whose every entry is the sequence
// length (what exporters write for a fixed-size input). Unimplemented, with a message: layout = 1
// (batch-first), other activations, and sequence_lens of differing or non-constant lengths.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "ops/op.h"

namespace tessera {

struct RecurrentDims {
  int64_t seq = 0;       // sequence length
  int64_t batch = 0;     // batch size
  int64_t input = 0;     // input features
  int64_t hidden = 0;    // hidden_size
  int dirs = 1;          // 2 when bidirectional
  bool reverse = false;  // direction = reverse (one direction, run backwards)
  float clip = 0;        // > 0: gate pre-activations are clipped to [-clip, clip]
};

// `gates` is 4 for LSTM, 3 for GRU; `defaults` lists the default activations of one direction
// ({"Sigmoid", "Tanh", "Tanh"} for LSTM, {"Sigmoid", "Tanh"} for GRU). Inputs: 0 X, 1 W, 2 R,
// 3 B (optional), 4 sequence_lens (optional), 5 initial_h (optional).
Result<RecurrentDims> recurrent_dims(const OpContext& ctx, int gates,
                                     const std::vector<std::string>& defaults);

// Checks an optional per-direction input of shape [dirs, batch, hidden] (initial_h, initial_c).
Status check_state_input(const OpContext& ctx, int i, const RecurrentDims& d, const char* what);

// The output shapes: Y [seq, dirs, batch, hidden] and the final states [dirs, batch, hidden].
void recurrent_outputs(const RecurrentDims& d, int num_outputs, std::vector<TensorInfo>* outputs);

inline float sigmoidf(float x) {
  return 1.f / (1.f + std::exp(-x));
}
inline float clipped(float x, float clip) {
  return clip > 0 ? std::fmin(std::fmax(x, -clip), clip) : x;
}

// out[r] = sum_k m[r * k + kk] * v[kk] for r in [0, rows): one matrix-vector product, adding to
// `out`.
inline void matvec_add(const float* m, const float* v, int64_t rows, int64_t k, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = m + r * k;
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t i = 0;
    for (; i + 4 <= k; i += 4) {
      s0 += row[i] * v[i];
      s1 += row[i + 1] * v[i + 1];
      s2 += row[i + 2] * v[i + 2];
      s3 += row[i + 3] * v[i + 3];
    }
    for (; i < k; ++i) s0 += row[i] * v[i];
    out[r] += (s0 + s1) + (s2 + s3);
  }
}

}  // namespace tessera
