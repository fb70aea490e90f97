// The cpu device's infrastructure: core sets, topology from a fake sysfs, thread pinning, two
// devices running at once, the arena planner, device names and error paths.
#include <cpuinfo.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "backends/arena.h"
#include "backends/cpu/cpu_device.h"
#include "backends/cpu/cpu_program.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/layout.h"
#include "backends/cpu/openblas.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/topology.h"
#include "backends/registry.h"
#include "core/denormals.h"
#include "tests/backends/op_cases.h"
#include "tests/ops/op_test_util.h"

namespace tessera::cpu {
namespace {

TEST(CoreSetTest, ParsesRangesAndLists) {
  EXPECT_EQ(CoreSet::parse("0-3")->cores(), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(CoreSet::parse("0,2")->cores(), (std::vector<int>{0, 2}));
  EXPECT_EQ(CoreSet::parse("4-5,0,2,2")->cores(), (std::vector<int>{0, 2, 4, 5}));
  EXPECT_EQ(CoreSet::parse("0-1,4,6-7")->to_string(), "0-1,4,6-7");
  EXPECT_EQ(CoreSet::parse("7")->to_string(), "7");
}

TEST(CoreSetTest, RejectsBadSets) {
  for (const char* bad : {"", "3-1", "a", "1,", ",1", "1-", "-1", "99999", "1--2", "1,,2"}) {
    Result<CoreSet> r = CoreSet::parse(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("core set"), std::string::npos) << r.status().message();
    }
  }
}

TEST(TopologyTest, ClustersFromFakeSysfs) {
  // A phone-like 4+2 system: capacities 1024 (big) and 446 (little).
  const std::string root = ::testing::TempDir() + "/fake_sysfs_cpu";
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  std::ofstream(root + "/online") << "0-5\n";
  for (int c = 0; c < 6; ++c) {
    const std::string d = root + "/cpu" + std::to_string(c);
    std::filesystem::create_directories(d + "/cpufreq");
    std::ofstream(d + "/cpu_capacity") << (c < 4 ? 446 : 1024) << "\n";
    std::ofstream(d + "/cpufreq/cpuinfo_max_freq") << (c < 4 ? 1800000 : 2800000) << "\n";
  }
  Topology t = read_topology(root, CoreSet({0, 1, 2, 3, 4, 5}));
  ASSERT_EQ(t.clusters.size(), 2u);
  EXPECT_EQ(t.clusters[0].cores.to_string(), "4-5");
  EXPECT_EQ(t.clusters[0].capacity, 1024);
  EXPECT_EQ(t.clusters[0].max_freq_khz, 2800000);
  EXPECT_EQ(t.clusters[1].cores.to_string(), "0-3");
  // No capacity or cpufreq: one cluster of all online cores.
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  std::ofstream(root + "/online") << "0-2\n";
  t = read_topology(root, CoreSet({0, 1, 2}));
  ASSERT_EQ(t.clusters.size(), 1u);
  EXPECT_EQ(t.clusters[0].cores.to_string(), "0-2");
}

TEST(ThreadPoolTest, WorkersArePinnedOnePerCore) {
  const CoreSet allowed = process_affinity();
  auto pool = ThreadPool::create(allowed);
  ASSERT_TRUE(pool.ok()) << pool.status().to_string();
  EXPECT_TRUE((*pool)->pinned_per_core());
  auto info = (*pool)->thread_info();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  ASSERT_EQ(info->size(), static_cast<size_t>(allowed.size()));
  std::set<pid_t> tids;
  for (size_t i = 0; i < info->size(); ++i) {
    EXPECT_EQ((*info)[i].affinity, CoreSet({allowed.cores()[i]})) << "thread " << i;
    tids.insert((*info)[i].tid);
  }
  EXPECT_EQ(tids.size(), info->size());
  // The caller's own affinity is untouched.
  EXPECT_EQ(current_thread_affinity(), allowed);
}

// Every thread that runs kernels flushes denormals (core/denormals.h): the leader, which runs
// a single-core device's kernels and oneDNN's, as well as the workers of parallel_for.
TEST(ThreadPoolTest, EveryKernelThreadFlushesDenormals) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "no MXCSR on this CPU";
#endif
  for (const CoreSet& cores : {CoreSet({process_affinity().cores()[0]}), process_affinity()}) {
    auto pool = ThreadPool::create(cores);
    ASSERT_TRUE(pool.ok());
    ASSERT_FALSE(denormals_flushed());  // the caller's mode is its own
    std::atomic<int> flushed{0}, items{0};
    Status st = (*pool)->run([&]() {
      if (denormals_flushed()) ++flushed;
      ++items;
      (*pool)->parallel_for(64, 1, [&](size_t, size_t) {
        if (denormals_flushed()) ++flushed;
        ++items;
      });
      return Status();
    });
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(flushed.load(), items.load()) << cores.to_string();
    EXPECT_FALSE(denormals_flushed());
  }
}

TEST(ThreadPoolTest, RejectsCoresNotAvailable) {
  auto pool = ThreadPool::create(CoreSet({CoreSet::kMaxCore - 1}));
  EXPECT_FALSE(pool.ok());
  EXPECT_FALSE(ThreadPool::create(CoreSet()).ok());
}

TEST(ThreadPoolTest, ParallelForCoversRangeOnce) {
  auto pool = ThreadPool::create(process_affinity());
  ASSERT_TRUE(pool.ok());
  std::vector<std::atomic<int>> hits(1013);
  Status st = (*pool)->run([&]() {
    (*pool)->parallel_for(hits.size(), 7, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) hits[i]++;
    });
    return Status();
  });
  ASSERT_TRUE(st.ok());
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  // A job's error comes back to the caller.
  EXPECT_EQ((*pool)->run([] { return invalid_argument("boom"); }).message(), "boom");
}

