#include "backends/cpu/thread_pool.h"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "core/denormals.h"

// pthreadpool hands work to its threads and waits for them with its own atomics and futexes.
// Under ThreadSanitizer the library is not instrumented, so those hand-offs are invisible and
// every read a worker makes of what the caller wrote reads as a race. The hand-offs are stated
// here instead: the caller releases the work's context before it parallelises and acquires it
// after; each work item acquires it when it starts and releases it when it ends. Without
// ThreadSanitizer these compile to nothing.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define TESSERA_HANDOFF_ACQUIRE(addr) __tsan_acquire(addr)
#define TESSERA_HANDOFF_RELEASE(addr) __tsan_release(addr)
#else
#define TESSERA_HANDOFF_ACQUIRE(addr) static_cast<void>(addr)
#define TESSERA_HANDOFF_RELEASE(addr) static_cast<void>(addr)
#endif

namespace tessera::cpu {

Status pin_current_thread(const CoreSet& cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores.cores()) {
    if (c >= CPU_SETSIZE) return invalid_argument("core " + std::to_string(c) + " is out of range");
    CPU_SET(c, &set);
  }
  const int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (err != 0) {
    return failed_precondition("cannot pin a thread to cores " + cores.to_string() + ": " +
                               std::strerror(err));
  }
  return Status();
}

CoreSet current_thread_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cores.push_back(c);
    }
  }
  return CoreSet(std::move(cores));
}

Result<std::unique_ptr<ThreadPool>> ThreadPool::create(const CoreSet& cores) {
  if (cores.empty()) return invalid_argument("a thread pool needs at least one core");
  const CoreSet allowed = process_affinity();
  for (int c : cores.cores()) {
    if (!allowed.contains(c)) {
      return not_found("core " + std::to_string(c) +
                       " is not available to this process (allowed: " + allowed.to_string() + ")");
    }
  }
  std::unique_ptr<ThreadPool> p(new ThreadPool(cores));
  p->leader_ = std::thread([raw = p.get()] { raw->leader_main(); });
  {
    std::unique_lock<std::mutex> lock(p->mu_);
    p->cv_.wait(lock, [&] { return p->started_; });
  }
  if (!p->start_status_.ok()) return p->start_status_;  // the destructor joins the leader
  return p;
}

ThreadPool::~ThreadPool() {
  if (leader_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    leader_.join();
  }
}

void ThreadPool::leader_main() {
  leader_id_ = std::this_thread::get_id();
  // The leader runs kernels itself (all of a one-core device's, and oneDNN's, whose OpenMP
  // team it creates and which inherits its mode): flush denormals for the thread's lifetime.
  const ScopedFlushDenormals flush;
  // Workers inherit the creating thread's mask: restrict it to the core set first.
  Status st = pin_current_thread(cores_);
  if (st.ok() && cores_.size() > 1) {
    pool_ = pthreadpool_create(static_cast<size_t>(cores_.size()));
    if (pool_ == nullptr)
      st = resource_exhausted("cannot start " + std::to_string(cores_.size()) + " threads");
  }
  if (st.ok()) {
    std::vector<int> cores = cores_.cores();
    pinned_per_core_ = run_one_per_thread([&](int i) {
      // Failures leave the inherited core-set mask in place.
      (void)pin_current_thread(CoreSet({cores[static_cast<size_t>(i)]}));
    });
    // The leader itself keeps core 0 of the set (it was item 0).
    if (!pinned_per_core_) (void)pin_current_thread(cores_);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    start_status_ = st;
    started_ = true;
  }
  cv_.notify_all();
  // Between jobs: a job arriving within kParkAfter finds the workers still spinning (runs back
  // to back pay no wake-up); after that the workers are parked, so an idle pool burns no CPU.
  constexpr auto kParkAfter = std::chrono::milliseconds(1);
  bool workers_spinning = pool_ != nullptr;  // after the pinning task
  while (st.ok()) {
    std::unique_lock<std::mutex> lock(mu_);
    auto ready = [&] { return stop_ || job_ != nullptr; };
    if (workers_spinning && !cv_.wait_for(lock, kParkAfter, ready)) {
      lock.unlock();
      park_workers();
      workers_spinning = false;
      continue;
    }
    cv_.wait(lock, ready);
    if (stop_) break;
    const std::function<Status()>* job = job_;
    lock.unlock();
    Status result = (*job)();
    use_workers_.store(true, std::memory_order_relaxed);
    workers_spinning = pool_ != nullptr;
    lock.lock();
    job_status_ = std::move(result);
    job_ = nullptr;
    job_done_ = true;
    lock.unlock();
    cv_.notify_all();
  }
  if (pool_ != nullptr) pthreadpool_destroy(pool_);
  pool_ = nullptr;
}

Status ThreadPool::run(const std::function<Status()>& fn) {
  if (std::this_thread::get_id() == leader_id_) return fn();
  std::lock_guard<std::mutex> run_lock(run_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  job_done_ = false;
  cv_.notify_all();
  cv_.wait(lock, [&] { return job_done_; });
  return std::move(job_status_);
}

namespace {

struct ForContext {
  const std::function<void(size_t, size_t)>* fn;
  size_t n;
};

void for_tile(void* ctx, size_t begin, size_t count) {
  TESSERA_HANDOFF_ACQUIRE(ctx);
  const auto* c = static_cast<const ForContext*>(ctx);
  (*c->fn)(begin, begin + count);
  TESSERA_HANDOFF_RELEASE(ctx);
}

// A barrier for `count` parties that gives up after a deadline.
struct TimedBarrier {
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  int count = 0;
  bool timed_out = false;
  std::chrono::steady_clock::time_point deadline;

  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mu);
    if (++arrived == count) {
      cv.notify_all();
      return;
    }
    if (!cv.wait_until(lock, deadline, [&] { return arrived >= count; })) timed_out = true;
  }
};

