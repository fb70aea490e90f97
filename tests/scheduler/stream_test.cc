// The executor's streaming driver: order, exactly-once delivery, per-frame errors, deadlines,
// cancellation, shutdown and draining, repeated devices and shared actors (executor.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "backends/registry.h"
#include "backends/remote/remote_device.h"
#include "backends/remote/server.h"
#include "backends/remote/transport.h"
#include "backends/remote/zmq_transport.h"
#include "scheduler/executor/executor.h"
#include "tests/scheduler/fault_device.h"
#include "tests/scheduler/profile_test_util.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Fault;

using testing::random_inputs;

bool same_bytes(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].shape() != b[i].shape() || a[i].byte_size() != b[i].byte_size()) return false;
    if (std::memcmp(a[i].raw(), b[i].raw(), a[i].byte_size()) != 0) return false;
  }
  return true;
}

Plan streaming(Plan p, int capacity = 2) {
  p.mode = PlanMode::kStreaming;
  p.queue_capacity = capacity;
  return p;
}

// Streams `frames` copies of `in` through `ex`, keeping every slot busy, and checks each frame as
// it comes out: in order, exactly once; a frame for which `must_fail(f)` names text fails with an
// error holding every piece of it and no outputs, the others give `expected` byte for byte.
// Counts the failed frames into `*failed`.
void stream_and_check(Executor& ex, const std::vector<Tensor>& in, int frames,
                      const std::vector<Tensor>& expected,
                      const std::function<std::vector<std::string>(int)>& must_fail, int* failed) {
  int submitted = 0, received = 0;
  *failed = 0;
  while (received < frames) {
    while (submitted < frames && submitted - received < ex.num_slots()) {
      ASSERT_TRUE(ex.submit(in).ok());
      ++submitted;
    }
    auto r = ex.next();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->frame, static_cast<uint64_t>(received));
    const std::vector<std::string> want_error = must_fail(received);
    if (!want_error.empty()) {
      ASSERT_FALSE(r->status.ok()) << "frame " << received << " should fail";
      for (const std::string& part : want_error) {
        EXPECT_NE(r->status.message().find(part), std::string::npos)
            << "frame " << received << ": " << r->status.to_string();
      }
      EXPECT_TRUE(r->outputs.empty());
      ++*failed;
    } else {
      ASSERT_TRUE(r->status.ok()) << "frame " << received << ": " << r->status.to_string();
      ASSERT_TRUE(same_bytes(r->outputs, expected)) << "frame " << received;
    }
    ++received;
  }
}

// The outputs of `in` on the reference device, the whole model in one stage.
std::vector<Tensor> reference_outputs(const LayerGraph& lg, const std::vector<Tensor>& in) {
  std::vector<Tensor> out;
  auto ex = Executor::create(lg, plan_from_slices(lg.num_layers(), {{0, "reference"}}).value());
  EXPECT_TRUE(ex.ok() && (*ex)->run(in, &out).ok());
  return out;
}

// Streams `frames` random frames through `plan` and checks every output against the sequential
// run of the same plan, byte for byte.
void expect_stream_matches_sequential(const LayerGraph& lg, const Plan& plan, int frames) {
  auto ex = Executor::create(lg, plan);
  ASSERT_TRUE(ex.ok()) << plan.notation() << ": " << ex.status().to_string();
  std::mt19937 rng(3);
  std::vector<std::vector<Tensor>> inputs, expected;
  for (int f = 0; f < frames; ++f) {
    inputs.push_back(random_inputs(lg.graph(), rng));
    std::vector<Tensor> out;
    ASSERT_TRUE((*ex)->run(inputs.back(), &out).ok());
    expected.push_back(out);
  }
  int submitted = 0, received = 0;
  while (received < frames) {
    // Keep the pipeline full: submit while slots are free, then take one frame out.
    while (submitted < frames && submitted - received < (*ex)->num_slots()) {
      auto id = (*ex)->submit(inputs[static_cast<size_t>(submitted)]);
      ASSERT_TRUE(id.ok()) << id.status().to_string();
      EXPECT_EQ(*id, static_cast<uint64_t>(submitted));
      ++submitted;
    }
    auto r = (*ex)->next();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->frame, static_cast<uint64_t>(received));
    ASSERT_TRUE(r->status.ok()) << r->status.to_string();
    EXPECT_TRUE(same_bytes(r->outputs, expected[static_cast<size_t>(received)]))
        << plan.notation() << " frame " << received;
    ++received;
  }
  (*ex)->close();
  EXPECT_EQ((*ex)->next().status().code(), StatusCode::kOutOfRange);
}