// CPU time a thread of this process has run, in ms (/proc schedstat: nanoseconds on a CPU).
double thread_cpu_ms(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/schedstat");
  double ns = -1;
  f >> ns;
  return ns * 1e-6;
}

TEST(ThreadPoolTest, IdlePoolBurnsNoCpuAfterARun) {
  if (process_affinity().size() < 2) GTEST_SKIP() << "needs two cores";
  auto pool = ThreadPool::create(process_affinity());
  ASSERT_TRUE(pool.ok());
  auto info = (*pool)->thread_info();
  ASSERT_TRUE(info.ok());
  const pid_t worker = (*info)[1].tid;
  if (thread_cpu_ms(worker) < 0) GTEST_SKIP() << "no /proc schedstat";
  std::atomic<size_t> items{0};
  // Consecutive parallel calls inside one run, as consecutive kernels make them.
  ASSERT_TRUE((*pool)
                  ->run([&]() {
                    for (int i = 0; i < 20; ++i) {
                      (*pool)->parallel_for(64, 1, [&](size_t b, size_t e) { items += e - b; });
                    }
                    return Status();
                  })
                  .ok());
  EXPECT_EQ(items.load(), 20u * 64u);
  // Left alone, a pthreadpool worker spins through a million pause instructions (~20 ms of CPU
  // here) after its last call, however long that takes under load; parked about a millisecond
  // after the run, it uses a small fraction of that.
  const double before = thread_cpu_ms(worker);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LT(thread_cpu_ms(worker) - before, 6.0);
}

TEST(ThreadPoolTest, RunsFromTwoUserThreadsLoseNoWork) {
  auto pool = ThreadPool::create(process_affinity());
  ASSERT_TRUE(pool.ok());
  constexpr int kRuns = 50;
  std::vector<std::atomic<int>> hits(517);
  std::atomic<int> items_done{0};
  auto user = [&](Status* st) {
    for (int r = 0; r < kRuns && st->ok(); ++r) {
      *st = (*pool)->run([&]() {
        (*pool)->parallel_for(hits.size(), 3, [&](size_t b, size_t e) {
          for (size_t i = b; i < e; ++i) hits[i]++;
        });
        (*pool)->parallel_items(13, [&](int worker, size_t) {
          if (worker >= 0 && worker < (*pool)->num_threads()) items_done++;
        });
        return Status();
      });
    }
  };
  Status sa, sb;
  std::thread ta(user, &sa), tb(user, &sb);
  ta.join();
  tb.join();
  ASSERT_TRUE(sa.ok() && sb.ok());
  for (auto& h : hits) EXPECT_EQ(h.load(), 2 * kRuns);
  EXPECT_EQ(items_done.load(), 2 * kRuns * 13);
}

