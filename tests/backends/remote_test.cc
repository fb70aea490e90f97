// Remote devices: the wire protocol's decoder against hostile bytes, the server's sessions, the
// remote device end to end (in-process and over ZeroMQ on loopback, with CURVE), and a
// two-stage streaming plan whose second stage is remote.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <thread>
#include <zmq.hpp>

#include "backends/registry.h"
#include "backends/remote/remote_device.h"
#include "backends/remote/server.h"
#include "backends/remote/transport.h"
#include "backends/remote/wire.h"
#include "backends/remote/zmq_transport.h"
#include "scheduler/executor/executor.h"
#include "tests/scheduler/profile_test_util.h"

namespace tessera {
// For failure messages (found by argument-dependent lookup).
inline std::ostream& operator<<(std::ostream& os, const Status& s) {
  return os << s.to_string();
}
}  // namespace tessera

namespace tessera::remote {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point in_ms(int ms) {
  return Clock::now() + std::chrono::milliseconds(ms);
}

Tensor random_tensor(const Shape& s, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2, 2);
  Tensor t = Tensor::create(DType::kF32, s).value();
  for (float& x : t.span<float>()) x = u(rng);
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.byte_size()) == 0;
}

// ---- Wire -----------------------------------------------------------------------------------

TEST(RemoteWireTest, MessagesRoundTrip) {
  std::mt19937 rng(1);
  const WireCaps caps;
  Hello h{op_set_version(), "fnv1a64:00", "me"};
  auto hd = decode_hello(encode_hello(7, h), caps);
  ASSERT_TRUE(hd.ok()) << hd.status().to_string();
  EXPECT_EQ(hd->op_set, h.op_set);
  EXPECT_EQ(hd->model_hash, h.model_hash);
  EXPECT_EQ(hd->client, "me");

  Welcome w{"m", "graph:1", "cpu", "desc", 123, 456, {1, 5, 9}};
  auto wd = decode_welcome(encode_welcome(8, w), caps);
  ASSERT_TRUE(wd.ok());
  EXPECT_EQ(wd->unsupported_nodes, w.unsupported_nodes);
  EXPECT_EQ(wd->memory_bytes, 123u);

  // Raw tensors of odd shapes and several dtypes come back bit for bit.
  std::vector<Tensor> ts = {random_tensor(Shape{3, 13, 7}, rng), random_tensor(Shape{}, rng),
                            Tensor::from_int64s(Shape{3}, std::vector<int64_t>{1, -2, 3}),
                            Tensor::create(DType::kF32, Shape{0, 4}).value()};
  auto run = encode_run(9, 4, 100, true, ts, TensorEncoding{});
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(decode_envelope(*run)->request_id, 9u);
  auto rd = decode_run(*run, caps);
  ASSERT_TRUE(rd.ok()) << rd.status().to_string();
  EXPECT_EQ(rd->program, 4u);
  EXPECT_EQ(rd->budget_ms, 100u);
  EXPECT_TRUE(rd->timed);
  ASSERT_EQ(rd->tensors.size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) EXPECT_TRUE(same_bytes(rd->tensors[i], ts[i])) << i;

  // Packed: within the codec's bound, scale / 2 (plus f32 rounding).
  TensorEncoding enc{true, PackPolicy{6}};
  Tensor x = random_tensor(Shape{2, 129}, rng);
  auto packed =
      encode_result(3, 1.5, std::vector<double>{0.25, 0.5}, std::span<const Tensor>(&x, 1), enc);
  ASSERT_TRUE(packed.ok());
  auto pd = decode_result(*packed, caps);
  ASSERT_TRUE(pd.ok()) << pd.status().to_string();
  EXPECT_EQ(pd->layer_ms, (std::vector<double>{0.25, 0.5}));
  ASSERT_EQ(pd->tensors.size(), 1u);
  const float scale = 4.0f / 63;
  for (int64_t i = 0; i < x.numel(); ++i) {
    ASSERT_NEAR(pd->tensors[0].data<float>()[i], x.data<float>()[i], scale / 2 + 1e-5f);
  }
  // NaN cannot be packed: a clear error, not undefined behaviour.
  x.data<float>()[5] = NAN;
  auto bad = encode_run(1, 1, 0, false, std::span<const Tensor>(&x, 1), enc);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("NaN"), std::string::npos) << bad.status().to_string();

  auto err = error_status(encode_error(5, out_of_range("too big")), caps);
  EXPECT_EQ(err.code(), StatusCode::kOutOfRange);
  EXPECT_NE(err.message().find("too big"), std::string::npos);
}

