// Progress of long `tessera` commands (profile, streaming runs, bench, simulate), on stderr.
//
// On a terminal: one bar redrawn at most ten times a second, with the share done, the elapsed
// time and an estimate of the time left. Not on a terminal (a log, CI): a plain line at every
// tenth of the work. With --quiet: nothing. The output on stdout (tables, JSON) is never touched.
//
// Thread rule: update() and finish() may be called from any thread; calls serialise.
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

namespace tessera::tools {

class Progress {
 public:
  enum class Style { kBar, kLines, kQuiet };

  // `task` names the work in each line ("profile mobilenet_v2"). The style follows whether
  // `out` is a terminal, unless `quiet`.
  Progress(std::string task, bool quiet, std::FILE* out = stderr);
  Progress(std::string task, Style style, std::FILE* out);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `done` of `total` units are done; `what` names the current one.
  void update(long done, long total, const std::string& what = "");
  // Ends the bar if anything was drawn: with a final 100% line when the work `completed`, else
  // (an error, or the destructor without finish) just ends the bar's line.
  void finish(bool completed = true);

  Style style() const { return style_; }

  // "1:05", "12 s", "2 h 03 min": for the elapsed and left times.
  static std::string format_seconds(double s);

 private:
  void draw(long done, long total, const std::string& what, bool final);

  std::mutex mu_;
  std::string task_;
  Style style_;
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
  int last_tenth_ = -1;
  long last_done_ = 0, last_total_ = 0;
  bool drawn_ = false;
  bool finished_ = false;
};

}  // namespace tessera::tools
