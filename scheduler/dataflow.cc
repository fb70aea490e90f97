#include "scheduler/dataflow.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/dtype.h"

namespace tessera {

// ---- SDF (Algorithm 1) ----

Result<SdfGraph> build_sdf(const LayerGraph& lg) {
  const Graph& g = lg.graph();
  const int L = lg.num_layers();
  std::unordered_map<ValueId, int> producer;
  for (int l = 0; l < L; ++l) {
    for (ValueId v : lg.layer(l).outputs) producer[v] = l;
  }
  SdfGraph sdf;
  sdf.num_actors = L;
  sdf.in_channels.assign(static_cast<size_t>(L), {});
  sdf.out_channels.assign(static_cast<size_t>(L), {});
  for (int l = 0; l < L; ++l) {
    std::set<ValueId> seen;  // a layer reading one tensor twice has one channel for it
    for (ValueId v : lg.layer(l).inputs) {
      if (v == kNoValue || !seen.insert(v).second) continue;
      auto it = producer.find(v);
      if (it == producer.end()) continue;  // a graph input
      const Value& val = g.value(v);
      if (!val.has_info) {
        return invalid_argument("dataflow: tensor " + quote_name(val.name) + " (read by layer " +
                                std::to_string(l) + " '" + lg.layer(l).name +
                                "') has no shape; run shape inference first");
      }
      SdfChannel c;
      c.src = it->second;
      c.dst = l;
      c.value = v;
      const int64_t n = val.info.shape.numel();
      c.production = c.consumption = static_cast<uint64_t>(std::max<int64_t>(n, 0));
      c.bytes = c.production * dtype_size(val.info.dtype);
      const int id = static_cast<int>(sdf.channels.size());
      sdf.channels.push_back(c);
      sdf.out_channels[static_cast<size_t>(c.src)].push_back(id);
      sdf.in_channels[static_cast<size_t>(l)].push_back(id);
    }
  }
  return sdf;
}

// ---- CSDF ----

std::vector<std::pair<int, int>> CsdfGraph::locate(int num_layers) const {
  std::vector<std::pair<int, int>> at(static_cast<size_t>(num_layers), {-1, -1});
  for (size_t a = 0; a < actors.size(); ++a) {
    for (size_t p = 0; p < actors[a].phases.size(); ++p) {
      for (int l : actors[a].phases[p]) {
        at[static_cast<size_t>(l)] = {static_cast<int>(a), static_cast<int>(p)};
      }
    }
  }
  return at;
}

namespace {

std::string layer_set(const std::vector<int>& layers) {
  std::string s = "{";
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    if (i > 0) s += ",";
    s += std::to_string(layers[i]);
    if (j > i) s += "-" + std::to_string(layers[j]);
    i = j + 1;
  }
  return s + "}";
}

// Fills channels and local edges from the phases (Algorithm 2 lines 26-30, with the fix that an
// edge between two phases of one actor stays in the actor's memory).
void build_channels(const SdfGraph& sdf, CsdfGraph* csdf) {
  csdf->channels.clear();
  csdf->local.clear();
  const auto at = csdf->locate(sdf.num_actors);
  for (size_t c = 0; c < sdf.channels.size(); ++c) {
    const SdfChannel& e = sdf.channels[c];
    const auto [sa, sp] = at[static_cast<size_t>(e.src)];
    const auto [da, dp] = at[static_cast<size_t>(e.dst)];
    if (sa == da) {
      if (sp != dp) csdf->local.push_back(static_cast<int>(c));
      continue;
    }
    CsdfChannel ch;
    ch.src_actor = sa;
    ch.dst_actor = da;
    ch.sdf_channel = static_cast<int>(c);
    ch.production.assign(csdf->actors[static_cast<size_t>(sa)].phases.size(), 0);
    ch.consumption.assign(csdf->actors[static_cast<size_t>(da)].phases.size(), 0);
    ch.production[static_cast<size_t>(sp)] = e.production;
    ch.consumption[static_cast<size_t>(dp)] = e.consumption;
    csdf->channels.push_back(std::move(ch));
  }
}

// Phases numbered globally: (actor, phase) -> id, and back.
struct PhaseIndex {
  std::vector<std::pair<int, int>> phase;  // by id
  std::vector<int> of_layer;               // by layer