// Every prefix of a valid message, and random corruptions of it, decode to an error or to a
// message within the caps: never a crash, a read past the end, or an allocation beyond caps.
TEST(RemoteWireTest, TruncatedAndCorruptMessagesAreRefused) {
  std::mt19937 rng(2);
  const WireCaps caps;
  std::vector<Tensor> ts = {random_tensor(Shape{5, 11}, rng), random_tensor(Shape{17}, rng)};
  std::vector<uint8_t> raw = encode_run(1, 2, 0, false, ts, TensorEncoding{}).value();
  std::vector<uint8_t> packed =
      encode_run(1, 2, 0, false, ts, TensorEncoding{true, PackPolicy{4}}).value();
  for (const auto* m : {&raw, &packed}) {
    for (size_t n = 0; n < m->size(); ++n) {
      std::span<const uint8_t> prefix(m->data(), n);
      EXPECT_FALSE(decode_run(prefix, caps).ok()) << "prefix of " << n << " bytes decoded";
    }
    std::vector<uint8_t> longer = *m;
    longer.push_back(0);
    auto trailing = decode_run(longer, caps);
    ASSERT_FALSE(trailing.ok());
    EXPECT_NE(trailing.status().message().find("trail"), std::string::npos);
    for (int trial = 0; trial < 2000; ++trial) {
      std::vector<uint8_t> c = *m;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) c[rng() % c.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
      auto d = decode_run(c, caps);
      if (d.ok()) {
        for (const Tensor& t : d->tensors) {
          EXPECT_LE(static_cast<uint64_t>(t.numel()), caps.max_elements);
          if (t.dtype() == DType::kF32) {
            for (float v : t.span<float>()) ASSERT_FALSE(std::isnan(v) && !std::isnan(v));
          }
        }
      }
    }
  }
}

// Every decoder with a body (one shared path: envelope, fields, nothing trailing) decodes its
// encoder's message, and refuses each of its proper prefixes, a trailing byte, and a message of
// another type.
TEST(RemoteWireTest, EveryDecoderRefusesPrefixesTrailersAndOtherTypes) {
  std::mt19937 rng(3);
  const WireCaps caps;
  const std::vector<Tensor> ts = {random_tensor(Shape{2, 3}, rng)};
  using Decode = std::function<Status(std::span<const uint8_t>)>;
  auto status = [](auto r) { return r.status(); };
  const std::vector<std::pair<std::vector<uint8_t>, Decode>> cases = {
      {encode_hello(1, Hello{op_set_version(), "h", "c"}),
       [&](auto m) { return status(decode_hello(m, caps)); }},
      {encode_welcome(2, Welcome{"m", "g", "cpu", "d", 1, 2, {3}}),
       [&](auto m) { return status(decode_welcome(m, caps)); }},
      {encode_compile(3, CompileRequest{"m", "g", "none", {0, 1}}),
       [&](auto m) { return status(decode_compile(m, caps)); }},
      {encode_compiled(4, Compiled{5, {1}, {2}, 64}),
       [&](auto m) { return status(decode_compiled(m, caps)); }},
      {encode_run(5, 1, 10, true, ts, TensorEncoding{}).value(),
       [&](auto m) { return status(decode_run(m, caps)); }},
      {encode_result(6, 1.0, std::vector<double>{0.5}, ts, TensorEncoding{}).value(),
       [&](auto m) { return status(decode_result(m, caps)); }},
      {encode_release(7, 9), [&](auto m) { return status(decode_release(m, caps)); }},
      {encode_ping(8, 16, 32), [&](auto m) { return status(decode_ping(m, caps)); }},
      {encode_pong(9, 16), [&](auto m) { return status(decode_pong(m, caps)); }},
      {encode_error(10, not_found("x")), [&](auto m) { return status(decode_error(m, caps)); }},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    const auto& [message, decode] = cases[c];
    SCOPED_TRACE(msg_type_name(decode_envelope(message)->type));
    EXPECT_TRUE(decode(message).ok()) << decode(message).to_string();
    for (size_t n = 0; n < message.size(); ++n) {
      EXPECT_FALSE(decode(std::span<const uint8_t>(message.data(), n)).ok()) << n << " bytes";
    }
    std::vector<uint8_t> longer = message;
    longer.push_back(0);
    const Status trailing = decode(longer);
    EXPECT_NE(trailing.message().find("1 bytes trail the message"), std::string::npos)
        << trailing.to_string();
    const Status other = decode(cases[(c + 1) % cases.size()].first);
    EXPECT_NE(other.message().find("expected a "), std::string::npos) << other.to_string();
  }
}

