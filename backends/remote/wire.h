// The wire protocol of remote devices: the messages a client (RemoteDevice) and a server
// (`tessera serve`, RemoteServer) exchange, how they are laid out, and the decoder that treats
// every byte as hostile. docs/remote.md has the protocol's story and a session's exchange.
//
// Every message is one transport frame (one ZeroMQ message): a 16-byte envelope, then a body
// whose layout the type fixes. Little-endian, no padding:
//
//   offset size  field
//        0    4  magic "TRM1"
//        4    2  protocol version (kProtocolVersion; a server answers another version with an
//                Error naming both)
//        6    1  type (MsgType)
//        7    1  reserved, zero
//        8    8  request id (the client numbers its requests; the reply carries the same id,
//                so a late reply to a request the client gave up on is recognised and dropped)
//       16       body
//
// Body fields are built from: u8, u32, u64, i32, f64; str = u32 length + bytes; a list = u32
// count + items; bytes = u64 length + bytes; a tensor = u8 encoding (0 raw, 1 packed) then
//   raw:    u8 dtype, u8 rank, rank x i64 dims, bytes (exactly numel x dtype size)
//   packed: bytes of one packed tensor (backends/remote/packing.h; f32 only)
//
//   Hello    c->s  u32 op-set version, str model hash ("" when the client does not know it yet),
//                  str client name
//   Welcome  s->c  str model hash, str graph digest, str device name, str device description,
//                  u64 device memory, u64 largest message the server reads, list of i32 node
//                  ids the server's device cannot run (of the hosted graph)
//   Compile  c->s  str model hash ("" when unknown), str graph digest, str packing policy,
//                  list of i32 layers
//   Compiled s->c  u32 program id, list of i32 input values, list of i32 output values,
//                  u64 peak memory of the program
//   Run      c->s  u32 program id, u32 budget ms (0: the server's own limit), u8 timed,
//                  list of tensors (the program's inputs in order)
//   Result   s->c  f64 server ms (decode, run, encode), list of f64 per-layer ms (empty when not
//                  timed), list of tensors (the program's outputs in order)
//   Release  c->s  u32 program id           -> Released (empty body)
//   Ping     c->s  u64 reply bytes, bytes payload  -> Pong: bytes payload (reply bytes of zeros)
//   Error    s->c  u8 StatusCode, str message (the request failed; the session is dropped when
//                  the message was malformed or out of order, see server.h)
//   Bye      c->s  (empty)                  -> Bye
//
// The decoder checks, before it allocates: the envelope; every count and length against the
// bytes left in the message (a truncated message is an error, never a read past its end) and
// against WireCaps; every dtype, rank and dim (non-negative, their product within caps and
// without overflow); that raw bytes equal numel x dtype size; packed tensors through
// read_packed_header (UnpackCaps) and LZ4_decompress_safe; and that no bytes trail the body.
//
// Thread rule: every function is safe to call from several threads at once.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/remote/packing.h"
#include "core/status.h"
#include "core/tensor.h"

