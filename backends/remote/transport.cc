// InProcessTransport (see transport.h).
#include "backends/remote/transport.h"

#include <atomic>
#include <cstring>

#include "backends/remote/server.h"
#include "backends/remote/wire.h"

namespace tessera::remote {

namespace {
std::atomic<uint64_t> next_in_process_peer{uint64_t{1} << 62};
}  // namespace

uint64_t message_request_id(std::span<const uint8_t> message) {
  if (message.size() < kEnvelopeBytes) return 0;
  uint64_t id;
  std::memcpy(&id, message.data() + 8, 8);
  return id;
}

InProcessTransport::InProcessTransport(RemoteServer& server)
    : server_(server), peer_(next_in_process_peer.fetch_add(1)) {}

InProcessTransport::~InProcessTransport() {
  server_.disconnect(peer_);
}

Result<std::vector<uint8_t>> InProcessTransport::request(std::span<const uint8_t> message,
                                                         Clock::time_point deadline) {
  if (Clock::now() >= deadline) return deadline_exceeded("in-process request: deadline passed");
  std::vector<uint8_t> reply = server_.handle(peer_, message);
  // An Error to a message without an envelope carries id 0; every other reply carries the id.
  if (message_request_id(reply) != message_request_id(message) && message_request_id(reply) != 0) {
    return internal_error("in-process request: the reply answers another request");
  }
  return reply;
}

}  // namespace tessera::remote
