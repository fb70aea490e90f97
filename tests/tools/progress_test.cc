// Progress lines and bars of long commands (tools/progress.h), written to a memory stream.
#include "tools/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace tessera::tools {
namespace {

struct Captured {
  char* buf = nullptr;
  size_t size = 0;
  std::FILE* f = nullptr;
  Captured() : f(open_memstream(&buf, &size)) {}
  ~Captured() {
    if (f != nullptr) std::fclose(f);
    std::free(buf);
  }
  std::string text() {
    std::fflush(f);
    return std::string(buf, size);
  }
};

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(Progress, LinesAtEveryTenthThenDone) {
  Captured out;
  {
    Progress p("profile m", Progress::Style::kLines, out.f);
    for (long i = 0; i <= 1000; ++i) p.update(i, 1000, "layer " + std::to_string(i));
    p.finish();
  }
  const std::string text = out.text();
  // 0%, 10%, ..., 100%: eleven lines, no carriage returns, one 100% line.
  EXPECT_EQ(count(text, "\n"), 11) << text;
  EXPECT_EQ(count(text, "\r"), 0);
  EXPECT_EQ(count(text, "100% (1000/1000)"), 1) << text;
  EXPECT_NE(text.find("profile m:  50% (500/1000)"), std::string::npos) << text;
  EXPECT_NE(text.find("left"), std::string::npos) << text;
}

TEST(Progress, BarRedrawsInPlaceAndEndsWithANewline) {
  Captured out;
  Progress p("stream", Progress::Style::kBar, out.f);
  p.update(1, 4, "frame 1");
  p.update(4, 4, "frame 4");
  p.finish();
  const std::string text = out.text();
  EXPECT_GE(count(text, "\r"), 2) << text;
  EXPECT_EQ(text.back(), '\n');
  EXPECT_NE(text.find("100%"), std::string::npos);
}

TEST(Progress, QuietAndUnfinishedWorkPrintNoDone) {
  Captured quiet;
  {
    Progress p("x", true, quiet.f);
    p.update(5, 10);
    p.finish();
  }
  EXPECT_EQ(quiet.text(), "");
  Captured failed;
  {
    Progress p("x", Progress::Style::kLines, failed.f);
    p.update(3, 10);
  }  // destroyed without finish(): the work did not complete
  EXPECT_EQ(failed.text().find("100%"), std::string::npos) << failed.text();
  // Nonsense totals draw nothing rather than dividing by zero.
  Captured none;
  {
    Progress p("x", Progress::Style::kLines, none.f);
    p.update(3, 0);
    p.update(-1, -5);
    p.finish();
  }
  EXPECT_EQ(none.text(), "");
}

TEST(Progress, FormatsTimes) {
  EXPECT_EQ(Progress::format_seconds(0.4), "0 s");
  EXPECT_EQ(Progress::format_seconds(59), "59 s");
  EXPECT_EQ(Progress::format_seconds(65), "1:05");
  EXPECT_EQ(Progress::format_seconds(7380), "2 h 03 min");
  EXPECT_EQ(Progress::format_seconds(-1), "?");
}

}  // namespace
}  // namespace tessera::tools
