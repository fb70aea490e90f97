// Einsum (opsets 12-21), in the forms that are a (batched) matrix product: two operands, each
// index letter at most once per term, no ellipsis, and every letter either in both operands
// (a batch index when it is in the output, a summed index when not) or in one operand and the
// output (a row or column index). That covers "ij,jk->ik", "bij,bjk->bik", "bhqd,bhkd->bhqk",
// outer products and transposed operands; the output may be implicit ("ij,jk": the letters seen
// once, in alphabetical order). Other equations (traces, diagonals, single-operand sums,
// ellipses, three or more operands) are Unimplemented, naming the equation. f32; sums
// accumulate in double.
#include <algorithm>
#include <array>
#include <cctype>
#include <map>

#include "ops/registry.h"

namespace tessera {

namespace {

struct EinsumPlan {
  std::string terms[2];
  std::string out;
  std::map<char, int64_t> size;  // every letter's extent
  std::string summed;            // letters in both operands but not in the output
};

Result<EinsumPlan> einsum_plan(const OpContext& ctx) {
  Result<std::string> eq_attr = ctx.attrs().get_string("equation");
  if (!eq_attr.ok()) return ctx.wrap(eq_attr.status());
  std::string eq;
  for (char c : *eq_attr) {
    if (c != ' ') eq.push_back(c);
  }
  const std::string quoted = "equation '" + *eq_attr + "'";
  auto refuse = [&](const std::string& why) {
    return ctx.unsupported(quoted + " is not a matrix product Tessera supports: " + why);
  };
  if (eq.find("...") != std::string::npos) return refuse("ellipses are not supported");
  EinsumPlan p;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  const size_t comma = lhs.find(',');
  if (comma == std::string::npos || lhs.find(',', comma + 1) != std::string::npos) {
    return refuse("it must have exactly two operands");
  }
  if (ctx.num_inputs() != 2) {
    return ctx.error(quoted + " names two operands but the node has " +
                     std::to_string(ctx.num_inputs()) + " inputs");
  }
  p.terms[0] = lhs.substr(0, comma);
  p.terms[1] = lhs.substr(comma + 1);
  std::map<char, int> count;
  for (int t = 0; t < 2; ++t) {
    const Shape& s = ctx.input(t).shape;
    const std::string& term = p.terms[t];
    if (static_cast<int>(term.size()) != s.rank()) {
      return ctx.error(quoted + ": operand " + std::to_string(t) + " " + quote_name(term) +
                       " has " + std::to_string(term.size()) + " indices but input " +
                       std::to_string(t) + " has shape " + s.to_string());
    }
    for (size_t k = 0; k < term.size(); ++k) {
      const char c = term[k];
      if (!std::isalpha(static_cast<unsigned char>(c))) {
        return ctx.error(quoted + ": '" + std::string(1, c) + "' is not an index letter");
      }
      if (term.find(c) != k) return refuse("index '" + std::string(1, c) + "' repeats in a term");
      auto [it, fresh] = p.size.emplace(c, s[static_cast<int>(k)]);
      if (!fresh && it->second != s[static_cast<int>(k)]) {
        return ctx.error(quoted + ": index '" + std::string(1, c) + "' has extent " +
                         std::to_string(it->second) + " in operand 0 but " +
                         std::to_string(s[static_cast<int>(k)]) + " in operand 1");
      }
      ++count[c];
    }
  }
  if (arrow == std::string::npos) {
    for (const auto& [c, n] : count) {
      if (n == 1) p.out.push_back(c);  // std::map iterates in letter order
    }
  } else {
    p.out = eq.substr(arrow + 2);
  }
  for (size_t k = 0; k < p.out.size(); ++k) {
    const char c = p.out[k];
    if (count.count(c) == 0) {
      return ctx.error(quoted + ": output index '" + std::string(1, c) + "' is in no operand");
    }
    if (p.out.find(c) != k)
      return refuse("index '" + std::string(1, c) + "' repeats in the output");
  }
  for (const auto& [c, n] : count) {
    const bool in_out = p.out.find(c) != std::string::npos;
    if (n == 1 && !in_out) {
      return refuse("index '" + std::string(1, c) + "' is summed within one operand");
    }
    if (n == 2 && !in_out) p.summed.push_back(c);
  }
  return p;
}

Status infer_einsum(const OpContext& ctx, int, std::vector<TensorInfo>* outputs) {
  for (int i = 0; i < ctx.num_inputs(); ++i) RETURN_IF_ERROR(require_f32(ctx, i));
  ASSIGN_OR_RETURN(EinsumPlan p, einsum_plan(ctx));
  std::vector<int64_t> dims;
  for (char c : p.out) dims.push_back(p.size[c]);
  outputs->push_back(TensorInfo{DType::kF32, Shape(std::move(dims))});
  return Status();
}

OpCost cost_einsum(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  Result<EinsumPlan> p = einsum_plan(ctx);
  double k = 1;
  if (p.ok()) {
    for (char s : p->summed) k *= static_cast<double>(p->size[s]);
  }
  c.flops = 2.0 * static_cast<double>(outputs[0].shape.numel()) * k;
  return c;
}

// The element stride of each letter of `term` in a row-major tensor of shape `s` (0 for the
// letters the term lacks), indexed by letter.
std::array<int64_t, 128> letter_strides(const std::string& term, const Shape& s) {
  std::array<int64_t, 128> st{};
  int64_t stride = 1;
  for (int k = s.rank() - 1; k >= 0; --k) {
    st[static_cast<unsigned char>(term[static_cast<size_t>(k)])] = stride;
    stride *= s[k];
  }
  return st;
}

Status reference_einsum(const OpContext& ctx, std::span<const Tensor> inputs,
                        std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(EinsumPlan p, einsum_plan(ctx));
  const auto sa = letter_strides(p.terms[0], inputs[0].shape());
  const auto sb = letter_strides(p.terms[1], inputs[1].shape());
  const float* a = inputs[0].data<float>();
  const float* b = inputs[1].data<float>();
  float* y = outputs[0].data<float>();
  // The summed letters as one flattened loop: per flat index, the offsets into a and b.
  int64_t ksize = 1;
  for (char c : p.summed) ksize *= p.size[c];
  std::vector<int64_t> ka(static_cast<size_t>(ksize)), kb(static_cast<size_t>(ksize));
  for (int64_t k = 0; k < ksize; ++k) {
    int64_t rem = k, oa = 0, ob = 0;
    for (size_t j = p.summed.size(); j-- > 0;) {
      const char c = p.summed[j];
      const int64_t i = rem % p.size[c];
      rem /= p.size[c];
      oa += i * sa[static_cast<unsigned char>(c)];
      ob += i * sb[static_cast<unsigned char>(c)];
    }
    ka[static_cast<size_t>(k)] = oa;
    kb[static_cast<size_t>(k)] = ob;
  }
  const int64_t n = outputs[0].numel();
  for (int64_t o = 0; o < n; ++o) {
    int64_t rem = o, oa = 0, ob = 0;
    for (size_t j = p.out.size(); j-- > 0;) {
      const char c = p.out[j];
      const int64_t i = rem % p.size[c];
      rem /= p.size[c];
      oa += i * sa[static_cast<unsigned char>(c)];
      ob += i * sb[static_cast<unsigned char>(c)];
    }
    double s = 0;
    for (int64_t k = 0; k < ksize; ++k) {
      s += static_cast<double>(a[oa + ka[static_cast<size_t>(k)]]) *
           static_cast<double>(b[ob + kb[static_cast<size_t>(k)]]);
    }
    y[o] = static_cast<float>(s);
  }
  return Status();
}

}  // namespace

const OpSchema kEinsumSchema = {
    .kind = OpKind::kEinsum,
    .min_inputs = 1,
    .max_inputs = 1 << 10,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_einsum,
    .cost = cost_einsum,
    .reference = reference_einsum,
};

}  // namespace tessera
