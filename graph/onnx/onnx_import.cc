#include "graph/onnx/onnx_import.h"

#include "graph/passes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "onnx/onnx_pb.h"

namespace tessera {
namespace {

// ONNX stores raw_data little-endian; copying it as-is is only right on a little-endian host.
static_assert(std::endian::native == std::endian::little,
              "the ONNX importer assumes little-endian");

// ---------------------------------------------------------------------------------------------
// Element types and tensors.
// ---------------------------------------------------------------------------------------------

// `what` names the tensor or graph input in messages, e.g. "initializer 'conv1.weight'".
Result<DType> dtype_from_onnx(int32_t elem_type, const std::string& what) {
  switch (elem_type) {
    case onnx::TensorProto::FLOAT:
      return DType::kF32;
    case onnx::TensorProto::FLOAT16:
      return DType::kF16;
    case onnx::TensorProto::INT8:
      return DType::kI8;
    case onnx::TensorProto::UINT8:
      return DType::kU8;
    case onnx::TensorProto::INT32:
      return DType::kI32;
    case onnx::TensorProto::INT64:
      return DType::kI64;
    case onnx::TensorProto::BOOL:
      return DType::kBool;
    case onnx::TensorProto::UNDEFINED:
      return invalid_argument(what + " has no element type");
    default:
      break;
  }
  if (onnx::TensorProto_DataType_IsValid(elem_type)) {
    return unimplemented(what + " has element type " + onnx::TensorProto_DataType_Name(elem_type) +
                         ", which Tessera does not support (supported: FLOAT, FLOAT16, INT8, "
                         "UINT8, INT32, INT64, BOOL)");
  }
  return invalid_argument(what + " has an invalid element type " + std::to_string(elem_type));
}

// Copies int32_data into a narrower element type, checking each value fits. ONNX keeps INT8,
// UINT8, BOOL and FLOAT16 (as bit patterns) in int32_data.
template <typename T>
Status copy_narrowed_int32_data(const onnx::TensorProto& tp, int32_t lo, int32_t hi,
                                const std::string& what, Tensor* t) {
  T* out = t->data<T>();
  for (int i = 0; i < tp.int32_data_size(); ++i) {
    const int32_t v = tp.int32_data(i);
    if (v < lo || v > hi) {
      return invalid_argument(what + ": int32_data[" + std::to_string(i) + "] = " +
                              std::to_string(v) + " is out of range for " + dtype_name(t->dtype()));
    }
    out[i] = static_cast<T>(v);
  }
  return Status();
}

// The number of values a tensor holds in the typed field its dtype uses, and that field's name.
std::pair<int64_t, const char*> typed_field_count(const onnx::TensorProto& tp, DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return {tp.float_data_size(), "float_data"};
    case DType::kI64:
      return {tp.int64_data_size(), "int64_data"};
    default:
      return {tp.int32_data_size(), "int32_data"};
  }
}

bool has_typed_data(const onnx::TensorProto& tp) {
  return tp.float_data_size() > 0 || tp.int32_data_size() > 0 || tp.int64_data_size() > 0 ||
         tp.double_data_size() > 0 || tp.uint64_data_size() > 0 || tp.string_data_size() > 0;
}

// A TensorProto (initializer, Constant value or tensor attribute) to a Tensor. The payload size is
// checked against shape x dtype before anything is allocated or copied.
Result<Tensor> tensor_from_onnx(const onnx::TensorProto& tp, const std::string& what) {
  if (tp.data_location() == onnx::TensorProto::EXTERNAL || tp.external_data_size() > 0) {
    return unimplemented(what +
                         " keeps its data in an external file; Tessera imports only "
                         "self-contained models (save the model without external data)");
  }
  if (tp.has_segment()) {
    return unimplemented(what + " is a segment of a larger tensor, which is not supported");
  }
  ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx(tp.data_type(), what));
  std::vector<int64_t> dims(tp.dims().begin(), tp.dims().end());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return invalid_argument(what + " has negative dimension " + std::to_string(dims[i]) +
                              " at index " + std::to_string(i));
    }
  }
  Shape shape(std::move(dims));
  Result<uint64_t> bytes = checked_byte_size(shape, dtype);
  if (!bytes.ok()) return bytes.status().with_context(what);
  const std::string type = std::string(dtype_name(dtype)) + shape.to_string();

  if (tp.has_raw_data()) {
    if (has_typed_data(tp)) {
      return invalid_argument(what + " (" + type + ") has both raw_data and typed data fields");
    }
    if (tp.raw_data().size() != *bytes) {
      return invalid_argument(what + " (" + type + ") has " + std::to_string(tp.raw_data().size()) +
                              " bytes of raw_data, expected " + std::to_string(*bytes));
    }
    ASSIGN_OR_RETURN(Tensor t, Tensor::create(dtype, shape));
    if (*bytes > 0) std::memcpy(t.raw(), tp.raw_data().data(), static_cast<size_t>(*bytes));
    return t;
  }

  const auto [count, field] = typed_field_count(tp, dtype);
  if (count != shape.numel()) {
    return invalid_argument(what + " (" + type + ") has " + std::to_string(count) + " values in " +
                            field + ", expected " + std::to_string(shape.numel()));
  }
  ASSIGN_OR_RETURN(Tensor t, Tensor::create(dtype, shape));
  if (count == 0) return t;
  switch (dtype) {
    case DType::kF32:
      std::memcpy(t.raw(), tp.float_data().data(), static_cast<size_t>(*bytes));
      break;
    case DType::kI64:
      std::memcpy(t.raw(), tp.int64_data().data(), static_cast<size_t>(*bytes));
      break;
    case DType::kI32:
      std::memcpy(t.raw(), tp.int32_data().data(), static_cast<size_t>(*bytes));
      break;
    case DType::kI8:
      RETURN_IF_ERROR(copy_narrowed_int32_data<int8_t>(tp, -128, 127, what, &t));
      break;
    case DType::kU8:
      RETURN_IF_ERROR(copy_narrowed_int32_data<uint8_t>(tp, 0, 255, what, &t));
      break;
    case DType::kBool:
      RETURN_IF_ERROR(copy_narrowed_int32_data<uint8_t>(tp, 0, 1, what, &t));
      break;
    case DType::kF16:
      RETURN_IF_ERROR(copy_narrowed_int32_data<uint16_t>(tp, 0, 65535, what, &t));
      break;
  }
  return t;
}

