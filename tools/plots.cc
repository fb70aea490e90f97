#include "tools/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "tools/svg.h"

namespace tessera::tools {

namespace {

constexpr double kLeft = 80, kRight = 30, kTop = 50;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Maps [lo, hi] to [a, b] (a degenerate range maps to the middle).
struct Scale {
  double lo, hi, a, b;
  double operator()(double v) const {
    return hi > lo ? a + (v - lo) / (hi - lo) * (b - a) : 0.5 * (a + b);
  }
};

void axes(Svg& svg, double x0, double y0, double x1, double y1) {
  svg.line(x0, y1, x1, y1, "#444");
  svg.line(x0, y0, x0, y1, "#444");
}

// About five round tick values covering [lo, hi].
std::vector<double> ticks(double lo, double hi) {
  std::vector<double> out;
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  }
  for (double v = std::ceil(lo / step) * step; v <= hi + 1e-9 * step; v += step) out.push_back(v);
  return out;
}

}  // namespace

std::string profile_svg(const Profile& p) {
  const double W = 960, H = 460, bottom = 60;
  Svg svg(W, H);
  svg.text(W / 2, 24,
           "per-layer time of " + p.model_name + " (" + std::to_string(p.num_layers()) +
               " layers): each layer alone, or in a chained run (chain)",
           14, "middle");
  struct Series {
    std::string label;
    const std::vector<std::optional<double>>* ms;
  };
  std::vector<Series> series;
  double lo = 1e300, hi = 0;
  for (const DeviceProfile& d : p.devices) {
    for (const LevelProfile& l : d.levels) {
      // Each layer alone where the profile measured that, else each layer in a chained run.
      const bool alone = std::any_of(l.layer_ms.begin(), l.layer_ms.end(),
                                     [](const std::optional<double>& v) { return v.has_value(); });
      const auto* ms = alone ? &l.layer_ms : &l.layer_chain_ms;
      series.push_back(
          {d.device + (l.mhz > 0 ? "@" + std::to_string(l.mhz) : "") + (alone ? "" : " (chain)"),
           ms});
      for (const auto& v : *ms) {
        if (v && *v > 0) {
          lo = std::min(lo, *v);
          hi = std::max(hi, *v);
        }
      }
    }
  }
  const double x0 = kLeft, x1 = W - kRight - 150, y0 = kTop, y1 = H - bottom;
  axes(svg, x0, y0, x1, y1);
  svg.text((x0 + x1) / 2, H - 20, "layer", 12, "middle");
  svg.text(18, (y0 + y1) / 2, "ms", 12, "middle");
  if (hi <= 0) {
    svg.text((x0 + x1) / 2, (y0 + y1) / 2, "no layer times in this profile", 12, "middle");
    return svg.str();
  }
  const double llo = std::floor(std::log10(lo)), lhi = std::ceil(std::log10(hi));
  const Scale y{llo, lhi == llo ? llo + 1 : lhi, y1, y0};
  const int L = std::max(1, p.num_layers());
  const Scale x{0, static_cast<double>(std::max(1, L - 1)), x0 + 5, x1 - 5};
  for (double e = llo; e <= lhi; e += 1) {
    svg.line(x0 - 4, y(e), x1, y(e), "#ddd");
    svg.text(x0 - 8, y(e) + 4, e >= 0 ? fmt("%.0f", std::pow(10, e)) : fmt("%g", std::pow(10, e)),
             10, "end");
  }
  for (double t : ticks(0, L - 1)) {
    svg.text(x(t), y1 + 16, fmt("%.0f", t), 10, "middle");
  }
  for (size_t s = 0; s < series.size(); ++s) {
    std::vector<std::pair<double, double>> run;
    for (size_t l = 0; l < series[s].ms->size(); ++l) {
      const auto& v = (*series[s].ms)[l];
      if (v && *v > 0) {
        run.emplace_back(x(static_cast<double>(l)), y(std::log10(*v)));
      } else {
        svg.polyline(run, Svg::color(s));  // a layer the device cannot run breaks the line
        run.clear();
      }
    }
    svg.polyline(run, Svg::color(s));
    svg.rect(x1 + 20, y0 + 18 * static_cast<double>(s), 12, 12, Svg::color(s));
    svg.text(x1 + 38, y0 + 18 * static_cast<double>(s) + 10, series[s].label, 11);
  }
  return svg.str();
}

