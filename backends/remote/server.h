// The serving side of remote devices: RemoteServer hosts one model and one of its machine's
// local devices and answers the requests of the wire protocol (wire.h), whatever transport
// carried them (transport.h: ZeroMQ for `tessera serve`, in-process for tests).
//
// Sessions. Each peer (a transport connection) has a session: it starts with a Hello, which is
// refused unless the protocol version, the op-set version and (when the client names one) the
// model hash match; then the peer compiles layer sets of the hosted graph (Compile), runs them
// on tensors it sends (Run; packed tensors are unpacked, outputs go back raw), measures the link
// (Ping) and releases programs (Release). A Run carries a budget: the server fails it with
// DeadlineExceeded once min(budget, ServerOptions::max_run_ms) has passed (checked between
// layers).
//
// Hostile peers. A message that does not decode (bad envelope, a count or length beyond the
// caps or beyond the message, a bad dtype or shape, trailing bytes), and a message out of order
// (anything but Hello before the handshake, a second Hello, an unknown program, a reply type),
// drops the peer's session: the reply is an Error and every program of the session is freed;
// the peer must say Hello again. A request that decodes but fails (a layer the device cannot
// run, inputs of the wrong shape, a run past its deadline) is answered with an Error and the
// session stays. Other peers are never affected. disconnect() frees a peer's session (the
// transport calls it when a peer goes away, or when a reply cannot be delivered), and sessions
// idle for longer than ServerOptions::session_idle_s are freed when a new session needs room.
//
// Thread rule: handle() and disconnect() may be called from several threads; the server takes
// one request at a time (its device runs one program at a time anyway).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backends/device.h"
#include "backends/remote/wire.h"
#include "graph/graph.h"

namespace tessera::remote {

// A digest of what a graph computes and how it is numbered: every node's op, name, inputs and
// outputs, every value's name, dtype and shape, and which values are constants (their shapes,
// not their bytes). Client and server compare it before any layer id crosses the wire, so a
// client that loaded another model (or the same file through other passes) is refused even when
// it does not know the model file's hash. "graph:<16 hex digits>".
std::string graph_digest(const Graph& g);

struct ServerOptions {
  // The hash of the model file the server loaded (scheduler/profile.h model_file_hash); a Hello
  // naming another hash is refused.
  std::string model_hash;
  WireCaps caps;
  int max_sessions = 64;
  int max_programs_per_session = 256;
  double session_idle_s = 600;  // an idle session may be freed after this long
  double max_run_ms = 60000;    // the longest a Run may take, whatever its budget
};

struct ServerStats {
  uint64_t requests = 0;
  uint64_t errors = 0;   // requests answered with an Error
  uint64_t dropped = 0;  // sessions dropped for malformed or out-of-order messages
  int sessions = 0;
  int programs = 0;
};

class RemoteServer {
 public:
  // Hosts `graph` (which must outlive the server) on `device`.
  static Result<std::unique_ptr<RemoteServer>> create(const Graph& graph,
                                                      std::unique_ptr<Device> device,
                                                      ServerOptions options);

  // Answers one message from `peer` (any id the transport chooses per connection). Always
  // returns a reply to send back (an Error when the request failed).
  std::vector<uint8_t> handle(uint64_t peer, std::span<const uint8_t> message);
  // Frees the peer's session and programs (no-op for an unknown peer).
  void disconnect(uint64_t peer);

  ServerStats stats() const;
  const Device& device() const { return *device_; }
  const WireCaps& caps() const { return options_.caps; }

 private:
  struct Program {
    std::unique_ptr<tessera::Program> program;
    std::vector<NodeId> layers;
  };
  struct Session {
    bool welcomed = false;
    std::chrono::steady_clock::time_point last_use;
    uint32_t next_program = 1;
    std::map<uint32_t, std::unique_ptr<Program>> programs;
  };
  RemoteServer(const Graph& graph, std::unique_ptr<Device> device, ServerOptions options);

  // The reply to a decoded request of `session`. `drop` is set when the session must go.
  Result<std::vector<uint8_t>> dispatch(Session& s, uint64_t id, MsgType type,
                                        std::span<const uint8_t> message, bool* drop);
  Result<std::vector<uint8_t>> on_hello(Session& s, uint64_t id, std::span<const uint8_t> m);
  Result<std::vector<uint8_t>> on_compile(Session& s, uint64_t id, std::span<const uint8_t> m,
                                          bool* drop);
  Result<std::vector<uint8_t>> on_run(Session& s, uint64_t id, std::span<const uint8_t> m,
                                      bool* drop);
  Session* session_for(uint64_t peer);

  const Graph& graph_;
  std::unique_ptr<Device> device_;
  ServerOptions options_;
  std::string digest_;
  std::vector<int32_t> unsupported_;

  mutable std::mutex mu_;
  std::map<uint64_t, Session> sessions_;
  ServerStats stats_;
};

}  // namespace tessera::remote
