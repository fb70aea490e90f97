// Parsing a HAL subgraph description into the driver's Model, checking every limit of the
// reference NPU on the way: the op whitelist, attribute limits, ranks, shapes and dtypes.
#include <algorithm>
#include <cstring>

#include "backends/npu/reference_driver/ref_model.h"

namespace tnpu_ref {

namespace {

constexpr uint32_t kLowPrecision = TNPU_PRECISION_F16 | TNPU_PRECISION_INT8;
constexpr uint32_t kFusable = TNPU_ACTIVATION_RELU | TNPU_ACTIVATION_CLIP;
constexpr int64_t kMaxChannels = 65535;

tnpu_op_support support(const char* name, uint32_t max_kernel, uint32_t max_stride,
                        uint32_t max_dilation, uint32_t max_inputs, uint32_t fused) {
  tnpu_op_support s{};
  s.struct_size = sizeof(tnpu_op_support);
  std::snprintf(s.op_type, sizeof(s.op_type), "%s", name);
  s.precisions = kLowPrecision;
  s.max_kernel = max_kernel;
  s.max_stride = max_stride;
  s.max_dilation = max_dilation;
  s.max_inputs = max_inputs;
  s.fused_activations = fused;
  return s;
}

struct OpEntry {
  const char* name;
  OpType type;
};
const OpEntry kOps[] = {
    {"Conv", OpType::kConv},
    {"Gemm", OpType::kGemm},
    {"MaxPool", OpType::kMaxPool},
    {"AveragePool", OpType::kAveragePool},
    {"GlobalAveragePool", OpType::kGlobalAveragePool},
    {"Add", OpType::kAdd},
    {"Relu", OpType::kRelu},
    {"Clip", OpType::kClip},
    {"Concat", OpType::kConcat},
    {"Flatten", OpType::kFlatten},
    {"Reshape", OpType::kReshape},
};

std::string supported_list() {
  std::string s;
  for (const OpEntry& e : kOps) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s;
}

int64_t numel_of(const tnpu_tensor_desc& t) {
  int64_t n = 1;
  for (uint32_t i = 0; i < t.rank; ++i) n *= t.dims[i];
  return n;
}

std::string dims_string(const TensorDesc& t) {
  std::string s = "[";
  for (int i = 0; i < t.rank; ++i) s += (i ? ", " : "") + std::to_string(t.dims[i]);
  return s + "]";
}

// Attribute access for one node; every error names the node and attribute.
class Attrs {
 public:
  Attrs(const tnpu_node& n, const Node& node) : n_(n), node_(node) {}

  const tnpu_attribute* find(const char* name) const {
    for (uint32_t i = 0; i < n_.num_attrs; ++i) {
      if (n_.attrs[i].name != nullptr && std::strcmp(n_.attrs[i].name, name) == 0)
        return &n_.attrs[i];
    }
    return nullptr;
  }
  Error get_int(const char* name, int64_t def, int64_t* out) const {
    const tnpu_attribute* a = find(name);
    if (a == nullptr) return *out = def, Error::none();
    if (a->type != TNPU_ATTR_INT) return bad(name, "an int");
    *out = a->i;
    return Error::none();
  }
  Error get_float(const char* name, float def, float* out) const {
    const tnpu_attribute* a = find(name);
    if (a == nullptr) return *out = def, Error::none();
    if (a->type != TNPU_ATTR_FLOAT) return bad(name, "a float");
    *out = a->f;
    return Error::none();
  }
  Error get_string(const char* name, const char* def, std::string* out) const {
    const tnpu_attribute* a = find(name);
    if (a == nullptr) return *out = def, Error::none();
    if (a->type != TNPU_ATTR_STRING || a->s == nullptr) return bad(name, "a string");
    *out = a->s;
    return Error::none();
  }
  // An ints attribute of exactly `count` values (or `def` when absent).
  Error get_ints(const char* name, size_t count, std::vector<int64_t> def,
                 std::vector<int64_t>* out) const {
    const tnpu_attribute* a = find(name);
    if (a == nullptr) return *out = std::move(def), Error::none();
    if (a->type != TNPU_ATTR_INTS || (a->count > 0 && a->ints == nullptr))
      return bad(name, "a list of ints");
    if (a->count != count) {
      return fail(TNPU_ERR_UNSUPPORTED, node_.describe() + ": attribute '" + name + "' has " +
                                            std::to_string(a->count) + " values, expected " +
                                            std::to_string(count) + " (2-D windows only)");
    }
    out->assign(a->ints, a->ints + a->count);
    return Error::none();
  }

