// How a remote device reaches its server: one request, one reply, over some transport.
//
//   Transport            the client's end of one connection (request/reply);
//   InProcessTransport   calls a RemoteServer in the same process (tests, benchmarks of the
//                        protocol without a network): the messages are the same bytes the
//                        ZeroMQ transport would carry;
//   ZmqTransport         (zmq_transport.h) a ZeroMQ DEALER socket, optionally CURVE-encrypted.
//
// Thread rule: a Transport carries one request at a time; RemoteDevice serialises its callers.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::remote {

class RemoteServer;

class Transport {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~Transport() = default;
  // Sends `message` and returns the reply whose request id (envelope bytes 8..15) equals the
  // message's; replies to earlier requests that arrive late are discarded. DeadlineExceeded
  // when no reply came by `deadline`; IoError when the connection failed.
  virtual Result<std::vector<uint8_t>> request(std::span<const uint8_t> message,
                                               Clock::time_point deadline) = 0;
  // "tcp://127.0.0.1:5555 (CURVE)", "in-process".
  virtual std::string describe() const = 0;
};

// A connection to a server in this process. Each transport is its own peer (session) of the
// server; destroying it disconnects the peer (frees its programs). The server must outlive it.
class InProcessTransport final : public Transport {
 public:
  explicit InProcessTransport(RemoteServer& server);
  ~InProcessTransport() override;
  Result<std::vector<uint8_t>> request(std::span<const uint8_t> message,
                                       Clock::time_point deadline) override;
  std::string describe() const override { return "in-process"; }
  uint64_t peer() const { return peer_; }

 private:
  RemoteServer& server_;
  uint64_t peer_;
};

// The request id of a message (envelope bytes 8..15), or 0 when it is shorter than an envelope.
uint64_t message_request_id(std::span<const uint8_t> message);

}  // namespace tessera::remote