// ---------------------------------------------------------------------------------------------
// Opsets before 11.
// ---------------------------------------------------------------------------------------------

// The opset versions at which the ops Tessera imports were defined or changed, up to opset 11
// (from onnx.defs.get_all_schemas_with_history(), onnx 1.12). Ops missing here are refused in a
// model of opset < 11.
struct OpHistory {
  std::string_view op;
  std::array<int, 5> since;  // ascending, 0-padded
};
constexpr OpHistory kOpHistory[] = {
    {"Add", {1, 6, 7}},
    {"AveragePool", {1, 7, 10, 11}},
    {"BatchNormalization", {1, 6, 7, 9}},
    {"Cast", {1, 6, 9}},
    {"Clip", {1, 6, 11}},
    {"Concat", {1, 4, 11}},
    {"Constant", {1, 9, 11}},
    {"Conv", {1, 11}},
    {"ConvTranspose", {1, 11}},
    {"Div", {1, 6, 7}},
    {"Dropout", {1, 6, 7, 10}},
    {"Flatten", {1, 9, 11}},
    {"Gather", {1, 11}},
    {"Gemm", {1, 6, 7, 9, 11}},
    {"GlobalAveragePool", {1}},
    {"GlobalMaxPool", {1}},
    {"HardSigmoid", {1, 6}},
    {"Identity", {1}},
    {"LeakyRelu", {1, 6}},
    {"LRN", {1}},
    {"MatMul", {1, 9}},
    {"MaxPool", {1, 8, 10, 11}},
    {"Mul", {1, 6, 7}},
    {"Pad", {1, 2, 11}},
    {"ReduceMean", {1, 11}},
    {"Relu", {1, 6}},
    {"Reshape", {1, 5}},
    {"Resize", {10, 11}},
    {"Shape", {1}},
    {"Sigmoid", {1, 6}},
    {"Slice", {1, 10, 11}},
    {"Softmax", {1, 11}},
    {"Split", {1, 2, 11}},
    {"Squeeze", {1, 11}},
    {"Sub", {1, 6, 7}},
    {"Tanh", {1, 6}},
    {"Transpose", {1}},
    {"Unsqueeze", {1, 11}},
};