  PhaseIndex(const CsdfGraph& csdf, int num_layers) {
    of_layer.assign(static_cast<size_t>(num_layers), -1);
    for (size_t a = 0; a < csdf.actors.size(); ++a) {
      for (size_t p = 0; p < csdf.actors[a].phases.size(); ++p) {
        const int id = static_cast<int>(phase.size());
        phase.emplace_back(static_cast<int>(a), static_cast<int>(p));
        for (int l : csdf.actors[a].phases[p]) of_layer[static_cast<size_t>(l)] = id;
      }
    }
  }
  int size() const { return static_cast<int>(phase.size()); }
};

// Phase -> phases it reads from (data edges between distinct phases).
std::vector<std::set<int>> phase_inputs(const SdfGraph& sdf, const PhaseIndex& ix) {
  std::vector<std::set<int>> in(static_cast<size_t>(ix.size()));
  for (const SdfChannel& e : sdf.channels) {
    const int s = ix.of_layer[static_cast<size_t>(e.src)];
    const int d = ix.of_layer[static_cast<size_t>(e.dst)];
    if (s != d) in[static_cast<size_t>(d)].insert(s);
  }
  return in;
}

// Strongly connected components (Tarjan, iterative) of the graph given by `in` (edges s -> d
// for s in in[d]); returns the component of every node.
std::vector<int> components(const std::vector<std::set<int>>& in, int* count) {
  const int n = static_cast<int>(in.size());
  std::vector<std::vector<int>> out(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) {
    for (int s : in[static_cast<size_t>(d)]) out[static_cast<size_t>(s)].push_back(d);
  }
  std::vector<int> index(static_cast<size_t>(n), -1), low(static_cast<size_t>(n), 0),
      comp(static_cast<size_t>(n), -1);
  std::vector<bool> on_stack(static_cast<size_t>(n), false);
  std::vector<int> stack;
  int next = 0, c = 0;
  for (int root = 0; root < n; ++root) {
    if (index[static_cast<size_t>(root)] >= 0) continue;
    std::vector<std::pair<int, size_t>> work = {{root, 0}};
    while (!work.empty()) {
      auto& [v, i] = work.back();
      const size_t vs = static_cast<size_t>(v);
      if (i == 0 && index[vs] < 0) {
        index[vs] = low[vs] = next++;
        stack.push_back(v);
        on_stack[vs] = true;
      }
      if (i < out[vs].size()) {
        const int w = out[vs][i++];
        const size_t ws = static_cast<size_t>(w);
        if (index[ws] < 0) {
          work.emplace_back(w, 0);
        } else if (on_stack[ws]) {
          low[vs] = std::min(low[vs], index[ws]);
        }
        continue;
      }
      if (low[vs] == index[vs]) {
        while (true) {
          const int w = stack.back();
          stack.pop_back();
          on_stack[static_cast<size_t>(w)] = false;
          comp[static_cast<size_t>(w)] = c;
          if (w == v) break;
        }
        ++c;
      }
      const int done = v;
      work.pop_back();
      if (!work.empty()) {
        const size_t p = static_cast<size_t>(work.back().first);
        low[p] = std::min(low[p], low[static_cast<size_t>(done)]);
      }
    }
  }
  *count = c;
  return comp;
}

// One topological order of the phases over data edges plus, when `keep_sequence`, each actor's
// phase p -> p + 1; among the ready phases the one with the lowest first layer goes first.
// Empty when there is a cycle.
std::vector<int> phase_order(const CsdfGraph& csdf, const PhaseIndex& ix,
                             const std::vector<std::set<int>>& in, bool keep_sequence) {
  const int n = ix.size();
  std::vector<std::vector<int>> out(static_cast<size_t>(n));
  std::vector<int> indegree(static_cast<size_t>(n), 0);
  auto edge = [&](int s, int d) {
    out[static_cast<size_t>(s)].push_back(d);
    ++indegree[static_cast<size_t>(d)];
  };
  for (int d = 0; d < n; ++d) {
    for (int s : in[static_cast<size_t>(d)]) edge(s, d);
  }
  if (keep_sequence) {
    for (int id = 0; id + 1 < n; ++id) {
      if (ix.phase[static_cast<size_t>(id)].first == ix.phase[static_cast<size_t>(id + 1)].first) {
        edge(id, id + 1);
      }
    }
  }
  auto first_layer = [&](int id) {
    const auto [a, p] = ix.phase[static_cast<size_t>(id)];
    return csdf.actors[static_cast<size_t>(a)].phases[static_cast<size_t>(p)].front();
  };
  using Item = std::pair<int, int>;  // (first layer, id)
  std::priority_queue<Item, std::vector<Item>, std::greater<>> ready;
  for (int id = 0; id < n; ++id) {
    if (indegree[static_cast<size_t>(id)] == 0) ready.emplace(first_layer(id), id);
  }
  std::vector<int> order;
  while (!ready.empty()) {
    const int id = ready.top().second;
    ready.pop();
    order.push_back(id);
    for (int d : out[static_cast<size_t>(id)]) {
      if (--indegree[static_cast<size_t>(d)] == 0) ready.emplace(first_layer(d), d);
    }
  }
  if (static_cast<int>(order.size()) != n) order.clear();
  return order;
}

}  // namespace

