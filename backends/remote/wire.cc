// The wire protocol (see wire.h): a byte writer, a bounds-checked reader, and one encoder and
// decoder per message.
#include "backends/remote/wire.h"

#include <bit>
#include <cstring>

#include "core/shape.h"

namespace tessera::remote {

static_assert(std::endian::native == std::endian::little,
              "the wire layout is little-endian and is read with memcpy");

namespace {

// ---- Writing -------------------------------------------------------------------------------

class Writer {
 public:
  Writer(uint64_t id, MsgType type) {
    out_.reserve(64);
    bytes(kWireMagic, 4);
    pod(kProtocolVersion);
    pod(static_cast<uint8_t>(type));
    pod(uint8_t{0});
    pod(id);
  }
  template <typename T>
  void pod(T v) {
    bytes(&v, sizeof v);
  }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void str(std::string_view s) {
    pod(static_cast<uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
  void i32_list(std::span<const int32_t> v) {
    pod(static_cast<uint32_t>(v.size()));
    bytes(v.data(), v.size() * sizeof(int32_t));
  }
  void blob(std::span<const uint8_t> b) {
    pod(static_cast<uint64_t>(b.size()));
    bytes(b.data(), b.size());
  }
  void zeros(uint64_t n) {
    pod(n);
    out_.resize(out_.size() + n, 0);
  }
  Status tensor(const Tensor& t, const TensorEncoding& enc, size_t index) {
    if (!t.defined()) return invalid_argument("tensor " + std::to_string(index) + " is undefined");
    if (enc.pack && t.dtype() == DType::kF32) {
      pod(uint8_t{1});
      const std::string name = "tensor " + std::to_string(index);
      RETURN_IF_ERROR(
          pack_f32(t.span<float>(), t.shape(), enc.policy, name, &scratch_packed_, &scratch_));
      blob(scratch_packed_);
      return Status();
    }
    pod(uint8_t{0});
    pod(static_cast<uint8_t>(t.dtype()));
    pod(static_cast<uint8_t>(t.rank()));
    for (int i = 0; i < t.rank(); ++i) pod(static_cast<int64_t>(t.dim(i)));
    pod(static_cast<uint64_t>(t.byte_size()));
    bytes(t.raw(), t.byte_size());
    return Status();
  }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
  std::vector<uint8_t> scratch_packed_;
  PackScratch scratch_;
};

// ---- Reading -------------------------------------------------------------------------------

class Reader {
 public:
  Reader(std::span<const uint8_t> m, const WireCaps& caps, MsgType type)
      : m_(m), caps_(caps), type_(type), pos_(kEnvelopeBytes) {}

  Status fail(const std::string& what) const {
    return invalid_argument(std::string(msg_type_name(type_)) + " message: " + what + " (at byte " +
                            std::to_string(pos_) + " of " + std::to_string(m_.size()) + ")");
  }
  uint64_t left() const { return m_.size() - pos_; }

  template <typename T>
  Result<T> pod(const char* what) {
    if (left() < sizeof(T)) return fail(std::string("truncated before ") + what);
    T v;
    std::memcpy(&v, m_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  Result<std::string> str(const char* what) {
    ASSIGN_OR_RETURN(uint32_t n, pod<uint32_t>(what));
    ASSIGN_OR_RETURN(std::span<const uint8_t> b, take(what, n, caps_.max_string));
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  // A u32 count, checked against the cap and against the bytes left (`item` bytes each).
  Result<uint32_t> count(const char* what, uint64_t cap, uint64_t item) {
    ASSIGN_OR_RETURN(uint32_t n, pod<uint32_t>(what));
    if (n > cap) {
      return fail(std::string(what) + ": " + std::to_string(n) + " items exceed the cap of " +
                  std::to_string(cap));
    }
    if (static_cast<uint64_t>(n) * item > left()) {
      return fail(std::string("truncated: ") + what + ": " + std::to_string(n) +
                  " items do not fit in the " + std::to_string(left()) + " bytes left");
    }
    return n;
  }
  template <typename T>
  Result<std::vector<T>> list(const char* what) {
    ASSIGN_OR_RETURN(uint32_t n, count(what, caps_.max_list, sizeof(T)));
    std::vector<T> v(n);
    if (n > 0) std::memcpy(v.data(), m_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }
  // A u64 length and that many bytes (a view into the message).
  Result<std::span<const uint8_t>> blob(const char* what, uint64_t cap) {
    ASSIGN_OR_RETURN(uint64_t n, pod<uint64_t>(what));
    return take(what, n, cap);
  }
  Result<Tensor> tensor(size_t index) {
    const std::string name = "tensor " + std::to_string(index);
    ASSIGN_OR_RETURN(uint8_t encoding, pod<uint8_t>("a tensor's encoding"));
    if (encoding == 1) {
      ASSIGN_OR_RETURN(std::span<const uint8_t> b,
                       blob("a packed tensor", caps_.max_message_bytes));
      UnpackCaps uc;
      uc.max_elements = caps_.max_elements;
      Result<Tensor> t = unpack_tensor(b, uc);
      if (!t.ok()) return fail(name + ": " + t.status().message());
      return t;
    }
    if (encoding != 0) return fail(name + ": unknown encoding " + std::to_string(encoding));
    ASSIGN_OR_RETURN(uint8_t dt, pod<uint8_t>("a tensor's dtype"));
    if (!dtype_is_valid(dt)) return fail(name + ": unknown dtype " + std::to_string(dt));
    ASSIGN_OR_RETURN(uint8_t rank, pod<uint8_t>("a tensor's rank"));
    if (rank > caps_.max_rank || rank > kMaxRank) {
      return fail(name + ": rank " + std::to_string(rank) + " exceeds the cap of " +
                  std::to_string(std::min<uint32_t>(caps_.max_rank, kMaxRank)));
    }
    std::vector<int64_t> dims(rank);
    uint64_t numel = 1;
    for (int i = 0; i < rank; ++i) {
      ASSIGN_OR_RETURN(dims[i], pod<int64_t>("a tensor's dims"));
      if (dims[i] < 0) return fail(name + ": negative dim " + std::to_string(dims[i]));
      if (!checked_mul(numel, static_cast<uint64_t>(dims[i]), &numel) ||
          numel > caps_.max_elements) {
        return fail(name + ": more elements than the cap of " + std::to_string(caps_.max_elements));
      }
    }
    const DType dtype = static_cast<DType>(dt);
    ASSIGN_OR_RETURN(std::span<const uint8_t> b, blob("a tensor's bytes", caps_.max_message_bytes));
    if (b.size() != numel * dtype_size(dtype)) {
      return fail(name + ": " + std::to_string(b.size()) + " bytes for " + std::to_string(numel) +
                  " elements of " + dtype_name(dtype));
    }
    ASSIGN_OR_RETURN(Tensor t, Tensor::create(dtype, Shape(std::move(dims))));
    if (!b.empty()) std::memcpy(t.raw(), b.data(), b.size());
    return t;
  }
  Result<std::vector<Tensor>> tensors() {
    // Each tensor takes at least 3 bytes (encoding, dtype, rank) + its u64 length.
    ASSIGN_OR_RETURN(uint32_t n, count("the tensor count", caps_.max_tensors, 11));
    std::vector<Tensor> out;
    out.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(Tensor t, tensor(i));
      out.push_back(std::move(t));
    }
    return out;
  }
  Status end() const {
    if (left() != 0) return fail(std::to_string(left()) + " bytes trail the message");
    return Status();
  }

 private:
  // The next `n` bytes (a string's or a blob's, whose length was just read), checked against
  // `cap` and against the bytes left.
  Result<std::span<const uint8_t>> take(const char* what, uint64_t n, uint64_t cap) {
    if (n > cap) {
      return fail(std::string(what) + " of " + std::to_string(n) + " bytes exceeds the cap of " +
                  std::to_string(cap));
    }
    if (n > left()) return fail(std::string("truncated inside ") + what);
    std::span<const uint8_t> b = m_.subspan(pos_, n);
    pos_ += n;
    return b;
  }

  std::span<const uint8_t> m_;
  const WireCaps& caps_;
  MsgType type_;
  uint64_t pos_;
};

// Checks the envelope and that its type is `type`; returns a reader at the body.
Status expect(std::span<const uint8_t> message, MsgType type) {
  ASSIGN_OR_RETURN(Envelope e, decode_envelope(message));
  if (e.type != type) {
    return invalid_argument(std::string("expected a ") + msg_type_name(type) + " message, got " +
                            msg_type_name(e.type));
  }
  return Status();
}

// Decodes a message of type `type` into a T: checks the envelope, lets `body(reader, &m)` read
// the fields, and checks that nothing trails them. Every decoder with a body goes through this.
template <typename T, typename Body>
Result<T> decode_message(std::span<const uint8_t> message, const WireCaps& caps, MsgType type,
                         Body body) {
  RETURN_IF_ERROR(expect(message, type));
  Reader r(message, caps, type);
  T m{};
  RETURN_IF_ERROR(body(r, &m));
  RETURN_IF_ERROR(r.end());
  return m;
}

}  // namespace

const char* msg_type_name(MsgType type) {
  switch (type) {
    case MsgType::kHello:
      return "Hello";
    case MsgType::kWelcome:
      return "Welcome";
    case MsgType::kCompile:
      return "Compile";
    case MsgType::kCompiled:
      return "Compiled";
    case MsgType::kRun:
      return "Run";
    case MsgType::kResult:
      return "Result";
    case MsgType::kRelease:
      return "Release";
    case MsgType::kReleased:
      return "Released";
    case MsgType::kPing:
      return "Ping";
    case MsgType::kPong:
      return "Pong";
    case MsgType::kError:
      return "Error";
    case MsgType::kBye:
      return "Bye";
  }
  return "unknown";
}

// ---- Encoders ------------------------------------------------------------------------------

std::vector<uint8_t> encode_hello(uint64_t id, const Hello& m) {
  Writer w(id, MsgType::kHello);
  w.pod(m.op_set);
  w.str(m.model_hash);
  w.str(m.client);
  return w.take();
}

std::vector<uint8_t> encode_welcome(uint64_t id, const Welcome& m) {
  Writer w(id, MsgType::kWelcome);
  w.str(m.model_hash);
  w.str(m.graph_digest);
  w.str(m.device);
  w.str(m.description);
  w.pod(m.memory_bytes);
  w.pod(m.max_message_bytes);
  w.i32_list(m.unsupported_nodes);
  return w.take();
}

std::vector<uint8_t> encode_compile(uint64_t id, const CompileRequest& m) {
  Writer w(id, MsgType::kCompile);
  w.str(m.model_hash);
  w.str(m.graph_digest);
  w.str(m.packing);
  w.i32_list(m.layers);
  return w.take();
}

std::vector<uint8_t> encode_compiled(uint64_t id, const Compiled& m) {
  Writer w(id, MsgType::kCompiled);
  w.pod(m.program);
  w.i32_list(m.inputs);
  w.i32_list(m.outputs);
  w.pod(m.peak_memory_bytes);
  return w.take();
}

Result<std::vector<uint8_t>> encode_run(uint64_t id, uint32_t program, uint32_t budget_ms,
                                        bool timed, std::span<const Tensor> tensors,
                                        const TensorEncoding& encoding) {
  Writer w(id, MsgType::kRun);
  w.pod(program);
  w.pod(budget_ms);
  w.pod(static_cast<uint8_t>(timed ? 1 : 0));
  w.pod(static_cast<uint32_t>(tensors.size()));
  for (size_t i = 0; i < tensors.size(); ++i) RETURN_IF_ERROR(w.tensor(tensors[i], encoding, i));
  return w.take();
}

Result<std::vector<uint8_t>> encode_result(uint64_t id, double server_ms,
                                           std::span<const double> layer_ms,
                                           std::span<const Tensor> tensors,
                                           const TensorEncoding& encoding) {
  Writer w(id, MsgType::kResult);
  w.pod(server_ms);
  w.pod(static_cast<uint32_t>(layer_ms.size()));
  w.bytes(layer_ms.data(), layer_ms.size() * sizeof(double));
  w.pod(static_cast<uint32_t>(tensors.size()));
  for (size_t i = 0; i < tensors.size(); ++i) RETURN_IF_ERROR(w.tensor(tensors[i], encoding, i));
  return w.take();
}

std::vector<uint8_t> encode_release(uint64_t id, uint32_t program) {
  Writer w(id, MsgType::kRelease);
  w.pod(program);
  return w.take();
}

std::vector<uint8_t> encode_empty(uint64_t id, MsgType type) {
  return Writer(id, type).take();
}

std::vector<uint8_t> encode_ping(uint64_t id, uint64_t reply_bytes, uint64_t payload_bytes) {
  Writer w(id, MsgType::kPing);
  w.pod(reply_bytes);
  w.zeros(payload_bytes);
  return w.take();
}

std::vector<uint8_t> encode_pong(uint64_t id, uint64_t payload_bytes) {
  Writer w(id, MsgType::kPong);
  w.zeros(payload_bytes);
  return w.take();
}

std::vector<uint8_t> encode_error(uint64_t id, const Status& status) {
  Writer w(id, MsgType::kError);
  w.pod(static_cast<uint8_t>(status.code()));
  const std::string& msg = status.message();
  w.str(std::string_view(msg).substr(0, 4000));
  return w.take();
}

// ---- Decoders ------------------------------------------------------------------------------

Result<Envelope> decode_envelope(std::span<const uint8_t> message) {
  if (message.size() < kEnvelopeBytes) {
    return invalid_argument("message of " + std::to_string(message.size()) +
                            " bytes is shorter than the " + std::to_string(kEnvelopeBytes) +
                            "-byte envelope");
  }
  if (std::memcmp(message.data(), kWireMagic, 4) != 0) {
    return invalid_argument("not a Tessera remote message (bad magic)");
  }
  uint16_t version;
  std::memcpy(&version, message.data() + 4, 2);
  if (version != kProtocolVersion) {
    return failed_precondition("protocol version " + std::to_string(version) +
                               " is not this Tessera's version " +
                               std::to_string(kProtocolVersion));
  }
  const uint8_t type = message[6];
  if (type < static_cast<uint8_t>(MsgType::kHello) || type > static_cast<uint8_t>(MsgType::kBye)) {
    return invalid_argument("unknown message type " + std::to_string(type));
  }
  if (message[7] != 0) return invalid_argument("reserved envelope byte is not zero");
  Envelope e;
  e.type = static_cast<MsgType>(type);
  std::memcpy(&e.request_id, message.data() + 8, 8);
  return e;
}

Result<Hello> decode_hello(std::span<const uint8_t> message, const WireCaps& caps) {
  return decode_message<Hello>(message, caps, MsgType::kHello, [](Reader& r, Hello* m) -> Status {
    ASSIGN_OR_RETURN(m->op_set, r.pod<uint32_t>("the op-set version"));
    ASSIGN_OR_RETURN(m->model_hash, r.str("the model hash"));
    ASSIGN_OR_RETURN(m->client, r.str("the client name"));
    return Status();
  });
}

Result<Welcome> decode_welcome(std::span<const uint8_t> message, const WireCaps& caps) {
  return decode_message<Welcome>(
      message, caps, MsgType::kWelcome, [](Reader& r, Welcome* m) -> Status {
        ASSIGN_OR_RETURN(m->model_hash, r.str("the model hash"));
        ASSIGN_OR_RETURN(m->graph_digest, r.str("the graph digest"));
        ASSIGN_OR_RETURN(m->device, r.str("the device name"));
        ASSIGN_OR_RETURN(m->description, r.str("the device description"));
        ASSIGN_OR_RETURN(m->memory_bytes, r.pod<uint64_t>("the device memory"));
        ASSIGN_OR_RETURN(m->max_message_bytes, r.pod<uint64_t>("the message cap"));
        ASSIGN_OR_RETURN(m->unsupported_nodes, r.list<int32_t>("the unsupported nodes"));
        return Status();
      });
}

Result<CompileRequest> decode_compile(std::span<const uint8_t> message, const WireCaps& caps) {
  return decode_message<CompileRequest>(
      message, caps, MsgType::kCompile, [](Reader& r, CompileRequest* m) -> Status {
        ASSIGN_OR_RETURN(m->model_hash, r.str("the model hash"));
        ASSIGN_OR_RETURN(m->graph_digest, r.str("the graph digest"));
        ASSIGN_OR_RETURN(m->packing, r.str("the packing policy"));
        ASSIGN_OR_RETURN(m->layers, r.list<int32_t>("the layers"));
        return Status();
      });
}

Result<Compiled> decode_compiled(std::span<const uint8_t> message, const WireCaps& caps) {
  return decode_message<Compiled>(
      message, caps, MsgType::kCompiled, [](Reader& r, Compiled* m) -> Status {
        ASSIGN_OR_RETURN(m->program, r.pod<uint32_t>("the program id"));
        ASSIGN_OR_RETURN(m->inputs, r.list<int32_t>("the input values"));
        ASSIGN_OR_RETURN(m->outputs, r.list<int32_t>("the output values"));
        ASSIGN_OR_RETURN(m->peak_memory_bytes, r.pod<uint64_t>("the peak memory"));
        return Status();
      });
}

Result<RunRequest> decode_run(std::span<const uint8_t> message, const WireCaps& caps) {
  return decode_message<RunRequest>(
      message, caps, MsgType::kRun, [](Reader& r, RunRequest* m) -> Status {
        ASSIGN_OR_RETURN(m->program, r.pod<uint32_t>("the program id"));
        ASSIGN_OR_RETURN(m->budget_ms, r.pod<uint32_t>("the budget"));
        ASSIGN_OR_RETURN(uint8_t timed, r.pod<uint8_t>("the timed flag"));
        if (timed > 1) return r.fail("timed flag " + std::to_string(timed) + " is not 0 or 1");
        m->timed = timed == 1;
        ASSIGN_OR_RETURN(m->tensors, r.tensors());
        return Status();
      });
}

Result<RunResult> decode_result(std::span<const uint8_t> message, const WireCaps& caps) {
  return decode_message<RunResult>(
      message, caps, MsgType::kResult, [](Reader& r, RunResult* m) -> Status {
        ASSIGN_OR_RETURN(m->server_ms, r.pod<double>("the server time"));
        ASSIGN_OR_RETURN(m->layer_ms, r.list<double>("the layer times"));
        ASSIGN_OR_RETURN(m->tensors, r.tensors());
        return Status();
      });
}

Result<uint32_t> decode_release(std::span<const uint8_t> message, const WireCaps& caps) {
  return decode_message<uint32_t>(message, caps, MsgType::kRelease,
                                  [](Reader& r, uint32_t* program) -> Status {
                                    ASSIGN_OR_RETURN(*program, r.pod<uint32_t>("the program id"));
                                    return Status();
                                  });
}

Status decode_empty(std::span<const uint8_t> message, MsgType type) {
  RETURN_IF_ERROR(expect(message, type));
  if (message.size() != kEnvelopeBytes) {
    return invalid_argument(std::string(msg_type_name(type)) +
                            " message: " + std::to_string(message.size() - kEnvelopeBytes) +
                            " bytes trail the message");
  }
  return Status();
}

Result<Ping> decode_ping(std::span<const uint8_t> message, const WireCaps& caps) {
  return decode_message<Ping>(message, caps, MsgType::kPing, [&](Reader& r, Ping* m) -> Status {
    ASSIGN_OR_RETURN(m->reply_bytes, r.pod<uint64_t>("the reply size"));
    if (m->reply_bytes > caps.max_ping_bytes) {
      return r.fail("reply size " + std::to_string(m->reply_bytes) + " exceeds the cap of " +
                    std::to_string(caps.max_ping_bytes));
    }
    ASSIGN_OR_RETURN(std::span<const uint8_t> payload, r.blob("the payload", caps.max_ping_bytes));
    m->payload_bytes = payload.size();
    return Status();
  });
}

Result<uint64_t> decode_pong(std::span<const uint8_t> message, const WireCaps& caps) {
  return decode_message<uint64_t>(message, caps, MsgType::kPong,
                                  [&](Reader& r, uint64_t* payload_bytes) -> Status {
                                    ASSIGN_OR_RETURN(std::span<const uint8_t> payload,
                                                     r.blob("the payload", caps.max_ping_bytes));
                                    *payload_bytes = payload.size();
                                    return Status();
                                  });
}

Result<ErrorReply> decode_error(std::span<const uint8_t> message, const WireCaps& caps) {
  return decode_message<ErrorReply>(
      message, caps, MsgType::kError, [](Reader& r, ErrorReply* m) -> Status {
        ASSIGN_OR_RETURN(uint8_t code, r.pod<uint8_t>("the status code"));
        if (code == 0 || code > static_cast<uint8_t>(StatusCode::kDeadlineExceeded)) {
          return r.fail("status code " + std::to_string(code) + " is not an error code");
        }
        m->code = static_cast<StatusCode>(code);
        ASSIGN_OR_RETURN(m->message, r.str("the message"));
        return Status();
      });
}

Status error_status(std::span<const uint8_t> message, const WireCaps& caps) {
  Result<ErrorReply> e = decode_error(message, caps);
  if (!e.ok()) return e.status();
  return Status(e->code, "server: " + e->message);
}

uint64_t encoded_tensor_bytes(const Tensor& t) {
  return 1 + 1 + 1 + 8 * static_cast<uint64_t>(t.rank()) + 8 + t.byte_size();
}

}  // namespace tessera::remote
