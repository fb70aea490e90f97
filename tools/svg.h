// A small SVG 1.1 writer for `tessera plot`: shapes and text in user units, every text and
// attribute escaped, a white background, one <svg> document.
//
// Thread rule: an Svg is used by one thread at a time.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tessera::tools {

class Svg {
 public:
  Svg(double width, double height);

  void rect(double x, double y, double w, double h, const std::string& fill,
            const std::string& title = "");
  void line(double x1, double y1, double x2, double y2, const std::string& stroke,
            double width = 1);
  void polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke,
                double width = 1.5);
  // anchor: "start", "middle" or "end".
  void text(double x, double y, const std::string& s, double size = 11,
            const std::string& anchor = "start", const std::string& fill = "#222");

  std::string str() const;

  // Escapes &, <, >, " and ' and drops control characters XML 1.0 forbids.
  static std::string escape(const std::string& s);
  // A distinct color for series i ("#rrggbb", from a fixed palette).
  static std::string color(size_t i);

 private:
  double width_, height_;
  std::string body_;
};

}  // namespace tessera::tools
