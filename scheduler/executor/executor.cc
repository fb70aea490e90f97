// The executor's two drivers over one stage graph (executor.h).
//
// State shared by the actor threads lives in Impl under one mutex and one condition variable:
// steps take milliseconds, so one lock taken a few times per step costs nothing measurable and
// keeps the protocol easy to check. Programs run with the lock released.
#include "scheduler/executor/executor.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "backends/registry.h"
#include "scheduler/executor/stage_graph.h"

namespace tessera {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

// One frame in flight and the buffers it owns: the table of boundary tensors by ValueId (the
// step outputs that are not model outputs are allocated once per slot and written in place).
struct FrameSlot {
  uint64_t frame = 0;
  bool busy = false;
  std::vector<Tensor> table;  // by ValueId
  std::vector<uint8_t> done;  // by step: finished or skipped for this frame
  int steps_done = 0;
  Status status;  // the frame's first error
  std::atomic<bool> cancel{false};
  Clock::time_point deadline = Clock::time_point::max();
  double queued_ms = 0;  // submit() waited this long for the slot
};

struct Executor::Impl {
  const LayerGraph* lg = nullptr;
  const Plan* plan = nullptr;
  StageGraph sg;
  Clock::time_point t0;

  // Frame slots: [0, num_slots) for the stream, one more for run().
  int num_slots = 0;
  std::vector<std::unique_ptr<FrameSlot>> slots;

  mutable std::mutex mu;
  std::condition_variable cv;
  // Stream state (guarded by mu).
  bool open = false;      // threads running
  bool stopping = false;  // close() in progress: no new frames
  bool running_sequential = false;
  uint64_t first_frame = 0;         // of the current stream
  uint64_t submitted = 0;           // frames submitted so far (ids 0..submitted-1)
  uint64_t returned = 0;            // frames returned by next()
  std::deque<FrameResult> results;  // finished frames not yet returned, in frame order
  std::vector<std::thread> threads;
  std::vector<ExecutorStep> step_descs;  // sg.steps' descriptions, for Executor::steps()
  // Measurements (guarded by mu).
  std::deque<StepRun> runs;  // the most recent history_limit
  size_t history_limit = 100000;
  uint64_t runs_dropped = 0;
  std::vector<std::vector<int64_t>> occupancy;  // by actor
  int sequential_runs = 0;

  // Steps whose program runs frames overlapped (Program::max_in_flight() > 1) in streams: the
  // actor starts a frame and goes on; the step's completion thread finishes the frames in the
  // order started (guarded by mu).
  struct Started {
    FrameSlot* slot = nullptr;
    StepRun run;
    Clock::time_point start;
  };
  struct OverlappedStep {
    int step = 0;
    int actor = 0;
    int max_in_flight = 1;
    int in_flight = 0;  // started, not yet finished
    std::deque<Started> started;
  };
  std::vector<OverlappedStep> overlapped;
  std::vector<int> overlapped_of_step;  // index into `overlapped`, or -1
  std::vector<uint8_t> actor_exited;    // by actor: its thread left its loop (this stream)

  // Appends to the history, dropping the oldest beyond the limit. Holds mu.
  void record_run(const StepRun& r) {
    runs.push_back(r);
    while (runs.size() > history_limit) {
      runs.pop_front();
      ++runs_dropped;
    }
  }

  FrameSlot& slot_of(uint64_t frame) {
    return *slots[static_cast<size_t>(frame % static_cast<uint64_t>(num_slots))];
  }
  FrameSlot& sequential_slot() { return *slots.back(); }

  Status allocate_slot_buffers(FrameSlot& s) const {
    const Graph& g = lg->graph();
    s.table.assign(static_cast<size_t>(g.num_values()), Tensor());
    for (ValueId v : sg.slot_values) {
      const TensorInfo& info = g.value(v).info;
      ASSIGN_OR_RETURN(s.table[static_cast<size_t>(v)], Tensor::create(info.dtype, info.shape));
    }
    s.done.assign(sg.steps.size(), 0);
    return Status();
  }

