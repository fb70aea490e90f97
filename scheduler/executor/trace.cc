// The executor's Chrome trace (open in Perfetto): one track per actor, one slice per step run,
// and flow arrows that follow each frame from step to step across the actors.
#include <algorithm>
#include <map>

#include "core/json.h"
#include "scheduler/executor/executor.h"

namespace tessera {

std::string Executor::chrome_trace_json() const {
  using nlohmann::json;
  const std::vector<StepRun> runs = step_runs();
  const std::vector<ExecutorStep>& desc = steps();
  json events = json::array();
  for (int a = 0; a < num_actors(); ++a) {
    std::string devices;
    for (const ExecutorStep& s : desc) {
      if (s.actor == a && devices.find(s.device) == std::string::npos) {
        devices += (devices.empty() ? "" : ", ") + s.device;
      }
    }
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 1},
                      {"tid", a},
                      {"args", {{"name", "actor " + std::to_string(a) + " (" + devices + ")"}}}});
  }
  std::map<int, std::vector<const StepRun*>> by_frame;
  for (const StepRun& r : runs) {
    const ExecutorStep& step = desc[static_cast<size_t>(r.step)];
    int first_layer = -1, last_layer = -1;
    size_t layers = 0;
    double estimated_ms = 0;
    for (int i = step.first_stage; i <= step.last_stage; ++i) {
      const Stage& s = plan_.stages[static_cast<size_t>(i)];
      first_layer = first_layer < 0 ? s.layers.front() : std::min(first_layer, s.layers.front());
      last_layer = std::max(last_layer, s.layers.back());
      layers += s.layers.size();
      estimated_ms += s.estimate.exec_ms + s.estimate.transfer_ms;
    }
    const std::string stages =
        step.first_stage == step.last_stage
            ? "stage " + std::to_string(step.first_stage)
            : "stages " + std::to_string(step.first_stage) + "-" + std::to_string(step.last_stage);
    events.push_back({{"name", stages + " " + step.device + "[" + std::to_string(first_layer) +
                                   ".." + std::to_string(last_layer) + "]"},
                      {"cat", "stage"},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", step.actor},
                      {"ts", r.start_ms * 1000.0},
                      {"dur", r.ms * 1000.0},
                      {"args",
                       {{"frame", r.run},
                        {"ok", r.ok},
                        {"layers", layers},
                        {"bytes_in", r.bytes_in},
                        {"bytes_out", r.bytes_out},
                        {"blocked_in_ms", r.blocked_in},
                        {"blocked_out_ms", r.blocked_out},
                        {"estimated_ms", estimated_ms}}}});
    by_frame[r.run].push_back(&r);
  }
  // Flow arrows: frame k's step runs in time order, start ("s"), steps ("t"), finish ("f").
  for (auto& [frame, list] : by_frame) {
    if (list.size() < 2) continue;
    std::sort(list.begin(), list.end(),
              [](const StepRun* a, const StepRun* b) { return a->start_ms < b->start_ms; });
    for (size_t k = 0; k < list.size(); ++k) {
      const StepRun& r = *list[k];
      const char* ph = k == 0 ? "s" : (k + 1 == list.size() ? "f" : "t");
      json e = {{"name", "frame " + std::to_string(frame)},
                {"cat", "frame"},
                {"ph", ph},
                {"id", frame},
                {"pid", 1},
                {"tid", desc[static_cast<size_t>(r.step)].actor},
                {"ts", (r.start_ms + r.ms * 0.5) * 1000.0}};
      if (k + 1 == list.size()) e["bp"] = "e";
      events.push_back(std::move(e));
    }
  }
  json j = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return j.dump(1) + "\n";
}

Status Executor::write_trace(const std::string& path) const {
  return json::write_text_file(path, chrome_trace_json());
}

}  // namespace tessera
