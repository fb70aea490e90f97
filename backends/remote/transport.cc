// Transport::request, ReplyBox and InProcessTransport (see transport.h).
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

Result<std::vector<uint8_t>> Transport::request(std::span<const uint8_t> message,
                                                Clock::time_point deadline) {
  const uint64_t id = message_request_id(message);
  RETURN_IF_ERROR(send(message, deadline));
  Result<std::vector<uint8_t>> reply = receive(id, deadline);
  if (!reply.ok()) abandon(id);
  return reply;
}

void ReplyBox::expect(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  awaited_.emplace(id, std::nullopt);
}

void ReplyBox::deliver(std::vector<uint8_t> reply) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = message_request_id(reply);
  auto it = awaited_.end();
  if (id == 0) {
    for (auto a = awaited_.begin(); a != awaited_.end(); ++a) {
      if (!a->second.has_value()) {
        it = a;
        break;
      }
    }
  } else {
    it = awaited_.find(id);
  }
  if (it == awaited_.end() || it->second.has_value()) return;  // abandoned, or not ours
  it->second = std::move(reply);
  cv_.notify_all();
}

void ReplyBox::fail(Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.ok()) failed_ = std::move(status);
  cv_.notify_all();
}

Result<std::vector<uint8_t>> ReplyBox::receive(uint64_t id, Clock::time_point deadline,
                                               const std::string& what) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = awaited_.find(id);
  if (it == awaited_.end()) {
    return failed_precondition(what + ": request " + std::to_string(id) + " is not awaited");
  }
  cv_.wait_until(lock, deadline, [&] { return it->second.has_value() || !failed_.ok(); });
  if (it->second.has_value()) {
    std::vector<uint8_t> reply = std::move(*it->second);
    awaited_.erase(it);
    return reply;
  }
  if (!failed_.ok()) return failed_;
  return deadline_exceeded(what +
                           ": no reply before the deadline (is the server up, and with CURVE, is "
                           "the server key right and this client authorised?)");
}

void ReplyBox::abandon(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  awaited_.erase(id);
}

InProcessTransport::InProcessTransport(RemoteServer& server)
    : server_(server), peer_(next_in_process_peer.fetch_add(1)) {
  thread_ = std::thread([this] { serve(); });
}

InProcessTransport::~InProcessTransport() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  server_.disconnect(peer_);
}

void InProcessTransport::serve() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !inbox_.empty(); });
    if (stop_) return;
    std::vector<uint8_t> message = std::move(inbox_.front());
    inbox_.pop_front();
    lock.unlock();
    std::vector<uint8_t> reply = server_.handle(peer_, message);
    replies_.deliver(std::move(reply));
    lock.lock();
  }
}

Status InProcessTransport::send(std::span<const uint8_t> message, Clock::time_point deadline) {
  if (Clock::now() >= deadline) return deadline_exceeded("in-process request: deadline passed");
  replies_.expect(message_request_id(message));
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.emplace_back(message.begin(), message.end());
  }
  cv_.notify_all();
  return Status();
}

Result<std::vector<uint8_t>> InProcessTransport::receive(uint64_t id, Clock::time_point deadline) {
  return replies_.receive(id, deadline, "in-process request");
}

void InProcessTransport::abandon(uint64_t id) {
  replies_.abandon(id);
}

}  // namespace tessera::remote
