// The sizing rule of the tool and the APIs, and the text form of input shapes
// (graph/onnx/import_options.h).
#include "graph/onnx/import_options.h"

#include <charconv>
#include <utility>

#include "core/shape.h"

namespace tessera {

ImportOptions import_options_for_shapes(std::map<std::string, std::vector<int64_t>> input_shapes,
                                        int64_t batch) {
  ImportOptions options;
  options.default_dim_value = batch;
  options.require_all_dims = !input_shapes.empty();
  options.input_shapes = std::move(input_shapes);
  return options;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// One NAME=DIMxDIMx... entry.
Status parse_entry(std::string_view entry, std::map<std::string, std::vector<int64_t>>* out) {
  const std::string quoted = "input shape '" + std::string(entry) + "'";
  const size_t eq = entry.rfind('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == entry.size()) {
    return invalid_argument(quoted + ": expected NAME=DIMxDIMx... (e.g. images=1x3x640x640)");
  }
  const std::string name(trim(entry.substr(0, eq)));
  if (name.empty()) return invalid_argument(quoted + ": the input name is empty");
  std::vector<int64_t> dims;
  std::string_view rest = entry.substr(eq + 1);
  while (true) {
    const size_t x = rest.find('x');
    const std::string_view part = trim(rest.substr(0, x));
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || v < 1 ||
        v > kMaxDim) {
      return invalid_argument(quoted + ": dimension " + std::to_string(dims.size()) + " (" +
                              quote_name(part) + ") is not an integer in 1.." +
                              std::to_string(kMaxDim));
    }
    dims.push_back(v);
    if (x == std::string_view::npos) break;
    rest.remove_prefix(x + 1);
  }
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return invalid_argument(quoted + ": " + std::to_string(dims.size()) +
                            " dimensions exceed the rank limit " + std::to_string(kMaxRank));
  }
  if (!out->emplace(name, std::move(dims)).second) {
    return invalid_argument(quoted + ": a shape for input " + quote_name(name) +
                            " was already given");
  }
  return Status();
}

}  // namespace

Status parse_input_shapes(std::string_view text, std::map<std::string, std::vector<int64_t>>* out) {
  while (!text.empty()) {
    const size_t semi = text.find(';');
    const std::string_view entry = trim(text.substr(0, semi));
    if (!entry.empty()) RETURN_IF_ERROR(parse_entry(entry, out));
    if (semi == std::string_view::npos) break;
    text.remove_prefix(semi + 1);
  }
  return Status();
}

}  // namespace tessera