 private:
  Error bad(const char* name, const char* what) const {
    return fail(TNPU_ERR_INVALID_ARGUMENT,
                node_.describe() + ": attribute '" + name + "' must be " + what);
  }
  const tnpu_node& n_;
  const Node& node_;
};

#define TRY(expr)            \
  do {                       \
    Error e_ = (expr);       \
    if (!e_.ok()) return e_; \
  } while (0)

Error unsupported(const Node& n, const std::string& why) {
  return fail(TNPU_ERR_UNSUPPORTED, n.describe() + ": " + why);
}
Error invalid(const Node& n, const std::string& why) {
  return fail(TNPU_ERR_INVALID_ARGUMENT, n.describe() + ": " + why);
}

// XNNPACK's clamps (every f16/s8 operator's output range) need min < max. ONNX Clip allows
// min >= max (every value becomes max); the NPU refuses such a clamp so that the host runs it.
Error check_clamp(const Node& n) {
  if (n.out_min < n.out_max) return Error::none();
  return unsupported(n, "clip range [" + std::to_string(n.out_min) + ", " +
                            std::to_string(n.out_max) +
                            "] is empty or a point (min must be below max on the NPU)");
}

Error parse_fused(const Attrs& a, Node* n, bool accepts) {
  std::string act;
  TRY(a.get_string("activation", "", &act));
  if (act.empty()) return Error::none();
  if (!accepts) return unsupported(*n, "cannot fuse an activation into this op");
  if (act == "relu") {
    n->out_min = 0;
  } else if (act == "clip") {
    TRY(a.get_float("activation_alpha", -INFINITY, &n->out_min));
    TRY(a.get_float("activation_beta", INFINITY, &n->out_max));
    TRY(check_clamp(*n));
  } else {
    return unsupported(*n, "fused activation '" + act +
                               "' is not supported (the NPU fuses relu and clip/relu6 only)");
  }
  return Error::none();
}

// Reads kernel/stride/pad/dilation attributes of a 2-D window op and checks the limits.
Error parse_window(const Attrs& a, const tnpu_op_support& lim, Node* n, bool need_kernel) {
  std::string auto_pad;
  TRY(a.get_string("auto_pad", "NOTSET", &auto_pad));
  if (auto_pad != "NOTSET") return unsupported(*n, "auto_pad '" + auto_pad + "' is not supported");
  std::vector<int64_t> k, s, p, d;
  TRY(a.get_ints("kernel_shape", 2, {0, 0}, &k));
  if (need_kernel && (k[0] <= 0 || k[1] <= 0))
    return invalid(*n, "attribute 'kernel_shape' must give two positive sizes");
  TRY(a.get_ints("strides", 2, {1, 1}, &s));
  TRY(a.get_ints("pads", 4, {0, 0, 0, 0}, &p));
  TRY(a.get_ints("dilations", 2, {1, 1}, &d));
  n->kh = k[0], n->kw = k[1], n->sh = s[0], n->sw = s[1], n->dh = d[0], n->dw = d[1];
  n->pt = p[0], n->pl = p[1], n->pb = p[2], n->pr = p[3];
  for (int64_t v : s)
    if (v <= 0) return invalid(*n, "attribute 'strides' must be positive");
  for (int64_t v : d)
    if (v <= 0) return invalid(*n, "attribute 'dilations' must be positive");
  for (int64_t v : p)
    if (v < 0 || v > 64) return unsupported(*n, "attribute 'pads' must be in [0, 64]");
  if (std::max(n->kh, n->kw) > lim.max_kernel) {
    return unsupported(*n, "kernel " + std::to_string(n->kh) + "x" + std::to_string(n->kw) +
                               " exceeds the NPU's largest kernel side " +
                               std::to_string(lim.max_kernel));
  }
  if (std::max(n->sh, n->sw) > lim.max_stride)
    return unsupported(*n, "stride exceeds the NPU's limit " + std::to_string(lim.max_stride));
  if (std::max(n->dh, n->dw) > lim.max_dilation)
    return unsupported(*n, "dilation exceeds the NPU's limit " + std::to_string(lim.max_dilation));
  return Error::none();
}

int64_t window_out(int64_t in, int64_t pad, int64_t k, int64_t s, int64_t d) {
  const int64_t span = (k - 1) * d + 1;
  return in + pad < span ? 0 : (in + pad - span) / s + 1;
}

const tnpu_op_support& limits_of(OpType t) {
  return op_support_table()[static_cast<size_t>(t)];
}

}  // namespace

const std::vector<tnpu_op_support>& op_support_table() {
  // In OpType order.
  static const std::vector<tnpu_op_support> table = {
      support("Conv", 11, 4, 4, 3, kFusable),
      support("Gemm", 0, 0, 0, 3, kFusable),
      support("MaxPool", 8, 4, 2, 1, 0),
      support("AveragePool", 8, 4, 1, 1, 0),
      support("GlobalAveragePool", 0, 0, 0, 1, 0),
      support("Add", 0, 0, 0, 2, kFusable),
      support("Relu", 0, 0, 0, 1, 0),
      support("Clip", 0, 0, 0, 3, 0),
      support("Concat", 0, 0, 0, 32, 0),
      support("Flatten", 0, 0, 0, 1, 0),
      support("Reshape", 0, 0, 0, 2, 0),
  };
  return table;
}

Error parse_model(const tnpu_graph* g, Model* out, int only_node) {
  if (g == nullptr) return fail(TNPU_ERR_INVALID_ARGUMENT, "graph is null");
  if (g->struct_size < sizeof(tnpu_graph))
    return fail(TNPU_ERR_INVALID_ARGUMENT, "graph struct_size " + std::to_string(g->struct_size) +
                                               " is smaller than tnpu_graph");
  if ((g->num_tensors > 0 && g->tensors == nullptr) || (g->num_nodes > 0 && g->nodes == nullptr) ||
      (g->num_inputs > 0 && g->inputs == nullptr) || (g->num_outputs > 0 && g->outputs == nullptr))
    return fail(TNPU_ERR_INVALID_ARGUMENT, "graph has a null array with a non-zero count");
  if (g->num_nodes == 0) return fail(TNPU_ERR_INVALID_ARGUMENT, "graph has no nodes");
  if (g->num_tensors > (1u << 20) || g->num_nodes > (1u << 20))
    return fail(TNPU_ERR_INVALID_ARGUMENT, "graph is too large");
  Model& m = *out;
  m = Model();

  // Tensors.
  m.tensors.resize(g->num_tensors);
  for (uint32_t i = 0; i < g->num_tensors; ++i) {
    const tnpu_tensor_desc& d = g->tensors[i];
    TensorDesc& t = m.tensors[i];
    t.name = d.name ? d.name : ("tensor " + std::to_string(i));
    if (d.rank > TNPU_MAX_RANK)
      return fail(TNPU_ERR_INVALID_ARGUMENT,
                  "tensor '" + t.name + "': rank " + std::to_string(d.rank) + " exceeds 8");
    t.rank = static_cast<int>(d.rank);
    int64_t numel = 1;
    for (uint32_t k = 0; k < d.rank; ++k) {
      if (d.dims[k] <= 0 || d.dims[k] > (int64_t{1} << 31))
        return fail(TNPU_ERR_INVALID_ARGUMENT, "tensor '" + t.name + "': dimension " +
                                                   std::to_string(k) + " is " +
                                                   std::to_string(d.dims[k]));
      t.dims[k] = d.dims[k];
      numel *= d.dims[k];
      if (numel > (int64_t{1} << 34))
        return fail(TNPU_ERR_INVALID_ARGUMENT, "tensor '" + t.name + "' is too large");
    }
    if (d.data != nullptr) {
      t.constant = true;
      const size_t esize = d.dtype == TNPU_DTYPE_F32 || d.dtype == TNPU_DTYPE_I32 ? 4
                           : d.dtype == TNPU_DTYPE_I64                            ? 8
                                                                                  : 0;
      if (esize == 0)
        return fail(TNPU_ERR_UNSUPPORTED,
                    "constant '" + t.name + "': only f32 weights and i32/i64 shapes are accepted");
      if (d.data_bytes != static_cast<uint64_t>(numel) * esize)
        return fail(TNPU_ERR_INVALID_ARGUMENT,
                    "constant '" + t.name + "': data_bytes " + std::to_string(d.data_bytes) +
                        " does not match its dims (" + std::to_string(numel * esize) + ")");
      if (d.dtype == TNPU_DTYPE_F32) {
        t.values = static_cast<const float*>(d.data);
      } else if (numel <= 16) {
        for (int64_t k = 0; k < numel; ++k) {
          t.ints.push_back(d.dtype == TNPU_DTYPE_I64 ? static_cast<const int64_t*>(d.data)[k]
                                                     : static_cast<const int32_t*>(d.data)[k]);
        }
      }
    } else {
      if (d.dtype != TNPU_DTYPE_F32)
        return fail(TNPU_ERR_UNSUPPORTED, "activation '" + t.name + "': dtype " +
                                              std::to_string(d.dtype) +
                                              " (activations are described as f32)");
    }
    if (!t.constant && t.rank != 0) {
      if (t.rank == 4) {
        t.n = t.dims[0], t.c = t.dims[1], t.h = t.dims[2], t.w = t.dims[3];
      } else if (t.rank == 2) {
        t.n = t.dims[0], t.c = t.dims[1];
      }
    }
  }
  auto check_index = [&](uint32_t v, const std::string& where) -> Error {
    if (v >= g->num_tensors)
      return fail(TNPU_ERR_INVALID_ARGUMENT,
                  where + ": tensor index " + std::to_string(v) + " out of range");
    return Error::none();
  };
  auto check_activation = [&](int v, const std::string& where) -> Error {
    const TensorDesc& t = m.tensors[static_cast<size_t>(v)];
    if (t.rank != 2 && t.rank != 4)
      return fail(TNPU_ERR_UNSUPPORTED, where + ": tensor '" + t.name + "' has rank " +
                                            std::to_string(t.rank) +
                                            " (the NPU takes 2-D and 4-D activations)");
    if (t.c > kMaxChannels)
      return fail(TNPU_ERR_UNSUPPORTED, where + ": tensor '" + t.name + "' has " +
                                            std::to_string(t.c) + " channels (limit " +
                                            std::to_string(kMaxChannels) + ")");
    return Error::none();
  };

  std::vector<char> defined(g->num_tensors, 0);
  for (uint32_t i = 0; i < g->num_inputs; ++i) {
    TRY(check_index(g->inputs[i], "graph input " + std::to_string(i)));
    const int v = static_cast<int>(g->inputs[i]);
    if (m.tensors[static_cast<size_t>(v)].constant)
      return fail(TNPU_ERR_INVALID_ARGUMENT,
                  "graph input '" + m.tensors[static_cast<size_t>(v)].name + "' is a constant");
    if (only_node < 0) TRY(check_activation(v, "graph input " + std::to_string(i)));
    defined[static_cast<size_t>(v)] = 1;
    m.inputs.push_back(v);
  }

  // Nodes.
  for (uint32_t ni = 0; ni < g->num_nodes; ++ni) {
    const tnpu_node& tn = g->nodes[ni];
    const bool check = only_node < 0 || static_cast<int>(ni) == only_node;
    Node n;
    n.name = tn.name ? tn.name : ("node " + std::to_string(ni));
    n.op_name = tn.op_type ? tn.op_type : "";
    if ((tn.num_inputs > 0 && tn.inputs == nullptr) || tn.num_outputs == 0 ||
        tn.outputs == nullptr || (tn.num_attrs > 0 && tn.attrs == nullptr))
      return invalid(n, "null inputs/outputs/attributes or no outputs");
    for (uint32_t k = 0; k < tn.num_inputs; ++k) {
      if (tn.inputs[k] != TNPU_NO_TENSOR) TRY(check_index(tn.inputs[k], n.describe()));
    }
    for (uint32_t k = 0; k < tn.num_outputs; ++k) TRY(check_index(tn.outputs[k], n.describe()));
    if (!check) {
      // check_node(): other nodes only define their outputs.
      for (uint32_t k = 0; k < tn.num_outputs; ++k) defined[tn.outputs[k]] = 1;
      continue;
    }
    const OpEntry* entry = nullptr;
    for (const OpEntry& e : kOps) {
      if (n.op_name == e.name) entry = &e;
    }
    if (entry == nullptr)
      return unsupported(
          n, "op not supported by the reference NPU (it runs " + supported_list() + ")");
    n.op = entry->type;
    const tnpu_op_support& lim = limits_of(n.op);
    if (tn.num_outputs != 1)
      return unsupported(
          n, "has " + std::to_string(tn.num_outputs) + " outputs (the NPU produces one per op)");
    if (tn.num_inputs > lim.max_inputs)
      return unsupported(n, "has " + std::to_string(tn.num_inputs) + " inputs (limit " +
                                std::to_string(lim.max_inputs) + ")");
    n.output = static_cast<int>(tn.outputs[0]);
    if (m.tensors[static_cast<size_t>(n.output)].constant || defined[static_cast<size_t>(n.output)])
      return invalid(n, "output '" + m.tensors[static_cast<size_t>(n.output)].name +
                            "' is a constant or defined twice");
    TRY(check_activation(n.output, n.describe()));
    // Activation inputs must be defined already; constants are weights.
    std::vector<int> consts;
    for (uint32_t k = 0; k < tn.num_inputs; ++k) {
      const uint32_t v = tn.inputs[k];
      if (v == TNPU_NO_TENSOR) {
        consts.push_back(-1);
        continue;
      }
      const TensorDesc& t = m.tensors[v];
      if (t.constant) {
        consts.push_back(static_cast<int>(v));
        continue;
      }
      if (!defined[v])
        return invalid(n, "input '" + t.name + "' is not produced before it is read");
      TRY(check_activation(static_cast<int>(v), n.describe()));
      n.inputs.push_back(static_cast<int>(v));
      consts.push_back(-2);  // marks an activation position
    }
    Attrs a(tn, n);
    const bool fusable = n.op == OpType::kConv || n.op == OpType::kGemm || n.op == OpType::kAdd;
    TRY(parse_fused(a, &n, fusable));
    const TensorDesc& y = m.tensors[static_cast<size_t>(n.output)];
    auto input_at = [&](size_t k) { return k < consts.size() ? consts[k] : -1; };
    auto need_activations = [&](size_t count) -> Error {
      if (n.inputs.size() != count || consts.empty() || consts[0] != -2)
        return invalid(n, "expects " + std::to_string(count) +
                              " activation input(s) first, the rest constant");
      return Error::none();
    };
    switch (n.op) {
      case OpType::kConv: {
        TRY(need_activations(1));
        n.weight = input_at(1);
        n.bias = input_at(2);
        if (n.weight < 0) return unsupported(n, "weights must be a constant");
        if (consts.size() > 2 && n.bias < 0 && consts[2] == -2)
          return unsupported(n, "bias must be a constant");
        TRY(parse_window(a, lim, &n, false));
        TRY(a.get_int("group", 1, &n.groups));
        const TensorDesc& x = m.tensors[static_cast<size_t>(n.inputs[0])];
        const TensorDesc& wt = m.tensors[static_cast<size_t>(n.weight)];
        if (x.rank != 4 || wt.rank != 4 || wt.values == nullptr)
          return unsupported(n, "only 2-D convolution with f32 weights [M, C/group, kH, kW]");
        if (n.kh == 0) n.kh = wt.dims[2], n.kw = wt.dims[3];
        if (n.kh != wt.dims[2] || n.kw != wt.dims[3])
          return invalid(n, "attribute 'kernel_shape' disagrees with the weights");
        if (std::max(n.kh, n.kw) > lim.max_kernel)
          return unsupported(
              n, "kernel exceeds the NPU's largest kernel side " + std::to_string(lim.max_kernel));
        if (n.groups <= 0 || x.c % n.groups != 0 || wt.dims[0] % n.groups != 0 ||
            wt.dims[1] * n.groups != x.c)
          return invalid(n, "attribute 'group' " + std::to_string(n.groups) +
                                " does not divide the channels of input " + dims_string(x) +
                                " and weights " + dims_string(wt));
        if (n.bias >= 0 && (m.tensors[static_cast<size_t>(n.bias)].values == nullptr ||
                            numel_of(g->tensors[n.bias]) != wt.dims[0]))
          return invalid(n, "bias must be f32 with one value per output channel");
        const int64_t oh = window_out(x.h, n.pt + n.pb, n.kh, n.sh, n.dh);
        const int64_t ow = window_out(x.w, n.pl + n.pr, n.kw, n.sw, n.dw);
        if (y.rank != 4 || y.n != x.n || y.c != wt.dims[0] || y.h != oh || y.w != ow)
          return invalid(n, "output " + dims_string(y) + " does not match the convolution");
        break;
      }
      case OpType::kGemm: {
        TRY(need_activations(1));
        n.weight = input_at(1);
        n.bias = input_at(2);
        if (n.weight < 0) return unsupported(n, "B must be a constant");
        if (consts.size() > 2 && n.bias < 0 && consts[2] == -2)
          return unsupported(n, "C must be a constant");
        int64_t ta = 0, tb = 0;
        TRY(a.get_int("transA", 0, &ta));
        TRY(a.get_int("transB", 0, &tb));
        TRY(a.get_float("alpha", 1.f, &n.alpha));
        TRY(a.get_float("beta", 1.f, &n.beta));
        if (ta != 0) return unsupported(n, "transA=1 is not supported");
        n.trans_b = tb != 0;
        const TensorDesc& x = m.tensors[static_cast<size_t>(n.inputs[0])];
        const TensorDesc& wt = m.tensors[static_cast<size_t>(n.weight)];
        if (x.rank != 2 || wt.rank != 2 || wt.values == nullptr)
          return unsupported(n, "A must be 2-D and B a 2-D f32 constant");
        const int64_t k = n.trans_b ? wt.dims[1] : wt.dims[0];
        const int64_t outc = n.trans_b ? wt.dims[0] : wt.dims[1];
        if (k != x.c)
          return invalid(n, "B " + dims_string(wt) + " does not match A " + dims_string(x));
        if (n.bias >= 0) {
          const int64_t cn = numel_of(g->tensors[n.bias]);
          if (m.tensors[static_cast<size_t>(n.bias)].values == nullptr || (cn != outc && cn != 1))
            return unsupported(n, "C must be f32 with N values or one (no other broadcasting)");
        }
        if (y.rank != 2 || y.n != x.n || y.c != outc)
          return invalid(n, "output " + dims_string(y) + " does not match the Gemm");
        break;
      }
      case OpType::kMaxPool:
      case OpType::kAveragePool: {
        TRY(need_activations(1));
        TRY(parse_window(a, lim, &n, true));
        int64_t ceil_mode = 0, storage = 0, cip = 0;
        TRY(a.get_int("ceil_mode", 0, &ceil_mode));
        TRY(a.get_int("storage_order", 0, &storage));
        TRY(a.get_int("count_include_pad", 0, &cip));
        if (storage != 0) return unsupported(n, "storage_order=1 is not supported");
        n.count_include_pad = cip != 0;
        const TensorDesc& x = m.tensors[static_cast<size_t>(n.inputs[0])];
        if (x.rank != 4) return unsupported(n, "input must be 4-D");
        if (n.op == OpType::kMaxPool && n.kh * n.kw < 2)
          return unsupported(n, "a 1x1 MaxPool window is not supported");
        const bool padded = n.pt + n.pb + n.pl + n.pr > 0;
        if (n.op == OpType::kAveragePool && padded && !n.count_include_pad)
          return unsupported(n,
                             "AveragePool excluding padding from the average "
                             "(count_include_pad=0 with pads) is not supported");
        const int64_t oh = window_out(x.h, n.pt + n.pb, n.kh, n.sh, n.dh);
        const int64_t ow = window_out(x.w, n.pl + n.pr, n.kw, n.sw, n.dw);
        if (y.rank != 4 || y.n != x.n || y.c != x.c)
          return invalid(n, "output " + dims_string(y) + " does not match the pooling");
        if (y.h != oh || y.w != ow) {
          // Ceil mode: extend the bottom/right padding so that the floor formula gives the
          // larger size (MaxPool ignores padding, so the extra rows never win).
          if (ceil_mode == 0 || n.op == OpType::kAveragePool || y.h < oh || y.w < ow ||
              y.h > oh + 1 || y.w > ow + 1)
            return unsupported(n, "output " + dims_string(y) +
                                      " needs ceil-mode rounding the NPU does not do for this op");
          n.pb += (y.h - oh) * n.sh;
          n.pr += (y.w - ow) * n.sw;
        }
        break;
      }
      case OpType::kGlobalAveragePool: {
        TRY(need_activations(1));
        const TensorDesc& x = m.tensors[static_cast<size_t>(n.inputs[0])];
        if (x.rank != 4 || y.rank != 4 || y.n != x.n || y.c != x.c || y.h != 1 || y.w != 1)
          return invalid(n, "needs a 4-D input and an N x C x 1 x 1 output");
        break;
      }
      case OpType::kAdd: {
        if (n.inputs.size() != 2 || tn.num_inputs != 2)
          return unsupported(n, "both inputs must be activations (no constant operands)");
        const TensorDesc& x0 = m.tensors[static_cast<size_t>(n.inputs[0])];
        const TensorDesc& x1 = m.tensors[static_cast<size_t>(n.inputs[1])];
        if (x0.rank != x1.rank || x0.numel() != x1.numel() || x0.c != x1.c || x0.h != x1.h ||
            y.numel() != x0.numel())
          return unsupported(n, "inputs " + dims_string(x0) + " and " + dims_string(x1) +
                                    " differ (the NPU adds equal shapes only, no broadcasting)");
        break;
      }
      case OpType::kRelu:
      case OpType::kClip: {
        TRY(need_activations(1));
        if (n.op == OpType::kRelu) {
          n.out_min = 0;
        } else {
          TRY(a.get_float("min", -INFINITY, &n.out_min));
          TRY(a.get_float("max", INFINITY, &n.out_max));
          for (size_t k = 1; k < consts.size(); ++k) {
            if (consts[k] == -1) continue;
            if (consts[k] < 0) return unsupported(n, "min/max must be constants");
            const TensorDesc& t = m.tensors[static_cast<size_t>(consts[k])];
            if (t.values == nullptr || numel_of(g->tensors[consts[k]]) != 1)
              return unsupported(n, "min/max must be f32 scalars");
            (k == 1 ? n.out_min : n.out_max) = t.values[0];
          }
          TRY(check_clamp(n));
        }
        const TensorDesc& x = m.tensors[static_cast<size_t>(n.inputs[0])];
        if (y.numel() != x.numel() || y.rank != x.rank)
          return invalid(n, "output shape differs from the input");
        break;
      }
      case OpType::kConcat: {
        if (n.inputs.size() != tn.num_inputs || n.inputs.empty())
          return unsupported(n, "constant inputs are not supported");
        int64_t axis = 0;
        TRY(a.get_int("axis", 1, &axis));
        if (axis < 0) axis += y.rank;
        if (axis != 1)
          return unsupported(n, "attribute 'axis' " + std::to_string(axis) +
                                    " (the NPU concatenates along channels only)");
        int64_t c = 0;
        for (int v : n.inputs) {
          const TensorDesc& x = m.tensors[static_cast<size_t>(v)];
          if (x.rank != y.rank || x.n != y.n || x.h != y.h || x.w != y.w)
            return invalid(n, "input " + dims_string(x) + " does not match output " +
                                  dims_string(y) + " outside the channel axis");
          c += x.c;
        }
        if (c != y.c) return invalid(n, "channel counts do not add up to the output's");
        break;
      }
      case OpType::kFlatten:
      case OpType::kReshape: {
        TRY(need_activations(1));
        const TensorDesc& x = m.tensors[static_cast<size_t>(n.inputs[0])];
        if (n.op == OpType::kFlatten) {
          int64_t axis = 1;
          TRY(a.get_int("axis", 1, &axis));
          if (axis != 1) return unsupported(n, "only axis=1 is supported");
        }
        if (y.rank != 2 || y.n != x.n || y.c != x.numel() / x.n)
          return unsupported(n, "only flattening " + dims_string(x) + " to [N, rest] (got " +
                                    dims_string(y) + ")");
        break;
      }
    }
    defined[static_cast<size_t>(n.output)] = 1;
    m.nodes.push_back(std::move(n));
  }
  if (only_node >= 0) return Error::none();
  for (uint32_t i = 0; i < g->num_outputs; ++i) {
    TRY(check_index(g->outputs[i], "graph output " + std::to_string(i)));
    const int v = static_cast<int>(g->outputs[i]);
    if (!defined[static_cast<size_t>(v)] || m.tensors[static_cast<size_t>(v)].constant)
      return fail(TNPU_ERR_INVALID_ARGUMENT, "graph output '" +
                                                 m.tensors[static_cast<size_t>(v)].name +
                                                 "' is not produced by the graph");
    m.outputs.push_back(v);
  }
  if (m.outputs.empty()) return fail(TNPU_ERR_INVALID_ARGUMENT, "graph has no outputs");
  return Error::none();
}

}  // namespace tnpu_ref