// Hand-made hostile fields: each is refused with a message naming what is wrong.
TEST(RemoteWireTest, HostileFieldsAreNamed) {
  WireCaps caps;
  caps.max_tensors = 4;
  caps.max_elements = 1000;
  caps.max_string = 64;
  auto header = [](MsgType type) {
    std::vector<uint8_t> m(kEnvelopeBytes, 0);
    std::memcpy(m.data(), kWireMagic, 4);
    const uint16_t v = kProtocolVersion;
    std::memcpy(m.data() + 4, &v, 2);
    m[6] = static_cast<uint8_t>(type);
    return m;
  };
  auto put = [](std::vector<uint8_t>& m, auto v) {
    const auto* b = reinterpret_cast<const uint8_t*>(&v);
    m.insert(m.end(), b, b + sizeof v);
  };
  auto expect_error = [&](const std::vector<uint8_t>& m, const std::string& part) {
    auto d = decode_run(m, caps);
    ASSERT_FALSE(d.ok()) << part;
    EXPECT_NE(d.status().message().find(part), std::string::npos) << d.status().to_string();
  };
  auto run_header = [&] {
    auto m = header(MsgType::kRun);
    put(m, uint32_t{1});
    put(m, uint32_t{0});
    put(m, uint8_t{0});
    return m;
  };
  {
    auto m = run_header();
    put(m, uint32_t{5});  // more tensors than the cap
    expect_error(m, "exceed the cap of 4");
  }
  {
    auto m = run_header();
    put(m, uint32_t{1});
    put(m, uint8_t{0});
    put(m, uint8_t{99});  // dtype
    m.resize(m.size() + 16, 0);
    expect_error(m, "unknown dtype 99");
  }
  {
    auto m = run_header();
    put(m, uint32_t{1});
    put(m, uint8_t{0});
    put(m, uint8_t{0});
    put(m, uint8_t{2});
    put(m, int64_t{-3});
    put(m, int64_t{4});
    m.resize(m.size() + 8, 0);
    expect_error(m, "negative dim");
  }
  {
    auto m = run_header();
    put(m, uint32_t{1});
    put(m, uint8_t{0});
    put(m, uint8_t{0});
    put(m, uint8_t{2});
    put(m, int64_t{1} << 40);  // overflowing, far over the element cap
    put(m, int64_t{1} << 40);
    put(m, uint64_t{0});
    expect_error(m, "more elements than the cap");
  }
  {
    auto m = run_header();
    put(m, uint32_t{1});
    put(m, uint8_t{0});
    put(m, uint8_t{0});
    put(m, uint8_t{1});
    put(m, int64_t{10});
    put(m, uint64_t{36});  // 10 f32 need 40 bytes
    m.resize(m.size() + 36, 0);
    expect_error(m, "36 bytes for 10 elements");
  }
  {
    auto m = run_header();
    put(m, uint32_t{1});
    put(m, uint8_t{1});
    put(m, uint64_t{1} << 62);  // a packed tensor longer than the message
    m.resize(m.size() + 8, 0);
    expect_error(m, "exceeds the cap");
  }
  {
    auto m = header(MsgType::kHello);
    put(m, uint32_t{0});
    put(m, uint32_t{1000});  // a string over the cap
    m.resize(m.size() + 1000, 'x');
    auto d = decode_hello(m, caps);
    ASSERT_FALSE(d.ok());
    EXPECT_NE(d.status().message().find("exceeds the cap of 64"), std::string::npos);
  }
  auto other_version = header(MsgType::kBye);
  other_version[4] = 77;
  auto v = decode_envelope(other_version);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("protocol version 77"), std::string::npos);
  auto not_ours = header(MsgType::kBye);
  not_ours[0] = 'X';
  EXPECT_FALSE(decode_envelope(not_ours).ok());
  auto unknown_type = header(MsgType::kBye);
  unknown_type[6] = 200;
  EXPECT_FALSE(decode_envelope(unknown_type).ok());
}

// ---- Server and remote device, in-process ----------------------------------------------------

struct Hosted {
  testing::TestModel model;
  std::unique_ptr<RemoteServer> server;
};

Hosted host(Graph g, const std::string& device = "reference", ServerOptions o = {}) {
  Hosted h;
  h.model = testing::make_model(std::move(g));
  if (o.model_hash.empty()) o.model_hash = "fnv1a64:00000000000000aa";
  h.server = RemoteServer::create(h.model.lg->graph(), open_device(device).value(), o).value();
  return h;
}

std::unique_ptr<RemoteDevice> connect_in_process(RemoteServer& server) {
  auto d = RemoteDevice::connect("remote:local:1", std::make_unique<InProcessTransport>(server));
  EXPECT_TRUE(d.ok()) << d.status().to_string();
  return d.ok() ? std::move(*d) : nullptr;
}

std::vector<NodeId> all_nodes(const Graph& g) {
  std::vector<NodeId> n(static_cast<size_t>(g.num_nodes()));
  for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<NodeId>(i);
  return n;
}

