// The ZeroMQ transport of remote devices (Debian's libzmq + cppzmq), with CURVE security.
//
// Server: one ROUTER socket; each connected client is a peer of the RemoteServer, named by its
// routing id. The socket's ZMQ_MAXMSGSIZE is the server's WireCaps::max_message_bytes, so
// libzmq drops a client that announces a bigger message before reading it. A reply that cannot
// be delivered (the client went away mid-request: ZMQ_ROUTER_MANDATORY reports it) frees the
// peer's session.
// Client: one DEALER socket per RemoteDevice; requests carry ids, replies to requests the
// client gave up on (deadline) are discarded.
//
// Security (docs/remote.md):
//   - CURVE (CurveZMQ: Curve25519 key exchange, encryption and authentication of every frame).
//     The server has a key pair; each client pins the server's public key and has its own key
//     pair; the server admits only the client public keys listed in its authorised-keys file,
//     through a ZAP handler (RFC 27) that runs on the serving thread.
//   - Without keys, a server binds to loopback only and a client connects to loopback only:
//     plaintext never leaves the machine. Binding or connecting elsewhere without CURVE is
//     refused with a message, and so is CURVE when libzmq was built without it.
//
// Key files (written by `tessera keygen`): NAME.key holds "public <z85>\nsecret <z85>\n" (mode
// 0600), NAME.pub holds "public <z85>\n". An authorised-keys file lists one public key per line
// (z85, or a .pub file's "public <z85>" line); a line whose first word starts with '#' and is
// not a key is a comment, and so are the words after a key from one starting with '#' ('#' is
// also a z85 digit, though never a key's first, so a key may hold one).
//
// Thread rule: serve_zmq() runs on the calling thread until *stop is set. A ZmqTransport's
// socket is owned by its own I/O thread (ZeroMQ sockets are not thread-safe): send() queues the
// message and wakes it, replies are delivered to the receivers by request id, so several
// threads may send and receive at once (transport.h).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/remote/server.h"
#include "backends/remote/transport.h"

namespace tessera::remote {

struct CurveKeyPair {
  std::string public_key;  // 40 z85 characters
  std::string secret_key;  // 40 z85 characters (empty for a public key alone)
};

// Whether this libzmq offers CURVE (zmq_has("curve")).
bool curve_available();
Result<CurveKeyPair> generate_curve_keys();
// Writes PATH.key (0600) and PATH.pub.
Status write_key_files(const std::string& path, const CurveKeyPair& keys);
// Reads a .key file (both keys) or a .pub file (the public key; secret empty).
Result<CurveKeyPair> read_key_file(const std::string& path);
// The public keys of an authorised-keys file.
Result<std::vector<std::string>> read_authorised_keys(const std::string& path);

// Whether `host` is a loopback address or name (127.0.0.0/8, ::1, localhost).
bool is_loopback_host(const std::string& host);

struct ZmqServerOptions {
  std::string bind_host = "127.0.0.1";
  int port = 5555;  // 0: an ephemeral port (see `bound`)
  // CURVE: the server's key pair and the client keys it admits. Both or neither.
  std::optional<CurveKeyPair> server_keys;
  std::vector<std::string> authorised_clients;
  // Called with one line per notable event (peer dropped, client refused by ZAP).
  std::function<void(const std::string&)> log;
  // Called (on the serving thread) with the bound endpoint, "tcp://127.0.0.1:PORT", before the
  // first request is read.
  std::function<void(const std::string&)> on_bound;
};

// Checks the options (security rules above) and serves `server` until *stop is set (checked
// every 100 ms).
Status serve_zmq(RemoteServer& server, const ZmqServerOptions& options,
                 const std::atomic<bool>* stop);

struct ZmqClientOptions {
  std::string host = "127.0.0.1";
  int port = 5555;
  // CURVE: the server's public key (pinned) and this client's key pair. Both or neither.
  std::optional<std::string> server_public_key;
  std::optional<CurveKeyPair> client_keys;
  uint64_t max_reply_bytes = uint64_t{1} << 30;
};

class ZmqTransport final : public Transport {
 public:
  static Result<std::unique_ptr<ZmqTransport>> connect(const ZmqClientOptions& options);
  ~ZmqTransport() override;
  Status send(std::span<const uint8_t> message, Clock::time_point deadline) override;
  Result<std::vector<uint8_t>> receive(uint64_t id, Clock::time_point deadline) override;
  void abandon(uint64_t id) override;
  std::string describe() const override { return description_; }

 private:
  struct Impl;
  explicit ZmqTransport(std::unique_ptr<Impl> impl, std::string description);
  std::unique_ptr<Impl> impl_;
  std::string description_;
};

}  // namespace tessera::remote
