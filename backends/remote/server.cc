// RemoteServer (see server.h): sessions, the handshake, and the Compile / Run / Ping / Release
// requests of the wire protocol.
#include "backends/remote/server.h"

#include <algorithm>
#include <cstdio>

namespace tessera::remote {

namespace {

using Clock = std::chrono::steady_clock;

uint64_t fnv(const void* p, size_t n, uint64_t h) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}
uint64_t fnv_str(const std::string& s, uint64_t h) {
  const uint64_t n = s.size();
  h = fnv(&n, sizeof n, h);
  return fnv(s.data(), s.size(), h);
}
template <typename T>
uint64_t fnv_pod(T v, uint64_t h) {
  return fnv(&v, sizeof v, h);
}

uint32_t fnv1a32(std::string_view s, uint32_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

uint32_t op_set_version() {
  uint32_t h = 2166136261u;
  for (int k = 0; k < kNumOpKinds; ++k) {
    h = fnv1a32(op_name(static_cast<OpKind>(k)), h);
    h = fnv1a32(";", h);
  }
  return h;
}

std::string graph_digest(const Graph& g) {
  uint64_t h = 1469598103934665603ull;
  h = fnv_pod(g.num_values(), h);
  for (const Value& v : g.values()) {
    h = fnv_str(v.name, h);
    h = fnv_pod(static_cast<uint8_t>(v.is_constant), h);
    h = fnv_pod(static_cast<uint8_t>(v.has_info), h);
    if (v.has_info) {
      h = fnv_pod(static_cast<uint8_t>(v.info.dtype), h);
      for (int64_t d : v.info.shape.dims()) h = fnv_pod(d, h);
      h = fnv_pod(int64_t{-2}, h);
    }
  }
  h = fnv_pod(g.num_nodes(), h);
  for (const Node& n : g.nodes()) {
    h = fnv_str(n.name, h);
    h = fnv_pod(static_cast<int>(n.kind), h);
    for (ValueId v : n.inputs) h = fnv_pod(v, h);
    h = fnv_pod(int32_t{-7}, h);
    for (ValueId v : n.outputs) h = fnv_pod(v, h);
    h = fnv_pod(int32_t{-9}, h);
  }
  for (ValueId v : g.inputs()) h = fnv_pod(v, h);
  for (ValueId v : g.outputs()) h = fnv_pod(v, h);
  char buf[32];
  std::snprintf(buf, sizeof buf, "graph:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

RemoteServer::RemoteServer(const Graph& graph, std::unique_ptr<Device> device,
                           ServerOptions options)
    : graph_(graph), device_(std::move(device)), options_(std::move(options)) {}

Result<std::unique_ptr<RemoteServer>> RemoteServer::create(const Graph& graph,
                                                           std::unique_ptr<Device> device,
                                                           ServerOptions options) {
  if (device == nullptr) return invalid_argument("RemoteServer: no device");
  if (options.max_sessions < 1 || options.max_programs_per_session < 1) {
    return invalid_argument("RemoteServer: max_sessions and max_programs_per_session must be >= 1");
  }
  std::unique_ptr<RemoteServer> s(new RemoteServer(graph, std::move(device), std::move(options)));
  s->digest_ = graph_digest(graph);
  for (const Node& n : graph.nodes()) {
    const NodeId id = static_cast<NodeId>(&n - graph.nodes().data());
    if (!s->device_->capabilities(graph, n).supported) s->unsupported_.push_back(id);
  }
  return s;
}

ServerStats RemoteServer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ServerStats st = stats_;
  st.sessions = static_cast<int>(sessions_.size());
  st.programs = 0;
  for (const auto& [peer, s] : sessions_) st.programs += static_cast<int>(s.programs.size());
  return st;
}

void RemoteServer::disconnect(uint64_t peer) {
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.erase(peer);
}

RemoteServer::Session* RemoteServer::session_for(uint64_t peer) {
  auto it = sessions_.find(peer);
  if (it != sessions_.end()) return &it->second;
  if (static_cast<int>(sessions_.size()) >= options_.max_sessions) {
    // Free the longest-idle session when it has been idle past the limit.
    auto oldest = std::min_element(
        sessions_.begin(), sessions_.end(),
        [](const auto& a, const auto& b) { return a.second.last_use < b.second.last_use; });
    const double idle_s =
        std::chrono::duration<double>(Clock::now() - oldest->second.last_use).count();
    if (idle_s < options_.session_idle_s) return nullptr;
    sessions_.erase(oldest);
  }
  return &sessions_[peer];
}

std::vector<uint8_t> RemoteServer::handle(uint64_t peer, std::span<const uint8_t> message) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.requests;
  Result<Envelope> env = decode_envelope(message);
  if (!env.ok()) {
    // Not even an envelope: nothing of this peer can be trusted any more.
    ++stats_.errors;
    ++stats_.dropped;
    sessions_.erase(peer);
    return encode_error(0, env.status().with_context("message dropped, say Hello again"));
  }
  Session* s = session_for(peer);
  if (s == nullptr) {
    ++stats_.errors;
    return encode_error(
        env->request_id,
        resource_exhausted("the server has " + std::to_string(options_.max_sessions) +
                           " sessions, none idle; try again later"));
  }
  s->last_use = Clock::now();
  bool drop = false;
  Result<std::vector<uint8_t>> reply = dispatch(*s, env->request_id, env->type, message, &drop);
  if (reply.ok()) return std::move(reply).value();
  ++stats_.errors;
  Status st = reply.status();
  if (drop) {
    ++stats_.dropped;
    sessions_.erase(peer);
    st = st.with_context("session dropped, say Hello again");
  }
  return encode_error(env->request_id, st);
}

Result<std::vector<uint8_t>> RemoteServer::dispatch(Session& s, uint64_t id, MsgType type,
                                                    std::span<const uint8_t> message, bool* drop) {
  // Every failure to decode, and every message out of order, drops the session; a request
  // that decodes and then fails keeps it (the `drop = false` paths below).
  *drop = true;
  if (type == MsgType::kHello) {
    if (s.welcomed) return failed_precondition("a second Hello in one session");
    return on_hello(s, id, message);
  }
  if (!s.welcomed) {
    return failed_precondition(std::string("a ") + msg_type_name(type) +
                               " message before the Hello handshake");
  }
  switch (type) {
    case MsgType::kCompile:
      return on_compile(s, id, message, drop);
    case MsgType::kRun:
      return on_run(s, id, message, drop);
    case MsgType::kRelease: {
      ASSIGN_OR_RETURN(uint32_t program, decode_release(message, options_.caps));
      if (s.programs.erase(program) == 0) {
        return failed_precondition("Release of unknown program " + std::to_string(program));
      }
      return encode_empty(id, MsgType::kReleased);
    }
    case MsgType::kPing: {
      ASSIGN_OR_RETURN(Ping p, decode_ping(message, options_.caps));
      return encode_pong(id, p.reply_bytes);
    }
    case MsgType::kBye: {
      RETURN_IF_ERROR(decode_empty(message, MsgType::kBye));
      s.programs.clear();
      s.welcomed = false;
      return encode_empty(id, MsgType::kBye);
    }
    default:
      return invalid_argument(std::string("a ") + msg_type_name(type) +
                              " message is a reply, not a request");
  }
}

Result<std::vector<uint8_t>> RemoteServer::on_hello(Session& s, uint64_t id,
                                                    std::span<const uint8_t> m) {
  ASSIGN_OR_RETURN(Hello h, decode_hello(m, options_.caps));
  if (h.op_set != op_set_version()) {
    return failed_precondition("op-set version " + std::to_string(h.op_set) +
                               " differs from the server's " + std::to_string(op_set_version()) +
                               " (client and server run different Tessera builds)");
  }
  if (!h.model_hash.empty() && h.model_hash != options_.model_hash) {
    return failed_precondition("the client asks for model " + h.model_hash +
                               ", this server hosts " + options_.model_hash);
  }
  s.welcomed = true;
  Welcome w;
  w.model_hash = options_.model_hash;
  w.graph_digest = digest_;
  w.device = device_->name();
  w.description = device_->description();
  w.memory_bytes = device_->memory_capacity();
  w.max_message_bytes = options_.caps.max_message_bytes;
  w.unsupported_nodes = unsupported_;
  return encode_welcome(id, w);
}

Result<std::vector<uint8_t>> RemoteServer::on_compile(Session& s, uint64_t id,
                                                      std::span<const uint8_t> m, bool* drop) {
  ASSIGN_OR_RETURN(CompileRequest c, decode_compile(m, options_.caps));
  if (c.graph_digest != digest_) {
    return failed_precondition("the client's graph (" + c.graph_digest +
                               ") is not the hosted one (" + digest_ + ")");
  }
  if (!c.model_hash.empty() && c.model_hash != options_.model_hash) {
    return failed_precondition("Compile for model " + c.model_hash + ", this server hosts " +
                               options_.model_hash);
  }
  std::vector<bool> seen(static_cast<size_t>(graph_.num_nodes()), false);
  if (c.layers.empty()) return invalid_argument("Compile of no layers");
  for (int32_t l : c.layers) {
    if (l < 0 || l >= graph_.num_nodes()) {
      return out_of_range("Compile: layer " + std::to_string(l) + " is not a node of the " +
                          std::to_string(graph_.num_nodes()) + "-node graph");
    }
    if (seen[static_cast<size_t>(l)]) {
      return invalid_argument("Compile: layer " + std::to_string(l) + " named twice");
    }
    seen[static_cast<size_t>(l)] = true;
  }
  // From here on the request is well formed: failures keep the session.
  *drop = false;
  if (static_cast<int>(s.programs.size()) >= options_.max_programs_per_session) {
    return resource_exhausted("the session holds " +
                              std::to_string(options_.max_programs_per_session) +
                              " programs; release some first");
  }
  if (!c.packing.empty() && c.packing != "none") {
    Result<PackPolicy> policy = parse_pack_policy(c.packing);
    if (!policy.ok()) return policy.status();
  }
  CompileOptions co;
  co.model_hash = options_.model_hash;
  co.packing = c.packing;
  auto prog = std::make_unique<Program>();
  prog->layers.assign(c.layers.begin(), c.layers.end());
  ASSIGN_OR_RETURN(prog->program, device_->compile(graph_, prog->layers, co));
  Compiled out;
  out.program = s.next_program++;
  out.inputs = prog->program->input_values();
  out.outputs = prog->program->output_values();
  out.peak_memory_bytes = prog->program->peak_memory_bytes();
  s.programs[out.program] = std::move(prog);
  return encode_compiled(id, out);
}

Result<std::vector<uint8_t>> RemoteServer::on_run(Session& s, uint64_t id,
                                                  std::span<const uint8_t> m, bool* drop) {
  const Clock::time_point t0 = Clock::now();
  ASSIGN_OR_RETURN(RunRequest r, decode_run(m, options_.caps));
  auto it = s.programs.find(r.program);
  if (it == s.programs.end()) {
    return failed_precondition("Run of unknown program " + std::to_string(r.program));
  }
  Program& p = *it->second;
  *drop = false;
  const std::vector<ValueId>& ins = p.program->input_values();
  if (r.tensors.size() != ins.size()) {
    return invalid_argument("Run: program " + std::to_string(r.program) + " takes " +
                            std::to_string(ins.size()) + " inputs, got " +
                            std::to_string(r.tensors.size()));
  }
  for (size_t i = 0; i < ins.size(); ++i) {
    const Value& v = graph_.value(ins[i]);
    if (v.has_info &&
        (r.tensors[i].dtype() != v.info.dtype || r.tensors[i].shape() != v.info.shape)) {
      return invalid_argument("Run: input " + std::to_string(i) + " (" + quote_name(v.name) +
                              ") is " + dtype_name(r.tensors[i].dtype()) +
                              r.tensors[i].shape().to_string() + ", the graph says " +
                              dtype_name(v.info.dtype) + v.info.shape.to_string());
    }
  }
  // Decoded and checked: the run's own failures (deadline, a kernel error) keep the session.
  RunOptions ro;
  double limit_ms = options_.max_run_ms;
  if (r.budget_ms > 0) limit_ms = std::min(limit_ms, static_cast<double>(r.budget_ms));
  ro.deadline = t0 + std::chrono::microseconds(static_cast<int64_t>(limit_ms * 1000));
  std::vector<double> layer_ms;
  if (r.timed) ro.layer_ms = &layer_ms;
  std::vector<Tensor> outputs(p.program->output_values().size());
  Status st = p.program->run(r.tensors, outputs, ro);
  if (!st.ok()) return st;
  ASSIGN_OR_RETURN(std::vector<uint8_t> reply,
                   encode_result(id, ms_since(t0), layer_ms, outputs, TensorEncoding{}));
  return reply;
}

}  // namespace tessera::remote
