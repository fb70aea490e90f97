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
//
// Thread rule: as device.h says. Requests of all programs of one device are serialised over
// its one connection.
#pragma once

#include <memory>
#include <mutex>
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

  const Welcome& welcome() const { return welcome_; }
  RemoteTraffic traffic() const;

  // One request/reply (used by the programs); `deadline` max() means the default timeout.
  // Replies that are Errors become their Status.
  Result<std::vector<uint8_t>> call_encoded(std::vector<uint8_t> message,
                                            RunOptions::Clock::time_point deadline);
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

  mutable std::mutex mu_;  // the connection, the request ids, the traffic
  uint64_t next_id_ = 1;
  RemoteTraffic traffic_;
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