// n MatMuls of [w, w] x [w, w]: slow enough on the reference kernels for a 1 ms budget to run
// out after the first.
Graph square_chain(int n, int w) {
  Graph g;
  ValueId cur = g.add_value("x", TensorInfo{DType::kF32, Shape{w, w}});
  g.inputs().push_back(cur);
  std::vector<float> weights(static_cast<size_t>(w * w), 1.0f / static_cast<float>(w));
  for (int i = 0; i < n; ++i) {
    ValueId wv = g.add_constant("w" + std::to_string(i), Tensor::from_floats(Shape{w, w}, weights));
    ValueId out = g.add_value("h" + std::to_string(i));
    g.add_node(Node{"mm" + std::to_string(i), OpKind::kMatMul, {}, {cur, wv}, {out}});
    cur = out;
  }
  g.outputs() = {cur};
  return g;
}

// The whole model on the remote device equals the local run of the same device, bit for bit
// (raw tensors), and the per-layer times the server reports cover every layer.
TEST(RemoteDeviceTest, InProcessRunEqualsLocalRun) {
  Hosted h = host(testing::skip_graph());
  const Graph& g = h.model.lg->graph();
  auto remote = connect_in_process(*h.server);
  ASSERT_NE(remote, nullptr);
  EXPECT_EQ(remote->info().kind, DeviceKind::kRemote);
  EXPECT_NE(remote->description().find("reference"), std::string::npos);
  auto local = open_device("reference").value();
  std::mt19937 rng(3);
  const std::vector<NodeId> nodes = all_nodes(g);
  auto rp = remote->compile(g, nodes);
  ASSERT_TRUE(rp.ok()) << rp.status().to_string();
  auto lp = local->compile(g, nodes).value();
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<Tensor> in = testing::random_inputs(g, rng);
    std::vector<Tensor> ro(1), lo(1);
    std::vector<double> layer_ms;
    ASSERT_TRUE((*rp)->run(in, ro, RunOptions::timed(&layer_ms)).ok());
    ASSERT_TRUE(lp->run(in, lo).ok());
    EXPECT_TRUE(same_bytes(ro[0], lo[0]));
    EXPECT_EQ(layer_ms.size(), nodes.size());
  }
  // A slice: its boundary is the local one.
  std::vector<NodeId> tail = nodes;
  tail.erase(tail.begin());
  auto sp = remote->compile(g, tail);
  ASSERT_TRUE(sp.ok());
  auto lsp = local->compile(g, tail).value();
  EXPECT_EQ((*sp)->input_values(), lsp->input_values());
  EXPECT_EQ((*sp)->output_values(), lsp->output_values());
  const RemoteTraffic t = remote->traffic();
  EXPECT_GT(t.bytes_sent, 0u);
  EXPECT_GT(t.requests, 4u);
  // upload/download cross the link and give the bytes back.
  Tensor x = random_tensor(Shape{1000}, rng);
  auto buf = remote->upload(x);
  ASSERT_TRUE(buf.ok());
  Tensor back = Tensor::create(DType::kF32, Shape{1000}).value();
  ASSERT_TRUE(remote->download(**buf, &back).ok());
  EXPECT_TRUE(same_bytes(back, x));
  EXPECT_GT(remote->traffic().bytes_received, t.bytes_received + 4000);
}

// Packed hops: the remote output equals, bit for bit, the local run on the inputs after a local
// pack and unpack (the codec is deterministic), and stays near the unpacked run.
TEST(RemoteDeviceTest, PackedInputsGiveTheLocalRunOfUnpackedInputs) {
  Hosted h = host(testing::skip_graph());
  const Graph& g = h.model.lg->graph();
  auto remote = connect_in_process(*h.server);
  ASSERT_NE(remote, nullptr);
  auto local = open_device("reference").value();
  std::vector<NodeId> tail = all_nodes(g);
  tail.erase(tail.begin());
  const PackPolicy policy{6};
  CompileOptions co;
  co.packing = pack_policy_name(policy);
  auto rp = remote->compile(g, tail, co).value();
  auto lp = local->compile(g, tail).value();
  ASSERT_EQ(rp->input_values(), lp->input_values());
  std::mt19937 rng(4);
  std::vector<Tensor> in, unpacked;
  for (ValueId v : rp->input_values()) {
    in.push_back(random_tensor(g.value(v).info.shape, rng));
    unpacked.push_back(unpack_tensor(pack_tensor(in.back(), policy, "x").value()).value());
  }
  std::vector<Tensor> ro(rp->output_values().size()), lo(ro.size()), exact(ro.size());
  ASSERT_TRUE(rp->run(in, ro).ok());
  ASSERT_TRUE(lp->run(unpacked, lo).ok());
  ASSERT_TRUE(lp->run(in, exact).ok());
  double worst = 0;
  for (size_t i = 0; i < ro.size(); ++i) {
    EXPECT_TRUE(same_bytes(ro[i], lo[i])) << "output " << i;
    for (int64_t k = 0; k < ro[i].numel(); ++k) {
      worst = std::max(
          worst, static_cast<double>(std::abs(ro[i].data<float>()[k] - exact[i].data<float>()[k])));
    }
  }
  EXPECT_GT(worst, 0);    // it really was quantised
  EXPECT_LT(worst, 0.5);  // 6 bits of a [-2, 2) range: steps of 0.063
  CompileOptions bad;
  bad.packing = "isq9";
  EXPECT_FALSE(remote->compile(g, tail, bad).ok());
}

