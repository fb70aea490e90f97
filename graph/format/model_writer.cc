// Writing .tsr files: build the FlatBuffer header while placing every payload in the weights
// section, then emit header, padding and payloads in file order to a buffer or a file.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <variant>

#include "core/allocator.h"
#include "graph/format/model_file.h"
#include "graph/format/schema_types.h"

namespace tessera {
namespace {

namespace fi = format_internal;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

// One tensor payload and where it goes in the weights section.
struct Payload {
  const Tensor* tensor;
  uint64_t offset;
};

// The serialised header and the plan of the weights section.
struct Header {
  FlatBufferBuilder fbb;
  std::vector<Payload> payloads;  // increasing offsets
  uint64_t weights_size = 0;

  uint64_t weights_start() const { return align_up(fbb.GetSize(), kWeightsAlignment); }
  uint64_t file_size() const { return weights_start() + weights_size; }
};

std::string label(const char* kind, size_t index, const std::string& name) {
  return std::string(kind) + " " + std::to_string(index) + " " + quote_name(name);
}

// Checks that a tensor about to be written is one the loader will accept.
Status check_tensor(const Tensor& t, const std::string& what) {
  if (Status s = t.shape().validate(); !s.ok()) return s.with_context(what);
  if (!t.defined()) return invalid_argument(what + ": the tensor has no data");
  return Status();
}

// An upper bound on the FlatBuffer's size: each table, vtable, vector and string with its
// alignment padding. FlatBuffers cannot address 2 GiB; a graph whose structure alone (names,
// shapes, attribute lists; not weights) comes near is refused before building starts.
uint64_t header_size_bound(const Graph& g, const ModelMetadata& metadata) {
  uint64_t n = 256 + metadata.producer.size();
  for (const auto& [key, val] : metadata.properties) n += 64 + key.size() + val.size();
  for (const Value& v : g.values()) n += 96 + v.name.size() + 8 * v.info.shape.dims().size();
  for (const Node& node : g.nodes()) {
    n += 128 + node.name.size() + 4 * (node.inputs.size() + node.outputs.size());
    for (const auto& [name, a] : node.attrs.all()) {
      n += 128 + name.size();
      if (const auto* s = std::get_if<std::string>(&a)) n += s->size();
      if (const auto* is = std::get_if<std::vector<int64_t>>(&a)) n += 8 * is->size();
      if (const auto* fs = std::get_if<std::vector<float>>(&a)) n += 4 * fs->size();
      if (const auto* t = std::get_if<Tensor>(&a)) n += 8 * t->shape().dims().size();
    }
  }
  return n + 4 * (g.inputs().size() + g.outputs().size());
}

// Phase 1: the FlatBuffer, assigning each payload the next 64-byte-aligned offset.
class HeaderBuilder {
 public:
  explicit HeaderBuilder(Header* h) : h_(h), fbb_(h->fbb) {}

  Status build(const Graph& g, const ModelMetadata& metadata) {
    if (Status s = g.validate(); !s.ok()) return s.with_context("cannot save an invalid graph");
    const uint64_t bound = header_size_bound(g, metadata);
    if (bound >= FLATBUFFERS_MAX_BUFFER_SIZE - fi::kSizePrefixBytes) {
      return out_of_range("the graph's structure needs up to " + std::to_string(bound) +
                          " bytes, beyond the 2 GiB limit of the model header");
    }
    std::vector<Offset<fb::Value>> values;
    values.reserve(g.values().size());
    for (size_t i = 0; i < g.values().size(); ++i) {
      ASSIGN_OR_RETURN(Offset<fb::Value> v, value(i, g.values()[i]));
      values.push_back(v);
    }
    std::vector<Offset<fb::Node>> nodes;
    nodes.reserve(g.nodes().size());
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      ASSIGN_OR_RETURN(Offset<fb::Node> n, node(i, g.nodes()[i]));
      nodes.push_back(n);
    }
    const auto graph =
        fb::CreateGraph(fbb_, fbb_.CreateVector(values), fbb_.CreateVector(nodes),
                        fbb_.CreateVector(g.inputs()), fbb_.CreateVector(g.outputs()));

