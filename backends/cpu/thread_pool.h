// The thread pool of one `cpu` device: a dedicated leader thread plus pthreadpool workers, one
// thread per core of the device's CoreSet, each pinned to its own core.
//
// Why a leader thread: pthreadpool runs work on the calling thread as its thread 0, and the
// caller of Program::run is a user thread Tessera must not re-pin. So every run is handed to the
// leader (pinned to the first core), which calls XNNPACK and Tessera's kernels with the pool;
// the caller waits. Two devices on disjoint core sets therefore never share a thread, and each
// can run while the other does.
//
// How workers get pinned (pthreadpool has no affinity API): the leader first restricts itself to
// the whole core set, then creates the pthreadpool, whose workers inherit that mask; then it runs
// a task with one item per thread in which every item pins its thread to one core and waits on a
// barrier with all the others. pthreadpool gives thread i the i-th item of an n-item range first,
// and no thread can hold two items while the barrier is closed, so item i runs on thread i. If the
// barrier ever times out (a pthreadpool that schedules differently), workers keep the core-set
// mask they inherited and `pinned_per_core()` reports false.
#pragma once

#include <pthreadpool.h>
#include <sys/types.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/cpu/topology.h"
#include "core/status.h"

namespace tessera::cpu {

class ThreadPool {
 public:
  // Starts one thread per core of `cores` (cores must be allowed for this process).
  static Result<std::unique_ptr<ThreadPool>> create(const CoreSet& cores);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  const CoreSet& cores() const { return cores_; }
  int num_threads() const { return cores_.size(); }
  // True when every thread is pinned to exactly its own core.
  bool pinned_per_core() const { return pinned_per_core_; }

  // Runs `fn` on the leader thread and waits for it. Calls from several threads are serialised.
  // Called from inside a job it runs `fn` inline.
  Status run(const std::function<Status()>& fn);

  // For code running inside run(): the pthreadpool to hand to XNNPACK (null with one thread,
  // or while the job keeps to the leader, which XNNPACK and pthreadpool treat as "run on the
  // caller"). Operators set up with the pool run correctly without it.
  pthreadpool_t pthreadpool() const {
    return use_workers_.load(std::memory_order_relaxed) ? pool_ : nullptr;
  }
  // Inside run(): with false, the rest of the job keeps to the leader thread (pthreadpool() is
  // null, parallel_for and parallel_items run inline); every job starts with the workers on.
  void set_use_workers(bool use) { use_workers_.store(use, std::memory_order_relaxed); }
  // Inside run(): calls fn(begin, end) over [0, n) in tiles of `tile`, spread over the threads.
  void parallel_for(size_t n, size_t tile, const std::function<void(size_t, size_t)>& fn);
  // Inside run(): calls fn(worker, item) for every item in [0, n), items handed out one at a time
  // to whichever thread is free (balances uneven items); `worker` < num_threads() is unique
  // among concurrent calls, so it can index per-thread scratch memory.
  void parallel_items(size_t n, const std::function<void(int, size_t)>& fn);

  // Inside run(): puts the workers to sleep now. pthreadpool workers spin-wait (a million pause
  // instructions, tens of milliseconds) after every parallel call, so that consecutive kernels
  // of a run find them awake; the leader parks them once the pool has had no job for a
  // millisecond, so an idle pool burns no CPU while runs back to back still find them awake.
  void park_workers();

  // Reads back, inside a one-item-per-thread task, each thread's kernel thread id and CPU
  // affinity (sched_getaffinity), thread 0 being the leader. For tests and `tessera devices`.
  struct ThreadInfo {
    pid_t tid;
    CoreSet affinity;
  };
  Result<std::vector<ThreadInfo>> thread_info();

 private:
  explicit ThreadPool(CoreSet cores) : cores_(std::move(cores)) {}
  void leader_main();
  // Runs fn(i) for i in [0, num_threads) with item i on thread i, all items meeting at a
  // barrier; false when the barrier timed out.
  bool run_one_per_thread(const std::function<void(int)>& fn);

  CoreSet cores_;
  pthreadpool_t pool_ = nullptr;
  bool pinned_per_core_ = false;
  std::atomic<bool> use_workers_{true};
  std::thread leader_;
  std::thread::id leader_id_;

  std::mutex run_mu_;  // one run at a time
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<Status()>* job_ = nullptr;
  Status job_status_;
  bool job_done_ = false;
  bool stop_ = false;
  bool started_ = false;
  Status start_status_;
};

// Whether the runs of one program use all of its pool's threads or only the leader, learnt from
// their wall times. On a machine where other processes compete for the pool's cores, a pinned
// worker that is not on its core stalls every fork/join until the scheduler gives it one (a
// time slice, milliseconds: `BM_PoolDispatch`), which can make a 2-thread run several times
// slower than the leader alone. Runs use all threads until they turn slow: the median of the
// last kWindow all-thread runs above 1.5x the fastest one seen (one outlier never counts). Then
// the leader alone is tried at once, and kept while its average beats that median; from the
// leader, all threads are retried after kExploreFirst runs, then after twice as many each time
// the leader stays ahead, up to every kExplore runs (a retry starts the window afresh, so one
// fast run brings them back). So a transient (the first runs of a process started while another
// engine's threads still spin on the cores) costs a few leader-only runs, not kExplore. A quiet
// machine never runs leader-only, so what a program's runs measure is what the profiler's
// all-thread timings predict. Used on the leader thread only (jobs are serialised there), so it
// needs no lock.
class ThreadChoice {
 public:
  static constexpr int kExplore = 32;
  static constexpr int kExploreFirst = 4;
  static constexpr int kWindow = 5;
  // Whether the next run should use the workers; `threads` is the pool's size.
  bool next(int threads);
  // The wall time of a run made in the mode next() returned.
  void record(bool workers, double ms);

 private:
  double typical_all() const;  // median of the window
  bool slow() const;

  int runs_ = 0;
  std::array<double, kWindow> window_{};  // the last all-thread run times (ring)
  int window_size_ = 0, window_next_ = 0;
  double best_all_ = -1, avg_leader_ = -1;  // < 0: not measured yet
  bool leader_ = false;                     // the current mode: leader only
  bool retry_ = false;                      // this run tries the other mode
  int since_retry_ = 0;
  int explore_ = kExploreFirst;  // runs in leader mode before all threads are retried
};

// Pins the calling thread to `cores`; the message names the cores on failure.
Status pin_current_thread(const CoreSet& cores);
// The calling thread's affinity.
CoreSet current_thread_affinity();

}  // namespace tessera::cpu