TEST(RemoteDeviceTest, HandshakeRefusesOtherModelsAndBuilds) {
  Hosted h = host(testing::skip_graph());
  {
    // A client that names another model hash is refused at Hello.
    InProcessTransport t(*h.server);
    Hello hello{op_set_version(), "fnv1a64:ffffffffffffffff", "c"};
    auto reply = t.request(encode_hello(1, hello), in_ms(1000)).value();
    Status s = error_status(reply, WireCaps{});
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("hosts fnv1a64:00000000000000aa"), std::string::npos) << s;
    // Another op set (another build).
    hello = Hello{op_set_version() + 1, "", "c"};
    s = error_status(t.request(encode_hello(2, hello), in_ms(1000)).value(), WireCaps{});
    EXPECT_NE(s.message().find("op-set version"), std::string::npos) << s;
  }
  // A client whose graph differs: no node is capable, and Compile is refused by the server.
  auto remote = connect_in_process(*h.server);
  ASSERT_NE(remote, nullptr);
  testing::TestModel other = testing::make_model(testing::matmul_chain(3));
  const Graph& og = other.lg->graph();
  Capability c = remote->capabilities(og, og.node(0));
  EXPECT_FALSE(c.supported);
  EXPECT_NE(c.reason.find("another model"), std::string::npos) << c.reason;
  EXPECT_FALSE(remote->compile(og, all_nodes(og)).ok());
}

// The hostile client: malformed, oversized, truncated, out-of-order and repeated messages each
// drop that session only; a good client's session and programs are untouched, and the hostile
// peer can start over with a Hello.
TEST(RemoteServerTest, HostileClientDoesNotDisturbOthers) {
  ServerOptions o;
  o.caps.max_message_bytes = 1 << 20;
  o.caps.max_elements = 1 << 16;
  Hosted h = host(testing::skip_graph(), "reference", o);
  const Graph& g = h.model.lg->graph();
  auto good = connect_in_process(*h.server);
  ASSERT_NE(good, nullptr);
  auto program = good->compile(g, all_nodes(g)).value();
  std::mt19937 rng(5);
  std::vector<Tensor> in = testing::random_inputs(g, rng);
  std::vector<Tensor> expected(1);
  ASSERT_TRUE(program->run(in, expected).ok());

  InProcessTransport bad(*h.server);
  uint64_t dropped = h.server->stats().dropped;
  auto say_hello = [&] {
    auto r = bad.request(encode_hello(100, Hello{op_set_version(), "", "bad"}), in_ms(1000));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(decode_envelope(*r)->type, MsgType::kWelcome);
  };
  auto expect_dropped = [&](std::vector<uint8_t> m, const std::string& part) {
    auto r = bad.request(m, in_ms(1000));
    ASSERT_TRUE(r.ok());
    Status s = error_status(*r, WireCaps{});
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(part), std::string::npos) << s;
    EXPECT_EQ(h.server->stats().dropped, ++dropped) << part;
    // The good client's program still runs and gives the same answer.
    std::vector<Tensor> out(1);
    ASSERT_TRUE(program->run(in, out).ok()) << part;
    EXPECT_TRUE(same_bytes(out[0], expected[0])) << part;
  };
  CompileRequest compile{"", graph_digest(g), "", {0, 1, 2, 3}};
  // Out of order: requests before Hello.
  expect_dropped(encode_compile(1, compile), "before the Hello");
  expect_dropped(encode_ping(2, 10, 0), "before the Hello");
  say_hello();
  expect_dropped(encode_hello(3, Hello{op_set_version(), "", "again"}), "second Hello");
  say_hello();
  expect_dropped(encode_run(4, 1, 0, false, in, TensorEncoding{}).value(), "unknown program");
  say_hello();
  expect_dropped(encode_welcome(5, Welcome{}), "is a reply");
  // Garbage and truncation.
  expect_dropped({1, 2, 3}, "envelope");
  say_hello();
  std::vector<uint8_t> trunc = encode_compile(6, compile);
  trunc.resize(trunc.size() - 3);
  expect_dropped(trunc, "truncated");
  say_hello();
  // Oversized: a tensor beyond the element cap, and a ping reply beyond its cap.
  Tensor big = Tensor::create(DType::kF32, Shape{1 << 17}).value();
  std::memset(big.raw(), 0, big.byte_size());
  expect_dropped(
      encode_run(7, 1, 0, false, std::span<const Tensor>(&big, 1), TensorEncoding{}).value(),
      "cap");
  say_hello();
  expect_dropped(encode_ping(8, uint64_t{1} << 40, 0), "exceeds the cap");
  // A well-formed request that fails keeps the session: wrong input shape.
  say_hello();
  auto c = bad.request(encode_compile(9, compile), in_ms(1000));
  ASSERT_TRUE(c.ok());
  auto compiled = decode_compiled(*c, WireCaps{});
  ASSERT_TRUE(compiled.ok()) << error_status(*c, WireCaps{});
  Tensor wrong = random_tensor(Shape{4, 31}, rng);
  auto r = bad.request(encode_run(10, compiled->program, 0, false,
                                  std::span<const Tensor>(&wrong, 1), TensorEncoding{})
                           .value(),
                       in_ms(1000));
  ASSERT_TRUE(r.ok());
  Status s = error_status(*r, WireCaps{});
  EXPECT_NE(s.message().find("the graph says"), std::string::npos) << s;
  EXPECT_EQ(h.server->stats().dropped, dropped);
  auto again = bad.request(
      encode_run(11, compiled->program, 0, false, in, TensorEncoding{}).value(), in_ms(1000));
  ASSERT_TRUE(again.ok());
  auto result = decode_result(*again, WireCaps{});
  ASSERT_TRUE(result.ok()) << error_status(*again, WireCaps{});
  EXPECT_TRUE(same_bytes(result->tensors[0], expected[0]));
  EXPECT_EQ(h.server->stats().sessions, 2);
  EXPECT_EQ(h.server->stats().programs, 2);
}