    std::vector<Offset<fb::MetadataEntry>> entries;
    for (const auto& [key, val] : metadata.properties) {
      entries.push_back(
          fb::CreateMetadataEntry(fbb_, fbb_.CreateString(key), fbb_.CreateString(val)));
    }
    const auto producer = fbb_.CreateString(metadata.producer);
    const auto entries_vec = fbb_.CreateVector(entries);

    // The section ends with kTensorPadding zero bytes after the last payload.
    h_->weights_size = align_up(cursor_, kWeightsAlignment) + kTensorPadding;
    fb::ModelBuilder mb(fbb_);
    mb.add_format_major(kFormatMajor);
    mb.add_format_minor(kFormatMinor);
    mb.add_producer(producer);
    mb.add_metadata(entries_vec);
    mb.add_graph(graph);
    mb.add_weights_size(h_->weights_size);
    fb::FinishSizePrefixedModelBuffer(fbb_, mb.Finish());
    return Status();
  }

 private:
  fb::TensorRef place(const Tensor& t) {
    const uint64_t offset = align_up(cursor_, kWeightsAlignment);
    cursor_ = offset + t.byte_size();
    h_->payloads.push_back(Payload{&t, offset});
    return fb::TensorRef(offset, t.byte_size());
  }

  Result<Offset<fb::Value>> value(size_t i, const Value& v) {
    const std::string what = label("value", i, v.name);
    if (v.is_constant) {
      if (!v.has_info) return invalid_argument(what + ": a constant without a type");
      RETURN_IF_ERROR(check_tensor(v.data, what));
      if (v.data.dtype() != v.info.dtype || v.data.shape() != v.info.shape) {
        return invalid_argument(what + ": constant data " + v.data.describe() +
                                " does not match the value's type " + dtype_name(v.info.dtype) +
                                v.info.shape.to_string());
      }
    } else if (v.has_info) {
      if (Status s = v.info.shape.validate(); !s.ok()) return s.with_context(what);
    }
    const auto name = fbb_.CreateString(v.name);
    Offset<flatbuffers::Vector<int64_t>> shape;
    if (v.has_info) shape = fbb_.CreateVector(v.info.shape.dims());
    fb::TensorRef ref;
    if (v.is_constant) ref = place(v.data);

    fb::ValueBuilder vb(fbb_);
    vb.add_name(name);
    if (v.has_info) {
      vb.add_has_info(true);
      vb.add_dtype(fi::to_schema(v.info.dtype));
      vb.add_shape(shape);
    }
    if (v.is_constant) {
      vb.add_constant(true);
      vb.add_layout(fi::to_schema(v.data.layout()));
      vb.add_data(&ref);
    }
    return vb.Finish();
  }

  Result<Offset<fb::Attribute>> attribute(const std::string& what, const std::string& name,
                                          const AttributeValue& a) {
    Offset<void> value;
    fb::AttributeValue type = fb::AttributeValue::NONE;
    if (const auto* i = std::get_if<int64_t>(&a)) {
      value = fb::CreateIntAttr(fbb_, *i).Union();
      type = fb::AttributeValue::IntAttr;
    } else if (const auto* f = std::get_if<float>(&a)) {
      value = fb::CreateFloatAttr(fbb_, *f).Union();
      type = fb::AttributeValue::FloatAttr;
    } else if (const auto* s = std::get_if<std::string>(&a)) {
      value = fb::CreateStringAttr(fbb_, fbb_.CreateString(*s)).Union();
      type = fb::AttributeValue::StringAttr;
    } else if (const auto* is = std::get_if<std::vector<int64_t>>(&a)) {
      value = fb::CreateIntsAttr(fbb_, fbb_.CreateVector(*is)).Union();
      type = fb::AttributeValue::IntsAttr;
    } else if (const auto* fs = std::get_if<std::vector<float>>(&a)) {
      value = fb::CreateFloatsAttr(fbb_, fbb_.CreateVector(*fs)).Union();
      type = fb::AttributeValue::FloatsAttr;
    } else if (const auto* t = std::get_if<Tensor>(&a)) {
      RETURN_IF_ERROR(check_tensor(*t, what + " attribute " + quote_name(name)));
      const auto shape = fbb_.CreateVector(t->shape().dims());
      const fb::TensorRef ref = place(*t);
      value = fb::CreateTensorAttr(fbb_, fi::to_schema(t->dtype()), shape,
                                   fi::to_schema(t->layout()), &ref)
                  .Union();
      type = fb::AttributeValue::TensorAttr;
    }
    return fb::CreateAttribute(fbb_, fbb_.CreateString(name), type, value);
  }