  Status check_inputs(std::span<const Tensor> inputs) const {
    const Graph& g = lg->graph();
    if (inputs.size() != g.inputs().size()) {
      return invalid_argument("the model takes " + std::to_string(g.inputs().size()) +
                              " inputs, got " + std::to_string(inputs.size()));
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Value& v = g.value(g.inputs()[i]);
      if (inputs[i].dtype() != v.info.dtype || inputs[i].shape() != v.info.shape) {
        return invalid_argument("input " + quote_name(v.name) + ": expected " +
                                dtype_name(v.info.dtype) + v.info.shape.to_string() + ", got " +
                                inputs[i].describe());
      }
    }
    return Status();
  }

  // Binds a frame's inputs to a slot and resets its per-frame state.
  void begin_frame(FrameSlot& s, uint64_t frame, std::span<const Tensor> inputs,
                   Clock::time_point deadline) {
    const Graph& g = lg->graph();
    s.frame = frame;
    s.busy = true;
    std::fill(s.done.begin(), s.done.end(), 0);
    s.steps_done = 0;
    s.status = Status();
    s.cancel.store(false);
    s.deadline = deadline;
    for (size_t i = 0; i < inputs.size(); ++i)
      s.table[static_cast<size_t>(g.inputs()[i])] = inputs[i];
    for (ValueId v : g.outputs()) {
      if (!g.value(v).is_constant) s.table[static_cast<size_t>(v)] = Tensor();
    }
  }

  // The graph outputs of a finished frame (fresh tensors, constants, or inputs passed through),
  // and the slot released: its references to the caller's inputs and outputs dropped.
  FrameResult end_frame(FrameSlot& s) {
    const Graph& g = lg->graph();
    FrameResult r;
    r.frame = s.frame;
    r.status = s.status;
    if (r.status.ok()) {
      for (ValueId v : g.outputs()) {
        const Value& val = g.value(v);
        Tensor t = val.is_constant ? val.data : s.table[static_cast<size_t>(v)];
        if (!t.defined()) {
          r.status = internal_error("model output " + quote_name(val.name) + " was not produced");
          r.outputs.clear();
          break;
        }
        r.outputs.push_back(std::move(t));
      }
    }
    for (ValueId v : g.inputs()) s.table[static_cast<size_t>(v)] = Tensor();
    for (ValueId v : g.outputs()) {
      if (!g.value(v).is_constant) s.table[static_cast<size_t>(v)] = Tensor();
    }
    s.busy = false;
    return r;
  }

  // The inputs of step `i` of the frame in `s` (ready), into `inputs`; false with `*status` set
  // when one is missing. Counts their bytes into `r`.
  bool gather_inputs(FrameSlot& s, int i, std::vector<Tensor>* inputs, StepRun* r,
                     Status* status) const {
    const StageGraph::Step& st = sg.steps[static_cast<size_t>(i)];
    const Graph& g = lg->graph();
    const auto& in_ids = st.program->input_values();
    inputs->assign(in_ids.size(), Tensor());
    for (size_t k = 0; k < in_ids.size(); ++k) {
      const Tensor& t = s.table[static_cast<size_t>(in_ids[k])];
      if (!t.defined() || (t.numel() > 0 && t.raw() == nullptr)) {
        *status =
            internal_error(step_where(*plan, st.desc) + ": input '" + g.value(in_ids[k]).name +
                           "' was not produced by an earlier stage");
        r->ok = false;
        return false;
      }
      (*inputs)[k] = t;
      r->bytes_in += st.input_bytes[k];
    }
    return true;
  }