// The version of `op` in effect at `opset` (<= 11), or 0 when the table does not define it then.
int legacy_op_version(std::string_view op, int64_t opset) {
  for (const OpHistory& h : kOpHistory) {
    if (h.op != op) continue;
    int v = 0;
    for (int since : h.since) {
      if (since != 0 && since <= opset) v = since;
    }
    return v;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Attributes.
// ---------------------------------------------------------------------------------------------

// `where` names the node, e.g. "node 'conv1' (Conv)".
Result<AttributeValue> attribute_from_onnx(const onnx::AttributeProto& a,
                                           const std::string& where) {
  const std::string what = where + ": attribute " + quote_name(a.name());
  if (!a.ref_attr_name().empty()) {
    return unimplemented(what + " refers to function attribute " + quote_name(a.ref_attr_name()) +
                         "; ONNX functions are not supported");
  }
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT:
      return AttributeValue(a.f());
    case onnx::AttributeProto::INT:
      return AttributeValue(static_cast<int64_t>(a.i()));
    case onnx::AttributeProto::STRING:
      return AttributeValue(a.s());
    case onnx::AttributeProto::INTS:
      return AttributeValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case onnx::AttributeProto::FLOATS:
      return AttributeValue(std::vector<float>(a.floats().begin(), a.floats().end()));
    case onnx::AttributeProto::STRINGS: {
      // A list of strings (an LSTM's activations) is kept as one string joined with ','.
      std::string joined;
      for (const std::string& x : a.strings()) {
        if (x.find(',') != std::string::npos) {
          return unimplemented(what + " holds the string " + quote_name(x) +
                               ", which contains a ','");
        }
        joined += (joined.empty() ? "" : ",") + x;
      }
      return AttributeValue(std::move(joined));
    }
    case onnx::AttributeProto::TENSOR: {
      ASSIGN_OR_RETURN(Tensor t, tensor_from_onnx(a.t(), what));
      return AttributeValue(std::move(t));
    }
    case onnx::AttributeProto::GRAPH:
    case onnx::AttributeProto::GRAPHS:
      return unimplemented(what + " is a subgraph; subgraphs and control flow are not supported");
    case onnx::AttributeProto::UNDEFINED:
      return invalid_argument(what + " has no type");
    default:
      break;
  }
  if (onnx::AttributeProto_AttributeType_IsValid(a.type())) {
    return unimplemented(what + " has type " + onnx::AttributeProto_AttributeType_Name(a.type()) +
                         ", which is not supported");
  }
  return invalid_argument(what + " has an invalid type " + std::to_string(a.type()));
}

// ---------------------------------------------------------------------------------------------
// Names.
// ---------------------------------------------------------------------------------------------

// Hands out names not yet used: `base`, else base_1, base_2, ...
class UniqueNames {
 public:
  void reserve(const std::string& name) { used_.insert(name); }
  std::string make(const std::string& base) {
    std::string name = base;
    for (int k = 1; used_.count(name) != 0; ++k) name = base + "_" + std::to_string(k);
    used_.insert(name);
    return name;
  }

 private:
  std::unordered_set<std::string> used_;
};

bool is_default_domain(const std::string& domain) {
  return domain.empty() || domain == "ai.onnx";
}

// ---------------------------------------------------------------------------------------------
// Model -> Graph.
// ---------------------------------------------------------------------------------------------

class GraphBuilder {
 public:
  GraphBuilder(const onnx::ModelProto& model, const ImportOptions& options)
      : model_(model), proto_(model.graph()), options_(options) {}

  Result<ImportedModel> build() {
    RETURN_IF_ERROR(check_options());
    RETURN_IF_ERROR(read_header());
    name_nodes();
    RETURN_IF_ERROR(check_operators());
    RETURN_IF_ERROR(check_legacy_opset());
    RETURN_IF_ERROR(add_initializers());
    RETURN_IF_ERROR(add_inputs());
    RETURN_IF_ERROR(add_node_outputs());
    RETURN_IF_ERROR(add_nodes());
    RETURN_IF_ERROR(add_outputs());
    RETURN_IF_ERROR(out_.graph.sort_topologically());
    RETURN_IF_ERROR(out_.graph.validate());
    return std::move(out_);
  }

 private:
  Status check_options() const {
    if (options_.default_dim_value < 1 || options_.default_dim_value > kMaxDim) {
      return invalid_argument(
          "import option default_dim_value = " + std::to_string(options_.default_dim_value) +
          " is not in 1.." + std::to_string(kMaxDim));
    }
    for (const auto& [name, v] : options_.dim_params) {
      if (v < 1 || v > kMaxDim) {
        return invalid_argument("import option dim_params[" + quote_name(name) + "] = " +
                                std::to_string(v) + " is not in 1.." + std::to_string(kMaxDim));
      }
    }
    for (const auto& [name, dims] : options_.input_shapes) {
      for (size_t d = 0; d < dims.size(); ++d) {
        if (dims[d] < 1 || dims[d] > kMaxDim) {
          return invalid_argument("shape of graph input " + quote_name(name) + ": dimension " +
                                  std::to_string(d) + " = " + std::to_string(dims[d]) +
                                  " is not in 1.." + std::to_string(kMaxDim));
        }
      }
    }
    return Status();
  }

  // ir_version, the default-domain opset and the presence of a graph.
  Status read_header() {
    if (!model_.has_ir_version()) {
      return invalid_argument("the model has no ir_version: not an ONNX model, or a truncated one");
    }
    out_.ir_version = model_.ir_version();
    if (out_.ir_version < 3) {
      return unimplemented("ONNX IR version " + std::to_string(out_.ir_version) +
                           " is not supported (the oldest is 3, which introduced opset imports)");
    }
    bool found = false;
    for (const onnx::OperatorSetIdProto& os : model_.opset_import()) {
      if (!is_default_domain(os.domain())) continue;
      if (found && os.version() != out_.opset) {
        return invalid_argument("the model imports the default ONNX domain twice, at opsets " +
                                std::to_string(out_.opset) + " and " +
                                std::to_string(os.version()));
      }
      found = true;
      out_.opset = os.version();
    }
    if (!found) {
      return invalid_argument(
          "the model imports no opset of the default ONNX domain (opset_import has no entry "
          "for domain \"\" or \"ai.onnx\")");
    }
    // Below opset 11, check_legacy_opset() decides op by op.
    if (out_.opset < 1 || out_.opset > kMaxOnnxOpset) {
      return unimplemented("the model uses opset " + std::to_string(out_.opset) +
                           " of the default ONNX domain; Tessera supports opsets " +
                           std::to_string(kMinOnnxOpset) + " to " + std::to_string(kMaxOnnxOpset) +
                           " (convert the model with onnx.version_converter)");
    }
    if (!model_.has_graph()) return invalid_argument("the model has no graph");
    if (proto_.sparse_initializer_size() > 0) {
      return unimplemented("sparse initializer " +
                           quote_name(proto_.sparse_initializer(0).values().name()) +
                           " is not supported");
    }
    out_.producer_name = model_.producer_name();
    out_.producer_version = model_.producer_version();
    out_.graph_name = proto_.name();
    return Status();
  }

  // Node names: the file's, or op_type + "_" + index for unnamed nodes (unique among all).
  void name_nodes() {
    for (const onnx::NodeProto& n : proto_.node()) {
      if (!n.name().empty()) node_names_.reserve(n.name());
      for (const std::string& o : n.output()) value_names_.reserve(o);
    }
    for (const onnx::TensorProto& t : proto_.initializer()) value_names_.reserve(t.name());
    for (const onnx::ValueInfoProto& vi : proto_.input()) value_names_.reserve(vi.name());
    names_.reserve(static_cast<size_t>(proto_.node_size()));
    for (int i = 0; i < proto_.node_size(); ++i) {
      const onnx::NodeProto& n = proto_.node(i);
      if (!n.name().empty()) {
        names_.push_back(n.name());
      } else {
        names_.push_back(node_names_.make((n.op_type().empty() ? "node" : n.op_type()) + "_" +
                                          std::to_string(i)));
      }
    }
  }

  std::string describe(int i) const {
    const onnx::NodeProto& n = proto_.node(i);
    std::string op = n.op_type();
    if (!is_default_domain(n.domain())) op = n.domain() + ":" + op;
    return "node " + quote_name(names_[static_cast<size_t>(i)]) + " (" + op + ")";
  }

  // Every node of another domain or of an op type Tessera lacks, reported together and grouped
  // by op type in order of first appearance: "Loop x2 (nodes 'a', 'b'), Range x1 (node 'c')",
  // naming at most kMaxNamesPerOp nodes of each type.
  //
  // This check runs before constant folding because the Graph has no way to hold an op Tessera
  // does not know; and folding evaluates nodes with their reference kernels, which such an op
  // lacks. So a node of an unknown type is refused even where all its inputs are constants
  // (anchor grids built by Range/Expand, an LSTM's zero initial state): the message says so.
  Status check_operators() {
    static constexpr size_t kMaxNamesPerOp = 3;
    struct Group {
      std::string op;
      std::vector<std::string> nodes;
    };
    std::vector<Group> groups;
    for (int i = 0; i < proto_.node_size(); ++i) {
      const onnx::NodeProto& n = proto_.node(i);
      if (n.op_type().empty()) return invalid_argument(describe(i) + " has no op_type");
      if (is_default_domain(n.domain()) && op_from_name(n.op_type())) continue;
      if (is_default_domain(n.domain()) && n.op_type() == "Upsample") continue;  // -> Resize
      const std::string op =
          is_default_domain(n.domain()) ? n.op_type() : n.domain() + ":" + n.op_type();
      auto g =
          std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.op == op; });
      if (g == groups.end()) g = groups.insert(groups.end(), Group{op, {}});
      g->nodes.push_back(names_[static_cast<size_t>(i)]);
    }
    if (groups.empty()) return Status();
    std::string list;
    for (const Group& g : groups) {
      list += (list.empty() ? "" : ", ") + g.op + " x" + std::to_string(g.nodes.size()) +
              (g.nodes.size() == 1 ? " (node " : " (nodes ");
      for (size_t k = 0; k < g.nodes.size() && k < kMaxNamesPerOp; ++k)
        list += (k ? ", '" : "'") + g.nodes[k] + "'";
      if (g.nodes.size() > kMaxNamesPerOp) list += ", ...";
      list += ")";
    }
    return unimplemented("unsupported operators: " + list +
                         "; Tessera has no kernel (not even a reference one) for these op types, "
                         "so it can neither run nor constant-fold them, even where their inputs "
                         "are constants");
  }

  // A model of opset v < 11 is read as opset 11 when every op it uses has the same definition at
  // v as at 11 (no new version of the op between v and 11): an Add or Relu of opset 7 means
  // what it means at 11, while Clip, Pad, Slice, Resize, Conv... changed and are refused.
  Status check_legacy_opset() const {
    if (out_.opset >= kMinOnnxOpset) return Status();
    std::vector<std::string> changed;
    for (const onnx::NodeProto& n : proto_.node()) {
      const std::string& op = n.op_type();
      const int at_model = legacy_op_version(op, out_.opset);
      const int at_11 = legacy_op_version(op, kMinOnnxOpset);
      if (at_model != 0 && at_model == at_11) continue;
      std::string why =
          op + (at_model == 0 ? " (not defined at opset " + std::to_string(out_.opset) + ")"
                              : " (version " + std::to_string(at_model) + ", changed at " +
                                    std::to_string(at_11) + ")");
      if (std::find(changed.begin(), changed.end(), why) == changed.end()) changed.push_back(why);
    }
    if (changed.empty()) return Status();
    std::string list;
    for (size_t i = 0; i < changed.size() && i < 6; ++i) list += (i ? ", " : "") + changed[i];
    if (changed.size() > 6) list += ", ...";
    return unimplemented("the model uses opset " + std::to_string(out_.opset) +
                         " of the default ONNX domain; Tessera supports opsets " +
                         std::to_string(kMinOnnxOpset) + " to " + std::to_string(kMaxOnnxOpset) +
                         ", and older ones only where every op means what it means at opset " +
                         std::to_string(kMinOnnxOpset) + ", which these do not: " + list +
                         " (convert the model with onnx.version_converter)");
  }

  // Adds a value under its ONNX name, failing if the name is taken.
  Status define(const std::string& name, ValueId id, const std::string& what) {
    auto [it, inserted] = by_name_.emplace(name, id);
    if (!inserted) {
      return invalid_argument(what + " redefines tensor " + quote_name(name) +
                              ", already defined by " + definer_[static_cast<size_t>(it->second)]);
    }
    if (definer_.size() <= static_cast<size_t>(id)) definer_.resize(static_cast<size_t>(id) + 1);
    definer_[static_cast<size_t>(id)] = what;
    return Status();
  }

  Status add_initializers() {
    for (const onnx::TensorProto& tp : proto_.initializer()) {
      if (tp.name().empty()) return invalid_argument("an initializer has no name");
      const std::string what = "initializer " + quote_name(tp.name());
      ASSIGN_OR_RETURN(Tensor t, tensor_from_onnx(tp, what));
      RETURN_IF_ERROR(define(tp.name(), out_.graph.add_constant(tp.name(), std::move(t)), what));
    }
    return Status();
  }

  // The dimension `d` of graph input `input`, substituting symbolic and unknown ones: from the
  // input's shape in ImportOptions::input_shapes (`given`, or null), else dim_params, else
  // default_dim_value (an error when require_all_dims).
  Result<int64_t> input_dim(const std::string& input, int index,
                            const onnx::TensorShapeProto::Dimension& d,
                            const std::vector<int64_t>* given) {
    const std::string what =
        "graph input " + quote_name(input) + " dimension " + std::to_string(index);
    if (d.has_dim_value() && d.dim_value() >= 0) {
      const int64_t fixed = d.dim_value();
      if (given != nullptr && (*given)[static_cast<size_t>(index)] != fixed) {
        return invalid_argument(what + " is " + std::to_string(fixed) + " in the model, but " +
                                std::to_string((*given)[static_cast<size_t>(index)]) +
                                " was given");
      }
      return fixed;
    }
    if (given != nullptr) return (*given)[static_cast<size_t>(index)];
    std::string why;
    int64_t v = options_.default_dim_value;
    bool set = false;
    if (d.has_dim_param() && !d.dim_param().empty()) {
      why = "is symbolic (" + quote_name(d.dim_param()) + ")";
      auto it = options_.dim_params.find(d.dim_param());
      if (it != options_.dim_params.end()) {
        v = it->second;
        set = true;
      }
    } else if (d.has_dim_value()) {
      why = "is " + std::to_string(d.dim_value());
    } else {
      why = "is unknown";
    }
    // default_dim_value stands for the batch only: a symbolic height or width set to it would
    // silently shrink the model to 1x1 images.
    if (!set && (options_.require_all_dims || index != 0)) {
      std::string example = input + "=";
      for (size_t k = 0; k < shape_hint_.size(); ++k) example += (k ? "x" : "") + shape_hint_[k];
      return invalid_argument(what + " " + why +
                              " and no size was given for it; give the input's whole shape "
                              "(--shape " +
                              example +
                              " to the tessera tool; the input shapes of import_onnx in the "
                              "C++, C and Python APIs)" +
                              (index == 0 ? ""
                                          : "; --batch sets only dimension 0, as does the "
                                            "APIs' batch"));
    }
    out_.warnings.push_back(what + " " + why + "; using " + std::to_string(v));
    return v;
  }

  Status add_inputs() {
    std::vector<std::string> overridable;  // inputs with initializers
    for (const onnx::ValueInfoProto& vi : proto_.input()) {
      if (vi.name().empty()) return invalid_argument("a graph input has no name");
      const std::string what = "graph input " + quote_name(vi.name());
      auto it = by_name_.find(vi.name());
      if (it != by_name_.end() && out_.graph.value(it->second).is_constant) {
        // Before IR 4 every initializer is also listed as an input; from IR 4 on such an input
        // is an overridable default, which a static graph treats as a constant.
        overridable.push_back(vi.name());
        continue;
      }
      if (!vi.has_type()) return invalid_argument(what + " has no type");
      if (!vi.type().has_tensor_type()) {
        return unimplemented(what +
                             " is not a tensor (sequence, map, optional and sparse inputs "
                             "are not supported)");
      }
      const onnx::TypeProto::Tensor& tt = vi.type().tensor_type();
      ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx(tt.elem_type(), what));
      if (!tt.has_shape()) {
        return unimplemented(what + " has no shape (unknown rank); Tessera needs static shapes");
      }
      const std::vector<int64_t>* given = nullptr;
      if (auto s = options_.input_shapes.find(vi.name()); s != options_.input_shapes.end()) {
        given = &s->second;
        if (given->size() != static_cast<size_t>(tt.shape().dim_size())) {
          return invalid_argument(what + " has rank " + std::to_string(tt.shape().dim_size()) +
                                  ", but a shape of " + std::to_string(given->size()) +
                                  " dimensions was given");
        }
      }
      // For messages: the input's dims as the model states them ("N", "3", "H", "W").
      shape_hint_.clear();
      for (int d = 0; d < tt.shape().dim_size(); ++d) {
        const auto& dim = tt.shape().dim(d);
        shape_hint_.push_back(dim.has_dim_value() && dim.dim_value() >= 0
                                  ? std::to_string(dim.dim_value())
                                  : (d == 0 ? "N" : "D" + std::to_string(d)));
      }
      Shape shape;
      for (int d = 0; d < tt.shape().dim_size(); ++d) {
        ASSIGN_OR_RETURN(int64_t dim, input_dim(vi.name(), d, tt.shape().dim(d), given));
        shape.dims().push_back(dim);
      }
      RETURN_IF_ERROR(shape.validate().with_context(what));
      const ValueId id = out_.graph.add_value(vi.name(), TensorInfo{dtype, std::move(shape)});
      RETURN_IF_ERROR(define(vi.name(), id, what));
      out_.graph.inputs().push_back(id);
    }
    for (const auto& [name, dims] : options_.input_shapes) {
      bool found = false;
      for (ValueId v : out_.graph.inputs()) found = found || out_.graph.value(v).name == name;
      if (found) continue;
      std::string names;
      for (ValueId v : out_.graph.inputs())
        names += (names.empty() ? "'" : ", '") + out_.graph.value(v).name + "'";
      return invalid_argument("a shape was given for " + quote_name(name) +
                              ", which is not a graph input of the model (its inputs: " +
                              (names.empty() ? "none" : names) + ")");
    }
    if (out_.ir_version >= 4 && !overridable.empty()) {
      // One line however many: exporters list every weight this way.
      std::string names;
      for (size_t i = 0; i < overridable.size() && i < 3; ++i) {
        names += (i ? ", '" : "'") + overridable[i] + "'";
      }
      if (overridable.size() > 3) names += ", ...";
      out_.warnings.push_back(std::to_string(overridable.size()) +
                              " graph inputs have initializers and are imported as constants (" +
                              names + ")");
    }
    return Status();
  }

  // Constant nodes become constants; every other node's outputs become values, so that inputs
  // can refer to nodes later in the file (sort_topologically orders them afterwards).
  Status add_node_outputs() {
    node_outputs_.resize(static_cast<size_t>(proto_.node_size()));
    for (int i = 0; i < proto_.node_size(); ++i) {
      const onnx::NodeProto& n = proto_.node(i);
      const std::string what = describe(i);
      if (n.op_type() == "Constant") {
        RETURN_IF_ERROR(add_constant_node(i));
        continue;
      }
      // Trailing omitted outputs are dropped; an omitted output before a named one gets a
      // placeholder value nothing reads.
      int count = n.output_size();
      while (count > 0 && n.output(count - 1).empty()) --count;
      for (int o = 0; o < count; ++o) {
        ValueId id;
        if (n.output(o).empty()) {
          id = out_.graph.add_value(
              value_names_.make(names_[static_cast<size_t>(i)] + ":output" + std::to_string(o)));
        } else {
          id = out_.graph.add_value(n.output(o));
          RETURN_IF_ERROR(define(n.output(o), id, what));
        }
        node_outputs_[static_cast<size_t>(i)].push_back(id);
      }
    }
    return Status();
  }

  // Constant: exactly one of value / value_float(s) / value_int(s) gives the tensor.
  Status add_constant_node(int i) {
    const onnx::NodeProto& n = proto_.node(i);
    const std::string where = describe(i);
    if (n.output_size() != 1 || n.output(0).empty()) {
      return invalid_argument(where + " must have exactly one named output");
    }
    if (n.attribute_size() != 1) {
      return invalid_argument(where + " must have exactly one attribute, has " +
                              std::to_string(n.attribute_size()));
    }
    const onnx::AttributeProto& a = n.attribute(0);
    ASSIGN_OR_RETURN(AttributeValue v, attribute_from_onnx(a, where));
    Tensor t;
    if (a.name() == "value" && std::holds_alternative<Tensor>(v)) {
      t = std::get<Tensor>(v);
    } else if (a.name() == "value_float" && std::holds_alternative<float>(v)) {
      t = Tensor::scalar_f32(std::get<float>(v));
    } else if (a.name() == "value_floats" && std::holds_alternative<std::vector<float>>(v)) {
      const auto& f = std::get<std::vector<float>>(v);
      t = Tensor::from_floats(Shape{static_cast<int64_t>(f.size())}, f);
    } else if (a.name() == "value_int" && std::holds_alternative<int64_t>(v)) {
      const int64_t x = std::get<int64_t>(v);
      t = Tensor::from_int64s(Shape{}, std::span<const int64_t>(&x, 1));
    } else if (a.name() == "value_ints" && std::holds_alternative<std::vector<int64_t>>(v)) {
      const auto& x = std::get<std::vector<int64_t>>(v);
      t = Tensor::from_int64s(Shape{static_cast<int64_t>(x.size())}, x);
    } else {
      return unimplemented(where + ": attribute " + quote_name(a.name()) + " of type " +
                           attribute_kind_name(v) + " is not a supported constant value");
    }
    return define(n.output(0), out_.graph.add_constant(n.output(0), std::move(t)), where);
  }

  Status add_nodes() {
    for (int i = 0; i < proto_.node_size(); ++i) {
      const onnx::NodeProto& n = proto_.node(i);
      if (n.op_type() == "Constant") continue;
      const std::string where = describe(i);
      Node node;
      node.name = names_[static_cast<size_t>(i)];
      if (n.op_type() == "Upsample") {
        RETURN_IF_ERROR(add_upsample(i));
        continue;
      }
      node.kind = *op_from_name(n.op_type());  // check_operators guarantees it maps
      for (const onnx::AttributeProto& a : n.attribute()) {
        if (a.name().empty()) return invalid_argument(where + " has an attribute without a name");
        if (node.attrs.has(a.name())) {
          return invalid_argument(where + " has attribute " + quote_name(a.name()) + " twice");
        }
        ASSIGN_OR_RETURN(AttributeValue v, attribute_from_onnx(a, where));
        node.attrs.set(a.name(), std::move(v));
      }
      // Before opset 13 Softmax's axis defaulted to 1; ops/ uses the opset-13 default of -1.
      if (node.kind == OpKind::kSoftmax && out_.opset < 13 && !node.attrs.has("axis")) {
        node.attrs.set("axis", int64_t{1});
      }
      for (int k = 0; k < n.input_size(); ++k) {
        if (n.input(k).empty()) {
          node.inputs.push_back(kNoValue);
          continue;
        }
        auto it = by_name_.find(n.input(k));
        if (it == by_name_.end()) {
          return invalid_argument(where + " input " + std::to_string(k) + " '" + n.input(k) +
                                  "' is not produced by any node and is not a graph input or "
                                  "initializer");
        }
        node.inputs.push_back(it->second);
      }
      node.outputs = node_outputs_[static_cast<size_t>(i)];
      out_.graph.add_node(std::move(node));
    }
    return Status();
  }

  // Upsample (opsets 7-9, deprecated since 10) is a Resize with asymmetric coordinates and, in
  // nearest mode, floor rounding (what ONNX Runtime computes for it): X -> Resize(X, roi: none,
  // scales). Opset 7 gives the scales as an attribute, opsets 9 as input 1.
  Status add_upsample(int i) {
    const onnx::NodeProto& n = proto_.node(i);
    const std::string where = describe(i);
    Node node;
    node.name = names_[static_cast<size_t>(i)];
    node.kind = OpKind::kResize;
    std::string mode = "nearest";
    std::vector<float> scales;
    bool scales_attr = false;
    for (const onnx::AttributeProto& a : n.attribute()) {
      ASSIGN_OR_RETURN(AttributeValue v, attribute_from_onnx(a, where));
      if (a.name() == "mode" && std::holds_alternative<std::string>(v)) {
        mode = std::get<std::string>(v);
      } else if (a.name() == "scales" && std::holds_alternative<std::vector<float>>(v)) {
        scales = std::get<std::vector<float>>(v);
        scales_attr = true;
      } else {
        return invalid_argument(where + ": unexpected attribute " + quote_name(a.name()) +
                                " of type " + attribute_kind_name(v));
      }
    }
    if (mode == "bilinear") mode = "linear";  // opset 7 spelled it both ways
    if (mode != "nearest" && mode != "linear") {
      return unimplemented(where + ": mode " + quote_name(mode) + " (supported: nearest, linear)");
    }
    node.attrs.set("mode", mode);
    node.attrs.set("coordinate_transformation_mode", std::string("asymmetric"));
    if (mode == "nearest") node.attrs.set("nearest_mode", std::string("floor"));
    if (n.input_size() < 1 || n.input(0).empty()) {
      return invalid_argument(where + " has no input X");
    }
    const int want_inputs = scales_attr ? 1 : 2;
    if (n.input_size() != want_inputs) {
      return invalid_argument(where + " must have " + std::to_string(want_inputs) + " input(s) (X" +
                              (scales_attr ? "; scales is an attribute" : ", scales") + "), has " +
                              std::to_string(n.input_size()));
    }
    ValueId scale_value = kNoValue;
    if (scales_attr) {
      scale_value = out_.graph.add_constant(
          value_names_.make(node.name + "/scales"),
          Tensor::from_floats(Shape{static_cast<int64_t>(scales.size())}, scales));
    }
    std::vector<ValueId> ins;
    for (int k = 0; k < n.input_size(); ++k) {
      auto it = by_name_.find(n.input(k));
      if (n.input(k).empty() || it == by_name_.end()) {
        return invalid_argument(where + " input " + std::to_string(k) + " '" + n.input(k) +
                                "' is not produced by any node and is not a graph input or "
                                "initializer");
      }
      ins.push_back(it->second);
    }
    node.inputs = {ins[0], kNoValue, scales_attr ? scale_value : ins[1]};
    node.outputs = node_outputs_[static_cast<size_t>(i)];
    out_.graph.add_node(std::move(node));
    return Status();
  }

  Status add_outputs() {
    std::unordered_set<std::string> seen;
    for (const onnx::ValueInfoProto& vi : proto_.output()) {
      if (!seen.insert(vi.name()).second) {
        return invalid_argument("graph output " + quote_name(vi.name()) + " is listed twice");
      }
      auto it = by_name_.find(vi.name());
      if (it == by_name_.end()) {
        return invalid_argument("graph output " + quote_name(vi.name()) +
                                " is not produced by any node and is not a graph input or "
                                "initializer");
      }
      out_.graph.outputs().push_back(it->second);
    }
    if (out_.graph.outputs().empty()) return invalid_argument("the graph has no outputs");
    return Status();
  }

  const onnx::ModelProto& model_;
  const onnx::GraphProto& proto_;
  const ImportOptions& options_;
  ImportedModel out_;
  UniqueNames node_names_;
  UniqueNames value_names_;         // every tensor name in the file, to generate placeholder names
  std::vector<std::string> names_;  // node index -> node name
  std::vector<std::vector<ValueId>> node_outputs_;
  std::unordered_map<std::string, ValueId> by_name_;
  std::vector<std::string> definer_;     // value id -> what defined it, for messages
  std::vector<std::string> shape_hint_;  // the dims of the input being added, for messages
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Entry points.
// ---------------------------------------------------------------------------------------------

