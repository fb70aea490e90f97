// Reading .tsr files. The phases follow model_file.h: envelope (sizes, identifier), version,
// FlatBuffers verification, the expansion bound, semantic validation, then building the Graph.
// Nothing large is allocated before the last phase, which allocates at most a bounded multiple
// of the header size; weight bytes are viewed in place.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "core/allocator.h"
#include "graph/format/model_file.h"
#include "graph/format/schema_types.h"

namespace tessera {
namespace {

namespace fi = format_internal;
using flatbuffers::soffset_t;  // for FLATBUFFERS_MIN_BUFFER_SIZE
using flatbuffers::uoffset_t;

// The smallest FlatBuffer: root offset, a table's vtable offset and an empty vtable.
constexpr uint64_t kMinHeaderBytes = FLATBUFFERS_MIN_BUFFER_SIZE;

// Limits handed to the FlatBuffers verifier. The schema nests tables five deep (Model, Graph,
// Node, Attribute, TensorAttr). Every distinct table occupies at least 4 bytes, so a header of
// N bytes holds at most N / 4 tables; a larger count means offsets are shared to make the
// verifier revisit the same tables over and over.
constexpr uoffset_t kMaxTableDepth = 16;
constexpr uoffset_t kMinTableLimit = 1024;
// The longest list of unsupported operators quoted in one message.
constexpr size_t kMaxListedOps = 10;

// The bytes of a model file and what keeps them alive.
struct FileBytes {
  uint8_t* data = nullptr;
  uint64_t size = 0;
  // How many bytes from `data` may be read: `size` plus the tail of the last mapped page or the
  // allocator's padding. Constants need kTensorPadding readable bytes past their end.
  uint64_t readable = 0;
  std::shared_ptr<void> owner;
  bool mapped = false;
};

// Where the parts of a checked file lie.
struct FileLayout {
  uint64_t header_size = 0;    // the FlatBuffer, size prefix included
  uint64_t weights_start = 0;  // file offset of the weights section
  uint64_t weights_size = 0;
};

// A name from the file in quotes, control bytes escaped (core/status.h quote_name).
std::string quoted(const flatbuffers::String* s) {
  if (s == nullptr) return "(unnamed)";
  return quote_name(std::string_view(s->c_str(), s->size()));
}
std::string value_label(size_t i, const fb::Value* v) {
  return "value " + std::to_string(i) + " " + quoted(v->name());
}
std::string node_label(size_t i, const fb::Node* n) {
  return "node " + std::to_string(i) + " " + quoted(n->name());
}

// Bytes as text with non-printable characters escaped, for identifiers in messages.
std::string printable(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (std::isprint(p[i])) {
      s += static_cast<char>(p[i]);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", p[i]);
      s += buf;
    }
  }
  return s;
}

// Reads a vector of integers. The verifier checks the alignment of a vector's length but not of
// its 8-byte elements, so the elements are copied out byte-wise rather than read in place.
template <typename T>
std::vector<int64_t> to_int64s(const flatbuffers::Vector<T>* v) {
  std::vector<int64_t> out;
  if (v == nullptr) return out;
  out.reserve(v->size());
  for (uoffset_t i = 0; i < v->size(); ++i) {
    T x;
    std::memcpy(&x, v->Data() + static_cast<size_t>(i) * sizeof(T), sizeof(T));
    out.push_back(static_cast<int64_t>(flatbuffers::EndianScalar(x)));
  }
  return out;
}

// ---- Phase 1: envelope ---------------------------------------------------------------------

Status check_envelope(const FileBytes& f, FileLayout* layout) {
  constexpr uint64_t kMinSize = fi::kSizePrefixBytes + kMinHeaderBytes;
  if (f.size == 0) return invalid_argument("the file is empty");
  if (f.size < kMinSize) {
    return invalid_argument("the file is " + std::to_string(f.size) +
                            " bytes, too small to be a Tessera model (at least " +
                            std::to_string(kMinSize) + ")");
  }
  // The identifier first, so that a file of another kind is named as such.
  const uint8_t* id = f.data + fi::kSizePrefixBytes + sizeof(uoffset_t);
  if (std::memcmp(id, fb::ModelIdentifier(), flatbuffers::kFileIdentifierLength) != 0) {
    return invalid_argument("not a Tessera model file: the identifier at offset " +
                            std::to_string(id - f.data) + " is '" +
                            printable(id, flatbuffers::kFileIdentifierLength) + "', expected '" +
                            fb::ModelIdentifier() + "'");
  }
  const uint64_t prefix = flatbuffers::ReadScalar<uoffset_t>(f.data);
  if (prefix > f.size - fi::kSizePrefixBytes) {
    return invalid_argument("the size prefix at offset 0 says the model header is " +
                            std::to_string(prefix) + " bytes, but only " +
                            std::to_string(f.size - fi::kSizePrefixBytes) +
                            " bytes follow it: the file is truncated");
  }
  if (prefix < kMinHeaderBytes || prefix + fi::kSizePrefixBytes >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return invalid_argument("the size prefix at offset 0 (" + std::to_string(prefix) +
                            ") is not a valid model header size");
  }
  layout->header_size = prefix + fi::kSizePrefixBytes;
  layout->weights_start = align_up(layout->header_size, kWeightsAlignment);
  return Status();
}

// ---- Phases 2 and 3: version and FlatBuffers verification ----------------------------------

flatbuffers::Verifier::Options verifier_options(uint64_t header_size) {
  flatbuffers::Verifier::Options opts;
  opts.max_depth = kMaxTableDepth;
  opts.max_tables = std::max<uoffset_t>(kMinTableLimit, static_cast<uoffset_t>(header_size / 4));
  opts.check_alignment = true;
  return opts;
}

Result<const fb::Model*> verify_header(const FileBytes& f, const FileLayout& layout) {
  const size_t n = static_cast<size_t>(layout.header_size);
  const std::string where = "the model header (" + std::to_string(n) + " bytes at file offset 0)";
  {
    flatbuffers::Verifier v(f.data, n, verifier_options(n));
    if (!v.VerifySizePrefixedBuffer<fb::ModelVersion>(fb::ModelIdentifier())) {
      return invalid_argument(where + " is corrupt: its root table does not verify");
    }
    const auto* version = flatbuffers::GetSizePrefixedRoot<fb::ModelVersion>(f.data);
    if (version->format_major() != kFormatMajor) {
      return unimplemented("the file has format version " +
                           std::to_string(version->format_major()) + "." +
                           std::to_string(version->format_minor()) + ", this Tessera reads " +
                           std::to_string(kFormatMajor) + ".x");
    }
  }
  flatbuffers::Verifier v(f.data, n, verifier_options(n));
  if (!fb::VerifySizePrefixedModelBuffer(v)) {
    return invalid_argument(where +
                            " failed FlatBuffers verification: the file is corrupt or truncated");
  }
  return fb::GetSizePrefixedModel(f.data);
}

// ---- Phase 4: expansion bound and semantic validation
// ----------------------------------------------------------

// FlatBuffers lets many offsets point at one table, string or vector, and the verifier (bounded
// by its table count) accepts that. Building the Graph copies each use, so a small header could
// expand into a huge graph: a thousand nodes sharing one node with a long `ints` attribute, say.
// This bounds the expansion before anything is built: each value, node, attribute and metadata
// entry costs about kObjectCost bytes in memory plus the bytes of its names, shape and lists.
// A file without sharing stays under 7x its header size; more than kMaxExpansion x the
// header (plus kExpansionSlack) is refused.
constexpr uint64_t kObjectCost = 128;
constexpr uint64_t kMaxExpansion = 16;
constexpr uint64_t kExpansionSlack = uint64_t{1} << 20;

template <typename T>
uint64_t length(const T* v) {
  return v ? v->size() : 0;
}

uint64_t attribute_cost(const fb::Attribute* a) {
  uint64_t n = kObjectCost + length(a->name());
  if (a->value() == nullptr) return n;
  switch (a->value_type()) {
    case fb::AttributeValue::StringAttr:
      return n + length(a->value_as_StringAttr()->value());
    case fb::AttributeValue::IntsAttr:
      return n + 8 * length(a->value_as_IntsAttr()->values());
    case fb::AttributeValue::FloatsAttr:
      return n + 4 * length(a->value_as_FloatsAttr()->values());
    case fb::AttributeValue::TensorAttr:
      return n + 8 * length(a->value_as_TensorAttr()->shape());
    default:
      return n;
  }
}

Status check_expansion(const fb::Model* m, const FileLayout& layout) {
  const uint64_t limit = kMaxExpansion * layout.header_size + kExpansionSlack;
  uint64_t cost = 0;
  auto over = [&] {
    return invalid_argument(
        "the " + std::to_string(layout.header_size) + "-byte model header would expand to more " +
        "than " + std::to_string(limit) + " bytes of graph structure: its tables, strings or " +
        "lists are referenced over and over");
  };
  if (m->metadata()) {
    for (const fb::MetadataEntry* e : *m->metadata()) {
      cost += kObjectCost + length(e->key()) + length(e->value());
      if (cost > limit) return over();
    }
  }
  const fb::Graph* g = m->graph();
  if (g == nullptr) return Status();
  cost += 4 * (length(g->inputs()) + length(g->outputs()));
  if (g->values()) {
    for (const fb::Value* v : *g->values()) {
      cost += kObjectCost + length(v->name()) + 8 * length(v->shape());
      if (cost > limit) return over();
    }
  }
  if (g->nodes()) {
    for (const fb::Node* n : *g->nodes()) {
      cost += kObjectCost + length(n->name()) + length(n->op_type()) +
              4 * (length(n->inputs()) + length(n->outputs()));
      if (n->attributes()) {
        for (const fb::Attribute* a : *n->attributes()) {
          cost += attribute_cost(a);
          if (cost > limit) return over();
        }
      }
      if (cost > limit) return over();
    }
  }
  return Status();
}

// Checks a stored type and returns the shape.
Status check_type(const std::string& what, fb::DataType dtype,
                  const flatbuffers::Vector<int64_t>* dims, Shape* shape) {
  if (!dtype_is_valid(static_cast<int>(dtype))) {
    return invalid_argument(what + ": field 'dtype' holds " +
                            std::to_string(static_cast<int>(dtype)) + ", not a Tessera dtype");
  }
  const uoffset_t rank = dims ? dims->size() : 0;
  if (rank > static_cast<uoffset_t>(kMaxRank)) {
    return out_of_range(what + ": field 'shape' has rank " + std::to_string(rank) +
                        ", beyond the limit of " + std::to_string(kMaxRank));
  }
  *shape = Shape(to_int64s(dims));
  if (Status s = shape->validate(); !s.ok()) return s.with_context(what + ": field 'shape'");
  return Status();
}

// Checks the payload of a constant or tensor attribute of type `dtype` x `shape`.
Status check_payload(const std::string& what, fb::DataType dtype, fb::TensorLayout tensor_layout,
                     const Shape& shape, const fb::TensorRef* ref, const FileLayout& layout) {
  if (static_cast<int>(tensor_layout) > static_cast<int>(fb::TensorLayout::MAX)) {
    return invalid_argument(what + ": field 'layout' holds " +
                            std::to_string(static_cast<int>(tensor_layout)) +
                            ", not a Tessera layout");
  }
  if (ref == nullptr) return invalid_argument(what + ": field 'data' is missing");
  const DType t = static_cast<DType>(dtype);
  ASSIGN_OR_RETURN(const uint64_t bytes, checked_byte_size(shape, t));
  const uint64_t offset = ref->offset();
  const uint64_t size = ref->size();
  if (size != bytes) {
    return invalid_argument(what + ": field 'data' holds " + std::to_string(size) + " bytes, but " +
                            dtype_name(t) + shape.to_string() + " needs " + std::to_string(bytes));
  }
  if (offset % kWeightsAlignment != 0) {
    uint64_t file_offset = 0;
    const bool fits = checked_add(layout.weights_start, offset, &file_offset);
    return invalid_argument(what + ": payload offset " + std::to_string(offset) +
                            " in the weights section" +
                            (fits ? " (file offset " + std::to_string(file_offset) + ")" : "") +
                            " is not a multiple of " + std::to_string(kWeightsAlignment));
  }
  uint64_t end = 0;
  if (!checked_add(offset, size, &end) || end > layout.weights_size) {
    return out_of_range(what + ": payload of " + std::to_string(size) + " bytes at offset " +
                        std::to_string(offset) + " lies outside the weights section (" +
                        std::to_string(layout.weights_size) + " bytes at file offset " +
                        std::to_string(layout.weights_start) + ")");
  }
  return Status();
}

Status check_value(size_t i, const fb::Value* v, const FileLayout& layout) {
  const std::string what = value_label(i, v);
  if (v->name() == nullptr) return invalid_argument(what + ": field 'name' is missing");
  if (v->constant() && !v->has_info()) {
    return invalid_argument(what + ": a constant must have a dtype and shape ('has_info')");
  }
  if (!v->constant() && v->data() != nullptr) {
    return invalid_argument(what + ": field 'data' is set on a value that is not constant");
  }
  if (!v->has_info()) return Status();
  Shape shape;
  RETURN_IF_ERROR(check_type(what, v->dtype(), v->shape(), &shape));
  if (v->constant()) {
    RETURN_IF_ERROR(check_payload(what, v->dtype(), v->layout(), shape, v->data(), layout));
  }
  return Status();
}

Status check_attribute(const std::string& what, const fb::Attribute* a, const FileLayout& layout) {
  switch (a->value_type()) {
    case fb::AttributeValue::IntAttr:
    case fb::AttributeValue::FloatAttr:
    case fb::AttributeValue::IntsAttr:
    case fb::AttributeValue::FloatsAttr:
      if (a->value() == nullptr) return invalid_argument(what + ": the value is missing");
      return Status();  // absent numbers are 0, absent lists empty
    case fb::AttributeValue::StringAttr:
      if (a->value() == nullptr || a->value_as_StringAttr()->value() == nullptr) {
        return invalid_argument(what + ": the string value is missing");
      }
      return Status();
    case fb::AttributeValue::TensorAttr: {
      const fb::TensorAttr* t = a->value_as_TensorAttr();
      if (t == nullptr) return invalid_argument(what + ": the tensor value is missing");
      Shape shape;
      RETURN_IF_ERROR(check_type(what, t->dtype(), t->shape(), &shape));
      return check_payload(what, t->dtype(), t->layout(), shape, t->data(), layout);
    }
    case fb::AttributeValue::NONE:
      break;
  }
  return invalid_argument(what + ": field 'value_type' holds " +
                          std::to_string(static_cast<int>(a->value_type())) +
                          ", not an attribute kind");
}

// Operators the model uses that this build does not know: the first few, and how many.
struct UnknownOps {
  std::vector<std::string> listed;
  size_t count = 0;
};

Status check_node(size_t i, const fb::Node* n, uoffset_t num_values, const FileLayout& layout,
                  UnknownOps* unknown_ops) {
  const std::string what = node_label(i, n);
  if (n->name() == nullptr) return invalid_argument(what + ": field 'name' is missing");
  if (n->op_type() == nullptr) return invalid_argument(what + ": field 'op_type' is missing");
  if (!op_from_name(n->op_type()->string_view())) {
    if (unknown_ops->count++ < kMaxListedOps) {
      unknown_ops->listed.push_back(n->op_type()->str() + " (" + what + ")");
    }
  }
  const int64_t nv = num_values;
  if (n->inputs()) {
    for (uoffset_t k = 0; k < n->inputs()->size(); ++k) {
      const int64_t v = n->inputs()->Get(k);
      if (v < kNoValue || v >= nv) {
        return out_of_range(what + ": input " + std::to_string(k) + " is value " +
                            std::to_string(v) + ", out of range (the graph has " +
                            std::to_string(nv) + " values)");
      }
    }
  }
  if (n->outputs()) {
    for (uoffset_t k = 0; k < n->outputs()->size(); ++k) {
      const int64_t v = n->outputs()->Get(k);
      if (v < 0 || v >= nv) {
        return out_of_range(what + ": output " + std::to_string(k) + " is value " +
                            std::to_string(v) + ", out of range (the graph has " +
                            std::to_string(nv) + " values)");
      }
    }
  }
  if (n->attributes()) {
    std::set<std::string_view> names;
    for (uoffset_t k = 0; k < n->attributes()->size(); ++k) {
      const fb::Attribute* a = n->attributes()->Get(k);
      if (a->name() == nullptr) {
        return invalid_argument(what + ": attribute " + std::to_string(k) +
                                ": field 'name' is missing");
      }
      const std::string attr_what = what + " attribute " + quote_name(a->name()->str());
      if (!names.insert(a->name()->string_view()).second) {
        return invalid_argument(attr_what + " appears more than once");
      }
      RETURN_IF_ERROR(check_attribute(attr_what, a, layout));
    }
  }
  return Status();
}

Status check_graph_ids(const char* what, const flatbuffers::Vector<int32_t>* ids,
                       uoffset_t num_values) {
  if (ids == nullptr) return Status();
  for (uoffset_t k = 0; k < ids->size(); ++k) {
    const int64_t v = ids->Get(k);
    if (v < 0 || v >= static_cast<int64_t>(num_values)) {
      return out_of_range(std::string("graph ") + what + " " + std::to_string(k) + " is value " +
                          std::to_string(v) + ", out of range (the graph has " +
                          std::to_string(num_values) + " values)");
    }
  }
  return Status();
}

Status check_model(const fb::Model* m, const FileLayout& layout) {
  if (m->metadata()) {
    std::set<std::string_view> keys;
    for (uoffset_t k = 0; k < m->metadata()->size(); ++k) {
      const fb::MetadataEntry* e = m->metadata()->Get(k);
      const std::string what = "metadata entry " + std::to_string(k);
      if (e->key() == nullptr) return invalid_argument(what + ": field 'key' is missing");
      if (e->value() == nullptr) {
        return invalid_argument(what + " " + quote_name(e->key()->str()) +
                                ": field 'value' is missing");
      }
      if (!keys.insert(e->key()->string_view()).second) {
        return invalid_argument(what + ": key " + quote_name(e->key()->str()) +
                                " appears more than once");
      }
    }
  }
  const fb::Graph* g = m->graph();
  if (g == nullptr) return invalid_argument("the model has no graph (field 'graph' is missing)");
  const uoffset_t nv = g->values() ? g->values()->size() : 0;
  if (nv > static_cast<uoffset_t>(INT32_MAX)) {
    return out_of_range("the graph has " + std::to_string(nv) + " values, too many");
  }
  for (uoffset_t i = 0; i < nv; ++i) RETURN_IF_ERROR(check_value(i, g->values()->Get(i), layout));
  UnknownOps unknown_ops;
  if (g->nodes()) {
    for (uoffset_t i = 0; i < g->nodes()->size(); ++i) {
      RETURN_IF_ERROR(check_node(i, g->nodes()->Get(i), nv, layout, &unknown_ops));
    }
  }
  RETURN_IF_ERROR(check_graph_ids("input", g->inputs(), nv));
  RETURN_IF_ERROR(check_graph_ids("output", g->outputs(), nv));
  if (unknown_ops.count > 0) {
    std::string list;
    for (const std::string& op : unknown_ops.listed) list += (list.empty() ? "" : ", ") + op;
    if (unknown_ops.count > unknown_ops.listed.size()) {
      list += " and " + std::to_string(unknown_ops.count - unknown_ops.listed.size()) + " more";
    }
    return unimplemented("the model uses operators this Tessera does not know: " + list);
  }
  return Status();
}

// ---- Phase 5: building the Graph -----------------------------------------------------------

// A constant's tensor: a view into the file bytes, or a copy when fewer than kTensorPadding
// readable bytes follow it (a file from another writer without trailing padding).
Result<Tensor> payload_tensor(const FileBytes& f, const FileLayout& layout, fb::DataType dtype,
                              fb::TensorLayout tensor_layout,
                              const flatbuffers::Vector<int64_t>* dims, const fb::TensorRef* ref) {
  const DType t = static_cast<DType>(dtype);
  Shape shape(to_int64s(dims));
  const uint64_t offset = layout.weights_start + ref->offset();
  uint8_t* p = f.data + offset;
  const tessera::Layout l = static_cast<tessera::Layout>(tensor_layout);
  if (offset + ref->size() + kTensorPadding <= f.readable) {
    return Tensor::view(t, std::move(shape), p, f.owner, l);
  }
  ASSIGN_OR_RETURN(Tensor copy, Tensor::create(t, std::move(shape), l));
  if (ref->size() > 0) std::memcpy(copy.raw(), p, static_cast<size_t>(ref->size()));
  return copy;
}

Result<AttributeValue> attribute_value(const FileBytes& f, const FileLayout& layout,
                                       const fb::Attribute* a) {
  switch (a->value_type()) {
    case fb::AttributeValue::IntAttr:
      return AttributeValue(a->value_as_IntAttr()->value());
    case fb::AttributeValue::FloatAttr:
      return AttributeValue(a->value_as_FloatAttr()->value());
    case fb::AttributeValue::StringAttr:
      return AttributeValue(a->value_as_StringAttr()->value()->str());
    case fb::AttributeValue::IntsAttr:
      return AttributeValue(to_int64s(a->value_as_IntsAttr()->values()));
    case fb::AttributeValue::FloatsAttr: {
      std::vector<float> v;
      if (const auto* fs = a->value_as_FloatsAttr()->values()) {
        v.reserve(fs->size());
        for (uoffset_t i = 0; i < fs->size(); ++i) v.push_back(fs->Get(i));
      }
      return AttributeValue(std::move(v));
    }
    case fb::AttributeValue::TensorAttr: {
      const fb::TensorAttr* t = a->value_as_TensorAttr();
      ASSIGN_OR_RETURN(Tensor tensor,
                       payload_tensor(f, layout, t->dtype(), t->layout(), t->shape(), t->data()));
      return AttributeValue(std::move(tensor));
    }
    case fb::AttributeValue::NONE:
      break;
  }
  return internal_error("unvalidated attribute kind");  // check_attribute rejects it
}

Result<Graph> build_graph(const FileBytes& f, const FileLayout& layout, const fb::Graph* fg) {
  Graph g;
  if (fg->values()) {
    g.values().reserve(fg->values()->size());
    for (uoffset_t i = 0; i < fg->values()->size(); ++i) {
      const fb::Value* v = fg->values()->Get(i);
      std::string name = v->name()->str();
      if (v->constant()) {
        ASSIGN_OR_RETURN(Tensor t,
                         payload_tensor(f, layout, v->dtype(), v->layout(), v->shape(), v->data()));
        g.add_constant(std::move(name), std::move(t));
      } else if (v->has_info()) {
        g.add_value(std::move(name),
                    TensorInfo{static_cast<DType>(v->dtype()), Shape(to_int64s(v->shape()))});
      } else {
        g.add_value(std::move(name));
      }
    }
  }
  if (fg->nodes()) {
    g.nodes().reserve(fg->nodes()->size());
    for (uoffset_t i = 0; i < fg->nodes()->size(); ++i) {
      const fb::Node* fn = fg->nodes()->Get(i);
      Node n;
      n.name = fn->name()->str();
      n.kind = *op_from_name(fn->op_type()->string_view());
      for (int64_t v : to_int64s(fn->inputs())) n.inputs.push_back(static_cast<ValueId>(v));
      for (int64_t v : to_int64s(fn->outputs())) n.outputs.push_back(static_cast<ValueId>(v));
      if (fn->attributes()) {
        for (const fb::Attribute* a : *fn->attributes()) {
          ASSIGN_OR_RETURN(AttributeValue av, attribute_value(f, layout, a));
          n.attrs.set(a->name()->str(), std::move(av));
        }
      }
      g.add_node(std::move(n));
    }
  }
  for (int64_t v : to_int64s(fg->inputs())) g.inputs().push_back(static_cast<ValueId>(v));
  for (int64_t v : to_int64s(fg->outputs())) g.outputs().push_back(static_cast<ValueId>(v));
  if (Status s = g.validate(); !s.ok()) return s.with_context("the graph in the file is invalid");
  // Passes rely on topological node order. Tessera writes it; restore it for other writers
  // (a stable sort: a file already in order is unchanged).
  RETURN_IF_ERROR(g.sort_topologically());
  return g;
}

Result<LoadedModel> parse(const FileBytes& f) {
  FileLayout layout;
  RETURN_IF_ERROR(check_envelope(f, &layout));
  ASSIGN_OR_RETURN(const fb::Model* m, verify_header(f, layout));
  layout.weights_size = m->weights_size();
  if (layout.weights_start > f.size || layout.weights_size > f.size - layout.weights_start) {
    return invalid_argument("the weights section (" + std::to_string(layout.weights_size) +
                            " bytes at file offset " + std::to_string(layout.weights_start) +
                            ") extends past the end of the file (" + std::to_string(f.size) +
                            " bytes): the file is truncated");
  }
  RETURN_IF_ERROR(check_expansion(m, layout));
  RETURN_IF_ERROR(check_model(m, layout));

  LoadedModel out;
  ASSIGN_OR_RETURN(out.graph, build_graph(f, layout, m->graph()));
  out.format_major = m->format_major();
  out.format_minor = m->format_minor();
  out.memory_mapped = f.mapped;
  if (m->producer()) out.metadata.producer = m->producer()->str();
  if (m->metadata()) {
    for (const fb::MetadataEntry* e : *m->metadata()) {
      out.metadata.properties.emplace(e->key()->str(), e->value()->str());
    }
  }
  return out;
}

// ---- Getting the bytes ---------------------------------------------------------------------

// Copies `n` bytes into a fresh kTensorAlignment-aligned buffer with kTensorPadding after it.
Result<FileBytes> owned_buffer(uint64_t n) {
  ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> mem, allocate_host(static_cast<size_t>(n)));
  FileBytes f;
  f.data = mem.get();
  f.size = n;
  f.readable = n + kTensorPadding;
  f.owner = std::move(mem);
  return f;
}