  // The output tensors step `i` writes: the slot's buffers, undefined for model outputs.
  std::vector<Tensor> step_outputs(FrameSlot& s, int i) const {
    const StageGraph::Step& st = sg.steps[static_cast<size_t>(i)];
    const auto& out_ids = st.program->output_values();
    std::vector<Tensor> outputs(out_ids.size());
    for (size_t k = 0; k < out_ids.size(); ++k) {
      if (!st.model_output[k]) outputs[k] = s.table[static_cast<size_t>(out_ids[k])];
    }
    return outputs;
  }

  // The model outputs a step produced, into the frame's table.
  void store_outputs(FrameSlot& s, int i, std::vector<Tensor>& outputs) const {
    const StageGraph::Step& st = sg.steps[static_cast<size_t>(i)];
    const auto& out_ids = st.program->output_values();
    for (size_t k = 0; k < out_ids.size(); ++k) {
      if (st.model_output[k]) s.table[static_cast<size_t>(out_ids[k])] = std::move(outputs[k]);
    }
  }

  // The RunOptions of a step run of the frame in `s`: its deadline and cancellation.
  static RunOptions frame_options(FrameSlot& s, const RunOptions& base, StepRun* r) {
    RunOptions options = base;
    options.layer_ms = nullptr;
    options.member_ms = &r->member_ms;
    options.deadline = std::min(options.deadline, s.deadline);
    if (options.cancel == nullptr) options.cancel = &s.cancel;
    return options;
  }

  // Calls `fn` (a program call), turning an exception into an error.
  template <typename F>
  static Status guarded_call(F&& fn) {
    try {
      return fn();
    } catch (const std::exception& e) {
      return internal_error(std::string("the program threw: ") + e.what());
    } catch (...) {
      return internal_error("the program threw a non-standard exception");
    }
  }

  // Runs step `i` of the frame in `s` on the calling thread (no lock held). The step's inputs
  // are ready. Returns the StepRun; a failure goes to `*status`.
  StepRun run_step(FrameSlot& s, int i, const RunOptions& base, Status* status) {
    const StageGraph::Step& st = sg.steps[static_cast<size_t>(i)];
    StepRun r;
    r.step = i;
    r.run = static_cast<int>(s.frame);
    std::vector<Tensor> inputs;
    if (!gather_inputs(s, i, &inputs, &r, status)) return r;
    std::vector<Tensor> outputs = step_outputs(s, i);
    const RunOptions options = frame_options(s, base, &r);
    const auto start = Clock::now();
    const Status st_run = guarded_call([&] { return st.program->run(inputs, outputs, options); });
    const auto end = Clock::now();
    r.start_ms = ms_between(t0, start);
    r.ms = ms_between(start, end);
    r.bytes_out = st.bytes_out;
    if (!st_run.ok()) {
      *status = st_run.with_context(step_where(*plan, st.desc));
      r.ok = false;
      return r;
    }
    store_outputs(s, i, outputs);
    return r;
  }

  // Starts step `i` of the frame in `s` on an overlapped program (Program::start, no lock
  // held); its finish() runs on the step's completion thread (completion_loop).
  StepRun start_step(FrameSlot& s, int i, Status* status) {
    const StageGraph::Step& st = sg.steps[static_cast<size_t>(i)];
    StepRun r;
    r.step = i;
    r.run = static_cast<int>(s.frame);
    std::vector<Tensor> inputs;
    if (!gather_inputs(s, i, &inputs, &r, status)) return r;
    const RunOptions options = frame_options(s, RunOptions(), &r);
    const auto start = Clock::now();
    const Status st_run = guarded_call([&] { return st.program->start(inputs, options); });
    r.start_ms = ms_between(t0, start);
    r.ms = ms_between(start, Clock::now());
    if (!st_run.ok()) {
      *status = st_run.with_context(step_where(*plan, st.desc));
      r.ok = false;
    }
    return r;
  }