std::string plan_svg(const Plan& p) {
  std::vector<std::string> rows;
  for (const Stage& s : p.stages) {
    const std::string label = s.placement.label();
    if (std::find(rows.begin(), rows.end(), label) == rows.end()) rows.push_back(label);
  }
  const bool streaming = p.mode == PlanMode::kStreaming && !p.device_load.empty();
  const double row_h = 34, W = 960;
  const double gantt_h = static_cast<double>(rows.size()) * row_h;
  const double load_h = streaming ? 40 + static_cast<double>(p.device_load.size()) * 22 : 0;
  const double H = kTop + gantt_h + 60 + load_h + 20;
  Svg svg(W, H);
  svg.text(W / 2, 22, "plan " + p.notation(), 13, "middle");
  std::string sub = p.planner + ", " + p.objective + ", estimated latency " +
                    fmt("%.3f ms", p.estimated_latency_ms);
  if (p.mode == PlanMode::kStreaming && p.estimated_period_ms > 0) {
    sub += ", period " + fmt("%.3f ms", p.estimated_period_ms) + " (" +
           fmt("%.1f frames/s", 1000.0 / p.estimated_period_ms) + ")";
  }
  svg.text(W / 2, 38, sub, 11, "middle", "#555");
  double total = 0;
  for (const Stage& s : p.stages) total += s.estimate.exec_ms + s.estimate.transfer_ms;
  const double x0 = 150, x1 = W - kRight, y0 = kTop, y1 = kTop + gantt_h;
  const Scale x{0, total > 0 ? total : 1, x0, x1};
  axes(svg, x0, y0, x1, y1);
  for (size_t r = 0; r < rows.size(); ++r) {
    svg.text(x0 - 8, y0 + row_h * static_cast<double>(r) + row_h / 2 + 4, rows[r], 11, "end");
  }
  for (double t : ticks(0, total)) {
    svg.line(x(t), y1, x(t), y1 + 4, "#444");
    svg.text(x(t), y1 + 16, fmt("%g", t), 10, "middle");
  }
  svg.text((x0 + x1) / 2, y1 + 34, "estimated time of one frame, ms (stages in plan order)", 11,
           "middle");
  double t = 0;
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const Stage& s = p.stages[i];
    const size_t r = static_cast<size_t>(std::find(rows.begin(), rows.end(), s.placement.label()) -
                                         rows.begin());
    const double top = y0 + row_h * static_cast<double>(r) + 5;
    const std::string layers = s.layers.empty() ? ""
                                                : std::to_string(s.layers.front()) + ".." +
                                                      std::to_string(s.layers.back());
    const std::string title = "stage " + std::to_string(i) + " on " + s.placement.label() +
                              ", layers " + layers + ": exec " +
                              fmt("%.3f ms", s.estimate.exec_ms) + ", transfer " +
                              fmt("%.3f ms", s.estimate.transfer_ms);
    svg.rect(x(t), top, x(t + s.estimate.exec_ms) - x(t), row_h - 10, Svg::color(i), title);
    svg.rect(x(t + s.estimate.exec_ms), top,
             x(t + s.estimate.exec_ms + s.estimate.transfer_ms) - x(t + s.estimate.exec_ms),
             row_h - 10, "#cccccc", title);
    if (x(t + s.estimate.exec_ms) - x(t) > 40) {
      svg.text((x(t) + x(t + s.estimate.exec_ms)) / 2, top + row_h / 2,
               "s" + std::to_string(i) + " [" + layers + "]", 10, "middle", "#fff");
    }
    t += s.estimate.exec_ms + s.estimate.transfer_ms;
  }
  if (streaming) {
    double most = p.estimated_period_ms;
    for (const DeviceLoad& d : p.device_load) most = std::max(most, d.busy_ms);
    const double ly0 = y1 + 60;
    svg.text(x0, ly0 - 8, "busy time per frame by device (the largest sets the period)", 11);
    const Scale bx{0, most > 0 ? most : 1, x0, x1};
    for (size_t i = 0; i < p.device_load.size(); ++i) {
      const double top = ly0 + 22 * static_cast<double>(i);
      svg.text(x0 - 8, top + 13, p.device_load[i].device, 11, "end");
      svg.rect(x0, top + 2, bx(p.device_load[i].busy_ms) - x0, 16, Svg::color(i),
               p.device_load[i].device + ": " + fmt("%.3f ms", p.device_load[i].busy_ms));
      svg.text(bx(p.device_load[i].busy_ms) + 4, top + 14, fmt("%.3f ms", p.device_load[i].busy_ms),
               10);
    }
    if (p.estimated_period_ms > 0) {
      const double px = bx(p.estimated_period_ms);
      svg.line(px, ly0 - 4, px, ly0 + 22 * static_cast<double>(p.device_load.size()), "#e15759",
               1.5);
    }
  }
  return svg.str();
}