struct OnePerThread {
  const std::function<void(int)>* fn;
  TimedBarrier* barrier;
};

void one_per_thread_item(void* ctx, size_t i) {
  TESSERA_HANDOFF_ACQUIRE(ctx);
  auto* c = static_cast<OnePerThread*>(ctx);
  (*c->fn)(static_cast<int>(i));
  // The barrier lives on the caller's stack: its last touch here must come before the release
  // that hands the frame back, or the caller's reuse of that stack races with it.
  c->barrier->arrive_and_wait();
  TESSERA_HANDOFF_RELEASE(ctx);
}

}  // namespace

void ThreadPool::parallel_for(size_t n, size_t tile,
                              const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  if (tile == 0) tile = 1;
  if (pthreadpool() == nullptr || n <= tile) {
    fn(0, n);
    return;
  }
  ForContext ctx{&fn, n};
  TESSERA_HANDOFF_RELEASE(&ctx);
  pthreadpool_parallelize_1d_tile_1d(pool_, for_tile, &ctx, n, tile,
                                     PTHREADPOOL_FLAG_DISABLE_DENORMALS);  // core/denormals.h
  TESSERA_HANDOFF_ACQUIRE(&ctx);
}

void ThreadPool::parallel_items(size_t n, const std::function<void(int, size_t)>& fn) {
  const size_t workers = std::min(n, static_cast<size_t>(num_threads()));
  if (pthreadpool() == nullptr || workers <= 1) {
    for (size_t i = 0; i < n; ++i) fn(0, i);
    return;
  }
  std::atomic<size_t> next{0};
  parallel_for(workers, 1, [&](size_t lo, size_t hi) {
    for (size_t w = lo; w < hi; ++w) {
      for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(static_cast<int>(w), i);
    }
  });
}

void ThreadPool::park_workers() {
  if (pool_ == nullptr) return;
  pthreadpool_parallelize_1d(
      pool_, [](void*, size_t) {}, nullptr, static_cast<size_t>(num_threads()),
      PTHREADPOOL_FLAG_YIELD_WORKERS);
}

double ThreadChoice::typical_all() const {
  std::array<double, kWindow> w = window_;
  const auto mid = w.begin() + window_size_ / 2;
  std::nth_element(w.begin(), mid, w.begin() + window_size_);
  return *mid;
}

bool ThreadChoice::slow() const {
  return window_size_ >= 3 && typical_all() > 1.5 * best_all_;
}

bool ThreadChoice::next(int threads) {
  if (threads < 2) return true;
  if (leader_) {
    retry_ = ++since_retry_ >= explore_;
  } else {
    // Slow all-thread runs: try the leader now if it was never measured, else every kExplore.
    retry_ = slow() && (avg_leader_ < 0 || ++since_retry_ >= kExplore);
  }
  if (retry_) since_retry_ = 0;
  return leader_ == retry_;
}

void ThreadChoice::record(bool workers, double ms) {
  if (runs_++ == 0) return;  // the first run warms caches and pages up
  if (workers) {
    best_all_ = best_all_ < 0 ? ms : std::min(best_all_, ms);
    if (retry_) window_size_ = window_next_ = 0;  // the load may have changed since
    window_[static_cast<size_t>(window_next_)] = ms;
    window_next_ = (window_next_ + 1) % kWindow;
    window_size_ = std::min(window_size_ + 1, kWindow);
    if (leader_) {
      // A retry from the leader: all threads back at once if they beat it; otherwise wait twice
      // as long before the next retry (a start-up transient costs a few runs, a lasting load one
      // run in kExplore).
      leader_ = avg_leader_ < typical_all();
      explore_ = leader_ ? std::min(2 * explore_, kExplore) : kExploreFirst;
    }
  } else {
    avg_leader_ = avg_leader_ < 0 || retry_ ? ms : 0.75 * avg_leader_ + 0.25 * ms;
    leader_ = window_size_ == 0 || avg_leader_ < typical_all();
  }
}

bool ThreadPool::run_one_per_thread(const std::function<void(int)>& fn) {
  TimedBarrier barrier;
  barrier.count = num_threads();
  barrier.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  OnePerThread ctx{&fn, &barrier};
  if (pool_ == nullptr) {
    one_per_thread_item(&ctx, 0);
  } else {
    TESSERA_HANDOFF_RELEASE(&ctx);
    pthreadpool_parallelize_1d(pool_, one_per_thread_item, &ctx, static_cast<size_t>(num_threads()),
                               PTHREADPOOL_FLAG_DISABLE_DENORMALS);
    TESSERA_HANDOFF_ACQUIRE(&ctx);
  }
  return !barrier.timed_out && barrier.arrived == barrier.count;
}

Result<std::vector<ThreadPool::ThreadInfo>> ThreadPool::thread_info() {
  std::vector<ThreadInfo> info(static_cast<size_t>(num_threads()));
  bool ok = false;
  RETURN_IF_ERROR(run([&]() -> Status {
    ok = run_one_per_thread([&](int i) {
      info[static_cast<size_t>(i)] = {static_cast<pid_t>(syscall(SYS_gettid)),
                                      current_thread_affinity()};
    });
    return Status();
  }));
  if (!ok) return internal_error("the thread pool did not run one item per thread");
  return info;
}

}  // namespace tessera::cpu
