#include "backends/vulkan/pipelines/kernel.h"

namespace tessera {

const Tensor* KernelBuilder::constant(int i) const {
  if (i >= static_cast<int>(node().inputs.size())) return nullptr;
  const ValueId v = node().inputs[static_cast<size_t>(i)];
  if (v == kNoValue || !graph().value(v).is_constant) return nullptr;
  return &graph().value(v).data;
}

Status KernelBuilder::error(const std::string& msg) const {
  return unimplemented("node " + quote_name(node().name) + " (" + op_name(node().kind) +
                       "): " + msg);
}

void append_activation_spec(const Activation& a, std::vector<uint32_t>* spec) {
  spec->push_back(static_cast<uint32_t>(a.kind));
  spec->push_back(float_bits(a.alpha));
  spec->push_back(float_bits(a.beta));
}

GemmTile pick_gemm_tile(uint64_t m, uint64_t n, uint64_t batch) {
  // Workgroups that keep a device busy: a guess for small GPUs and lavapipe's thread count, not
  // a measurement (no GPU was at hand to tune it).
  constexpr uint64_t kEnoughGroups = 16;
  static constexpr GemmTile kTiles[] = {{16, 16}, {8, 16}, {16, 8}, {8, 8}, {16, 4}, {4, 16}};
  GemmTile best = kTiles[0];
  uint64_t best_groups = 0, best_padded = 0;
  for (const GemmTile& t : kTiles) {
    const uint64_t gm = (m + t.tile_m() - 1) / t.tile_m(), gn = (n + t.tile_n() - 1) / t.tile_n();
    const uint64_t groups = gm * gn * batch;
    const uint64_t padded = gm * t.tile_m() * gn * t.tile_n() * batch;
    const bool enough = groups >= kEnoughGroups, best_enough = best_groups >= kEnoughGroups;
    bool better;
    if (best_groups == 0) {
      better = true;
    } else if (enough != best_enough) {
      better = enough;
    } else if (!enough) {
      better = groups > best_groups || (groups == best_groups && padded < best_padded);
    } else {
      better = padded < best_padded;  // ties keep the earlier, larger tile
    }
    if (better) {
      best = t;
      best_groups = groups;
      best_padded = padded;
    }
  }
  return best;
}

void append_tile_spec(const GemmTile& t, std::vector<uint32_t>* spec) {
  spec->push_back(t.wg_n);
  spec->push_back(t.wg_m);
  spec->push_back(t.threads());
}

void set_linear_groups(uint64_t elements, uint32_t local, Dispatch* d) {
  const uint64_t groups = std::max<uint64_t>(1, (elements + local - 1) / local);
  const uint64_t x = std::min<uint64_t>(groups, 65535);
  d->groups[0] = static_cast<uint32_t>(x);
  d->groups[1] = static_cast<uint32_t>((groups + x - 1) / x);
  d->groups[2] = 1;
}

}  // namespace tessera