Result<ImportedModel> import_onnx_from_memory(std::span<const uint8_t> bytes,
                                              const ImportOptions& options) {
  if (bytes.empty()) return invalid_argument("the ONNX model is empty (0 bytes)");
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return unimplemented("the ONNX model is " + std::to_string(bytes.size()) +
                         " bytes; protobuf models are limited to 2 GiB");
  }
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return invalid_argument("the " + std::to_string(bytes.size()) +
                            " bytes are not a valid ONNX model: protobuf parsing of ModelProto "
                            "failed (corrupt or truncated file, or not an ONNX file)");
  }
  return GraphBuilder(model, options).build();
}

namespace {

// The whole of a regular file; errors name `where`. Protobuf messages are limited to 2 GiB.
Result<std::vector<uint8_t>> read_file_bytes(const std::string& path, const std::string& where) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string msg = where + ": cannot open: " + std::strerror(err);
    return err == ENOENT ? not_found(msg) : io_error(msg);
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return io_error(where + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return io_error(where + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > static_cast<uint64_t>(INT_MAX)) {
    return unimplemented(where + " is " + std::to_string(st.st_size) +
                         " bytes; protobuf models are limited to 2 GiB");
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return io_error(where + ": read failed at offset " + std::to_string(done) + ": " +
                      std::strerror(errno));
    }
    if (n == 0) {
      return io_error(where + ": file ended at offset " + std::to_string(done) + ", expected " +
                      std::to_string(bytes.size()) + " bytes");
    }
    done += static_cast<size_t>(n);
  }
  return bytes;
}

}  // namespace

