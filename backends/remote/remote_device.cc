// RemoteDevice and RemoteProgram (see remote_device.h), and the registry entry of
// remote:HOST:PORT.
#include "backends/remote/remote_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include "backends/remote/server.h"
#include "backends/remote/zmq_transport.h"

namespace tessera::remote {

namespace {

using Clock = RunOptions::Clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// A buffer "on" the remote side: its bytes crossed the link; the host keeps a copy so that a
// download gives the same bytes back after they cross the link again.
class RemoteBuffer final : public Buffer {
 public:
  explicit RemoteBuffer(Tensor copy) : copy_(std::move(copy)) {}
  size_t byte_size() const override { return copy_.byte_size(); }
  const Tensor& copy() const { return copy_; }

 private:
  Tensor copy_;
};

class RemoteProgram final : public Program {
 public:
  RemoteProgram(RemoteDevice& device, const Graph& g, uint32_t id, std::vector<ValueId> inputs,
                std::vector<ValueId> outputs, size_t num_layers, TensorEncoding encoding,
                uint64_t peak)
      : device_(device),
        g_(g),
        id_(id),
        inputs_(std::move(inputs)),
        outputs_(std::move(outputs)),
        num_layers_(num_layers),
        encoding_(encoding),
        peak_(peak) {}

  ~RemoteProgram() override {
    // Free the server's program; a failure (server gone) leaves nothing to free here.
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    (void)device_.call_encoded(encode_release(device_.next_id(), id_), deadline);
  }

  const std::vector<ValueId>& input_values() const override { return inputs_; }
  const std::vector<ValueId>& output_values() const override { return outputs_; }
  uint64_t peak_memory_bytes() const override { return peak_; }
  std::string describe() const override {
    return "remote program " + std::to_string(id_) + " on " + device_.name() + " (" +
           std::to_string(num_layers_) + " layers, " +
           (encoding_.pack ? pack_policy_name(encoding_.policy) : std::string("raw")) + ")";
  }

  int max_in_flight() const override { return device_.frames_in_flight(); }

 protected:
  Status execute(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                 const RunOptions& options) override {
    RETURN_IF_ERROR(start_frame(inputs, options));
    return finish_frame(outputs, options);
  }

  // Packs the inputs and sends the Run request.
  Status start_frame(std::span<const Tensor> inputs, const RunOptions& options) override {
    if (inputs.size() != inputs_.size()) {
      return invalid_argument("remote program: " + std::to_string(inputs_.size()) +
                              " inputs expected, got " + std::to_string(inputs.size()));
    }
    uint32_t budget_ms = 0;
    if (options.deadline != Clock::time_point::max()) {
      const double left = ms_between(Clock::now(), options.deadline);
      budget_ms = static_cast<uint32_t>(std::clamp(left, 1.0, 4e9));
    }
    InFlight f;
    f.id = device_.next_id();
    f.timed = options.layer_ms != nullptr;
    const Clock::time_point t0 = Clock::now();
    ASSIGN_OR_RETURN(std::vector<uint8_t> msg,
                     encode_run(f.id, id_, budget_ms, f.timed, inputs, encoding_));
    f.pack_ms = ms_between(t0, Clock::now());
    {
      // In the queue before the send: finish() on another thread may wait for it at once.
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_.push_back(f);
    }
    Status sent = device_.send_encoded(msg, options.deadline);
    if (!sent.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_.back().failed = sent;
    }
    return Status();
  }

  // Waits for the oldest frame's reply (checking the cancellation and deadline while it waits),
  // unpacks it and writes the outputs.
  Status finish_frame(std::span<Tensor> outputs, const RunOptions& options) override {
    InFlight f;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (in_flight_.empty()) return failed_precondition("remote program: no frame in flight");
      f = in_flight_.front();
      in_flight_.pop_front();
    }
    RETURN_IF_ERROR(f.failed);
    Result<std::vector<uint8_t>> reply = deadline_exceeded("");
    for (;;) {
      // Slices of at most 50 ms, so that a cancellation ends the wait.
      const Clock::time_point slice = Clock::now() + std::chrono::milliseconds(50);
      const Clock::time_point end = std::min(slice, device_.deadline_or_default(options.deadline));
      reply = device_.receive_reply(f.id, end);
      if (reply.ok() || reply.status().code() != StatusCode::kDeadlineExceeded) break;
      if (options.stop_requested() || end < slice) break;
    }
    if (!reply.ok()) {
      device_.abandon(f.id);
      if (options.stop_requested()) return options.check("remote program");
      return reply.status();
    }
    return unpack(*reply, outputs, options, f);
  }