  // With mu held: marks step `i` of the frame in `s` finished (or skipped); the last step of a
  // frame moves its result to `results` and frees the slot.
  void finish_step(FrameSlot& s, int i) {
    s.done[static_cast<size_t>(i)] = 1;
    if (++s.steps_done == static_cast<int>(sg.steps.size())) results.push_back(end_frame(s));
  }

  bool deps_done(const FrameSlot& s, int i) const {
    for (int d : sg.steps[static_cast<size_t>(i)].deps) {
      if (!s.done[static_cast<size_t>(d)]) return false;
    }
    return true;
  }

  // Frames after `frame` (already submitted) whose inputs for the actor's first step are ready.
  int64_t ready_after(int actor, uint64_t frame) const {
    const int first = sg.actor_steps[static_cast<size_t>(actor)].front();
    int64_t n = 0;
    for (uint64_t f = frame + 1; f < submitted; ++f) {
      const FrameSlot& s = *slots[static_cast<size_t>(f % static_cast<uint64_t>(num_slots))];
      if (s.frame == f && s.busy && deps_done(s, first)) ++n;
    }
    return n;
  }

  void actor_loop(int actor) {
    const std::vector<int>& my_steps = sg.actor_steps[static_cast<size_t>(actor)];
    std::unique_lock<std::mutex> lk(mu);
    uint64_t f = first_frame;
    for (;;) {
      cv.wait(lk, [&] { return f < submitted || stopping; });
      if (f >= submitted) {
        actor_exited[static_cast<size_t>(actor)] = 1;
        cv.notify_all();
        return;
      }
      FrameSlot& s = slot_of(f);
      {
        auto& h = occupancy[static_cast<size_t>(actor)];
        const int64_t n = ready_after(actor, f);
        if (h.size() <= static_cast<size_t>(n)) h.resize(static_cast<size_t>(n) + 1, 0);
        ++h[static_cast<size_t>(n)];
      }
      for (int i : my_steps) {
        const auto wait_start = Clock::now();
        cv.wait(lk, [&] { return deps_done(s, i) || !s.status.ok(); });
        const double blocked = ms_between(wait_start, Clock::now());
        if (s.status.ok()) {
          auto where = [&] {
            return "frame " + std::to_string(f) + ", " +
                   step_where(*plan, sg.steps[static_cast<size_t>(i)].desc);
          };
          Status st;
          if (s.cancel.load()) {
            st = cancelled(where() + ": cancelled");
          } else if (Clock::now() >= s.deadline) {
            st = deadline_exceeded(where() + ": deadline exceeded before the stage started");
          }
          StepRun r;
          const int ov = overlapped_of_step[static_cast<size_t>(i)];
          if (st.ok() && ov >= 0) {
            OverlappedStep& o = overlapped[static_cast<size_t>(ov)];
            cv.wait(lk, [&] { return o.in_flight < o.max_in_flight; });
            lk.unlock();
            const auto start = Clock::now();
            r = start_step(s, i, &st);
            lk.lock();
            if (st.ok()) {  // finished by the completion thread
              r.blocked_in = blocked;
              if (i == 0) r.blocked_out = s.queued_ms;
              o.started.push_back(Started{&s, r, start});
              ++o.in_flight;
              cv.notify_all();
              continue;
            }
          } else if (st.ok()) {
            lk.unlock();
            r = run_step(s, i, RunOptions(), &st);
            lk.lock();
          } else {
            r.step = i;
            r.run = static_cast<int>(f);
            r.start_ms = ms_between(t0, Clock::now());
            r.ok = false;
          }
          r.blocked_in = blocked;
          if (i == 0) r.blocked_out = s.queued_ms;  // the frame waited for its slot
          if (!st.ok() && s.status.ok()) s.status = st;
          record_run(r);
        }
        finish_step(s, i);
        cv.notify_all();
      }
      ++f;
    }
  }

