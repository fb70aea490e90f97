// libFuzzer target: the message decoder of the remote wire protocol (backends/remote/wire.h) on
// arbitrary bytes. Whatever the bytes, decoding returns an error that says why, or a message
// within the caps; and a message without tensors or payload that decodes is re-encoded to the
// very same bytes (the layout has one spelling). ASan and UBSan catch every out-of-bounds
// access, overflow and bad cast on the way.
//
// Built only with -DTESSERA_FUZZ=ON and clang (scripts/fuzz.sh 60 wire).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#include "backends/remote/wire.h"

namespace {

using namespace tessera;
using namespace tessera::remote;

void check(const Status& s) {
  if (!s.ok() && s.message().empty()) __builtin_trap();  // every refusal says why
}

void same(const std::vector<uint8_t>& again, std::span<const uint8_t> bytes) {
  if (again.size() != bytes.size() || std::memcmp(again.data(), bytes.data(), again.size()) != 0) {
    std::fprintf(stderr, "re-encoding differs from the decoded message\n");
    __builtin_trap();
  }
}

void check_tensors(const std::vector<Tensor>& ts, const WireCaps& caps) {
  if (ts.size() > caps.max_tensors) __builtin_trap();
  for (const Tensor& t : ts) {
    if (static_cast<uint64_t>(t.numel()) > caps.max_elements) __builtin_trap();
    if (t.rank() > static_cast<int>(caps.max_rank)) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  WireCaps caps;
  caps.max_elements = uint64_t{1} << 22;  // 16 MiB of f32: the fuzzer's memory limit is 2 GiB
  caps.max_message_bytes = uint64_t{1} << 26;
  caps.max_ping_bytes = uint64_t{1} << 20;
  const std::span<const uint8_t> bytes(data, size);
  Result<Envelope> env = decode_envelope(bytes);
  check(env.status());
  if (!env.ok()) return 0;
  const uint64_t id = env->request_id;
  switch (env->type) {
    case MsgType::kHello: {
      auto m = decode_hello(bytes, caps);
      check(m.status());
      if (m.ok()) same(encode_hello(id, *m), bytes);
      break;
    }
    case MsgType::kWelcome: {
      auto m = decode_welcome(bytes, caps);
      check(m.status());
      if (m.ok()) same(encode_welcome(id, *m), bytes);
      break;
    }
    case MsgType::kCompile: {
      auto m = decode_compile(bytes, caps);
      check(m.status());
      if (m.ok()) same(encode_compile(id, *m), bytes);
      break;
    }
    case MsgType::kCompiled: {
      auto m = decode_compiled(bytes, caps);
      check(m.status());
      if (m.ok()) same(encode_compiled(id, *m), bytes);
      break;
    }
    case MsgType::kRun: {
      auto m = decode_run(bytes, caps);
      check(m.status());
      if (m.ok()) check_tensors(m->tensors, caps);
      break;
    }
    case MsgType::kResult: {
      auto m = decode_result(bytes, caps);
      check(m.status());
      if (m.ok()) check_tensors(m->tensors, caps);
      break;
    }
    case MsgType::kRelease: {
      auto m = decode_release(bytes, caps);
      check(m.status());
      if (m.ok()) same(encode_release(id, *m), bytes);
      break;
    }
    case MsgType::kPing: {
      auto m = decode_ping(bytes, caps);
      check(m.status());
      if (m.ok() && m->reply_bytes > caps.max_ping_bytes) __builtin_trap();
      break;
    }
    case MsgType::kPong:
      check(decode_pong(bytes, caps).status());
      break;
    case MsgType::kError:
      check(decode_error(bytes, caps).status());
      break;
    case MsgType::kReleased:
    case MsgType::kBye:
      check(decode_empty(bytes, env->type));
      break;
  }
  return 0;
}
