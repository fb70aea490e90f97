// The ZeroMQ transport (see zmq_transport.h): keys, the serving loop with its ZAP handler, and
// the client's DEALER connection.
#include "backends/remote/zmq_transport.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace tessera::remote {

namespace {

using Clock = std::chrono::steady_clock;

bool is_z85_key(const std::string& k) {
  if (k.size() != 40) return false;
  uint8_t bin[32];
  return zmq_z85_decode(bin, k.c_str()) != nullptr;
}

std::string endpoint(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return "tcp://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

uint64_t peer_of(const zmq::message_t& routing_id) {
  uint64_t h = 1469598103934665603ull;
  const auto* b = static_cast<const uint8_t*>(routing_id.data());
  for (size_t i = 0; i < routing_id.size(); ++i) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

// Answers one ZAP request (RFC 27): 200 for a CURVE client whose public key is authorised,
// 400 otherwise.
void answer_zap(zmq::socket_t& zap, const std::vector<std::string>& authorised,
                const std::function<void(const std::string&)>& log) {
  std::vector<zmq::message_t> req;
  if (!zmq::recv_multipart(zap, std::back_inserter(req))) return;
  std::string status = "400", text = "malformed ZAP request";
  std::string request_id = req.size() > 1 ? req[1].to_string() : "";
  if (req.size() >= 7 && req[0].to_string() == "1.0") {
    const std::string mechanism = req[5].to_string();
    if (mechanism == "CURVE" && req[6].size() == 32) {
      char z85[41];
      zmq_z85_encode(z85, static_cast<const uint8_t*>(req[6].data()), 32);
      if (std::find(authorised.begin(), authorised.end(), std::string(z85)) != authorised.end()) {
        status = "200";
        text = "OK";
      } else {
        text = "client key not authorised";
        if (log) log(std::string("refused client key ") + z85 + " from " + req[3].to_string());
      }
    } else {
      text = "CURVE required";
      if (log) log("refused a " + mechanism + " client from " + req[3].to_string());
    }
  }
  std::array<zmq::const_buffer, 6> rep = {zmq::str_buffer("1.0"), zmq::buffer(request_id),
                                          zmq::buffer(status),    zmq::buffer(text),
                                          zmq::str_buffer(""),    zmq::str_buffer("")};
  (void)zmq::send_multipart(zap, rep);
}

}  // namespace

bool curve_available() {
  return zmq_has("curve") != 0;
}

Result<CurveKeyPair> generate_curve_keys() {
  if (!curve_available()) return unimplemented("this libzmq was built without CURVE");
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0) {
    return internal_error(std::string("zmq_curve_keypair: ") + zmq_strerror(zmq_errno()));
  }
  return CurveKeyPair{pub, sec};
}

Status write_key_files(const std::string& path, const CurveKeyPair& keys) {
  const std::string key_path = path + ".key", pub_path = path + ".pub";
  {
    std::ofstream f(key_path, std::ios::trunc);
    if (!f) return io_error("cannot write " + key_path);
    f << "public " << keys.public_key << "\nsecret " << keys.secret_key << "\n";
    if (!f) return io_error("cannot write " + key_path);
  }
  if (::chmod(key_path.c_str(), 0600) != 0) return io_error("cannot chmod 0600 " + key_path);
  std::ofstream f(pub_path, std::ios::trunc);
  f << "public " << keys.public_key << "\n";
  if (!f) return io_error("cannot write " + pub_path);
  return Status();
}

Result<CurveKeyPair> read_key_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return not_found("key file " + path + " cannot be read");
  CurveKeyPair k;
  std::string line;
  int n = 0;
  while (std::getline(f, line) && ++n < 16) {
    std::istringstream ls(line);
    std::string field, value;
    ls >> field >> value;
    if (field.empty() || field[0] == '#') continue;
    if (!is_z85_key(value))
      return invalid_argument(path + ": " + quote_name(field) + " is not a z85 key");
    if (field == "public")
      k.public_key = value;
    else if (field == "secret")
      k.secret_key = value;
    else
      return invalid_argument(path + ": unknown field " + quote_name(field));
  }
  if (k.public_key.empty()) return invalid_argument(path + ": no public key");
  return k;
}