TEST(ThreadPoolTest, AJobCanKeepToTheLeader) {
  if (process_affinity().size() < 2) GTEST_SKIP() << "needs two cores";
  auto pool = ThreadPool::create(process_affinity());
  ASSERT_TRUE(pool.ok());
  std::set<std::thread::id> seen;
  std::mutex mu;
  std::thread::id leader;
  std::vector<int> hits(301, 0);
  ASSERT_TRUE((*pool)
                  ->run([&]() {
                    leader = std::this_thread::get_id();
                    EXPECT_NE((*pool)->pthreadpool(), nullptr);
                    (*pool)->set_use_workers(false);
                    EXPECT_EQ((*pool)->pthreadpool(), nullptr);
                    (*pool)->parallel_for(hits.size(), 1, [&](size_t b, size_t e) {
                      std::lock_guard<std::mutex> lock(mu);
                      seen.insert(std::this_thread::get_id());
                      for (size_t i = b; i < e; ++i) hits[i]++;
                    });
                    (*pool)->parallel_items(7, [&](int worker, size_t) {
                      std::lock_guard<std::mutex> lock(mu);
                      EXPECT_EQ(worker, 0);
                      seen.insert(std::this_thread::get_id());
                    });
                    return Status();
                  })
                  .ok());
  EXPECT_EQ(seen, std::set<std::thread::id>({leader}));
  for (int h : hits) EXPECT_EQ(h, 1);
  // The next job has the workers again.
  ASSERT_TRUE((*pool)
                  ->run([&]() {
                    EXPECT_NE((*pool)->pthreadpool(), nullptr);
                    return Status();
                  })
                  .ok());
}

// Feeds ThreadChoice run times from `ms(workers, run)` and returns the modes it chose.
std::vector<bool> choices(int runs, const std::function<double(bool, int)>& ms) {
  ThreadChoice c;
  std::vector<bool> modes;
  for (int r = 0; r < runs; ++r) {
    const bool w = c.next(2);
    modes.push_back(w);
    c.record(w, ms(w, r));
  }
  return modes;
}

TEST(ThreadChoiceTest, QuietMachineKeepsAllThreads) {
  // Steady all-thread runs (a slow first run, small jitter), the leader alone twice as slow:
  // the leader alone is never tried.
  const std::vector<bool> m =
      choices(200, [](bool w, int r) { return r == 0 ? 30.0 : (w ? 10.0 : 20.0) + (r % 3) * 0.5; });
  for (size_t r = 0; r < m.size(); ++r) EXPECT_TRUE(m[r]) << r;
  ThreadChoice one;
  EXPECT_TRUE(one.next(1));
}

TEST(ThreadChoiceTest, OutliersDoNotHandRunsToTheLeader) {
  // All threads 10 ms with single spikes of 100 ms (a descheduled worker now and then); the
  // leader alone 20 ms. A lone outlier must not move the program to the leader.
  const std::vector<bool> m = choices(200, [](bool w, int r) {
    if (!w) return 20.0;
    return r % 7 == 3 ? 100.0 : 10.0;
  });
  for (size_t r = 0; r < m.size(); ++r) EXPECT_TRUE(m[r]) << r;
}

TEST(ThreadChoiceTest, LoadedWorkersGiveWayToTheLeaderAndComeBack) {
  // All threads: 10 ms, then 50 ms from run 20 to 120 (a competing process), then 10 again;
  // the leader alone: 20 ms throughout.
  const std::vector<bool> m = choices(250, [](bool w, int r) {
    if (!w) return 20.0;
    return r >= 20 && r < 120 ? 50.0 : 10.0;
  });
  int leader_runs = 0, loaded_workers = 0;
  for (int r = 0; r < 250; ++r) {
    if (r < 20) {
      EXPECT_TRUE(m[static_cast<size_t>(r)]) << r;
    }
    if (r >= 30 && r < 120) {
      leader_runs += m[static_cast<size_t>(r)] ? 0 : 1;
      loaded_workers += m[static_cast<size_t>(r)] ? 1 : 0;
    }
    if (r >= 160) {
      EXPECT_TRUE(m[static_cast<size_t>(r)]) << r;  // back after a retry
    }
  }
  EXPECT_GE(leader_runs, 80);
  EXPECT_GE(loaded_workers, 2);  // the retries every kExplore runs
}

