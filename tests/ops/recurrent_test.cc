// LSTM and GRU against PyTorch (nn.LSTM / nn.GRU, bidirectional, with initial states, in double
// precision; weights reordered from ONNX's gate order to PyTorch's), with the expected values
// below printed by this script (the weights follow the formula of `val` on both sides):
//   W = val(dirs*4H*I, 2), R = val(.., 3), B = val(.., 4), h0 = val(.., 5), c0 = val(.., 6) (LSTM)
//   W = val(dirs*3H*I, 7), R = val(.., 8), B = val(.., 9), h0 = val(.., 10)              (GRU)
//   X = val(S*B*I, 1), val(n, k)[i] = 0.5 sin(0.7 i + k); S = 3, B = 2, I = 3, H = 2.
// Plus a hand-computed GRU step for both linear_before_reset forms, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/ops/naive_index.h"
#include "tests/ops/nn_test_util.h"

namespace tessera {
namespace {

using testing::constant;
using testing::contains;
using testing::in;
using testing::omitted;
using testing::run_error;
using testing::run_op;

constexpr int64_t S = 3, B = 2, I = 3, H = 2;

Tensor val(const Shape& s, int k) {
  Tensor t = Tensor::create(DType::kF32, s).value();
  for (int64_t i = 0; i < s.numel(); ++i) {
    t.data<float>()[i] = static_cast<float>(0.5 * std::sin(0.7 * static_cast<double>(i) + k));
  }
  return t;
}

void expect_values(const Tensor& t, const std::vector<double>& want) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(t.data<float>()[i], want[i], 2e-6) << "at " << i;
  }
}

TEST(LSTM, BidirectionalWithInitialStatesMatchesPyTorch) {
  Attributes a;
  a.set("hidden_size", H);
  a.set("direction", std::string("bidirectional"));
  auto out = run_op(OpKind::kLSTM, a,
                    {in(val(Shape{S, B, I}, 1)), in(val(Shape{2, 4 * H, I}, 2)),
                     in(val(Shape{2, 4 * H, H}, 3)), in(val(Shape{2, 8 * H}, 4)), omitted(),
                     in(val(Shape{2, B, H}, 5)), in(val(Shape{2, B, H}, 6))},
                    3);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ((*out)[0].shape(), (Shape{S, 2, B, H}));
  expect_values(
      (*out)[0],
      {0.129061852,    0.0586848871, 0.114410426,   0.212081669,  0.0853261798, 0.169007502,
       -0.00908397022, 0.109805244,  0.111106351,   0.115148163,  0.18255555,   0.192160191,
       0.0416065126,   0.0905557613, 0.0936217058,  0.145172543,  0.107897558,  0.180522714,
       0.139890626,    0.169943715,  -0.0666714784, 0.0439645982, 0.0510034196, -0.000621965436});
  expect_values((*out)[1], {0.107897558, 0.180522714, 0.139890626, 0.169943715, 0.0853261798,
                            0.169007502, -0.00908397022, 0.109805244});
  expect_values((*out)[2], {0.518226402, 0.472174339, 0.51173982, 0.506913276, 0.353285532,
                            0.511251234, -0.0213236371, 0.530602518});
}

TEST(GRU, BidirectionalLinearBeforeResetMatchesPyTorch) {
  Attributes a;
  a.set("hidden_size", H);
  a.set("direction", std::string("bidirectional"));
  a.set("linear_before_reset", int64_t{1});
  auto out = run_op(
      OpKind::kGRU, a,
      {in(val(Shape{S, B, I}, 1)), in(val(Shape{2, 3 * H, I}, 7)), in(val(Shape{2, 3 * H, H}, 8)),
       in(val(Shape{2, 6 * H}, 9)), omitted(), in(val(Shape{2, B, H}, 10))},
      2);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  expect_values((*out)[0], {-0.395049551, -0.520237942, -0.389821436, -0.204039505, 0.168954659,
                            0.0663126389, 0.436964345,  0.265245938,  -0.540979527, -0.29826466,
                            -0.462933388, -0.377689445, 0.230054304,  0.458552177,  0.187621511,
                            0.0545144935, -0.448999021, -0.254511895, -0.565594093, -0.215409468,
                            0.396372305,  0.392234201,  0.261303752,  0.435527346});
  expect_values((*out)[1], {-0.448999021, -0.254511895, -0.565594093, -0.215409468, 0.168954659,
                            0.0663126389, 0.436964345, 0.265245938});
}