std::string errno_text() {
  return std::strerror(errno);
}

Result<FileBytes> read_whole_file(int fd, uint64_t size, const std::string& path) {
  ASSIGN_OR_RETURN(FileBytes f, owned_buffer(size));
  uint64_t done = 0;
  while (done < size) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(size - done, uint64_t{1} << 30));
    const ssize_t r = ::pread(fd, f.data + done, want, static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      return io_error("reading " + quote_name(path) + " failed at offset " + std::to_string(done) +
                      ": " + errno_text());
    }
    if (r == 0) {
      return io_error(quote_name(path) + " ended at offset " + std::to_string(done) +
                      " while reading it (was it truncated?)");
    }
    done += static_cast<uint64_t>(r);
  }
  return f;
}

// Maps the file copy-on-write: constants are writable in memory (a pass that edits one gets a
// private copy of the page) and the file itself is never modified.
Result<FileBytes> map_file(int fd, uint64_t size) {
  void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) return io_error("mmap failed: " + errno_text());
  const size_t length = static_cast<size_t>(size);
  FileBytes f;
  f.data = static_cast<uint8_t*>(p);
  f.size = size;
  const long page = ::sysconf(_SC_PAGESIZE);
  f.readable = align_up(length, page > 0 ? static_cast<size_t>(page) : 4096);
  f.owner = std::shared_ptr<void>(p, [length](void* q) { ::munmap(q, length); });
  f.mapped = true;
  return f;
}