Result<std::vector<std::string>> read_authorised_keys(const std::string& path) {
  std::ifstream f(path);
  if (!f) return not_found("authorised keys file " + path + " cannot be read");
  std::vector<std::string> keys;
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    ++n;
    // '#' is a z85 digit too (never a key's first): a comment is a line whose first word starts
    // with '#', or the words after a key from one that starts with '#'.
    std::istringstream ls(line);
    std::string a, key, rest;
    ls >> a;
    if (a.empty() || (a[0] == '#' && !is_z85_key(a))) continue;
    key = a;
    if (a == "public") ls >> key;
    ls >> rest;
    const std::string at = path + ":" + std::to_string(n) + ": ";
    if (!is_z85_key(key)) return invalid_argument(at + "not a z85 public key");
    if (!rest.empty() && rest[0] != '#') {
      return invalid_argument(at + "unexpected text after the key (a comment starts with '#')");
    }
    keys.push_back(key);
  }
  return keys;
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

// ---- Server ----------------------------------------------------------------------------------

Status serve_zmq(RemoteServer& server, const ZmqServerOptions& o, const std::atomic<bool>* stop) {
  const bool curve = o.server_keys.has_value();
  if (curve && !curve_available()) {
    return unimplemented("this libzmq was built without CURVE; serve on loopback without keys");
  }
  if (!curve && !is_loopback_host(o.bind_host)) {
    return failed_precondition("binding to " + o.bind_host +
                               " needs CURVE keys (--key and --authorised-keys; make them with "
                               "`tessera keygen`): plaintext stays on loopback");
  }
  if (curve && (o.server_keys->secret_key.empty() || o.authorised_clients.empty())) {
    return invalid_argument(
        "CURVE needs the server's secret key and at least one authorised "
        "client key");
  }
  if (o.port < 0 || o.port > 65535) return invalid_argument("port must be 0..65535");
  try {
    zmq::context_t ctx(1);
    zmq::socket_t zap(ctx, zmq::socket_type::rep);
    if (curve) zap.bind("inproc://zeromq.zap.01");
    zmq::socket_t sock(ctx, zmq::socket_type::router);
    sock.set(zmq::sockopt::linger, 0);
    sock.set(zmq::sockopt::router_mandatory, 1);
    sock.set(zmq::sockopt::maxmsgsize,
             static_cast<int64_t>(server.caps().max_message_bytes + kEnvelopeBytes));
    if (curve) {
      sock.set(zmq::sockopt::curve_server, 1);
      sock.set(zmq::sockopt::curve_secretkey, o.server_keys->secret_key);
      sock.set(zmq::sockopt::zap_domain, "tessera");
    }
    std::string ep = endpoint(o.bind_host, o.port);
    if (o.port == 0) ep = ep.substr(0, ep.rfind(':')) + ":*";
    sock.bind(ep);
    if (o.on_bound) o.on_bound(sock.get(zmq::sockopt::last_endpoint));
    while (stop == nullptr || !stop->load()) {
      std::vector<zmq::pollitem_t> items = {{sock.handle(), 0, ZMQ_POLLIN, 0}};
      if (curve) items.push_back({zap.handle(), 0, ZMQ_POLLIN, 0});
      zmq::poll(items, std::chrono::milliseconds(100));
      if (curve && (items[1].revents & ZMQ_POLLIN)) answer_zap(zap, o.authorised_clients, o.log);
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(sock, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
        continue;
      }
      if (frames.size() < 2) continue;
      const uint64_t peer = peer_of(frames[0]);
      std::vector<uint8_t> reply;
      if (frames.size() != 2) {
        reply = encode_error(0, invalid_argument("a request is one frame, got " +
                                                 std::to_string(frames.size() - 1)));
        server.disconnect(peer);
      } else {
        const auto* b = static_cast<const uint8_t*>(frames[1].data());
        reply = server.handle(peer, std::span<const uint8_t>(b, frames[1].size()));
      }
      std::array<zmq::const_buffer, 2> out = {zmq::buffer(frames[0].data(), frames[0].size()),
                                              zmq::buffer(reply)};
      try {
        if (!zmq::send_multipart(sock, out, zmq::send_flags::dontwait)) {
          server.disconnect(peer);
          if (o.log) o.log("reply not delivered (peer busy); session freed");
        }
      } catch (const zmq::error_t& e) {
        // EHOSTUNREACH: the peer disconnected mid-request. Free what it held.
        server.disconnect(peer);
        if (o.log) o.log(std::string("peer gone before its reply (") + e.what() + "); freed");
      }
    }
  } catch (const zmq::error_t& e) {
    return io_error(std::string("zeromq: ") + e.what());
  }
  return Status();
}

