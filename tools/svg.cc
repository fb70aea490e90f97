#include "tools/svg.h"

#include <cmath>
#include <cstdio>

namespace tessera::tools {

namespace {

std::string num(double v) {
  if (!std::isfinite(v)) v = 0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

Svg::Svg(double width, double height) : width_(width), height_(height) {}

std::string Svg::escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (u < 0x20 && c != '\t' && c != '\n' && c != '\r') break;  // not allowed in XML 1.0
        out += c;
    }
  }
  return out;
}

std::string Svg::color(size_t i) {
  static const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kPalette[i % (sizeof kPalette / sizeof kPalette[0])];
}

void Svg::rect(double x, double y, double w, double h, const std::string& fill,
               const std::string& title) {
  body_ += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(std::max(0.0, w)) +
           "\" height=\"" + num(std::max(0.0, h)) + "\" fill=\"" + escape(fill) + "\"";
  if (title.empty()) {
    body_ += "/>\n";
  } else {
    body_ += "><title>" + escape(title) + "</title></rect>\n";
  }
}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& stroke,
               double width) {
  body_ += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
           num(y2) + "\" stroke=\"" + escape(stroke) + "\" stroke-width=\"" + num(width) + "\"/>\n";
}

void Svg::polyline(const std::vector<std::pair<double, double>>& points, const std::string& stroke,
                   double width) {
  if (points.empty()) return;
  body_ += "<polyline fill=\"none\" stroke=\"" + escape(stroke) + "\" stroke-width=\"" +
           num(width) + "\" points=\"";
  for (const auto& [x, y] : points) body_ += num(x) + "," + num(y) + " ";
  body_ += "\"/>\n";
}

void Svg::text(double x, double y, const std::string& s, double size, const std::string& anchor,
               const std::string& fill) {
  body_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + num(size) +
           "\" text-anchor=\"" + escape(anchor) + "\" fill=\"" + escape(fill) + "\">" + escape(s) +
           "</text>\n";
}

std::string Svg::str() const {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" +
         num(width_) + "\" height=\"" + num(height_) + "\" viewBox=\"0 0 " + num(width_) + " " +
         num(height_) + "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" " +
         "fill=\"#ffffff\"/>\n" + body_ + "</svg>\n";
}

}  // namespace tessera::tools