TEST(ThreadChoiceTest, AStartUpTransientCostsOnlyAFewLeaderRuns) {
  // The first timed runs are slow (another process's threads still spin on the cores), then all
  // threads take 10 ms and the leader 20 ms: the leader is tried, but all threads are back after
  // a few runs, not after kExplore.
  const std::vector<bool> m = choices(100, [](bool w, int r) {
    if (!w) return 20.0;
    return r < 3 ? 40.0 : 10.0;
  });
  int leader_runs = 0;
  for (bool w : m) leader_runs += w ? 0 : 1;
  EXPECT_LE(leader_runs, ThreadChoice::kExploreFirst);
  for (size_t r = 12; r < m.size(); ++r) EXPECT_TRUE(m[r]) << r;
}

TEST(ThreadChoiceTest, JitterAloneDoesNotSwitchWhenTheLeaderIsSlower) {
  // All-thread runs alternate 10 and 25 ms (average above 1.5x the best); the leader alone
  // takes 40 ms: it is tried, found slower, and retried only every kExplore runs.
  const std::vector<bool> m =
      choices(200, [](bool w, int r) { return w ? (r % 2 ? 25.0 : 10.0) : 40.0; });
  int leader_runs = 0;
  for (bool w : m) leader_runs += w ? 0 : 1;
  EXPECT_GE(leader_runs, 1);
  EXPECT_LE(leader_runs, 200 / ThreadChoice::kExplore + 2);
}

TEST(LayoutTest, ConversionsAndCopiesMatchALoopOnOneAndAllThreads) {
  for (const CoreSet& cores : {CoreSet({process_affinity().cores()[0]}), process_affinity()}) {
    SCOPED_TRACE(cores.to_string());
    auto pool = ThreadPool::create(cores);
    ASSERT_TRUE(pool.ok());
    // (n, c, hw): a 3-channel image (one row tile, many column blocks; the RGB interleave),
    // odd tails, tiny, whole 16 x 16 register tiles, tiles cut on both sides, one row.
    const int64_t cases[][3] = {{2, 3, 127 * 131}, {1, 67, 61 * 59}, {1, 5, 7},    {3, 33, 1},
                                {2, 3, 17},        {1, 16, 16},      {1, 32, 196}, {1, 384, 49},
                                {1, 17, 1000},     {1, 1, 40},       {1, 4, 33},   {1, 2, 3}};
    for (const auto& [n, c, hw] : cases) {
      SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(hw));
      const size_t count = static_cast<size_t>(n * c * hw);
      std::vector<float> x(count), y(count), z(count);
      for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>(i);
      ASSERT_TRUE((*pool)
                      ->run([&]() {
                        nchw_to_nhwc(x.data(), y.data(), n, c, hw, pool->get());
                        nhwc_to_nchw(y.data(), z.data(), n, c, hw, pool->get());
                        return Status();
                      })
                      .ok());
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t ch = 0; ch < c; ++ch) {
          for (int64_t p = 0; p < hw; ++p) {
            ASSERT_EQ(y[static_cast<size_t>((i * hw + p) * c + ch)],
                      x[static_cast<size_t>((i * c + ch) * hw + p)]);
          }
        }
      }
      EXPECT_EQ(z, x);
    }
    for (size_t bytes : {size_t{0}, size_t{1001}, size_t{300007}}) {
      std::vector<uint8_t> src(bytes), dst(bytes, 0);
      for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
      ASSERT_TRUE((*pool)
                      ->run([&]() {
                        copy_bytes(dst.data(), src.data(), bytes, pool->get());
                        return Status();
                      })
                      .ok());
      EXPECT_EQ(dst, src) << bytes << " bytes";
    }
  }
}