Result<ImportedModel> import_onnx(const std::string& path, const ImportOptions& options) {
  const std::string where = "ONNX file " + quote_name(path);
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, read_file_bytes(path, where));
  Result<ImportedModel> r = import_onnx_from_memory(bytes, options);
  if (!r.ok()) return r.status().with_context(where);
  return r;
}

Result<Tensor> import_onnx_tensor(std::span<const uint8_t> bytes, std::string* name) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return unimplemented("the ONNX tensor is " + std::to_string(bytes.size()) +
                         " bytes; protobuf messages are limited to 2 GiB");
  }
  onnx::TensorProto tp;
  if (!tp.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return invalid_argument("the " + std::to_string(bytes.size()) +
                            " bytes are not a valid ONNX TensorProto (protobuf parsing failed)");
  }
  if (name != nullptr) *name = tp.name();
  return tensor_from_onnx(tp, "tensor " + quote_name(tp.name()));
}

Result<Tensor> import_onnx_tensor_file(const std::string& path, std::string* name) {
  const std::string where = "ONNX tensor file " + quote_name(path);
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, read_file_bytes(path, where));
  Result<Tensor> r = import_onnx_tensor(bytes, name);
  if (!r.ok()) return r.status().with_context(where);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Phase 2.
// ---------------------------------------------------------------------------------------------

