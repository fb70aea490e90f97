// Graphs and a stream check for the dataflow tests (SDF/CSDF, the ga planner): the paper's Fig. 1
// network, the counterexample to Algorithm 2 as printed, and small graphs in the shape of
// resnet18 (residual blocks), googlenet (inception modules), squeezenet1_1 (fire modules) and
// densenet121 (dense blocks).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/registry.h"
#include "graph/graph.h"
#include "graph/layer_graph.h"
#include "scheduler/executor/executor.h"
#include "scheduler/plan.h"
#include "tests/scheduler/profile_test_util.h"

namespace tessera::testing {

// A CNN under construction (NCHW, batch 1); every node is one layer (no passes run).
class CnnBuilder {
 public:
  using Ints = std::vector<int64_t>;
  ValueId input(int64_t c, int64_t h, int64_t w) {
    const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, c, h, w}});
    g.inputs().push_back(x);
    ch(x) = c;
    return x;
  }
  ValueId conv(ValueId x, int64_t cout, int64_t k, int64_t stride = 1, int64_t pad = -1) {
    if (pad < 0) pad = k / 2;
    Attributes a;
    a.set("pads", Ints{pad, pad, pad, pad});
    a.set("strides", Ints{stride, stride});
    const int64_t cin = ch(x);
    std::vector<float> w(static_cast<size_t>(cout * cin * k * k));
    std::uniform_real_distribution<float> u(-0.3f, 0.3f);
    for (float& v : w) v = u(rng_) / static_cast<float>(k * std::max<int64_t>(1, cin / 8));
    const ValueId wv = g.add_constant("w" + std::to_string(g.num_nodes()),
                                      Tensor::from_floats(Shape{cout, cin, k, k}, w));
    return add(OpKind::kConv, {x, wv}, a, cout);
  }
  ValueId relu(ValueId x) { return add(OpKind::kRelu, {x}, {}, ch(x)); }
  ValueId sum(ValueId a, ValueId b) { return add(OpKind::kAdd, {a, b}, {}, ch(a)); }
  ValueId maxpool(ValueId x, int64_t k, int64_t stride, int64_t pad) {
    Attributes a;
    a.set("kernel_shape", Ints{k, k});
    a.set("strides", Ints{stride, stride});
    a.set("pads", Ints{pad, pad, pad, pad});
    return add(OpKind::kMaxPool, {x}, a, ch(x));
  }
  ValueId gap(ValueId x) { return add(OpKind::kGlobalAveragePool, {x}, {}, ch(x)); }
  ValueId concat(const std::vector<ValueId>& parts) {
    Attributes a;
    a.set("axis", int64_t{1});
    int64_t c = 0;
    for (ValueId p : parts) c += ch(p);
    return add(OpKind::kConcat, parts, a, c);
  }
  void output(ValueId v) { g.outputs().push_back(v); }

  Graph g;

 private:
  ValueId add(OpKind kind, std::vector<ValueId> inputs, const Attributes& a, int64_t cout) {
    Node n;
    n.name = "n" + std::to_string(g.num_nodes());
    n.kind = kind;
    n.inputs = std::move(inputs);
    n.attrs = a;
    const ValueId y = g.add_value(n.name + "_out");
    n.outputs = {y};
    g.add_node(std::move(n));
    ch(y) = cout;
    return y;
  }
  int64_t& ch(ValueId v) {
    if (ch_.size() <= static_cast<size_t>(v)) ch_.resize(static_cast<size_t>(v) + 1);
    return ch_[static_cast<size_t>(v)];
  }
  std::vector<int64_t> ch_;
  std::mt19937 rng_{11};
};

// Fig. 1(a) of seed 003 as its text describes it (the figure's tensors are not all printed):
// 23 layers, 24 edges; l2 convolves X[32,32,3] into Y[32,32,110] (U_36 = 112640 from l3 to the
// residual add l6); l7 -> l8 carries 187200 tokens (15 x 15 x 832); l8 feeds two branches
// {l9, l10} and {l11, l12} that l13 joins (l12 -> l13: 22500 tokens); then a chain to l23.
// Layer i of the paper is LayerGraph layer i - 1.
inline Graph fig1_graph() {
  CnnBuilder b;
  const ValueId x = b.input(3, 32, 32);
  const ValueId l1 = b.relu(x);
  const ValueId l2 = b.conv(l1, 110, 3);
  const ValueId l3 = b.relu(l2);
  const ValueId l4 = b.conv(l3, 110, 1);
  const ValueId l5 = b.relu(l4);
  const ValueId l6 = b.sum(l3, l5);
  const ValueId l7 = b.conv(l6, 832, 3, 2, 0);
  const ValueId l8 = b.relu(l7);
  const ValueId l9 = b.conv(l8, 100, 1);
  const ValueId l10 = b.relu(l9);
  const ValueId l11 = b.conv(l8, 100, 1);
  const ValueId l12 = b.relu(l11);
  const ValueId l13 = b.concat({l10, l12});
  const ValueId l14 = b.conv(l13, 64, 1);
  const ValueId l15 = b.relu(l14);
  const ValueId l16 = b.maxpool(l15, 3, 2, 1);
  const ValueId l17 = b.conv(l16, 64, 3);
  const ValueId l18 = b.relu(l17);
  const ValueId l19 = b.conv(l18, 32, 1);
  const ValueId l20 = b.relu(l19);
  const ValueId l21 = b.gap(l20);
  const ValueId l22 = b.relu(l21);
  const ValueId l23 = b.conv(l22, 10, 1);
  b.output(l23);
  return std::move(b.g);
}

