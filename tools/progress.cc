#include "tools/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace tessera::tools {

Progress::Progress(std::string task, bool quiet, std::FILE* out)
    : Progress(std::move(task),
               quiet                      ? Style::kQuiet
               : isatty(fileno(out)) != 0 ? Style::kBar
                                          : Style::kLines,
               out) {}

Progress::Progress(std::string task, Style style, std::FILE* out)
    : task_(std::move(task)), style_(style), out_(out), start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() {
  finish(false);
}

std::string Progress::format_seconds(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "?";
  char buf[32];
  const long t = std::lround(s);
  if (t < 60) {
    std::snprintf(buf, sizeof buf, "%ld s", t);
  } else if (t < 3600) {
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ld h %02ld min", t / 3600, (t % 3600) / 60);
  }
  return buf;
}

void Progress::update(long done, long total, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (style_ == Style::kQuiet || finished_ || total <= 0) return;
  done = std::clamp(done, 0L, total);
  last_done_ = done;
  last_total_ = total;
  const auto now = std::chrono::steady_clock::now();
  if (style_ == Style::kBar) {
    if (done < total && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    draw(done, total, what, false);
    return;
  }
  const int tenth = static_cast<int>(10 * done / total);
  if (tenth == last_tenth_) return;
  last_tenth_ = tenth;
  draw(done, total, what, false);
}

void Progress::draw(long done, long total, const std::string& what, bool final) {
  const double frac = static_cast<double>(done) / static_cast<double>(total);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const std::string left =
      done > 0 && done < total ? ", " + format_seconds(elapsed * (1 - frac) / frac) + " left" : "";
  if (style_ == Style::kBar) {
    const int width = 24;
    const int filled = static_cast<int>(frac * width);
    std::fprintf(out_, "\r%s [%s%s] %3d%% %s%s %-28.28s", task_.c_str(),
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), '.').c_str(),
                 static_cast<int>(frac * 100), format_seconds(elapsed).c_str(), left.c_str(),
                 what.c_str());
    if (final) std::fputc('\n', out_);
  } else {
    std::fprintf(out_, "%s: %3d%% (%ld/%ld) %s elapsed%s%s%s\n", task_.c_str(),
                 static_cast<int>(frac * 100), done, total, format_seconds(elapsed).c_str(),
                 left.c_str(), what.empty() ? "" : ", ", what.c_str());
  }
  std::fflush(out_);
  drawn_ = true;
}

void Progress::finish(bool completed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (style_ == Style::kQuiet || !drawn_ || last_total_ <= 0) return;
  if (!completed) {
    if (style_ == Style::kBar) std::fputc('\n', out_);
    std::fflush(out_);
    return;
  }
  if (style_ == Style::kBar || last_tenth_ < 10) draw(last_total_, last_total_, "done", true);
}

}  // namespace tessera::tools