// One step, H = I = 1, where the two forms differ only through the recurrent bias Rbh.
TEST(GRU, OneStepBothResetForms) {
  const float wz = 0.3f, wr = -0.2f, wh = 0.7f, rz = 0.5f, rr = 0.4f, rh = -0.6f, rbh = 0.9f;
  const float x = 1.f, h = 0.5f;
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  const double z = sig(wz * x + rz * h), r = sig(wr * x + rr * h);
  for (int64_t lbr : {0, 1}) {
    const double n =
        lbr ? std::tanh(wh * x + r * (rh * h + rbh)) : std::tanh(wh * x + rh * r * h + rbh);
    const double want = (1 - z) * n + z * h;
    Attributes a;
    a.set("hidden_size", int64_t{1});
    a.set("linear_before_reset", lbr);
    auto out = run_op(OpKind::kGRU, a,
                      {in(Tensor::from_floats(Shape{1, 1, 1}, std::vector<float>{x})),
                       in(Tensor::from_floats(Shape{1, 3, 1}, std::vector<float>{wz, wr, wh})),
                       in(Tensor::from_floats(Shape{1, 3, 1}, std::vector<float>{rz, rr, rh})),
                       in(Tensor::from_floats(Shape{1, 6}, std::vector<float>{0, 0, 0, 0, 0, rbh})),
                       omitted(), in(Tensor::from_floats(Shape{1, 1, 1}, std::vector<float>{h}))},
                      2);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_NEAR((*out)[1].data<float>()[0], want, 1e-6) << "linear_before_reset " << lbr;
  }
}

TEST(Recurrent, RefusesWhatItDoesNotSupportNamingIt) {
  const std::vector<testing::OpInput> base = {
      in(val(Shape{S, B, I}, 1)), in(val(Shape{1, 4 * H, I}, 2)), in(val(Shape{1, 4 * H, H}, 3))};
  Attributes a;
  a.set("hidden_size", H);
  Attributes batch_first = a;
  batch_first.set("layout", int64_t{1});
  EXPECT_TRUE(contains(run_error(OpKind::kLSTM, batch_first, base), "layout = 1"));
  Attributes acts = a;
  acts.set("activations", std::string("Sigmoid,Relu,Tanh"));
  EXPECT_TRUE(contains(run_error(OpKind::kLSTM, acts, base), "activations 'Sigmoid,Relu,Tanh'"));
  Attributes defaults = a;
  defaults.set("activations", std::string("sigmoid,tanh,tanh"));
  EXPECT_TRUE(run_op(OpKind::kLSTM, defaults, base).ok());
  // sequence_lens: all equal to seq_length is fine; shorter, or computed at run time, is refused.
  auto with_lens = base;
  with_lens.push_back(omitted());
  with_lens.push_back(constant(Tensor::from_int64s(Shape{B}, std::vector<int64_t>{S, S})));
  EXPECT_TRUE(run_op(OpKind::kLSTM, a, with_lens).ok());
  with_lens[4] = constant(Tensor::from_int64s(Shape{B}, std::vector<int64_t>{S, 1}));
  EXPECT_TRUE(contains(run_error(OpKind::kLSTM, a, with_lens), "shorter than seq_length"));
  with_lens[4] = in(Tensor::from_int64s(Shape{B}, std::vector<int64_t>{S, S}));
  EXPECT_TRUE(contains(run_error(OpKind::kLSTM, a, with_lens), "computed at run time"));
  // A wrong weight shape names the input and the shape it expects.
  auto bad = base;
  bad[1] = in(val(Shape{1, 3 * H, I}, 2));
  EXPECT_TRUE(contains(run_error(OpKind::kLSTM, a, bad), "input 1 (W) must have shape [1, 8, 3]"))
      << run_error(OpKind::kLSTM, a, bad);
}

}  // namespace
}  // namespace tessera