Result<FileBytes> open_file(const std::string& path, const LoadOptions& options) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return not_found("model file " + quote_name(path) + " does not exist");
    return io_error("cannot open model file " + quote_name(path) + ": " + errno_text());
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return io_error("cannot stat " + quote_name(path) + ": " + errno_text());
  if (!S_ISREG(st.st_mode)) return invalid_argument(quote_name(path) + " is not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size == 0) return FileBytes{};  // check_envelope reports the empty file
  if (options.use_mmap) {
    Result<FileBytes> mapped = map_file(fd, size);
    if (mapped.ok()) return mapped;
  }
  return read_whole_file(fd, size, path);
}

}  // namespace

Result<LoadedModel> load_model_file(const std::string& path, const LoadOptions& options) {
  ASSIGN_OR_RETURN(FileBytes f, open_file(path, options));
  Result<LoadedModel> m = parse(f);
  if (!m.ok()) return m.status().with_context("model file " + quote_name(path));
  return m;
}

Result<LoadedModel> load_model_file_from_memory(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return parse(FileBytes{});
  ASSIGN_OR_RETURN(FileBytes f, owned_buffer(bytes.size()));
  std::memcpy(f.data, bytes.data(), bytes.size());
  return parse(f);
}

Result<Graph> load_model(const std::string& path) {
  ASSIGN_OR_RETURN(LoadedModel m, load_model_file(path));
  return std::move(m.graph);
}

Result<Graph> load_model_from_memory(std::span<const uint8_t> bytes) {
  ASSIGN_OR_RETURN(LoadedModel m, load_model_file_from_memory(bytes));
  return std::move(m.graph);
}

}  // namespace tessera