// Deadlines: a run whose budget has passed fails with DeadlineExceeded and the session stays;
// a client that goes away frees its programs; sessions are capped.
TEST(RemoteServerTest, DeadlinesDisconnectsAndSessionCaps) {
  ServerOptions o;
  o.max_sessions = 2;
  o.session_idle_s = 3600;
  Hosted h = host(square_chain(16, 160), "reference", o);
  const Graph& g = h.model.lg->graph();
  {
    auto a = connect_in_process(*h.server);
    ASSERT_NE(a, nullptr);
    auto p = a->compile(g, all_nodes(g)).value();
    std::mt19937 rng(6);
    std::vector<Tensor> in = testing::random_inputs(g, rng);
    // The server stops a run whose budget (1 ms) ran out, between layers; the session stays.
    InProcessTransport t(*h.server);
    ASSERT_TRUE(t.request(encode_hello(1, Hello{op_set_version(), "", "t"}), in_ms(1000)).ok());
    auto c = t.request(encode_compile(2, CompileRequest{"", graph_digest(g), "", all_nodes(g)}),
                       in_ms(5000));
    const uint32_t prog = decode_compiled(c.value(), WireCaps{}).value().program;
    auto r = t.request(encode_run(3, prog, 1, false, in, TensorEncoding{}).value(), in_ms(5000));
    Status s = error_status(r.value(), WireCaps{});
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
    r = t.request(encode_run(4, prog, 0, false, in, TensorEncoding{}).value(), in_ms(5000));
    EXPECT_TRUE(decode_result(r.value(), WireCaps{}).ok());
    EXPECT_EQ(h.server->stats().programs, 2);
    // A third peer finds no room (both sessions are fresh).
    auto third =
        RemoteDevice::connect("remote:third:1", std::make_unique<InProcessTransport>(*h.server));
    ASSERT_FALSE(third.ok());
    EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted) << third.status();
    // A program whose client deadline has passed never leaves the client.
    std::vector<Tensor> out(1);
    RunOptions ro;
    ro.deadline = Clock::now() - std::chrono::milliseconds(1);
    EXPECT_EQ(p->run(in, out, ro).code(), StatusCode::kDeadlineExceeded);
    p.reset();
  }
  // The clients are gone: their transports disconnected and nothing is held.
  EXPECT_EQ(h.server->stats().sessions, 0);
  EXPECT_EQ(h.server->stats().programs, 0);
}