std::string CsdfGraph::describe() const {
  std::string s;
  for (size_t a = 0; a < actors.size(); ++a) {
    if (a > 0) s += " | ";
    s += "a" + std::to_string(a) + "(p" + std::to_string(actors[a].processor) + "):";
    for (const auto& phase : actors[a].phases) s += " " + layer_set(phase);
  }
  return s;
}

Result<CsdfGraph> csdf_algorithm2(const LayerGraph& lg, const SdfGraph& sdf,
                                  const std::vector<int>& mapping, int num_processors) {
  const int L = lg.num_layers();
  if (sdf.num_actors != L) {
    return invalid_argument("dataflow: the SDF graph has " + std::to_string(sdf.num_actors) +
                            " actors, the model " + std::to_string(L) + " layers");
  }
  if (static_cast<int>(mapping.size()) != L) {
    return invalid_argument("dataflow: the mapping names " + std::to_string(mapping.size()) +
                            " layers, the model has " + std::to_string(L));
  }
  if (num_processors < 1) return invalid_argument("dataflow: no processors");
  for (int l = 0; l < L; ++l) {
    const int p = mapping[static_cast<size_t>(l)];
    if (p < 0 || p >= num_processors) {
      return invalid_argument("dataflow: layer " + std::to_string(l) + " '" + lg.layer(l).name +
                              "' is mapped to processor " + std::to_string(p) + ", not in 0.." +
                              std::to_string(num_processors - 1));
    }
  }
  auto proc = [&](int l) { return mapping[static_cast<size_t>(l)]; };
  CsdfGraph csdf;
  std::vector<bool> visited(static_cast<size_t>(L), false), queued(static_cast<size_t>(L), false);
  for (int i = 0; i < num_processors; ++i) {
    CsdfActor actor;
    actor.processor = i;
    for (int k = 0; k < L; ++k) {  // line 6: the processor's unvisited layers, in layer order
      if (proc(k) != i || visited[static_cast<size_t>(k)]) continue;
      std::vector<int> phase;
      std::deque<int> q = {k};
      queued[static_cast<size_t>(k)] = true;
      while (!q.empty()) {
        const int j = q.front();
        q.pop_front();
        phase.push_back(j);
        visited[static_cast<size_t>(j)] = true;
        const auto& outs = sdf.out_channels[static_cast<size_t>(j)];
        const bool leaves = std::any_of(outs.begin(), outs.end(), [&](int c) {
          return proc(sdf.channels[static_cast<size_t>(c)].dst) != i;
        });
        if (leaves) continue;  // lines 13-16: every output edge of l_j goes to E_out
        for (int c : outs) {   // lines 18-20
          const int s = sdf.channels[static_cast<size_t>(c)].dst;
          if (!visited[static_cast<size_t>(s)] && !queued[static_cast<size_t>(s)]) {
            queued[static_cast<size_t>(s)] = true;
            q.push_back(s);
          }
        }
      }
      std::sort(phase.begin(), phase.end());
      actor.phases.push_back(std::move(phase));
    }
    if (!actor.phases.empty()) csdf.actors.push_back(std::move(actor));
  }
  build_channels(sdf, &csdf);
  return csdf;
}