 private:
  struct InFlight {
    uint64_t id = 0;
    bool timed = false;
    double pack_ms = 0;
    Status failed;  // the send failed: the frame fails at finish()
  };

  Status unpack(const std::vector<uint8_t>& reply, std::span<Tensor> outputs,
                const RunOptions& options, const InFlight& f) {
    if (outputs.size() != outputs_.size()) {
      return invalid_argument("remote program: " + std::to_string(outputs_.size()) +
                              " outputs expected, got " + std::to_string(outputs.size()));
    }
    const Clock::time_point t2 = Clock::now();
    WireCaps caps;
    ASSIGN_OR_RETURN(RunResult r, decode_result(reply, caps));
    if (r.tensors.size() != outputs_.size()) {
      return invalid_argument("remote program: the server sent " +
                              std::to_string(r.tensors.size()) + " outputs, expected " +
                              std::to_string(outputs_.size()));
    }
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const Value& v = g_.value(outputs_[i]);
      Tensor& t = r.tensors[i];
      if (v.has_info && (t.dtype() != v.info.dtype || t.shape() != v.info.shape)) {
        return invalid_argument("remote program: output " + quote_name(v.name) + " came back " +
                                dtype_name(t.dtype()) + t.shape().to_string() + ", expected " +
                                dtype_name(v.info.dtype) + v.info.shape.to_string());
      }
      Tensor& out = outputs[i];
      if (out.defined() && out.numel() > 0 && out.dtype() == t.dtype() &&
          out.shape() == t.shape()) {
        std::memcpy(out.raw(), t.raw(), t.byte_size());
      } else {
        out = std::move(t);
      }
    }
    if (f.timed && options.layer_ms != nullptr) {
      if (r.layer_ms.size() != num_layers_) {
        return unimplemented("remote program: the server timed " +
                             std::to_string(r.layer_ms.size()) + " of " +
                             std::to_string(num_layers_) + " layers");
      }
      *options.layer_ms = std::move(r.layer_ms);
    }
    device_.add_traffic(f.pack_ms, ms_between(t2, Clock::now()), r.server_ms);
    return Status();
  }

 private:
  RemoteDevice& device_;
  const Graph& g_;
  uint32_t id_;
  std::vector<ValueId> inputs_, outputs_;
  size_t num_layers_;
  TensorEncoding encoding_;
  uint64_t peak_;
  std::mutex mu_;  // in_flight_
  std::deque<InFlight> in_flight_;
};

}  // namespace

RemoteDevice::RemoteDevice(std::string name, std::unique_ptr<Transport> transport)
    : name_(std::move(name)), transport_(std::move(transport)) {
  if (const char* t = std::getenv("TESSERA_REMOTE_TIMEOUT_MS"); t != nullptr) {
    const double v = std::atof(t);
    if (v > 0) default_timeout_ms_ = v;
  }
}

RemoteDevice::~RemoteDevice() {
  const auto deadline = Clock::now() + std::chrono::milliseconds(500);
  (void)call_encoded(encode_empty(next_id(), MsgType::kBye), deadline);
}

Result<std::unique_ptr<RemoteDevice>> RemoteDevice::connect(std::string name,
                                                            std::unique_ptr<Transport> transport) {
  std::unique_ptr<RemoteDevice> d(new RemoteDevice(std::move(name), std::move(transport)));
  if (const char* v = std::getenv("TESSERA_REMOTE_IN_FLIGHT"); v != nullptr) {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (end == v || *end != '\0' || n < 1 || n > kMaxFramesInFlight) {
      return invalid_argument("TESSERA_REMOTE_IN_FLIGHT must be a whole number from 1 to " +
                              std::to_string(kMaxFramesInFlight) + ", got '" + v + "'");
    }
    d->frames_in_flight_ = static_cast<int>(n);
  }
  Hello h;
  h.op_set = op_set_version();
  h.client = "tessera";
  const auto deadline =
      Clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(std::min(d->default_timeout_ms_, 10000.0)));
  Result<std::vector<uint8_t>> reply = d->call_encoded(encode_hello(d->next_id(), h), deadline);
  if (!reply.ok()) return reply.status().with_context(d->name_ + ": handshake");
  Result<Welcome> w = decode_welcome(*reply, d->caps_);
  if (!w.ok()) return w.status().with_context(d->name_ + ": handshake");
  d->welcome_ = std::move(*w);
  std::sort(d->welcome_.unsupported_nodes.begin(), d->welcome_.unsupported_nodes.end());
  return d;
}