  // Finishes the frames an overlapped step's actor started, in order, until the actor has left
  // and nothing is left to finish. Every started frame is finished (cancelled ones too: the
  // program keeps its frames in order).
  void completion_loop(size_t index) {
    OverlappedStep& o = overlapped[index];
    const StageGraph::Step& st = sg.steps[static_cast<size_t>(o.step)];
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return !o.started.empty() || actor_exited[static_cast<size_t>(o.actor)]; });
      if (o.started.empty()) return;
      Started f = std::move(o.started.front());
      o.started.pop_front();
      FrameSlot& s = *f.slot;
      lk.unlock();
      std::vector<Tensor> outputs = step_outputs(s, o.step);
      const RunOptions options = frame_options(s, RunOptions(), &f.run);
      Status status = guarded_call([&] { return st.program->finish(outputs, options); });
      f.run.ms = ms_between(f.start, Clock::now());
      f.run.bytes_out = st.bytes_out;
      if (status.ok()) {
        store_outputs(s, o.step, outputs);
      } else {
        status = status.with_context(step_where(*plan, st.desc));
        f.run.ok = false;
      }
      lk.lock();
      --o.in_flight;
      if (!status.ok() && s.status.ok()) s.status = status;
      record_run(f.run);
      finish_step(s, o.step);
      cv.notify_all();
    }
  }

  void start_threads() {
    open = true;
    stopping = false;
    first_frame = submitted;
    actor_exited.assign(sg.actor_steps.size(), 0);
    for (size_t a = 0; a < sg.actor_steps.size(); ++a) {
      threads.emplace_back([this, a] { actor_loop(static_cast<int>(a)); });
    }
    for (size_t o = 0; o < overlapped.size(); ++o) {
      threads.emplace_back([this, o] { completion_loop(o); });
    }
  }
};

Executor::~Executor() {
  if (impl_) close();
}

Result<std::unique_ptr<Executor>> Executor::create(const LayerGraph& lg, const Plan& plan,
                                                   const ExecutorOptions& options) {
  if (options.max_flops > 0 && lg.total_flops() > options.max_flops) {
    char buf[160];
    std::snprintf(buf, sizeof(buf),
                  "the model needs %.4g GFLOPs per inference, over the work budget of %.4g GFLOPs",
                  lg.total_flops() * 1e-9, options.max_flops * 1e-9);
    return resource_exhausted(buf);
  }
  {
    const Graph& g = lg.graph();
    std::vector<NodeId> all(static_cast<size_t>(g.num_nodes()));
    for (NodeId n = 0; n < g.num_nodes(); ++n) all[static_cast<size_t>(n)] = n;
    RETURN_IF_ERROR(check_compile_memory(g, all, options.compile.memory_budget, "the model"));
  }
  std::unique_ptr<Executor> ex(new Executor());
  ex->plan_ = plan;
  if (options.queue_capacity > 0) ex->plan_.queue_capacity = options.queue_capacity;
  ex->impl_ = std::make_unique<Impl>();
  Impl& impl = *ex->impl_;
  impl.history_limit = std::max<size_t>(1, options.step_run_history);
  impl.lg = &lg;
  impl.plan = &ex->plan_;
  auto open = options.open_device ? options.open_device
                                  : [](const std::string& name) { return open_device(name); };
  ASSIGN_OR_RETURN(
      impl.sg, build_stage_graph(lg, ex->plan_, options.merge_same_device, open, options.compile));
  for (const StageGraph::Step& st : impl.sg.steps) impl.step_descs.push_back(st.desc);
  const int actors = static_cast<int>(impl.sg.actor_steps.size());
  impl.overlapped_of_step.assign(impl.sg.steps.size(), -1);
  for (size_t i = 0; i < impl.sg.steps.size(); ++i) {
    const StageGraph::Step& st = impl.sg.steps[i];
    const int m = st.program->max_in_flight();
    if (m <= 1) continue;
    impl.overlapped_of_step[i] = static_cast<int>(impl.overlapped.size());
    Impl::OverlappedStep o;
    o.step = static_cast<int>(i);
    o.actor = st.desc.actor;
    o.max_in_flight = m;
    impl.overlapped.push_back(std::move(o));
  }
  // Frames in flight: the queue capacity, one per actor, and the further frames each overlapped
  // step keeps in its hop.
  int overlap_frames = 0;
  for (const Impl::OverlappedStep& o : impl.overlapped) overlap_frames += o.max_in_flight - 1;
  impl.num_slots = std::max(2, ex->plan_.queue_capacity + actors + overlap_frames);
  for (int i = 0; i <= impl.num_slots; ++i) {
    auto s = std::make_unique<FrameSlot>();
    RETURN_IF_ERROR(impl.allocate_slot_buffers(*s));
    impl.slots.push_back(std::move(s));
  }
  impl.occupancy.assign(static_cast<size_t>(actors), {});
  impl.t0 = Clock::now();
  return ex;
}