TEST(ThreadPoolTest, DisjointDevicesRunConcurrentlyOnTheirOwnThreads) {
  const CoreSet allowed = process_affinity();
  if (allowed.size() < 2) GTEST_SKIP() << "needs two cores";
  auto a = ThreadPool::create(CoreSet({allowed.cores()[0]}));
  auto b = ThreadPool::create(CoreSet({allowed.cores()[1]}));
  ASSERT_TRUE(a.ok() && b.ok());
  auto ia = (*a)->thread_info();
  auto ib = (*b)->thread_info();
  ASSERT_TRUE(ia.ok() && ib.ok());
  EXPECT_NE((*ia)[0].tid, (*ib)[0].tid);
  EXPECT_EQ((*ia)[0].affinity, CoreSet({allowed.cores()[0]}));
  EXPECT_EQ((*ib)[0].affinity, CoreSet({allowed.cores()[1]}));
  // Both jobs must be inside their pools at the same time: each waits for the other.
  std::atomic<int> inside{0};
  auto job = [&]() {
    inside++;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (inside.load() < 2 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    return inside.load() >= 2 ? Status()
                              : internal_error("the other device never ran concurrently");
  };
  Status sa, sb;
  std::thread ta([&] { sa = (*a)->run(job); });
  std::thread tb([&] { sb = (*b)->run(job); });
  ta.join();
  tb.join();
  EXPECT_TRUE(sa.ok()) << sa.to_string();
  EXPECT_TRUE(sb.ok()) << sb.to_string();
}

TEST(ArenaTest, OverlappingLifetimesNeverShareMemory) {
  std::vector<ArenaRequest> req = {
      {1000, 0, 2}, {500, 1, 3}, {2000, 3, 4}, {700, 4, 5}, {100, 0, 5}};
  ArenaPlan p = plan_arena(req, 64, 16);
  for (size_t i = 0; i < req.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % 64, 0u);
    for (size_t j = i + 1; j < req.size(); ++j) {
      const bool time =
          !(req[i].last_step < req[j].first_step || req[j].last_step < req[i].first_step);
      const bool space = p.offsets[i] < p.offsets[j] + req[j].bytes + 16 &&
                         p.offsets[j] < p.offsets[i] + req[i].bytes + 16;
      EXPECT_FALSE(time && space) << i << " and " << j;
    }
  }
  EXPECT_LT(p.total_bytes, p.sum_bytes);  // 0 and 2 share memory
}

// The greedy-by-size plan as first written: every request scans every placed one. The planner
// finds the overlapping tensors through per-step lists; its offsets must be these, exactly.
ArenaPlan brute_force_plan(std::span<const ArenaRequest> req, uint64_t alignment,
                           uint64_t padding) {
  const size_t n = req.size();
  ArenaPlan plan;
  plan.offsets.assign(n, 0);
  std::vector<uint64_t> size(n);
  for (size_t i = 0; i < n; ++i) {
    size[i] = (req[i].bytes + padding + alignment - 1) & ~(alignment - 1);
    plan.sum_bytes += size[i];
  }
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return size[a] > size[b]; });
  std::vector<size_t> placed;
  for (size_t idx : order) {
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (size_t p : placed) {
      if (req[p].last_step < req[idx].first_step || req[idx].last_step < req[p].first_step)
        continue;
      busy.push_back({plan.offsets[p], plan.offsets[p] + size[p]});
    }
    std::sort(busy.begin(), busy.end());
    uint64_t best = UINT64_MAX, best_waste = UINT64_MAX, cursor = 0;
    for (const auto& [lo, hi] : busy) {
      if (lo >= cursor && lo - cursor >= size[idx] && lo - cursor - size[idx] < best_waste) {
        best = cursor;
        best_waste = lo - cursor - size[idx];
      }
      cursor = std::max(cursor, hi);
    }
    if (best == UINT64_MAX) best = cursor;
    plan.offsets[idx] = best;
    plan.total_bytes = std::max(plan.total_bytes, best + size[idx]);
    placed.push_back(idx);
  }
  return plan;
}