  Result<Offset<fb::Node>> node(size_t i, const Node& n) {
    const std::string what = label("node", i, n.name);
    if (static_cast<int>(n.kind) >= kNumOpKinds) {
      return invalid_argument(what + ": invalid op kind " +
                              std::to_string(static_cast<int>(n.kind)));
    }
    std::vector<Offset<fb::Attribute>> attrs;
    for (const auto& [name, a] : n.attrs.all()) {
      ASSIGN_OR_RETURN(Offset<fb::Attribute> attr, attribute(what, name, a));
      attrs.push_back(attr);
    }
    return fb::CreateNode(fbb_, fbb_.CreateString(n.name), fbb_.CreateString(op_name(n.kind)),
                          fbb_.CreateVector(n.inputs), fbb_.CreateVector(n.outputs),
                          fbb_.CreateVector(attrs));
  }

  Header* h_;
  FlatBufferBuilder& fbb_;
  uint64_t cursor_ = 0;  // end of the last payload placed
};

// Phase 2: the file bytes in order, through `write(const uint8_t*, size_t) -> Status`.
template <typename Write>
Status emit(const Header& h, Write&& write) {
  static const uint8_t kZeros[4096] = {};
  uint64_t pos = 0;  // file offset
  auto zeros_to = [&](uint64_t end) -> Status {
    while (pos < end) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(end - pos, sizeof(kZeros)));
      RETURN_IF_ERROR(write(kZeros, n));
      pos += n;
    }
    return Status();
  };
  RETURN_IF_ERROR(write(h.fbb.GetBufferPointer(), h.fbb.GetSize()));
  pos = h.fbb.GetSize();
  const uint64_t base = h.weights_start();
  for (const Payload& p : h.payloads) {
    RETURN_IF_ERROR(zeros_to(base + p.offset));
    const size_t n = p.tensor->byte_size();
    if (n > 0) RETURN_IF_ERROR(write(static_cast<const uint8_t*>(p.tensor->raw()), n));
    pos += n;
  }
  return zeros_to(h.file_size());
}

Status build_header(const Graph& graph, const ModelMetadata& metadata, Header* h) {
  HeaderBuilder builder(h);
  return builder.build(graph, metadata);
}

std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace

Result<std::vector<uint8_t>> serialize_model(const Graph& graph, const ModelMetadata& metadata) {
  Header h;
  RETURN_IF_ERROR(build_header(graph, metadata, &h));
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(h.file_size()));
  RETURN_IF_ERROR(emit(h, [&out](const uint8_t* p, size_t n) {
    out.insert(out.end(), p, p + n);
    return Status();
  }));
  return out;
}

Status save_model(const Graph& graph, const std::string& path, const ModelMetadata& metadata) {
  Header h;
  RETURN_IF_ERROR(build_header(graph, metadata, &h));

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot create " + quote_name(tmp) + ": " + errno_text());
  uint64_t written = 0;
  Status s = emit(h, [&](const uint8_t* p, size_t n) -> Status {
    while (n > 0) {
      const ssize_t w = ::write(fd, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        return io_error("writing " + quote_name(tmp) + " failed at offset " +
                        std::to_string(written) + ": " + errno_text());
      }
      p += w;
      n -= static_cast<size_t>(w);
      written += static_cast<uint64_t>(w);
    }
    return Status();
  });
  if (s.ok() && ::fsync(fd) != 0)
    s = io_error("flushing " + quote_name(tmp) + " failed: " + errno_text());
  if (::close(fd) != 0 && s.ok())
    s = io_error("closing " + quote_name(tmp) + " failed: " + errno_text());
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = io_error("renaming " + quote_name(tmp) + " to " + quote_name(path) +
                 " failed: " + errno_text());
  }
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

}  // namespace tessera