namespace tessera::remote {

inline constexpr char kWireMagic[4] = {'T', 'R', 'M', '1'};
inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kEnvelopeBytes = 16;

// The version of the op set a server runs: a hash of every op's name (ops/op.h) in OpKind
// order, so that a server that knows other ops (or numbers them differently) is refused at the
// handshake. Computed, not hand-bumped. (Defined with the server, server.cc: the decoder's
// library needs no ops.)
uint32_t op_set_version();

enum class MsgType : uint8_t {
  kHello = 1,
  kWelcome = 2,
  kCompile = 3,
  kCompiled = 4,
  kRun = 5,
  kResult = 6,
  kRelease = 7,
  kReleased = 8,
  kPing = 9,
  kPong = 10,
  kError = 11,
  kBye = 12,
};
const char* msg_type_name(MsgType type);

// Limits the decoder enforces before it allocates (a server reads requests with its caps, a
// client replies with its own).
struct WireCaps {
  uint64_t max_message_bytes = uint64_t{1} << 30;  // also the transport's cap (ZMQ_MAXMSGSIZE)
  uint32_t max_tensors = 256;                      // per Run / Result
  uint32_t max_rank = 8;
  uint64_t max_elements = uint64_t{1} << 28;  // per tensor (1 GiB of f32)
  uint32_t max_list = 1 << 20;                // layers, value ids, node ids, layer times
  uint32_t max_string = 4096;                 // hashes, names, messages
  uint64_t max_ping_bytes = uint64_t{1} << 28;
};

struct Envelope {
  MsgType type = MsgType::kError;
  uint64_t request_id = 0;
};

struct Hello {
  uint32_t op_set = 0;
  std::string model_hash;
  std::string client;
};
struct Welcome {
  std::string model_hash;
  std::string graph_digest;
  std::string device;
  std::string description;
  uint64_t memory_bytes = 0;
  uint64_t max_message_bytes = 0;
  std::vector<int32_t> unsupported_nodes;
};
struct CompileRequest {
  std::string model_hash;
  std::string graph_digest;
  std::string packing;
  std::vector<int32_t> layers;
};
struct Compiled {
  uint32_t program = 0;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  uint64_t peak_memory_bytes = 0;
};
struct RunRequest {
  uint32_t program = 0;
  uint32_t budget_ms = 0;
  bool timed = false;
  std::vector<Tensor> tensors;
};
struct RunResult {
  double server_ms = 0;
  std::vector<double> layer_ms;
  std::vector<Tensor> tensors;
};
struct Ping {
  uint64_t reply_bytes = 0;
  uint64_t payload_bytes = 0;  // decoded: the payload's length (its bytes are not kept)
};
struct ErrorReply {
  StatusCode code = StatusCode::kInternal;
  std::string message;
};

// How tensors of a Run or Result are written: raw, or packed with `policy` (f32 tensors only;
// other dtypes go raw).
struct TensorEncoding {
  bool pack = false;
  PackPolicy policy;
};

// ---- Encoding (into a fresh message, envelope included) ----------------------------------------
std::vector<uint8_t> encode_hello(uint64_t id, const Hello& m);
std::vector<uint8_t> encode_welcome(uint64_t id, const Welcome& m);
std::vector<uint8_t> encode_compile(uint64_t id, const CompileRequest& m);
std::vector<uint8_t> encode_compiled(uint64_t id, const Compiled& m);
// Fails when a tensor cannot be packed (NaN/Inf with packing on) or is not defined.
Result<std::vector<uint8_t>> encode_run(uint64_t id, uint32_t program, uint32_t budget_ms,
                                        bool timed, std::span<const Tensor> tensors,
                                        const TensorEncoding& encoding);
Result<std::vector<uint8_t>> encode_result(uint64_t id, double server_ms,
                                           std::span<const double> layer_ms,
                                           std::span<const Tensor> tensors,
                                           const TensorEncoding& encoding);
std::vector<uint8_t> encode_release(uint64_t id, uint32_t program);
std::vector<uint8_t> encode_empty(uint64_t id, MsgType type);  // Released, Bye
std::vector<uint8_t> encode_ping(uint64_t id, uint64_t reply_bytes, uint64_t payload_bytes);
std::vector<uint8_t> encode_pong(uint64_t id, uint64_t payload_bytes);
std::vector<uint8_t> encode_error(uint64_t id, const Status& status);

// ---- Decoding (every input hostile) ------------------------------------------------------------
// The envelope of `message`: magic, version (an Error naming both versions when it differs),
// a known type, reserved byte zero.
Result<Envelope> decode_envelope(std::span<const uint8_t> message);
// The body of a message whose envelope was decoded (each checks the type too).
Result<Hello> decode_hello(std::span<const uint8_t> message, const WireCaps& caps);
Result<Welcome> decode_welcome(std::span<const uint8_t> message, const WireCaps& caps);
Result<CompileRequest> decode_compile(std::span<const uint8_t> message, const WireCaps& caps);
Result<Compiled> decode_compiled(std::span<const uint8_t> message, const WireCaps& caps);
Result<RunRequest> decode_run(std::span<const uint8_t> message, const WireCaps& caps);
Result<RunResult> decode_result(std::span<const uint8_t> message, const WireCaps& caps);
Result<uint32_t> decode_release(std::span<const uint8_t> message, const WireCaps& caps);
Status decode_empty(std::span<const uint8_t> message, MsgType type);
Result<Ping> decode_ping(std::span<const uint8_t> message, const WireCaps& caps);
Result<uint64_t> decode_pong(std::span<const uint8_t> message, const WireCaps& caps);
Result<ErrorReply> decode_error(std::span<const uint8_t> message, const WireCaps& caps);
// The Status an Error message carries ("server: <message>"), or the decoding error.
Status error_status(std::span<const uint8_t> message, const WireCaps& caps);

// Bytes a raw tensor or a packed one adds to a message (what the link carries for it).
uint64_t encoded_tensor_bytes(const Tensor& t);

}  // namespace tessera::remote