TEST(ArenaTest, MatchesTheBruteForcePlanOnRandomLifetimes) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 60), steps = 1 + static_cast<int>(rng() % 40);
    const int base = static_cast<int>(rng() % 5) - 2;  // steps may start below 0
    std::vector<ArenaRequest> req(static_cast<size_t>(n));
    for (ArenaRequest& r : req) {
      // Sizes from a few values, so that ties in the size order occur.
      r.bytes = (rng() % 3 == 0) ? 4096 : 1 + rng() % 20000;
      r.first_step = base + static_cast<int>(rng() % static_cast<unsigned>(steps));
      const int len = rng() % 4 == 0 ? static_cast<int>(rng() % static_cast<unsigned>(steps))
                                     : static_cast<int>(rng() % 3);
      r.last_step = r.first_step + len;
    }
    const ArenaPlan got = plan_arena(req, 64, 16), want = brute_force_plan(req, 64, 16);
    ASSERT_EQ(got.offsets, want.offsets) << "trial " << trial;
    EXPECT_EQ(got.total_bytes, want.total_bytes);
    EXPECT_EQ(got.sum_bytes, want.sum_bytes);
  }
}

TEST(ArenaTest, ABackwardRangeCountsAsTheStepsBetween) {
  // [5, 3] is live at 3..5: it may not share memory with a tensor live at 4.
  std::vector<ArenaRequest> req = {{1000, 5, 3}, {1000, 4, 4}};
  const ArenaPlan p = plan_arena(req, 64, 0);
  EXPECT_NE(p.offsets[0], p.offsets[1]);
  EXPECT_TRUE(plan_arena(std::vector<ArenaRequest>{}, 64, 0).offsets.empty());
}

TEST(CpuDeviceTest, NamesAndErrors) {
  EXPECT_TRUE(open_device("cpu").ok());
  EXPECT_TRUE(open_device("cpu:0").ok());
  Result<std::unique_ptr<Device>> bad = open_device("cpu:999");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("999"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(open_device("cpu:2-1").ok());
  EXPECT_FALSE(open_device("cpu:x").ok());
  EXPECT_FALSE(open_device("cpu@1800").ok());
  bool listed = false;
  for (const DeviceListing& d : list_devices()) listed = listed || d.name == "cpu";
  EXPECT_TRUE(listed);
}

TEST(CpuDeviceTest, ProgramChecksInputsAndReportsMemory) {
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 8, 13, 13}});
  g.inputs().push_back(x);
  const ValueId w = g.add_constant("w", testing::random_tensor({16, 8, 3, 3}, 1));
  const ValueId y = g.add_value("y");
  const ValueId z = g.add_value("z");
  Node conv;
  conv.name = "conv";
  conv.kind = OpKind::kConv;
  conv.inputs = {x, w};
  conv.outputs = {y};
  g.add_node(conv);
  Node relu;
  relu.name = "relu";
  relu.kind = OpKind::kRelu;
  relu.inputs = {y};
  relu.outputs = {z};
  g.add_node(relu);
  g.outputs().push_back(z);
  ASSERT_TRUE(g.infer_shapes().ok());
  auto dev = open_device("cpu");
  ASSERT_TRUE(dev.ok());
  const NodeId layers[] = {0, 1};
  auto prog = (*dev)->compile(g, layers);
  ASSERT_TRUE(prog.ok()) << prog.status().to_string();
  auto* cp = dynamic_cast<CpuProgram*>(prog->get());
  ASSERT_NE(cp, nullptr);
  EXPECT_EQ(cp->num_conversions(), 0);  // in: converted on copy-in; out: on copy-out
  EXPECT_EQ(cp->num_reference_steps(), 0);
  EXPECT_GT((*prog)->peak_memory_bytes(), 16u * 8 * 9 * 4);
  std::vector<Tensor> out(1);
  Tensor wrong = testing::random_tensor({1, 8, 13, 12}, 2);
  Status st = (*prog)->run({&wrong, 1}, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'x'"), std::string::npos) << st.message();
  std::vector<Tensor> none;
  EXPECT_FALSE((*prog)->run(none, out).ok());
}

// Every op of the foundation set has a kernel-table entry except the ones import folds away;
// capabilities() notes the reference fallback for those.
TEST(CpuDeviceTest, CapabilitiesNoteTheReferenceFallback) {
  auto dev = open_device("cpu");
  ASSERT_TRUE(dev.ok());
  Graph g;
  for (int k = 0; k < static_cast<int>(OpKind::kCount); ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    if (!op_is_registered(kind)) continue;
    Node n;
    n.kind = kind;
    const Capability c = (*dev)->capabilities(g, n);
    SCOPED_TRACE(op_name(kind));
    EXPECT_TRUE(c.supported);
    if (!::tessera::testing::is_foundation_op(kind))
      continue;  // later ops may run on the reference kernel
    const bool folded =
        kind == OpKind::kShape || kind == OpKind::kConstant || kind == OpKind::kCast;
    EXPECT_EQ(has_optimised_kernel(kind), !folded);
    EXPECT_EQ(c.reason.find("reference kernel") != std::string::npos, folded) << c.reason;
  }
}