TEST(StreamTest, TwoStagesOnTwoCoresGiveTheSequentialOutputs) {
  for (const char* d : {"cpu:0", "cpu:1"}) {
    if (!open_device(d).ok()) GTEST_SKIP() << d << " is not available";
  }
  auto m = testing::make_model(testing::matmul_chain(6));
  Plan p = streaming(plan_from_slices(6, {{0, "cpu:0"}, {3, "cpu:1"}}).value());
  expect_stream_matches_sequential(*m.lg, p, 60);
}

TEST(StreamTest, RepeatedDeviceAndSkipConnections) {
  // cpu:0 hosts two actors; x skips from stage 0 over stage 1 into stage 2.
  if (!open_device("cpu:0").ok()) GTEST_SKIP() << "cpu:0 is not available";
  auto m = testing::make_model(testing::skip_graph());
  Plan p = streaming(
      plan_from_slices(4, {{0, "cpu:0"}, {1, "reference"}, {2, "cpu:0"}, {3, "reference"}}).value(),
      1);
  auto ex = Executor::create(*m.lg, p);
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  EXPECT_EQ((*ex)->num_actors(), 4);
  expect_stream_matches_sequential(*m.lg, p, 40);
}

TEST(StreamTest, StagesSharingAnActorRunAsPhasesOfOneThread) {
  // Stages 0 and 2 are phases of actor 7 (one thread), stage 1 and 3 have their own.
  auto m = testing::make_model(testing::matmul_chain(4));
  Plan p = streaming(
      plan_from_slices(4, {{0, "reference"}, {1, "reference"}, {2, "reference"}, {3, "reference"}})
          .value());
  p.stages[0].actor = 7;
  p.stages[2].actor = 7;
  auto ex = Executor::create(*m.lg, p);
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  EXPECT_EQ((*ex)->num_actors(), 3);
  EXPECT_EQ((*ex)->steps()[0].actor, (*ex)->steps()[2].actor);
  EXPECT_NE(p.notation().find("#a7"), std::string::npos) << p.notation();
  expect_stream_matches_sequential(*m.lg, p, 30);
}

TEST(StreamTest, ActorStagesMustShareAPlacement) {
  auto m = testing::make_model(testing::matmul_chain(3));
  Plan p = streaming(plan_from_slices(3, {{0, "reference"}, {1, "cpu"}, {2, "reference"}}).value());
  p.stages[0].actor = 0;
  p.stages[1].actor = 0;
  auto ex = Executor::create(*m.lg, p);
  ASSERT_FALSE(ex.ok());
  EXPECT_NE(ex.status().message().find("share one placement"), std::string::npos)
      << ex.status().to_string();
}

// 10,000 frames through three stages whose programs fail or throw at random: every frame comes
// out exactly once, in order, with the error the schedule predicts or the fault-free outputs.
TEST(StreamTest, RandomFaultsLoseDuplicateOrReorderNothing) {
  auto m = testing::make_model(testing::matmul_chain(3));
  const LayerGraph& lg = *m.lg;
  constexpr int kFrames = 10000;
  constexpr int kPrograms = 3;
  // fault[p][r]: what program p does on its r-th run (about 3% of runs fail, 2% throw).
  std::mt19937 rng(2026);
  std::vector<std::vector<Fault>> fault(kPrograms, std::vector<Fault>(kFrames, Fault::kNone));
  for (auto& runs : fault) {
    for (Fault& f : runs) {
      const unsigned x = rng() % 100;
      f = x < 3 ? Fault::kFail : (x < 5 ? Fault::kThrow : Fault::kNone);
    }
  }
  // The frames that must fail: replay the schedule (a program runs only frames still alive).
  std::vector<int> fails_at(kFrames, -1);
  {
    std::vector<int> runs(kPrograms, 0);
    for (int f = 0; f < kFrames; ++f) {
      for (int p = 0; p < kPrograms && fails_at[static_cast<size_t>(f)] < 0; ++p) {
        if (fault[static_cast<size_t>(p)][static_cast<size_t>(runs[static_cast<size_t>(p)]++)] !=
            Fault::kNone) {
          fails_at[static_cast<size_t>(f)] = p;
        }
      }
    }
  }
  ExecutorOptions opts;
  opts.open_device = testing::fault_opener(
      [&fault](int p, int r) { return fault[static_cast<size_t>(p)][static_cast<size_t>(r)]; });
  Plan p = streaming(
      plan_from_slices(3, {{0, "reference"}, {1, "reference"}, {2, "reference"}}).value(), 3);
  auto ex = Executor::create(lg, p, opts);
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  std::mt19937 in_rng(1);
  const std::vector<Tensor> in = random_inputs(lg.graph(), in_rng);
  const std::vector<Tensor> expected = reference_outputs(lg, in);
  int failed = 0;
  stream_and_check(
      **ex, in, kFrames, expected,
      [&](int f) -> std::vector<std::string> {
        const int program = fails_at[static_cast<size_t>(f)];
        if (program < 0) return {};
        return {"stage " + std::to_string(program)};
      },
      &failed);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_GT(failed, 1000);
  EXPECT_EQ((*ex)->pending(), 0u);
  (*ex)->close();
  EXPECT_EQ((*ex)->next().status().code(), StatusCode::kOutOfRange);
}