Status check_deadlock_free(const SdfGraph& sdf, const CsdfGraph& csdf) {
  const PhaseIndex ix(csdf, sdf.num_actors);
  for (int l = 0; l < sdf.num_actors; ++l) {
    if (ix.of_layer[static_cast<size_t>(l)] < 0) {
      return invalid_argument("dataflow: layer " + std::to_string(l) + " is in no phase");
    }
  }
  std::vector<bool> fired(static_cast<size_t>(sdf.num_actors), false);
  std::vector<size_t> next(csdf.actors.size(), 0);
  // The first layer outside the phase that it reads and that has not fired, or -1.
  auto waits_for = [&](const std::vector<int>& phase) {
    const int id = ix.of_layer[static_cast<size_t>(phase.front())];
    for (int l : phase) {
      for (int c : sdf.in_channels[static_cast<size_t>(l)]) {
        const int s = sdf.channels[static_cast<size_t>(c)].src;
        if (ix.of_layer[static_cast<size_t>(s)] != id && !fired[static_cast<size_t>(s)]) return s;
      }
    }
    return -1;
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (size_t a = 0; a < csdf.actors.size(); ++a) {
      const auto& phases = csdf.actors[a].phases;
      while (next[a] < phases.size() && waits_for(phases[next[a]]) < 0) {
        for (int l : phases[next[a]]) fired[static_cast<size_t>(l)] = true;
        ++next[a];
        progress = true;
      }
    }
  }
  std::string stuck;
  for (size_t a = 0; a < csdf.actors.size(); ++a) {
    const auto& phases = csdf.actors[a].phases;
    if (next[a] == phases.size()) continue;
    if (!stuck.empty()) stuck += "; ";
    stuck += "actor a" + std::to_string(a) + " phase " + std::to_string(next[a] + 1) + " " +
             layer_set(phases[next[a]]) + " waits for layer " +
             std::to_string(waits_for(phases[next[a]]));
  }
  if (stuck.empty()) return Status();
  return failed_precondition("dataflow: the CSDF graph deadlocks in its first iteration: " + stuck);
}

