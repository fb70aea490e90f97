// How a remote device reaches its server: one request, one reply, over some transport.
//
//   Transport            the client's end of one connection (request/reply);
//   InProcessTransport   calls a RemoteServer in the same process (tests, benchmarks of the
//                        protocol without a network): the messages are the same bytes the
//                        ZeroMQ transport would carry;
//   ZmqTransport         (zmq_transport.h) a ZeroMQ DEALER socket, optionally CURVE-encrypted.
//
// Thread rule: send(), receive() and abandon() may be called from several threads at once (one
// receiver per request id): a remote program packs and sends frame i + 1 while another thread
// waits for frame i's reply (pipelined hops, docs/remote.md).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"

namespace tessera::remote {

class RemoteServer;

class Transport {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~Transport() = default;
  // Hands `message` to the connection without waiting for its reply (collect it with
  // receive(its request id)): several requests may be in flight, answered in the order sent.
  // IoError when the connection has failed.
  virtual Status send(std::span<const uint8_t> message, Clock::time_point deadline) = 0;
  // The reply to the sent request `id` (envelope bytes 8..15 of the reply), waiting until it
  // arrives or `deadline` (DeadlineExceeded; the request stays awaited: receive again, or
  // abandon it). Replies to requests nobody awaits (abandoned) are discarded; an Error reply
  // without an envelope (id 0) answers the oldest awaited request.
  virtual Result<std::vector<uint8_t>> receive(uint64_t id, Clock::time_point deadline) = 0;
  // Stops waiting for request `id`: its reply, if one comes, is discarded.
  virtual void abandon(uint64_t id) = 0;
  // "tcp://127.0.0.1:5555 (CURVE)", "in-process".
  virtual std::string describe() const = 0;

  // send(), then receive() (abandoning the request when no reply came).
  Result<std::vector<uint8_t>> request(std::span<const uint8_t> message,
                                       Clock::time_point deadline);
};

// The replies a transport's receivers wait for, by request id (shared by the transports).
// Thread rule: every member may be called from any thread.
class ReplyBox {
 public:
  using Clock = std::chrono::steady_clock;
  // A request sent: its reply will be kept for receive().
  void expect(uint64_t id);
  // A reply arrived (from the connection's thread): kept when its id is awaited (id 0: for the
  // oldest awaited request), else dropped.
  void deliver(std::vector<uint8_t> reply);
  // The connection failed: every receive() from now on fails with `status`.
  void fail(Status status);
  Result<std::vector<uint8_t>> receive(uint64_t id, Clock::time_point deadline,
                                       const std::string& what);
  void abandon(uint64_t id);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, std::optional<std::vector<uint8_t>>> awaited_;
  Status failed_;
};

// A connection to a server in this process. Each transport is its own peer (session) of the
// server; destroying it disconnects the peer (frees its programs). The server must outlive it.
// Its own thread hands the messages to the server one at a time, in the order sent, as a
// server's serving thread does: requests in flight overlap the caller's work.
class InProcessTransport final : public Transport {
 public:
  explicit InProcessTransport(RemoteServer& server);
  ~InProcessTransport() override;
  Status send(std::span<const uint8_t> message, Clock::time_point deadline) override;
  Result<std::vector<uint8_t>> receive(uint64_t id, Clock::time_point deadline) override;
  void abandon(uint64_t id) override;
  std::string describe() const override { return "in-process"; }
  uint64_t peer() const { return peer_; }

 private:
  void serve();

  RemoteServer& server_;
  uint64_t peer_;
  ReplyBox replies_;
  std::mutex mu_;  // the inbox and stop_
  std::condition_variable cv_;
  std::deque<std::vector<uint8_t>> inbox_;
  bool stop_ = false;
  std::thread thread_;
};

// The request id of a message (envelope bytes 8..15), or 0 when it is shorter than an envelope.
uint64_t message_request_id(std::span<const uint8_t> message);

}  // namespace tessera::remote