TEST(StreamTest, DeadlineEndsAStalledFrameAndTheStreamGoesOn) {
  auto m = testing::make_model(testing::matmul_chain(2));
  ExecutorOptions opts;
  // Program 1 stalls on its run 1 (frame 1) until the frame's deadline.
  opts.open_device = testing::fault_opener(
      [](int p, int r) { return p == 1 && r == 1 ? Fault::kStall : Fault::kNone; });
  Plan p = streaming(plan_from_slices(2, {{0, "reference"}, {1, "reference"}}).value());
  auto ex = Executor::create(*m.lg, p, opts);
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  std::mt19937 rng(9);
  const std::vector<Tensor> in = random_inputs(m.lg->graph(), rng);
  for (int f = 0; f < 4; ++f) {
    // Frame 1 has 200 ms; the frames behind it wait for the stalled stage, so they get 30 s.
    SubmitOptions so;
    so.deadline = Clock::now() + std::chrono::milliseconds(f == 1 ? 200 : 30000);
    ASSERT_TRUE((*ex)->submit(in, so).ok());
  }
  for (int f = 0; f < 4; ++f) {
    auto r = (*ex)->next();
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->frame, static_cast<uint64_t>(f));
    if (f == 1) {
      EXPECT_EQ(r->status.code(), StatusCode::kDeadlineExceeded) << r->status.to_string();
    } else {
      EXPECT_TRUE(r->status.ok()) << r->status.to_string();
    }
  }
}