Result<int> lower_legacy_softmax(ImportedModel& model) {
  if (model.opset >= 13) return 0;
  Graph& g = model.graph;
  UniqueNames names;
  for (const Value& v : g.values()) names.reserve(v.name);
  for (const Node& n : g.nodes()) names.reserve(n.name);
  int rewritten = 0;
  const int num_nodes = g.num_nodes();  // the loop appends nodes: visit only the original ones
  for (NodeId i = 0; i < num_nodes; ++i) {
    if (g.node(i).kind != OpKind::kSoftmax) continue;
    const std::string where = "node " + quote_name(g.node(i).name) + " (Softmax)";
    if (g.node(i).inputs.empty() || g.node(i).inputs[0] == kNoValue ||
        g.node(i).outputs.size() != 1) {
      return invalid_argument(where + " needs one input and one output");
    }
    const ValueId x = g.node(i).inputs[0];
    const ValueId y = g.node(i).outputs[0];
    if (!g.value(x).has_info) {
      return failed_precondition(where + ": the shape of input " + quote_name(g.value(x).name) +
                                 " is not inferred yet");
    }
    const Shape shape = g.value(x).info.shape;
    Result<int64_t> axis_attr = g.node(i).attrs.int_or("axis", 1);
    if (!axis_attr.ok()) return axis_attr.status().with_context(where);
    Result<int> axis = normalize_axis(*axis_attr, shape.rank(), "axis");
    if (!axis.ok()) return axis.status().with_context(where);
    if (*axis == shape.rank() - 1) continue;  // both semantics coincide

    // x -> Flatten(axis) -> flat -> Softmax(-1) -> soft -> Reshape(shape of x) -> y
    const std::string base = g.node(i).name;
    const ValueId flat = g.add_value(names.make(base + "/flatten_out"));
    const ValueId soft = g.add_value(names.make(base + "/softmax_out"));
    const ValueId target = g.add_constant(names.make(base + "/shape"),
                                          Tensor::from_int64s(Shape{shape.rank()}, shape.dims()));
    Node flatten;
    flatten.name = names.make(base + "/flatten");
    flatten.kind = OpKind::kFlatten;
    flatten.attrs.set("axis", int64_t{*axis});
    flatten.inputs = {x};
    flatten.outputs = {flat};
    Node reshape;
    reshape.name = names.make(base + "/reshape");
    reshape.kind = OpKind::kReshape;
    // With allowzero=0 a 0 in the target would copy a dimension of the 2-D input instead.
    for (int64_t d : shape.dims()) {
      if (d == 0) reshape.attrs.set("allowzero", int64_t{1});
    }
    reshape.inputs = {soft, target};
    reshape.outputs = {y};
    Node& softmax = g.node(i);
    softmax.attrs.set("axis", int64_t{-1});
    softmax.inputs[0] = flat;
    softmax.outputs[0] = soft;
    g.value(y).has_info = false;
    g.add_node(std::move(flatten));
    g.add_node(std::move(reshape));
    ++rewritten;
  }
  if (rewritten > 0) {
    RETURN_IF_ERROR(g.sort_topologically());
    RETURN_IF_ERROR(g.validate());
  }
  return rewritten;
}

Status infer_onnx_shapes(ImportedModel& model, PassStats* stats) {
  RETURN_IF_ERROR(fold_constants(model.graph, stats));
  ASSIGN_OR_RETURN(const int rewritten, lower_legacy_softmax(model));
  if (rewritten > 0) RETURN_IF_ERROR(fold_constants(model.graph, stats));
  return Status();
}

Result<ImportedModel> convert_onnx(const std::string& path, const ImportOptions& options,
                                   PassStats* stats) {
  ASSIGN_OR_RETURN(ImportedModel m, import_onnx(path, options));
  RETURN_IF_ERROR(infer_onnx_shapes(m, stats).with_context(path));
  RETURN_IF_ERROR(optimize_graph(m.graph, stats).with_context(path));
  return m;
}

}  // namespace tessera