Result<std::string> trace_svg(const json::Json& trace) {
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    return invalid_argument("trace: expected an object with a \"traceEvents\" array");
  }
  struct Run {
    int actor;
    double start, dur;  // ms
    long frame;
    std::string name;
  };
  std::map<int, std::string> actor_names;
  std::vector<Run> runs;
  const json::Json& events = trace["traceEvents"];
  for (size_t i = 0; i < events.size(); ++i) {
    const json::Json& e = events[i];
    const std::string where = "traceEvents[" + std::to_string(i) + "]";
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) {
      return invalid_argument(where + ": not a trace event");
    }
    const std::string ph = e["ph"].get<std::string>();
    auto tid = e.contains("tid") && e["tid"].is_number_integer() ? e["tid"].get<long>() : -1;
    if (ph == "M" && e.value("name", "") == "thread_name" && tid >= 0 && tid < 100000 &&
        e.contains("args") && e["args"].is_object() && e["args"].contains("name") &&
        e["args"]["name"].is_string()) {
      actor_names[static_cast<int>(tid)] = e["args"]["name"].get<std::string>();
    }
    if (ph != "X") continue;
    if (tid < 0 || tid >= 100000 || !e.contains("ts") || !e["ts"].is_number() ||
        !e.contains("dur") || !e["dur"].is_number()) {
      return invalid_argument(where + ": a complete event needs a tid in [0, 100000), ts and dur");
    }
    const double ts = e["ts"].get<double>() / 1000.0, dur = e["dur"].get<double>() / 1000.0;
    if (!std::isfinite(ts) || !std::isfinite(dur) || dur < 0) {
      return invalid_argument(where + ": ts and dur must be finite, dur >= 0");
    }
    long frame = -1;
    if (e.contains("args") && e["args"].is_object() && e["args"].contains("frame") &&
        e["args"]["frame"].is_number_integer()) {
      frame = e["args"]["frame"].get<long>();
    }
    runs.push_back({static_cast<int>(tid), ts, dur, frame, e.value("name", "")});
    actor_names.emplace(static_cast<int>(tid), "actor " + std::to_string(tid));
  }
  std::vector<int> actors;
  for (const auto& [a, name] : actor_names) actors.push_back(a);
  const double row_h = 28, W = 1000;
  const double gantt_h = std::max<double>(1, static_cast<double>(actors.size())) * row_h;
  const double H = kTop + gantt_h + 50 + 180 + 40;
  Svg svg(W, H);
  svg.text(W / 2, 24,
           "executor trace: " + std::to_string(runs.size()) + " step runs on " +
               std::to_string(actors.size()) + " actors",
           14, "middle");
  if (runs.empty()) {
    svg.text(W / 2, H / 2, "no step runs in this trace", 12, "middle");
    return svg.str();
  }
  double t_lo = 1e300, t_hi = -1e300;
  std::map<long, std::pair<double, double>> frames;  // frame -> first start, last end
  for (const Run& r : runs) {
    t_lo = std::min(t_lo, r.start);
    t_hi = std::max(t_hi, r.start + r.dur);
    if (r.frame >= 0) {
      auto [it, fresh] = frames.emplace(r.frame, std::make_pair(r.start, r.start + r.dur));
      if (!fresh) {
        it->second.first = std::min(it->second.first, r.start);
        it->second.second = std::max(it->second.second, r.start + r.dur);
      }
    }
  }
  const double x0 = 190, x1 = W - 60, y0 = kTop, y1 = kTop + gantt_h;
  const Scale x{0, t_hi - t_lo, x0, x1};
  axes(svg, x0, y0, x1, y1);
  for (size_t i = 0; i < actors.size(); ++i) {
    svg.text(x0 - 8, y0 + row_h * static_cast<double>(i) + row_h / 2 + 4, actor_names[actors[i]],
             10, "end");
  }
  for (const Run& r : runs) {
    const size_t row =
        static_cast<size_t>(std::find(actors.begin(), actors.end(), r.actor) - actors.begin());
    const double top = y0 + row_h * static_cast<double>(row) + 4;
    svg.rect(x(r.start - t_lo), top, std::max(0.5, x(r.start - t_lo + r.dur) - x(r.start - t_lo)),
             row_h - 8, Svg::color(r.frame >= 0 ? static_cast<size_t>(r.frame) : 9),
             "frame " + std::to_string(r.frame) + ": " + r.name + ", " + fmt("%.3f ms", r.dur));
  }
  for (double t : ticks(0, t_hi - t_lo)) {
    svg.line(x(t), y1, x(t), y1 + 4, "#444");
    svg.text(x(t), y1 + 16, fmt("%g", t), 10, "middle");
  }
  svg.text((x0 + x1) / 2, y1 + 34, "ms since the first step run (colour: frame)", 11, "middle");

  // Throughput (frames finished per second, over a sliding window) and frames in flight.
  const double py0 = y1 + 60, py1 = py0 + 160;
  axes(svg, x0, py0, x1, py1);
  const int samples = 200;
  const double span = t_hi - t_lo, window = span / 10;
  std::vector<double> fps(samples + 1), flight(samples + 1);
  double fps_max = 0, flight_max = 0;
  for (int k = 0; k <= samples; ++k) {
    const double t = t_lo + span * k / samples;
    int done = 0, in = 0;
    for (const auto& [f, se] : frames) {
      done += se.second > t - window && se.second <= t ? 1 : 0;
      in += se.first <= t && se.second > t ? 1 : 0;
    }
    fps[static_cast<size_t>(k)] = window > 0 ? done / (window / 1000.0) : 0;
    flight[static_cast<size_t>(k)] = in;
    fps_max = std::max(fps_max, fps[static_cast<size_t>(k)]);
    flight_max = std::max(flight_max, flight[static_cast<size_t>(k)]);
  }
  const Scale yf{0, fps_max > 0 ? fps_max : 1, py1, py0};
  const Scale yq{0, flight_max > 0 ? flight_max : 1, py1, py0};
  std::vector<std::pair<double, double>> a, b;
  for (int k = 0; k <= samples; ++k) {
    const double px = x(span * k / samples);
    a.emplace_back(px, yf(fps[static_cast<size_t>(k)]));
    b.emplace_back(px, yq(flight[static_cast<size_t>(k)]));
  }
  svg.polyline(a, Svg::color(0), 2);
  svg.polyline(b, Svg::color(1), 2);
  svg.text(x0 - 8, py0 + 4, fmt("%.0f", fps_max), 10, "end", Svg::color(0));
  svg.text(x0 - 8, py1, "0", 10, "end");
  svg.text(x1 + 6, py0 + 4, fmt("%.0f", flight_max), 10, "start", Svg::color(1));
  svg.text(x0 + 6, py0 - 6, "frames/s finished (window " + fmt("%.1f ms", window) + ")", 11,
           "start", Svg::color(0));
  svg.text(x1, py0 - 6, "frames in flight", 11, "end", Svg::color(1));
  return svg.str();
}

}  // namespace tessera::tools