TEST(StreamTest, CancelEndsOneStalledFrame) {
  auto m = testing::make_model(testing::matmul_chain(2));
  ExecutorOptions opts;
  opts.open_device = testing::fault_opener(
      [](int p, int r) { return p == 0 && r == 0 ? Fault::kStall : Fault::kNone; });
  Plan p = streaming(plan_from_slices(2, {{0, "reference"}, {1, "reference"}}).value());
  auto ex = Executor::create(*m.lg, p, opts);
  ASSERT_TRUE(ex.ok());
  std::mt19937 rng(9);
  const std::vector<Tensor> in = random_inputs(m.lg->graph(), rng);
  ASSERT_TRUE((*ex)->submit(in).ok());
  ASSERT_TRUE((*ex)->submit(in).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  (*ex)->cancel(0);
  auto r0 = (*ex)->next();
  ASSERT_TRUE(r0.ok());
  EXPECT_EQ(r0->status.code(), StatusCode::kCancelled) << r0->status.to_string();
  auto r1 = (*ex)->next();
  ASSERT_TRUE(r1.ok());
  EXPECT_TRUE(r1->status.ok()) << r1->status.to_string();
}

TEST(StreamTest, CloseWithFullQueuesAndStalledWorkJoinsQuickly) {
  auto m = testing::make_model(testing::matmul_chain(3));
  ExecutorOptions opts;
  // The last stage stalls on every frame: the queues before it fill up.
  opts.open_device =
      testing::fault_opener([](int p, int) { return p == 2 ? Fault::kStall : Fault::kNone; });
  Plan p = streaming(
      plan_from_slices(3, {{0, "reference"}, {1, "reference"}, {2, "reference"}}).value());
  auto ex = Executor::create(*m.lg, p, opts);
  ASSERT_TRUE(ex.ok());
  std::mt19937 rng(9);
  const std::vector<Tensor> in = random_inputs(m.lg->graph(), rng);
  const int slots = (*ex)->num_slots();
  for (int f = 0; f < slots; ++f) {
    ASSERT_TRUE((*ex)->submit(in).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const auto t0 = Clock::now();
  (*ex)->close();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_LT(ms, 2000) << "close() took " << ms << " ms";
  for (int f = 0; f < slots; ++f) {
    auto r = (*ex)->next();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->frame, static_cast<uint64_t>(f));
    EXPECT_EQ(r->status.code(), StatusCode::kCancelled) << r->status.to_string();
  }
  EXPECT_EQ((*ex)->next().status().code(), StatusCode::kOutOfRange);
  // A new stream opens on the same executor after close().
  auto id = (*ex)->submit(in);
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  EXPECT_EQ(*id, static_cast<uint64_t>(slots));
  (*ex)->cancel(*id);
  auto r = (*ex)->next();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status.code(), StatusCode::kCancelled);
}

TEST(StreamTest, DestructorWithWorkInFlightJoins) {
  auto m = testing::make_model(testing::matmul_chain(2));
  ExecutorOptions opts;
  opts.open_device =
      testing::fault_opener([](int p, int) { return p == 1 ? Fault::kStall : Fault::kNone; });
  Plan p = streaming(plan_from_slices(2, {{0, "reference"}, {1, "reference"}}).value());
  auto ex = Executor::create(*m.lg, p, opts);
  ASSERT_TRUE(ex.ok());
  std::mt19937 rng(9);
  const std::vector<Tensor> in = random_inputs(m.lg->graph(), rng);
  ASSERT_TRUE((*ex)->submit(in).ok());
  ASSERT_TRUE((*ex)->submit(in).ok());
  ex->reset();  // joins every actor thread without hanging
}

// ---- Overlapped steps: a remote hop (Program::max_in_flight() > 1) ----------------------------

// A model served in this process by a server whose device injects `schedule`'s faults, and an
// executor opener that reaches it as remote:local:1 over an InProcessTransport.
struct ServedModel {
  testing::TestModel model;
  std::unique_ptr<remote::RemoteServer> server;
  ExecutorOptions options;
};

std::unique_ptr<ServedModel> serve(Graph g, testing::FaultSchedule schedule) {
  auto m = std::make_unique<ServedModel>();
  m->model = testing::make_model(std::move(g));
  remote::ServerOptions so;
  so.model_hash = "fnv1a64:00000000000000aa";
  auto dev = std::make_unique<testing::FaultDevice>(open_device("reference").value(), schedule,
                                                    std::make_shared<std::atomic<int>>(0));
  m->server = remote::RemoteServer::create(m->model.lg->graph(), std::move(dev), so).value();
  remote::RemoteServer* server = m->server.get();
  m->options.open_device = [server](const std::string& name) -> Result<std::unique_ptr<Device>> {
    if (name != "remote:local:1") return open_device(name);
    ASSIGN_OR_RETURN(
        std::unique_ptr<remote::RemoteDevice> d,
        remote::RemoteDevice::connect(name, std::make_unique<remote::InProcessTransport>(*server)));
    return std::unique_ptr<Device>(std::move(d));
  };
  return m;
}

// 300 frames through reference | remote, the server slow on every run and failing on some: the
// remote program runs up to 3 frames at once (packing, link and server overlap), and still every
// frame comes out once, in order, with its own error or the sequential outputs.
TEST(StreamTest, RemoteHopOverlapsFramesAndKeepsThemInOrder) {
  constexpr int kFrames = 300;
  std::mt19937 rng(77);
  std::vector<testing::Fault> fault(kFrames);
  for (testing::Fault& f : fault) f = rng() % 100 < 4 ? Fault::kFail : Fault::kSlow;
  auto m = serve(testing::matmul_chain(4), [&fault](int, int r) {
    return r < kFrames ? fault[static_cast<size_t>(r)] : Fault::kNone;
  });
  const LayerGraph& lg = *m->model.lg;
  Plan p = streaming(plan_from_slices(4, {{0, "reference"}, {2, "remote:local:1"}}).value(), 4);
  auto ex = Executor::create(lg, p, m->options);
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  std::mt19937 in_rng(5);
  const std::vector<Tensor> in = random_inputs(lg.graph(), in_rng);
  int failed = 0;
  stream_and_check(
      **ex, in, kFrames, reference_outputs(lg, in),
      [&](int f) -> std::vector<std::string> {
        if (fault[static_cast<size_t>(f)] != Fault::kFail) return {};
        return {"injected failure", "stage 1"};
      },
      &failed);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_GT(failed, 3);
  // Frames overlapped in the hop: some frame started before the one ahead of it finished.
  std::vector<StepRun> hop;
  for (const StepRun& r : (*ex)->step_runs()) {
    if (r.step == 1) hop.push_back(r);
  }
  ASSERT_EQ(hop.size(), static_cast<size_t>(kFrames));
  std::sort(hop.begin(), hop.end(),
            [](const StepRun& a, const StepRun& b) { return a.run < b.run; });
  int overlapped = 0;
  for (size_t i = 1; i < hop.size(); ++i) {
    if (hop[i].start_ms < hop[i - 1].start_ms + hop[i - 1].ms) ++overlapped;
  }
  EXPECT_GT(overlapped, kFrames / 2);
  (*ex)->close();
  EXPECT_EQ((*ex)->next().status().code(), StatusCode::kOutOfRange);
}

// A frame stalled on the server: its deadline ends it (the server's budget and the client's
// wait), a cancelled one ends at once on the client (its late reply is dropped), and the frames
// behind them come out with their outputs.
TEST(StreamTest, RemoteHopDeadlineAndCancelEndTheirFramesOnly) {
  auto m = serve(testing::matmul_chain(4),
                 [](int, int r) { return r == 1 || r == 3 ? Fault::kStall : Fault::kNone; });
  const LayerGraph& lg = *m->model.lg;
  Plan p = streaming(plan_from_slices(4, {{0, "reference"}, {2, "remote:local:1"}}).value(), 4);
  auto ex = Executor::create(lg, p, m->options);
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  std::mt19937 in_rng(6);
  const std::vector<Tensor> in = random_inputs(lg.graph(), in_rng);
  const std::vector<Tensor> expected = reference_outputs(lg, in);
  // Frames 1 and 3 stall on the server until their budgets run out (200 and 300 ms); frame 3 is
  // cancelled on the client first.
  for (int f = 0; f < 6; ++f) {
    SubmitOptions so;
    so.deadline = Clock::now() + std::chrono::milliseconds(f == 1 ? 200 : f == 3 ? 300 : 30000);
    ASSERT_TRUE((*ex)->submit(in, so).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  (*ex)->cancel(3);
  for (int f = 0; f < 6; ++f) {
    auto r = (*ex)->next();
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->frame, static_cast<uint64_t>(f));
    if (f == 1) {
      EXPECT_EQ(r->status.code(), StatusCode::kDeadlineExceeded) << r->status.to_string();
    } else if (f == 3) {
      EXPECT_EQ(r->status.code(), StatusCode::kCancelled) << r->status.to_string();
    } else {
      ASSERT_TRUE(r->status.ok()) << "frame " << f << ": " << r->status.to_string();
      EXPECT_TRUE(same_bytes(r->outputs, expected)) << "frame " << f;
    }
  }
  (*ex)->close();
}

// The same over ZeroMQ on loopback (the transport's I/O thread, the registry's remote device):
// 120 frames, the server slow on every run and failing on some, every frame in order with its
// error or the sequential outputs.
TEST(StreamTest, RemoteHopOverZeroMqKeepsFramesInOrder) {
  constexpr int kFrames = 120;
  std::vector<Fault> fault(kFrames);
  for (int f = 0; f < kFrames; ++f)
    fault[static_cast<size_t>(f)] = f % 17 == 5 ? Fault::kFail : Fault::kSlow;
  auto m = serve(testing::matmul_chain(4), [&fault](int, int r) {
    return r < kFrames ? fault[static_cast<size_t>(r)] : Fault::kNone;
  });
  std::mutex mu;
  std::condition_variable cv;
  std::string endpoint;
  std::atomic<bool> stop{false};
  remote::ZmqServerOptions zo;
  zo.port = 0;
  zo.on_bound = [&](const std::string& ep) {
    std::lock_guard<std::mutex> lock(mu);
    endpoint = ep;
    cv.notify_all();
  };
  Status served;
  std::thread server([&] {
    served = remote::serve_zmq(*m->server, zo, &stop);
    std::lock_guard<std::mutex> lock(mu);
    if (endpoint.empty()) endpoint = "failed";
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return !endpoint.empty(); });
  }
  ASSERT_NE(endpoint, "failed") << served.to_string();
  const std::string device = "remote:127.0.0.1:" + endpoint.substr(endpoint.rfind(':') + 1);
  const LayerGraph& lg = *m->model.lg;
  {
    Plan p = streaming(plan_from_slices(4, {{0, "reference"}, {2, device}}).value(), 4);
    auto ex = Executor::create(lg, p);
    ASSERT_TRUE(ex.ok()) << ex.status().to_string();
    std::mt19937 in_rng(8);
    const std::vector<Tensor> in = random_inputs(lg.graph(), in_rng);
    int failed = 0;
    stream_and_check(
        **ex, in, kFrames, reference_outputs(lg, in),
        [&](int f) -> std::vector<std::string> {
          if (fault[static_cast<size_t>(f)] != Fault::kFail) return {};
          return {"injected failure"};
        },
        &failed);
    EXPECT_EQ(failed, (kFrames + 11) / 17);
    EXPECT_EQ((*ex)->step_frames_in_flight(1), remote::RemoteDevice::kDefaultFramesInFlight);
    (*ex)->close();
  }
  stop = true;
  server.join();
  EXPECT_TRUE(served.ok()) << served.to_string();
}

TEST(StreamTest, MisuseIsRefusedWithAMessage) {
  auto m = testing::make_model(testing::matmul_chain(2));
  Plan p = streaming(plan_from_slices(2, {{0, "reference"}, {1, "reference"}}).value());
  auto ex = Executor::create(*m.lg, p);
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ((*ex)->next().status().code(), StatusCode::kOutOfRange);
  std::mt19937 rng(9);
  const std::vector<Tensor> in = random_inputs(m.lg->graph(), rng);
  // Wrong inputs are refused at submit, naming the input.
  auto bad = (*ex)->submit({});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("inputs"), std::string::npos);
  ASSERT_TRUE((*ex)->submit(in).ok());
  std::vector<Tensor> out;
  const Status s = (*ex)->run(in, &out);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.to_string();
  ASSERT_TRUE((*ex)->next().ok());
  EXPECT_EQ((*ex)->next().status().code(), StatusCode::kFailedPrecondition);
  (*ex)->close();
  EXPECT_TRUE((*ex)->run(in, &out).ok());
}