// A Flatten between two layers shares its input's storage (nothing is copied) and the result is
// unchanged.
TEST(CpuDeviceTest, ReshapeSharesItsInputBuffer) {
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 64, 8, 8}});
  g.inputs().push_back(x);
  auto add = [&](OpKind kind, ValueId in) {
    Node n;
    n.name = op_name(kind);
    n.kind = kind;
    n.inputs = {in};
    n.outputs = {g.add_value(n.name + "_out")};
    const ValueId v = n.outputs[0];
    g.add_node(std::move(n));
    return v;
  };
  const ValueId r = add(OpKind::kRelu, x);
  const ValueId f = add(OpKind::kFlatten, r);
  const ValueId y = add(OpKind::kSigmoid, f);
  g.outputs().push_back(y);
  ASSERT_TRUE(g.infer_shapes().ok());
  auto dev = open_device("cpu:0");
  ASSERT_TRUE(dev.ok());
  const NodeId layers[] = {0, 1, 2};
  auto prog = (*dev)->compile(g, layers);
  ASSERT_TRUE(prog.ok()) << prog.status().to_string();
  auto* cp = dynamic_cast<CpuProgram*>(prog->get());
  ASSERT_NE(cp, nullptr);
  EXPECT_NE(cp->describe().find("alias, no copy"), std::string::npos) << cp->describe();
  const Tensor in = testing::random_tensor({1, 64, 8, 8}, 3);
  std::vector<Tensor> out(1);
  ASSERT_TRUE((*prog)->run({&in, 1}, out).ok());
  for (int64_t i = 0; i < in.numel(); ++i) {
    const float v = std::max(in.data<float>()[i], 0.f);
    ASSERT_NEAR(out[0].data<float>()[i], 1.f / (1.f + std::exp(-v)), 1e-5f) << i;
  }
}

TEST(OpenBlasTest, LoadsWithTheRightCore) {
  const OpenBlas& b = openblas();
  if (!b.available()) GTEST_SKIP() << b.note;
  float a[4] = {1, 2, 3, 4}, x[4] = {1, 0, 0, 1}, c[4] = {};
  b.sgemm(kRowMajor, kNoTrans, kNoTrans, 2, 2, 2, 1.f, a, 2, x, 2, 0.f, c, 2);
  EXPECT_EQ(c[0], 1);
  EXPECT_EQ(c[3], 4);
  EXPECT_FALSE(b.note.empty());
  // On AVX-512 machines the core is never the generic fallback Debian's build picks for CPUs it
  // does not know.
  std::printf("[ openblas ] %s\n", b.note.c_str());
  if (b.get_corename != nullptr && std::getenv("TESSERA_OPENBLAS_CORETYPE") == nullptr) {
    EXPECT_EQ(std::string(b.get_corename()).find("Prescott"), std::string::npos) << b.note;
    // Also over an OPENBLAS_CORETYPE naming an older core in the environment.
    if (cpuinfo_initialize() && cpuinfo_has_x86_avx512f() &&
        b.note.find("loaded before") == std::string::npos) {
      EXPECT_TRUE(b.avx512_kernels) << b.note;
    }
  }
  // The process's OPENBLAS_CORETYPE is what it started with (/proc/self/environ is the initial
  // environment): the load does not change it.
  std::ifstream environ_file("/proc/self/environ", std::ios::binary);
  std::string entry, initial;
  bool initially_set = false;
  while (std::getline(environ_file, entry, '\0')) {
    if (entry.rfind("OPENBLAS_CORETYPE=", 0) == 0) {
      initially_set = true;
      initial = entry.substr(18);
    }
  }
  const char* now = std::getenv("OPENBLAS_CORETYPE");
  EXPECT_EQ(now != nullptr, initially_set);
  if (now != nullptr && initially_set) {
    EXPECT_EQ(std::string(now), initial);
  }
}

}  // namespace
}  // namespace tessera::cpu