uint64_t RemoteDevice::next_id() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_id_++;
}

RunOptions::Clock::time_point RemoteDevice::deadline_or_default(Clock::time_point deadline) const {
  if (deadline != Clock::time_point::max()) return deadline;
  return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(default_timeout_ms_ * 1000));
}

Status RemoteDevice::send_encoded(std::span<const uint8_t> message, Clock::time_point deadline) {
  const uint64_t id = message_request_id(message);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++traffic_.requests;
    traffic_.bytes_sent += message.size();
    sent_at_[id] = Clock::now();
  }
  Status st = transport_->send(message, deadline_or_default(deadline));
  if (!st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    sent_at_.erase(id);
    return st.with_context(name_);
  }
  return st;
}

Result<std::vector<uint8_t>> RemoteDevice::receive_reply(uint64_t id, Clock::time_point deadline) {
  Result<std::vector<uint8_t>> reply = transport_->receive(id, deadline_or_default(deadline));
  if (!reply.ok()) return reply.status().with_context(name_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    traffic_.bytes_received += reply->size();
    if (auto it = sent_at_.find(id); it != sent_at_.end()) {
      traffic_.round_trip_ms += ms_between(it->second, Clock::now());
      sent_at_.erase(it);
    }
  }
  Result<Envelope> env = decode_envelope(*reply);
  if (!env.ok()) return env.status().with_context(name_ + ": reply");
  if (env->type == MsgType::kError) return error_status(*reply, caps_).with_context(name_);
  return reply;
}

void RemoteDevice::abandon(uint64_t id) {
  transport_->abandon(id);
  std::lock_guard<std::mutex> lock(mu_);
  sent_at_.erase(id);
}

Result<std::vector<uint8_t>> RemoteDevice::call_encoded(std::vector<uint8_t> message,
                                                        Clock::time_point deadline) {
  deadline = deadline_or_default(deadline);
  const uint64_t id = message_request_id(message);
  RETURN_IF_ERROR(send_encoded(message, deadline));
  Result<std::vector<uint8_t>> reply = receive_reply(id, deadline);
  if (!reply.ok() && reply.status().code() == StatusCode::kDeadlineExceeded) abandon(id);
  return reply;
}

void RemoteDevice::add_traffic(double pack_ms, double unpack_ms, double server_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  traffic_.pack_ms += pack_ms;
  traffic_.unpack_ms += unpack_ms;
  traffic_.server_ms += server_ms;
}

RemoteTraffic RemoteDevice::traffic() const {
  std::lock_guard<std::mutex> lock(mu_);
  return traffic_;
}

std::string RemoteDevice::description() const {
  return "remote " + welcome_.device + " over " + transport_->describe() + ": " +
         welcome_.description + "; model " + welcome_.model_hash;
}

DeviceInfo RemoteDevice::info() const {
  DeviceInfo i;
  i.kind = DeviceKind::kRemote;
  i.memory_bytes = welcome_.memory_bytes;
  i.host_visible_memory = false;
  i.concurrency = 1;
  return i;
}

const std::string& RemoteDevice::digest_of(const Graph& g) const {
  std::lock_guard<std::mutex> lock(digest_mu_);
  if (digest_graph_ != &g || digest_nodes_ != g.num_nodes()) {
    digest_ = graph_digest(g);
    digest_graph_ = &g;
    digest_nodes_ = g.num_nodes();
  }
  return digest_;
}

Capability RemoteDevice::capabilities(const Graph& g, const Node& node) const {
  if (digest_of(g) != welcome_.graph_digest) {
    return Capability::no("the server hosts another model (graph " + welcome_.graph_digest +
                          ", this one is " + digest_of(g) + ")");
  }
  const NodeId id = static_cast<NodeId>(&node - g.nodes().data());
  if (std::binary_search(welcome_.unsupported_nodes.begin(), welcome_.unsupported_nodes.end(),
                         id)) {
    return Capability::no("the server's " + welcome_.device + " cannot run it");
  }
  return Capability::yes();
}

