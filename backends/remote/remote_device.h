// The remote device: a `tessera serve` process reached over a Transport, opened through the
// registry as remote:HOST:PORT like any other device.
//
//   info()           kind kRemote, the server device's memory, concurrency 1 (the server runs
//                    one request at a time);
//   capabilities()   what the server advertised at the handshake: the nodes of the hosted graph
//                    its device cannot run (and nothing at all of another graph: the digests of
//                    the client's graph and the server's must match);
//   compile(layers)  a Compile request; the program's boundary must equal the local one;
//   Program::run     packs the f32 inputs with CompileOptions::packing (packing.h; "" or "none"
//                    sends them raw), sends them, and receives the outputs (raw, exact); with
//                    RunOptions::layer_ms the server times each layer, so the profiler profiles a
//                    remote device unchanged; the run's deadline travels as the request's budget;
//   upload/download  move the tensor's bytes over the link (Ping): the profiler's transfer
//                    benchmark on a remote device is the link microbenchmark, ms = L + bytes / B.
//
// Opening remote:HOST:PORT connects with ZeroMQ. CURVE keys come from the environment:
// TESSERA_REMOTE_SERVER_KEY (the server's .pub file, pinned) and TESSERA_REMOTE_CLIENT_KEY (this
// client's .key file); without them only a loopback host is accepted (zmq_transport.h).
// TESSERA_REMOTE_TIMEOUT_MS bounds every request without a deadline of its own (default 120000).
// TESSERA_REMOTE_IN_FLIGHT: frames a program may have in flight to the server (1..16, default 3).
//
// Thread rule: as device.h says. The programs of one device share its one connection; their
// requests may be in flight at once (the server answers them in the order sent), so a program
// runs frames overlapped: max_in_flight() frames_in_flight(), start() packs and sends, finish()
// receives and unpacks (device.h).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "backends/device.h"
#include "backends/registry.h"
#include "backends/remote/transport.h"
#include "backends/remote/wire.h"

namespace tessera::remote {

// What a remote device has carried (cumulative; read with RemoteDevice::traffic()).
struct RemoteTraffic {
  uint64_t requests = 0;
  uint64_t bytes_sent = 0;  // whole messages, envelopes and side information included
  uint64_t bytes_received = 0;
  double pack_ms = 0;        // encoding the Run messages (ISQuant + shuffle + LZ4 when packed)
  double unpack_ms = 0;      // decoding the Result messages
  double server_ms = 0;      // what the server reported for its decode + run + encode
  double round_trip_ms = 0;  // request sent to reply received
};

class RemoteDevice final : public Device {
 public:
  // Says Hello over `transport` and keeps the connection. `name` is what name() returns.
  static Result<std::unique_ptr<RemoteDevice>> connect(std::string name,
                                                       std::unique_ptr<Transport> transport);
  ~RemoteDevice() override;

  const std::string& name() const override { return name_; }
  std::string description() const override;
  DeviceInfo info() const override;
  Capability capabilities(const Graph& g, const Node& node) const override;
  uint64_t memory_capacity() const override { return welcome_.memory_bytes; }
  Result<std::unique_ptr<Buffer>> upload(const Tensor& host) override;
  Status download(const Buffer& device, Tensor* host) override;

  // Frames a program of this device may have in flight to the server (Program::max_in_flight):
  // one being packed and sent, one crossing the link, one on the server, by default (seed 002's
  // three pipeline steps); TESSERA_REMOTE_IN_FLIGHT sets it (1: no overlap).
  static constexpr int kMaxFramesInFlight = 16;
  static constexpr int kDefaultFramesInFlight = 3;  // what the pricer assumes (pricer.h)
  int frames_in_flight() const { return frames_in_flight_; }

  const Welcome& welcome() const { return welcome_; }
  RemoteTraffic traffic() const;

  // One request/reply (used by the programs); `deadline` max() means the default timeout.
  // Replies that are Errors become their Status.
  Result<std::vector<uint8_t>> call_encoded(std::vector<uint8_t> message,
                                            RunOptions::Clock::time_point deadline);
  // The two halves, for requests in flight while others are sent (a program's start() and
  // finish()): send_encoded() hands the message to the transport; receive_reply() waits for the
  // reply to request `id` (DeadlineExceeded leaves it awaited: receive again or abandon()).
  Status send_encoded(std::span<const uint8_t> message, RunOptions::Clock::time_point deadline);
  Result<std::vector<uint8_t>> receive_reply(uint64_t id, RunOptions::Clock::time_point deadline);
  void abandon(uint64_t id);
  // `deadline`, or the default timeout from now when it is max().
  RunOptions::Clock::time_point deadline_or_default(RunOptions::Clock::time_point deadline) const;
  uint64_t next_id();
  const std::string& digest_of(const Graph& g) const;
  void add_traffic(double pack_ms, double unpack_ms, double server_ms);

 protected:
  Result<std::unique_ptr<Program>> compile_program(const Graph& g, std::span<const NodeId> layers,
                                                   const CompileOptions& options) override;

 private:
  RemoteDevice(std::string name, std::unique_ptr<Transport> transport);

  std::string name_;
  std::unique_ptr<Transport> transport_;
  Welcome welcome_;
  WireCaps caps_;
  double default_timeout_ms_ = 120000;
  int frames_in_flight_ = kDefaultFramesInFlight;

  mutable std::mutex mu_;  // the request ids, the traffic (the transport is thread-safe)
  uint64_t next_id_ = 1;
  RemoteTraffic traffic_;
  std::map<uint64_t, RunOptions::Clock::time_point> sent_at_;  // requests awaiting replies
  mutable std::mutex digest_mu_;
  mutable const Graph* digest_graph_ = nullptr;
  mutable int digest_nodes_ = -1;
  mutable std::string digest_;
};

}  // namespace tessera::remote

namespace tessera {
// The registry's entry for remote:HOST:PORT (backends/registry.cc lists it).
extern const Backend kRemoteBackend;
}  // namespace tessera