// The counterexample of wave2-spec Sect. 3.4: l1 -> {l2, l3}; l2 -> l4; l4 -> l5; l3 -> l5.
inline Graph counterexample_graph() {
  CnnBuilder b;
  const ValueId x = b.input(4, 6, 6);
  const ValueId l1 = b.relu(x);
  const ValueId l2 = b.conv(l1, 4, 1);
  const ValueId l3 = b.conv(l1, 4, 3);
  const ValueId l4 = b.relu(l2);
  const ValueId l5 = b.sum(l4, l3);
  b.output(l5);
  return std::move(b.g);
}

// Small graphs in the shape of the foundation models (few channels, 16 x 16 inputs).
inline Graph resnet_style() {
  CnnBuilder b;
  ValueId x = b.maxpool(b.relu(b.conv(b.input(3, 16, 16), 8, 3)), 3, 2, 1);
  for (int block = 0; block < 3; ++block) {
    const bool down = block == 1;
    const int64_t c = down ? 16 : (block == 0 ? 8 : 16);
    ValueId y = b.relu(b.conv(x, c, 3, down ? 2 : 1));
    y = b.conv(y, c, 3);
    const ValueId skip = down ? b.conv(x, c, 1, 2, 0) : x;
    x = b.relu(b.sum(y, skip));
  }
  b.output(b.conv(b.gap(x), 10, 1));
  return std::move(b.g);
}

inline Graph googlenet_style() {
  CnnBuilder b;
  ValueId x = b.maxpool(b.conv(b.input(3, 16, 16), 8, 3), 3, 2, 1);
  for (int m = 0; m < 2; ++m) {
    const ValueId a = b.conv(x, 4, 1);
    const ValueId c = b.conv(b.conv(x, 4, 1), 6, 3);
    const ValueId d = b.conv(b.conv(x, 2, 1), 4, 3);
    const ValueId e = b.conv(b.maxpool(x, 3, 1, 1), 4, 1);
    x = b.concat({a, c, d, e});
  }
  b.output(b.conv(b.gap(x), 10, 1));
  return std::move(b.g);
}

inline Graph squeezenet_style() {
  CnnBuilder b;
  ValueId x = b.maxpool(b.relu(b.conv(b.input(3, 16, 16), 8, 3, 2)), 3, 2, 1);
  for (int f = 0; f < 3; ++f) {
    const ValueId s = b.relu(b.conv(x, 4, 1));
    x = b.concat({b.relu(b.conv(s, 8, 1)), b.relu(b.conv(s, 8, 3))});
  }
  b.output(b.gap(b.relu(b.conv(x, 10, 1))));
  return std::move(b.g);
}

inline Graph densenet_style() {
  CnnBuilder b;
  ValueId x = b.maxpool(b.conv(b.input(3, 16, 16), 8, 3), 3, 2, 1);
  std::vector<ValueId> feats = {x};
  for (int l = 0; l < 4; ++l) {
    const ValueId in = feats.size() == 1 ? feats[0] : b.concat(feats);
    feats.push_back(b.conv(b.relu(b.conv(b.relu(in), 8, 1)), 4, 3));
  }
  x = b.conv(b.concat(feats), 8, 1);
  b.output(b.gap(x));
  return std::move(b.g);
}

inline bool same_bytes(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].shape() != b[i].shape() || a[i].byte_size() != b[i].byte_size()) return false;
    if (std::memcmp(a[i].raw(), b[i].raw(), a[i].byte_size()) != 0) return false;
  }
  return true;
}

// Streams `frames` random frames through `plan` at its queue capacity, under a watchdog of
// `watchdog_s` seconds (a deadlocked stream aborts the test program with the plan), and checks
// every output against the sequential run of the same plan, byte for byte.
inline void expect_stream_equals_sequential(const LayerGraph& lg, const Plan& plan, int frames,
                                            double watchdog_s = 60) {
  auto ex = Executor::create(lg, plan);
  ASSERT_TRUE(ex.ok()) << plan.notation() << ": " << ex.status().to_string();
  std::mt19937 rng(5);
  std::vector<std::vector<Tensor>> inputs, expected;
  for (int f = 0; f < frames; ++f) {
    inputs.push_back(random_inputs(lg.graph(), rng));
    std::vector<Tensor> out;
    Status s = (*ex)->run(inputs.back(), &out);
    ASSERT_TRUE(s.ok()) << plan.notation() << ": " << s.to_string();
    expected.push_back(out);
  }
  Executor* e = ex->get();
  auto streamed = std::async(std::launch::async, [&]() -> std::string {
    int submitted = 0, received = 0;
    while (received < frames) {
      while (submitted < frames && submitted - received < e->num_slots()) {
        auto id = e->submit(inputs[static_cast<size_t>(submitted)]);
        if (!id.ok()) return "submit: " + id.status().to_string();
        ++submitted;
      }
      auto r = e->next();
      if (!r.ok()) return "next: " + r.status().to_string();
      if (!r->status.ok())
        return "frame " + std::to_string(r->frame) + ": " + r->status.to_string();
      if (r->frame != static_cast<uint64_t>(received)) return "frames out of order";
      if (!same_bytes(r->outputs, expected[static_cast<size_t>(received)])) {
        return "frame " + std::to_string(received) + " differs from the sequential run";
      }
      ++received;
    }
    e->close();
    return "";
  });
  if (streamed.wait_for(std::chrono::duration<double>(watchdog_s)) != std::future_status::ready) {
    std::fprintf(stderr, "watchdog: the stream of %s did not finish in %.0f s (deadlock?)\n",
                 plan.notation().c_str(), watchdog_s);
    std::abort();
  }
  const std::string err = streamed.get();
  EXPECT_TRUE(err.empty()) << plan.notation() << ": " << err;
}

}  // namespace tessera::testing
