// Seed 004 Fig. 12-style sweep: one Conv layer (128x128 input, same padding, kernels 3/5/9, 128
// or 512 filters, input depth 16..512) on cpu:0 alone, on cpu (all cores, one program), and
// split over cpu:0 + cpu:1 by each method (channel, spatial, filter, grid) with equal ratios.
// Prints the median latency of each and its speedup over cpu:0 and over cpu.
//
//   tessera_split_sweep [--kernels 3,5,9] [--filters 128,512] [--depths 16,32,...,512]
//                       [--rounds 5] [--size 128] [--members cpu:0,cpu:1]
//
// Rounds alternate the variants (cpu:0, cpu, each split, then again), so that a drift of the
// machine's load hits them alike; each variant runs once untimed first. Medians of the rounds.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "backends/split/split_device.h"
#include "graph/graph.h"
#include "ops/activation.h"

namespace tessera {
namespace {

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoll(item));
  return out;
}

std::vector<std::string> parse_names(const char* s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

Tensor random_tensor(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::create(DType::kF32, shape).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}

int run(int argc, char** argv) {
  std::vector<int64_t> kernels = {3, 5, 9}, filters = {128, 512},
                       depths = {16, 32, 64, 128, 256, 512};
  int rounds = 5;
  int64_t size = 128;
  std::vector<std::string> members = {"cpu:0", "cpu:1"};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--kernels")
      kernels = parse_list(argv[i + 1]);
    else if (flag == "--filters")
      filters = parse_list(argv[i + 1]);
    else if (flag == "--depths")
      depths = parse_list(argv[i + 1]);
    else if (flag == "--rounds")
      rounds = std::atoi(argv[i + 1]);
    else if (flag == "--size")
      size = std::atoll(argv[i + 1]);
    else if (flag == "--members")
      members = parse_names(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::vector<std::string> variants = {members[0], "cpu"};
  const char* methods[] = {"conv-channel", "conv-spatial", "conv-filter", "conv-grid"};
  for (const char* m : methods) {
    SplitSpec spec;
    spec.method = *parse_split_method(m);
    spec.devices = members;
    spec.ratios.assign(members.size(), 1.0 / static_cast<double>(members.size()));
    variants.push_back(split_device_name(spec));
  }
  std::vector<std::unique_ptr<Device>> devices;
  for (const std::string& v : variants) {
    auto d = open_device(v);
    if (!d.ok()) {
      std::fprintf(stderr, "%s: %s\n", v.c_str(), d.status().to_string().c_str());
      return 1;
    }
    devices.push_back(std::move(*d));
  }
  std::printf(
      "%6s %7s %6s | %10s %10s | %10s %10s %10s %10s | %-8s %-8s %-8s %-8s (x %s) | best vs "
      "cpu\n",
      "kernel", "filters", "depth", (members[0] + " ms").c_str(), "cpu ms", "channel", "spatial",
      "filter", "grid", "channel", "spatial", "filter", "grid", members[0].c_str());
  for (int64_t f : kernels) {
    for (int64_t k : filters) {
      for (int64_t c : depths) {
        Graph g;
        const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, c, size, size}});
        g.inputs().push_back(x);
        Node n;
        n.name = "conv";
        n.kind = OpKind::kConv;
        n.attrs.set("auto_pad", std::string("SAME_UPPER"));
        set_fused_activation(&n.attrs, Activation{ActivationKind::kRelu, 0, 0});
        n.inputs = {x, g.add_constant("w", random_tensor(Shape{k, c, f, f}, 1)),
                    g.add_constant("b", random_tensor(Shape{k}, 2))};
        n.outputs = {g.add_value("y")};
        g.outputs().push_back(n.outputs[0]);
        g.add_node(n);
        if (!g.infer_shapes().ok()) return 1;
        const NodeId node = 0;
        std::vector<std::unique_ptr<Program>> programs;
        for (auto& d : devices) {
          auto p = d->compile(g, std::span<const NodeId>(&node, 1));
          if (!p.ok()) {
            std::fprintf(stderr, "%s: %s\n", d->name().c_str(), p.status().to_string().c_str());
            return 1;
          }
          programs.push_back(std::move(*p));
        }
        const std::vector<Tensor> in = {random_tensor(Shape{1, c, size, size}, 3)};
        std::vector<std::vector<double>> ms(programs.size());
        std::vector<std::vector<Tensor>> out(programs.size(), std::vector<Tensor>(1));
        for (int r = -1; r < rounds; ++r) {
          for (size_t v = 0; v < programs.size(); ++v) {
            const auto t0 = std::chrono::steady_clock::now();
            Status s = programs[v]->run(in, out[v]);
            const auto t1 = std::chrono::steady_clock::now();
            if (!s.ok()) {
              std::fprintf(stderr, "%s\n", s.to_string().c_str());
              return 1;
            }
            if (r >= 0) ms[v].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
          }
        }
        std::vector<double> med;
        for (auto& v : ms) {
          std::sort(v.begin(), v.end());
          med.push_back(v[v.size() / 2]);
        }
        // The split results must equal cpu:0's (a sweep that measures wrong outputs is void).
        double max_err = 0;
        for (size_t v = 2; v < out.size(); ++v) {
          for (int64_t i = 0; i < out[0][0].numel(); ++i) {
            max_err = std::max(max_err, static_cast<double>(std::fabs(out[v][0].data<float>()[i] -
                                                                      out[0][0].data<float>()[i])));
          }
        }
        const char* names[] = {"channel", "spatial", "filter", "grid"};
        size_t best = 2;
        for (size_t v = 3; v < med.size(); ++v) {
          if (med[v] < med[best]) best = v;
        }
        std::printf(
            "%6lld %7lld %6lld | %10.2f %10.2f | %10.2f %10.2f %10.2f %10.2f | %-8.2f %-8.2f "
            "%-8.2f %-8.2f       | %s %.2fx%s\n",
            static_cast<long long>(f), static_cast<long long>(k), static_cast<long long>(c), med[0],
            med[1], med[2], med[3], med[4], med[5], med[0] / med[2], med[0] / med[3],
            med[0] / med[4], med[0] / med[5], names[best - 2], med[1] / med[best],
            max_err > 1e-2 ? "  (OUTPUTS DIFFER)" : "");
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  return tessera::run(argc, argv);
}