Result<std::unique_ptr<Program>> RemoteDevice::compile_program(const Graph& g,
                                                               std::span<const NodeId> layers,
                                                               const CompileOptions& options) {
  RETURN_IF_ERROR(check_capabilities(*this, g, layers));
  TensorEncoding enc;
  if (!options.packing.empty() && options.packing != "none") {
    ASSIGN_OR_RETURN(enc.policy, parse_pack_policy(options.packing));
    enc.pack = true;
  }
  CompileRequest c;
  c.model_hash = options.model_hash;
  c.graph_digest = digest_of(g);
  c.packing = options.packing;
  c.layers.assign(layers.begin(), layers.end());
  ASSIGN_OR_RETURN(std::vector<uint8_t> reply,
                   call_encoded(encode_compile(next_id(), c), Clock::time_point::max()));
  ASSIGN_OR_RETURN(Compiled out, decode_compiled(reply, caps_));
  std::vector<ValueId> inputs, outputs;
  slice_boundary(g, layers, &inputs, &outputs);
  auto program = std::make_unique<RemoteProgram>(*this, g, out.program, inputs, outputs,
                                                 layers.size(), enc, out.peak_memory_bytes);
  if (out.inputs != inputs || out.outputs != outputs) {
    return internal_error(name_ +
                          ": the server's program reads or writes other values than "
                          "this graph's slice");
  }
  return std::unique_ptr<Program>(std::move(program));
}

Result<std::unique_ptr<Buffer>> RemoteDevice::upload(const Tensor& host) {
  ASSIGN_OR_RETURN(Tensor copy, host.clone());
  ASSIGN_OR_RETURN(
      std::vector<uint8_t> reply,
      call_encoded(encode_ping(next_id(), 0, host.byte_size()), Clock::time_point::max()));
  ASSIGN_OR_RETURN(uint64_t n, decode_pong(reply, caps_));
  if (n != 0) return internal_error(name_ + ": Pong of the wrong size");
  return std::unique_ptr<Buffer>(std::make_unique<RemoteBuffer>(std::move(copy)));
}

Status RemoteDevice::download(const Buffer& device, Tensor* host) {
  const auto* b = dynamic_cast<const RemoteBuffer*>(&device);
  if (b == nullptr) return invalid_argument(name_ + ": download of another device's buffer");
  ASSIGN_OR_RETURN(
      std::vector<uint8_t> reply,
      call_encoded(encode_ping(next_id(), b->byte_size(), 0), Clock::time_point::max()));
  ASSIGN_OR_RETURN(uint64_t n, decode_pong(reply, caps_));
  if (n != b->byte_size()) return internal_error(name_ + ": Pong of the wrong size");
  if (host->defined() && host->byte_size() == b->byte_size() &&
      host->dtype() == b->copy().dtype()) {
    if (n > 0) std::memcpy(host->raw(), b->copy().raw(), n);
    return Status();
  }
  ASSIGN_OR_RETURN(*host, b->copy().clone());
  return Status();
}

namespace {

void list_remote(std::vector<DeviceListing>* /*out*/) {
  // Remote devices are named by their address; there is nothing to discover.
}

Result<std::unique_ptr<Device>> open_remote(const DeviceName& name) {
  const size_t colon = name.spec.rfind(':');
  ZmqClientOptions o;
  o.host = name.spec.substr(0, colon);
  if (o.host.size() > 2 && o.host.front() == '[' && o.host.back() == ']') {
    o.host = o.host.substr(1, o.host.size() - 2);
  }
  const std::string port = name.spec.substr(colon + 1);
  if (o.host.empty() || port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return invalid_argument("device '" + name.to_string() +
                            "': expected remote:HOST:PORT with a numeric port");
  }
  o.port = std::stoi(port);
  const char* server_key = std::getenv("TESSERA_REMOTE_SERVER_KEY");
  const char* client_key = std::getenv("TESSERA_REMOTE_CLIENT_KEY");
  if ((server_key != nullptr) != (client_key != nullptr)) {
    return invalid_argument(
        "set both TESSERA_REMOTE_SERVER_KEY and TESSERA_REMOTE_CLIENT_KEY "
        "(or neither, for a loopback server without CURVE)");
  }
  if (server_key != nullptr) {
    ASSIGN_OR_RETURN(CurveKeyPair s, read_key_file(server_key));
    ASSIGN_OR_RETURN(CurveKeyPair c, read_key_file(client_key));
    if (c.secret_key.empty()) {
      return invalid_argument(std::string(client_key) + ": no secret key (give the .key file)");
    }
    o.server_public_key = s.public_key;
    o.client_keys = c;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ZmqTransport> t, ZmqTransport::connect(o));
  ASSIGN_OR_RETURN(std::unique_ptr<RemoteDevice> d,
                   RemoteDevice::connect(name.to_string(), std::move(t)));
  return std::unique_ptr<Device>(std::move(d));
}

}  // namespace

}  // namespace tessera::remote

namespace tessera {
const Backend kRemoteBackend = {"remote", remote::list_remote, remote::open_remote};
}  // namespace tessera