// ---- Client ----------------------------------------------------------------------------------

// The client's I/O thread owns the DEALER socket. API threads queue messages in `outbox` and
// wake it through an inproc PAIR socket (`wake_tx`, under `wake_mu`); it sends what is queued
// (as far as the socket takes it) and hands every reply to `replies`.
struct ZmqTransport::Impl {
  zmq::context_t ctx{1};
  zmq::socket_t sock{ctx, zmq::socket_type::dealer};
  zmq::socket_t wake_rx{ctx, zmq::socket_type::pair};
  zmq::socket_t wake_tx{ctx, zmq::socket_type::pair};
  std::mutex wake_mu;  // wake_tx
  std::mutex mu;       // outbox, stop
  std::deque<std::vector<uint8_t>> outbox;
  bool stop = false;
  ReplyBox replies;
  std::thread io;

  void wake() {
    std::lock_guard<std::mutex> lock(wake_mu);
    try {
      const uint8_t b = 1;
      (void)wake_tx.send(zmq::buffer(&b, 1), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      // A full wake pipe already holds a wake-up.
    }
  }

  void run(const std::string& what) {
    try {
      for (;;) {
        bool want_out = false;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (stop) return;
          want_out = !outbox.empty();
        }
        std::vector<zmq::pollitem_t> items = {
            {sock.handle(), 0, static_cast<short>(ZMQ_POLLIN | (want_out ? ZMQ_POLLOUT : 0)), 0},
            {wake_rx.handle(), 0, ZMQ_POLLIN, 0}};
        zmq::poll(items, std::chrono::milliseconds(want_out ? 10 : 1000));
        if (items[1].revents & ZMQ_POLLIN) {
          zmq::message_t m;
          while (wake_rx.recv(m, zmq::recv_flags::dontwait)) {
          }
        }
        // Send what the socket takes now.
        for (;;) {
          std::vector<uint8_t> msg;
          {
            std::lock_guard<std::mutex> lock(mu);
            if (outbox.empty()) break;
            msg = std::move(outbox.front());
            outbox.pop_front();
          }
          if (!sock.send(zmq::buffer(msg.data(), msg.size()), zmq::send_flags::dontwait)) {
            std::lock_guard<std::mutex> lock(mu);
            outbox.push_front(std::move(msg));  // no peer or high-water mark: try again later
            break;
          }
        }
        // Deliver every reply that has arrived.
        for (;;) {
          std::vector<zmq::message_t> frames;
          if (!zmq::recv_multipart(sock, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
            break;
          }
          if (frames.size() != 1) continue;  // not a reply of this protocol
          const auto* b = static_cast<const uint8_t*>(frames[0].data());
          replies.deliver(std::vector<uint8_t>(b, b + frames[0].size()));
        }
      }
    } catch (const zmq::error_t& e) {
      replies.fail(io_error(what + ": " + e.what()));
    }
  }
};

ZmqTransport::ZmqTransport(std::unique_ptr<Impl> impl, std::string description)
    : impl_(std::move(impl)), description_(std::move(description)) {
  Impl* im = impl_.get();
  im->io = std::thread([im, what = description_] { im->run(what); });
}

ZmqTransport::~ZmqTransport() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->wake();
  impl_->io.join();
}