Status Executor::run(std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
                     const RunOptions& options) {
  Impl& impl = *impl_;
  RETURN_IF_ERROR(impl.check_inputs(inputs));
  {
    std::lock_guard<std::mutex> lk(impl.mu);
    if (impl.open) {
      return failed_precondition("run(): a stream is open (close() it first)");
    }
    if (impl.running_sequential) {
      return failed_precondition("run(): another run() is in progress on this executor");
    }
    impl.running_sequential = true;
  }
  FrameSlot& s = impl.sequential_slot();
  int frame = 0;
  {
    std::lock_guard<std::mutex> lk(impl.mu);
    frame = impl.sequential_runs++;
  }
  impl.begin_frame(s, static_cast<uint64_t>(frame), inputs, options.deadline);
  Status status;
  std::vector<StepRun> runs;
  for (size_t i = 0; i < impl.sg.steps.size() && status.ok(); ++i) {
    runs.push_back(impl.run_step(s, static_cast<int>(i), options, &status));
  }
  FrameResult r;
  {
    std::lock_guard<std::mutex> lk(impl.mu);
    if (!status.ok()) s.status = status;
    r = impl.end_frame(s);
    for (const StepRun& sr : runs) impl.record_run(sr);
    impl.running_sequential = false;
  }
  RETURN_IF_ERROR(r.status);
  *outputs = std::move(r.outputs);
  return Status();
}

Result<uint64_t> Executor::submit(std::vector<Tensor> inputs, const SubmitOptions& options) {
  Impl& impl = *impl_;
  RETURN_IF_ERROR(impl.check_inputs(inputs));
  const auto t_submit = Clock::now();
  std::unique_lock<std::mutex> lk(impl.mu);
  if (impl.running_sequential) {
    return failed_precondition("submit(): a run() is in progress on this executor");
  }
  if (!impl.open) {
    if (!impl.threads.empty()) {
      return failed_precondition("submit(): the stream is closing");
    }
    impl.start_threads();
  }
  const uint64_t frame = impl.submitted;
  FrameSlot& s = impl.slot_of(frame);
  impl.cv.wait(lk, [&] { return !s.busy || impl.stopping; });
  if (impl.stopping) return failed_precondition("submit(): the stream was closed");
  s.queued_ms = ms_between(t_submit, Clock::now());
  impl.begin_frame(s, frame, inputs, options.deadline);
  if (impl.sg.steps.empty()) impl.results.push_back(impl.end_frame(s));
  ++impl.submitted;
  impl.cv.notify_all();
  return frame;
}

Result<FrameResult> Executor::next() {
  Impl& impl = *impl_;
  std::unique_lock<std::mutex> lk(impl.mu);
  if (impl.returned == impl.submitted) {
    if (!impl.open) return out_of_range("next(): end of stream (every frame has been returned)");
    return failed_precondition("next(): no frame is pending (submit one first)");
  }
  impl.cv.wait(lk, [&] { return !impl.results.empty(); });
  FrameResult r = std::move(impl.results.front());
  impl.results.pop_front();
  ++impl.returned;
  impl.cv.notify_all();
  return r;
}