void make_deadlock_free(const SdfGraph& sdf, CsdfGraph* csdf) {
  const int L = sdf.num_actors;
  // 1. Split phases until the phase graph is acyclic.
  while (true) {
    const PhaseIndex ix(*csdf, L);
    const auto in = phase_inputs(sdf, ix);
    int count = 0;
    const std::vector<int> comp = components(in, &count);
    std::vector<int> size(static_cast<size_t>(count), 0);
    for (int c : comp) ++size[static_cast<size_t>(c)];
    // The cyclic component holding the lowest layer.
    int s = -1;
    for (int l = 0; l < L && s < 0; ++l) {
      const int c = comp[static_cast<size_t>(ix.of_layer[static_cast<size_t>(l)])];
      if (size[static_cast<size_t>(c)] > 1) s = c;
    }
    if (s < 0) break;
    int q = -1;  // the phase of S holding S's lowest layer
    for (int l = 0; l < L && q < 0; ++l) {
      const int id = ix.of_layer[static_cast<size_t>(l)];
      if (comp[static_cast<size_t>(id)] == s) q = id;
    }
    // reach[l]: l depends on a layer of another phase of S (layers are in topological order).
    std::vector<bool> reach(static_cast<size_t>(L), false);
    for (int l = 0; l < L; ++l) {
      for (int c : sdf.in_channels[static_cast<size_t>(l)]) {
        const int src = sdf.channels[static_cast<size_t>(c)].src;
        const int sid = ix.of_layer[static_cast<size_t>(src)];
        if (reach[static_cast<size_t>(src)] || (sid != q && comp[static_cast<size_t>(sid)] == s)) {
          reach[static_cast<size_t>(l)] = true;
          break;
        }
      }
    }
    const auto [a, p] = ix.phase[static_cast<size_t>(q)];
    auto& phases = csdf->actors[static_cast<size_t>(a)].phases;
    std::vector<int> early, late;
    for (int l : phases[static_cast<size_t>(p)])
      (reach[static_cast<size_t>(l)] ? late : early).push_back(l);
    phases[static_cast<size_t>(p)] = std::move(early);
    phases.insert(phases.begin() + p + 1, std::move(late));
    ++csdf->splits;
  }
  // 2. Keep each actor's sequence where it is consistent, else reorder along the phase graph.
  const PhaseIndex ix(*csdf, L);
  const auto in = phase_inputs(sdf, ix);
  if (phase_order(*csdf, ix, in, /*keep_sequence=*/true).empty()) {
    const std::vector<int> order = phase_order(*csdf, ix, in, /*keep_sequence=*/false);
    std::vector<std::vector<std::vector<int>>> phases(csdf->actors.size());
    for (int id : order) {
      const auto [a, p] = ix.phase[static_cast<size_t>(id)];
      phases[static_cast<size_t>(a)].push_back(
          csdf->actors[static_cast<size_t>(a)].phases[static_cast<size_t>(p)]);
    }
    for (size_t a = 0; a < phases.size(); ++a) csdf->actors[a].phases = std::move(phases[a]);
    csdf->reordered = true;
  }
  build_channels(sdf, csdf);
}

Result<CsdfGraph> build_csdf(const LayerGraph& lg, const SdfGraph& sdf,
                             const std::vector<int>& mapping, int num_processors) {
  ASSIGN_OR_RETURN(CsdfGraph csdf, csdf_algorithm2(lg, sdf, mapping, num_processors));
  if (!check_deadlock_free(sdf, csdf).ok()) {
    make_deadlock_free(sdf, &csdf);
    Status s = check_deadlock_free(sdf, csdf);
    if (!s.ok())
      return internal_error("dataflow: the repaired phases still deadlock: " + s.message());
  }
  return csdf;
}

Result<Plan> csdf_to_plan(const SdfGraph& sdf, const CsdfGraph& csdf,
                          const std::vector<std::string>& devices, int num_layers) {
  if (sdf.num_actors != num_layers) {
    return invalid_argument("dataflow: the SDF graph has " + std::to_string(sdf.num_actors) +
                            " actors, the model " + std::to_string(num_layers) + " layers");
  }
  RETURN_IF_ERROR(check_deadlock_free(sdf, csdf));
  const PhaseIndex ix(csdf, num_layers);
  const auto in = phase_inputs(sdf, ix);
  const std::vector<int> order = phase_order(csdf, ix, in, /*keep_sequence=*/true);
  if (order.empty()) {
    return internal_error("dataflow: no phase order although the check passed");
  }
  Plan plan;
  plan.num_layers = num_layers;
  plan.mode = PlanMode::kStreaming;
  for (int id : order) {
    const auto [a, p] = ix.phase[static_cast<size_t>(id)];
    const CsdfActor& actor = csdf.actors[static_cast<size_t>(a)];
    if (actor.processor < 0 || actor.processor >= static_cast<int>(devices.size())) {
      return invalid_argument("dataflow: actor a" + std::to_string(a) + " runs on processor " +
                              std::to_string(actor.processor) + ", but " +
                              std::to_string(devices.size()) + " devices were given");
    }
    Stage st;
    st.layers = actor.phases[static_cast<size_t>(p)];
    st.placement = Placement::on(devices[static_cast<size_t>(actor.processor)]);
    st.actor = a;
    plan.stages.push_back(std::move(st));
  }
  RETURN_IF_ERROR(plan.validate(num_layers, {}, /*require_contiguous=*/false));
  return plan;
}

}  // namespace tessera