TEST(StreamTest, MeasurementsAndTraceCoverEveryFrameAndActor) {
  auto m = testing::make_model(testing::matmul_chain(4));
  Plan p = streaming(plan_from_slices(4, {{0, "reference"}, {2, "reference"}}).value());
  auto ex = Executor::create(*m.lg, p);
  ASSERT_TRUE(ex.ok());
  std::mt19937 rng(9);
  const std::vector<Tensor> in = random_inputs(m.lg->graph(), rng);
  constexpr int kFrames = 12;
  for (int f = 0; f < kFrames; ++f) {
    if (f >= (*ex)->num_slots()) {
      ASSERT_TRUE((*ex)->next().ok());
    }
    ASSERT_TRUE((*ex)->submit(in).ok());
  }
  while ((*ex)->pending() > 0) {
    ASSERT_TRUE((*ex)->next().ok());
  }
  const std::vector<StepRun> runs = (*ex)->step_runs();
  ASSERT_EQ(runs.size(), 2u * kFrames);
  std::set<std::pair<int, int>> seen;
  for (const StepRun& r : runs) {
    EXPECT_TRUE(r.ok);
    EXPECT_GE(r.ms, 0);
    EXPECT_GE(r.blocked_in, 0);
    EXPECT_GT(r.bytes_in, 0u);
    EXPECT_TRUE(seen.insert({r.run, r.step}).second) << "frame " << r.run << " step " << r.step;
  }
  const auto occ = (*ex)->queue_occupancy();
  ASSERT_EQ(occ.size(), 2u);
  for (const QueueOccupancy& q : occ) {
    int64_t n = 0;
    for (int64_t c : q.histogram) n += c;
    EXPECT_EQ(n, kFrames);
  }
  const std::string trace = (*ex)->chrome_trace_json();
  EXPECT_NE(trace.find("actor 0 (reference)"), std::string::npos);
  EXPECT_NE(trace.find("actor 1 (reference)"), std::string::npos);
  EXPECT_NE(trace.find("\"ph\": \"f\""), std::string::npos);  // flow arrows end
}

}  // namespace
}  // namespace tessera