// A two-stage streaming plan, local stage then remote stage, gives the local run's outputs:
// exactly without packing, within the codec's bound with it.
TEST(RemoteDeviceTest, StreamingPlanWithRemoteStageMatchesLocal) {
  Hosted h = host(testing::skip_graph());
  const LayerGraph& lg = *h.model.lg;
  const int L = lg.num_layers();
  ExecutorOptions eo;
  eo.open_device = [&](const std::string& name) -> Result<std::unique_ptr<Device>> {
    if (name == "remote:local:1") {
      ASSIGN_OR_RETURN(
          std::unique_ptr<RemoteDevice> d,
          RemoteDevice::connect(name, std::make_unique<InProcessTransport>(*h.server)));
      return std::unique_ptr<Device>(std::move(d));
    }
    return open_device(name);
  };
  Plan local = plan_from_slices(L, {{0, "reference"}}).value();
  auto lex = Executor::create(lg, local).value();
  std::mt19937 rng(7);
  std::vector<std::vector<Tensor>> inputs, expected;
  for (int f = 0; f < 6; ++f) {
    inputs.push_back(testing::random_inputs(lg.graph(), rng));
    std::vector<Tensor> out;
    ASSERT_TRUE(lex->run(inputs.back(), &out).ok());
    expected.push_back(out);
  }
  for (const std::string packing : {"", "isq8+bitshuffle+lz4"}) {
    Plan split = plan_from_slices(L, {{0, "reference"}, {L / 2, "remote:local:1"}}).value();
    split.mode = PlanMode::kStreaming;
    split.stages[1].packing = packing;
    auto ex = Executor::create(lg, split, eo);
    ASSERT_TRUE(ex.ok()) << ex.status().to_string();
    EXPECT_EQ((*ex)->num_actors(), 2);
    for (const auto& in : inputs) ASSERT_TRUE((*ex)->submit(in).ok());
    for (size_t f = 0; f < inputs.size(); ++f) {
      auto r = (*ex)->next();
      ASSERT_TRUE(r.ok());
      ASSERT_TRUE(r->status.ok()) << r->status;
      ASSERT_EQ(r->frame, f);
      const Tensor& got = r->outputs[0];
      const Tensor& want = expected[f][0];
      if (packing.empty()) {
        EXPECT_TRUE(same_bytes(got, want)) << "frame " << f;
      } else {
        // The hop carries r = relu(mm) (>= 0) and x, each within its own scale / 2.
        for (int64_t i = 0; i < want.numel(); ++i) {
          ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 0.02) << "frame " << f;
        }
      }
    }
    (*ex)->close();
  }
}

// ---- ZeroMQ on loopback ----------------------------------------------------------------------

// A server thread on an ephemeral loopback port.
class ZmqServerThread {
 public:
  ZmqServerThread(RemoteServer& server, ZmqServerOptions o) {
    o.port = 0;
    o.on_bound = [this](const std::string& ep) {
      std::lock_guard<std::mutex> lock(mu_);
      endpoint_ = ep;
      cv_.notify_all();
    };
    thread_ = std::thread([this, &server, o] {
      status_ = serve_zmq(server, o, &stop_);
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      cv_.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !endpoint_.empty() || done_; });
  }
  ~ZmqServerThread() {
    stop_ = true;
    thread_.join();
  }
  int port() const { return std::stoi(endpoint_.substr(endpoint_.rfind(':') + 1)); }
  const Status& status() const { return status_; }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::string endpoint_;
  bool done_ = false;
  Status status_;
  std::thread thread_;
};

TEST(RemoteZmqTest, PlaintextLoopbackThroughTheRegistry) {
  ServerOptions so;
  so.caps.max_message_bytes = 1 << 20;
  Hosted h = host(testing::skip_graph(), "reference", so);
  ZmqServerThread st(*h.server, ZmqServerOptions{});
  ASSERT_GT(st.port(), 0) << st.status();
  const Graph& g = h.model.lg->graph();
  auto dev = open_device("remote:127.0.0.1:" + std::to_string(st.port()));
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  auto local = open_device("reference").value();
  auto p = (*dev)->compile(g, all_nodes(g)).value();
  auto lp = local->compile(g, all_nodes(g)).value();
  std::mt19937 rng(8);
  std::vector<Tensor> in = testing::random_inputs(g, rng);
  std::vector<Tensor> out(1), want(1);
  ASSERT_TRUE(p->run(in, out).ok());
  ASSERT_TRUE(lp->run(in, want).ok());
  EXPECT_TRUE(same_bytes(out[0], want[0]));

  // A raw socket sends garbage, a message over ZMQ_MAXMSGSIZE (libzmq drops that connection),
  // and disconnects mid-request; the device above still works.
  {
    zmq::context_t ctx;
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.connect("tcp://127.0.0.1:" + std::to_string(st.port()));
    s.send(zmq::str_buffer("garbage"), zmq::send_flags::none);
    zmq::message_t reply;
    s.set(zmq::sockopt::rcvtimeo, 2000);
    ASSERT_TRUE(s.recv(reply));
    std::span<const uint8_t> rb(static_cast<const uint8_t*>(reply.data()), reply.size());
    EXPECT_NE(error_status(rb, WireCaps{}).message().find("envelope"), std::string::npos);
    std::vector<uint8_t> huge = encode_ping(1, 0, 2 << 20);
    s.send(zmq::buffer(huge), zmq::send_flags::none);
    std::vector<uint8_t> hello = encode_hello(2, Hello{op_set_version(), "", "x"});
    s.send(zmq::buffer(hello), zmq::send_flags::none);
    const std::vector<uint8_t> run = encode_run(3, 1, 0, false, in, TensorEncoding{}).value();
    s.send(zmq::buffer(run), zmq::send_flags::none);
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(p->run(in, out).ok());
    EXPECT_TRUE(same_bytes(out[0], want[0]));
  }
  // Binding elsewhere without keys is refused.
  ZmqServerOptions wide;
  wide.bind_host = "0.0.0.0";
  Status refused = serve_zmq(*h.server, wide, nullptr);
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("CURVE"), std::string::npos) << refused;
  // And connecting elsewhere without keys.
  ZmqClientOptions far;
  far.host = "192.0.2.1";
  EXPECT_EQ(ZmqTransport::connect(far).status().code(), StatusCode::kFailedPrecondition);
}