void Executor::cancel(uint64_t frame) {
  Impl& impl = *impl_;
  std::lock_guard<std::mutex> lk(impl.mu);
  if (frame >= impl.submitted || frame < impl.first_frame) return;
  FrameSlot& s = impl.slot_of(frame);
  if (s.busy && s.frame == frame) s.cancel.store(true);
  impl.cv.notify_all();
}

void Executor::close() {
  Impl& impl = *impl_;
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lk(impl.mu);
    if (!impl.open) return;
    impl.stopping = true;
    for (int i = 0; i < impl.num_slots; ++i) {
      FrameSlot& s = *impl.slots[static_cast<size_t>(i)];
      if (s.busy) s.cancel.store(true);
    }
    threads.swap(impl.threads);
    impl.cv.notify_all();
  }
  for (std::thread& t : threads) t.join();
  std::lock_guard<std::mutex> lk(impl.mu);
  impl.open = false;
  impl.stopping = false;
  impl.cv.notify_all();
}

uint64_t Executor::pending() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->submitted - impl_->returned;
}

const std::vector<ExecutorStep>& Executor::steps() const {
  return impl_->step_descs;
}

int Executor::num_actors() const {
  return static_cast<int>(impl_->sg.actor_steps.size());
}

int Executor::num_slots() const {
  return impl_->num_slots;
}

uint64_t Executor::peak_memory_bytes() const {
  uint64_t sum = 0;
  for (const StageGraph::Step& st : impl_->sg.steps) sum += st.program->peak_memory_bytes();
  return sum;
}

std::string Executor::describe_step(size_t step) const {
  return step < impl_->sg.steps.size() ? impl_->sg.steps[step].program->describe() : std::string();
}

int Executor::step_frames_in_flight(size_t step) const {
  return step < impl_->sg.steps.size() ? std::max(1, impl_->sg.steps[step].program->max_in_flight())
                                       : 1;
}

std::string Executor::describe() const {
  std::string s;
  for (size_t i = 0; i < impl_->sg.steps.size(); ++i) {
    s += "step " + std::to_string(i) + " on " + impl_->sg.steps[i].desc.device + ":\n" +
         describe_step(i);
  }
  return s;
}

std::vector<StepRun> Executor::step_runs(int first_run) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  std::vector<StepRun> out;
  for (const StepRun& r : impl_->runs) {
    if (r.run >= first_run) out.push_back(r);
  }
  return out;
}

uint64_t Executor::step_runs_dropped() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->runs_dropped;
}

std::vector<double> Executor::mean_step_ms(int first_run) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  std::vector<double> sum(impl_->sg.steps.size(), 0);
  std::vector<int> n(impl_->sg.steps.size(), 0);
  for (const StepRun& r : impl_->runs) {
    if (r.run < first_run || !r.ok) continue;
    sum[static_cast<size_t>(r.step)] += r.ms;
    ++n[static_cast<size_t>(r.step)];
  }
  for (size_t i = 0; i < sum.size(); ++i) {
    if (n[i]) sum[i] /= n[i];
  }
  return sum;
}

double QueueOccupancy::mean() const {
  int64_t n = 0, sum = 0;
  for (size_t k = 0; k < histogram.size(); ++k) {
    n += histogram[k];
    sum += static_cast<int64_t>(k) * histogram[k];
  }
  return n > 0 ? static_cast<double>(sum) / static_cast<double>(n) : 0.0;
}

std::vector<QueueOccupancy> Executor::queue_occupancy() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  std::vector<QueueOccupancy> out;
  for (size_t a = 0; a < impl_->occupancy.size(); ++a) {
    out.push_back(QueueOccupancy{static_cast<int>(a), impl_->occupancy[a]});
  }
  return out;
}

}  // namespace tessera
