// Einsum in its matrix-product forms against a brute-force sum over every index assignment, and
// the refusal of other equations, naming them.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/ops/naive_index.h"
#include "tests/ops/nn_test_util.h"

namespace tessera {
namespace {

using testing::contains;
using testing::in;
using testing::random_tensor;
using testing::run_error;
using testing::run_op;

// out[letters of `out`] = sum over the other letters of a[ta] * b[tb], by enumerating every
// assignment of every letter.
Tensor brute_einsum(const std::string& ta, const Tensor& a, const std::string& tb, const Tensor& b,
                    const std::string& out, std::map<char, int64_t> size) {
  std::string letters;  // the letters of this equation
  for (const auto& [c, n] : size) {
    if (ta.find(c) != std::string::npos || tb.find(c) != std::string::npos) letters.push_back(c);
  }
  std::vector<int64_t> dims;
  for (char c : out) dims.push_back(size[c]);
  Tensor y = Tensor::create(DType::kF32, Shape(dims)).value();
  std::vector<double> acc(static_cast<size_t>(y.numel()), 0.0);
  int64_t total = 1;
  for (char c : letters) total *= size[c];
  for (int64_t f = 0; f < total; ++f) {
    std::map<char, int64_t> at;
    int64_t rem = f;
    for (char c : letters) {
      at[c] = rem % size[c];
      rem /= size[c];
    }
    auto flat = [&](const std::string& term, const Shape& s) {
      std::vector<int64_t> idx;
      for (char c : term) idx.push_back(at[c]);
      return testing::ravel(idx, s);
    };
    acc[static_cast<size_t>(flat(out, y.shape()))] +=
        static_cast<double>(a.data<float>()[flat(ta, a.shape())]) *
        b.data<float>()[flat(tb, b.shape())];
  }
  for (size_t i = 0; i < acc.size(); ++i) y.data<float>()[i] = static_cast<float>(acc[i]);
  return y;
}

TEST(Einsum, MatrixProductFormsMatchBruteForce) {
  struct Case {
    const char* eq;
    std::string ta, tb, out;
  };
  const std::map<char, int64_t> size = {{'b', 3}, {'h', 2}, {'i', 5}, {'j', 7}, {'k', 4}};
  const Case cases[] = {
      {"ij,jk->ik", "ij", "jk", "ik"},
      {"bij,bjk->bik", "bij", "bjk", "bik"},
      {"bhij,bhkj->bhik", "bhij", "bhkj", "bhik"},
      {"ij,kj->ki", "ij", "kj", "ki"},
      {"i,k->ik", "i", "k", "ik"},
      {"ij,jk", "ij", "jk", "ik"},
      {"bij, bkj -> bki", "bij", "bkj", "bki"},
      {"ij,ij->i", "ij", "ij", "i"},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.eq);
    auto shape_of = [&](const std::string& t) {
      std::vector<int64_t> d;
      for (char ch : t) d.push_back(size.at(ch));
      return Shape(d);
    };
    const Tensor a = random_tensor(shape_of(c.ta), seed++),
                 b = random_tensor(shape_of(c.tb), seed++);
    Attributes at;
    at.set("equation", std::string(c.eq));
    auto out = run_op(OpKind::kEinsum, at, {in(a), in(b)});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    testing::expect_near((*out)[0], brute_einsum(c.ta, a, c.tb, b, c.out, size), 1e-5f, 1e-5f);
  }
}

TEST(Einsum, RefusesOtherEquationsNamingThem) {
  const Tensor sq = random_tensor(Shape{4, 4}, 1);
  auto err = [&](const std::string& eq, std::vector<testing::OpInput> ins) {
    Attributes a;
    a.set("equation", eq);
    return run_error(OpKind::kEinsum, a, ins);
  };
  std::string msg = err("ii->i", {in(sq)});
  EXPECT_TRUE(contains(msg, "equation 'ii->i'")) << msg;
  msg = err("ij,jk->i", {in(sq), in(sq)});
  EXPECT_TRUE(contains(msg, "summed within one operand")) << msg;
  msg = err("...ij,...jk->...ik", {in(sq), in(sq)});
  EXPECT_TRUE(contains(msg, "ellipses")) << msg;
  msg = err("ij,jk,kl->il", {in(sq), in(sq), in(sq)});
  EXPECT_TRUE(contains(msg, "exactly two operands")) << msg;
  msg = err("ij,jk->ik", {in(sq), in(random_tensor(Shape{5, 4}, 2))});
  EXPECT_TRUE(contains(msg, "index 'j' has extent 4 in operand 0 but 5")) << msg;
}

}  // namespace
}  // namespace tessera