Result<std::unique_ptr<ZmqTransport>> ZmqTransport::connect(const ZmqClientOptions& o) {
  const bool curve = o.server_public_key.has_value();
  if (curve != o.client_keys.has_value()) {
    return invalid_argument("CURVE needs both the server's public key and a client key pair");
  }
  if (curve && !curve_available()) {
    return unimplemented(
        "this libzmq was built without CURVE; remote devices reach loopback "
        "servers only");
  }
  if (!curve && !is_loopback_host(o.host)) {
    return failed_precondition(
        "remote:" + o.host +
        ": a server off this machine needs CURVE keys (set "
        "TESSERA_REMOTE_SERVER_KEY to the server's .pub file and TESSERA_REMOTE_CLIENT_KEY to "
        "this client's .key file; make keys with `tessera keygen`)");
  }
  if (curve && (!is_z85_key(*o.server_public_key) || o.client_keys->secret_key.empty())) {
    return invalid_argument("CURVE: bad server public key or missing client secret key");
  }
  if (o.port < 1 || o.port > 65535) return invalid_argument("port must be 1..65535");
  auto impl = std::make_unique<Impl>();
  const std::string ep = endpoint(o.host, o.port);
  try {
    impl->sock.set(zmq::sockopt::linger, 0);
    impl->sock.set(zmq::sockopt::maxmsgsize,
                   static_cast<int64_t>(o.max_reply_bytes + kEnvelopeBytes));
    if (curve) {
      impl->sock.set(zmq::sockopt::curve_serverkey, *o.server_public_key);
      impl->sock.set(zmq::sockopt::curve_publickey, o.client_keys->public_key);
      impl->sock.set(zmq::sockopt::curve_secretkey, o.client_keys->secret_key);
    }
    impl->sock.connect(ep);
    // The wake pipe: a name of this transport's own (the context is its own too).
    char name[64];
    std::snprintf(name, sizeof name, "inproc://tessera-wake-%p", static_cast<void*>(impl.get()));
    impl->wake_rx.set(zmq::sockopt::linger, 0);
    impl->wake_tx.set(zmq::sockopt::linger, 0);
    impl->wake_rx.bind(name);
    impl->wake_tx.connect(name);
  } catch (const zmq::error_t& e) {
    return io_error("zeromq connect " + ep + ": " + e.what());
  }
  return std::unique_ptr<ZmqTransport>(
      new ZmqTransport(std::move(impl), ep + (curve ? " (CURVE)" : " (plaintext, loopback)")));
}

Status ZmqTransport::send(std::span<const uint8_t> message, Clock::time_point deadline) {
  if (Clock::now() >= deadline) {
    return deadline_exceeded(description_ + ": could not send before the deadline");
  }
  impl_->replies.expect(message_request_id(message));
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->outbox.emplace_back(message.begin(), message.end());
  }
  impl_->wake();
  return Status();
}

Result<std::vector<uint8_t>> ZmqTransport::receive(uint64_t id, Clock::time_point deadline) {
  return impl_->replies.receive(id, deadline, description_);
}

void ZmqTransport::abandon(uint64_t id) {
  impl_->replies.abandon(id);
  // Not sent yet (no server, or it is slow to take messages): not sent at all.
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::erase_if(impl_->outbox,
                [&](const std::vector<uint8_t>& m) { return message_request_id(m) == id; });
}

}  // namespace tessera::remote