// '#' is a z85 digit (never a key's first: it is the 85th, and a 32-bit group's first digit is
// at most the 83rd): keys that contain one are keys, not comments; comment lines and comments
// after a key are skipped; other text after a key is refused with the line.
TEST(RemoteZmqTest, AuthorisedKeysWithHashDigits) {
  std::string plain, inside;
  for (int i = 0; i < 5000 && (plain.empty() || inside.empty()); ++i) {
    const std::string k = generate_curve_keys().value().public_key;
    ASSERT_NE(k[0], '#');
    (k.find('#') == std::string::npos ? plain : inside) = k;
  }
  ASSERT_FALSE(plain.empty());
  ASSERT_FALSE(inside.empty());
  const std::string path =
      (std::filesystem::temp_directory_path() / "tessera_authorised_keys_test.txt").string();
  {
    std::ofstream f(path);
    f << "# clients of the test\n"
      << plain << "\n"
      << "  public " << inside << "   # the second client\n"
      << "#another comment\n\n";
  }
  auto keys = read_authorised_keys(path);
  ASSERT_TRUE(keys.ok()) << keys.status().to_string();
  EXPECT_EQ(*keys, (std::vector<std::string>{plain, inside}));
  {
    std::ofstream f(path);
    f << inside << " trailing\n";
  }
  auto bad = read_authorised_keys(path);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(":1: unexpected text"), std::string::npos)
      << bad.status().to_string();
  std::filesystem::remove(path);
}

TEST(RemoteZmqTest, CurveAdmitsOnlyAuthorisedClients) {
  if (!curve_available()) GTEST_SKIP() << "libzmq without CURVE";
  Hosted h = host(testing::skip_graph());
  const CurveKeyPair server_keys = generate_curve_keys().value();
  const CurveKeyPair client_keys = generate_curve_keys().value();
  const CurveKeyPair stranger_keys = generate_curve_keys().value();
  // Key files round-trip.
  const std::string dir = ::testing::TempDir() + "/tessera_keys_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(write_key_files(dir + "/server", server_keys).ok());
  EXPECT_EQ(read_key_file(dir + "/server.key").value().secret_key, server_keys.secret_key);
  EXPECT_TRUE(read_key_file(dir + "/server.pub").value().secret_key.empty());
  EXPECT_EQ(std::filesystem::status(dir + "/server.key").permissions() &
                std::filesystem::perms::group_all,
            std::filesystem::perms::none);
  std::filesystem::remove_all(dir);

  ZmqServerOptions zo;
  zo.server_keys = server_keys;
  zo.authorised_clients = {client_keys.public_key};
  std::atomic<int> refusals{0};
  zo.log = [&](const std::string&) { ++refusals; };
  ZmqServerThread st(*h.server, zo);
  ASSERT_GT(st.port(), 0) << st.status();
  auto try_hello = [&](std::optional<std::string> server_pub, std::optional<CurveKeyPair> keys,
                       int ms) -> Status {
    ZmqClientOptions co;
    co.port = st.port();
    co.server_public_key = server_pub;
    co.client_keys = keys;
    auto t = ZmqTransport::connect(co);
    if (!t.ok()) return t.status();
    auto r = (*t)->request(encode_hello(1, Hello{op_set_version(), "", "c"}), in_ms(ms));
    if (!r.ok()) return r.status();
    return decode_welcome(*r, WireCaps{}).status();
  };
  EXPECT_TRUE(try_hello(server_keys.public_key, client_keys, 5000).ok());
  // An unknown client key, a plaintext client, and a client pinning the wrong server key get
  // no answer at all.
  EXPECT_EQ(try_hello(server_keys.public_key, stranger_keys, 400).code(),
            StatusCode::kDeadlineExceeded);
  EXPECT_EQ(try_hello(std::nullopt, std::nullopt, 400).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(try_hello(stranger_keys.public_key, client_keys, 400).code(),
            StatusCode::kDeadlineExceeded);
  EXPECT_GE(refusals.load(), 1);
  // The authorised client still gets in afterwards.
  EXPECT_TRUE(try_hello(server_keys.public_key, client_keys, 5000).ok());
}

}  // namespace
}  // namespace tessera::remote
