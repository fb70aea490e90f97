#include "core/budget.h"

#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tessera {

Result<uint64_t> parse_byte_count(std::string_view text) {
  const std::string s(text);
  auto bad = [&] {
    return invalid_argument("memory budget '" + s +
                            "': expected a byte count with an optional K, M, G or T suffix "
                            "(e.g. 512M, 8G)");
  };
  if (s.empty()) return bad();
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(s, &end);
  } catch (...) {
    return bad();
  }
  double unit = 1;
  if (end < s.size()) {
    switch (s[end]) {
      case 'K':
      case 'k':
        unit = 1024.0;
        break;
      case 'M':
      case 'm':
        unit = 1024.0 * 1024;
        break;
      case 'G':
      case 'g':
        unit = 1024.0 * 1024 * 1024;
        break;
      case 'T':
      case 't':
        unit = 1024.0 * 1024 * 1024 * 1024;
        break;
      default:
        return bad();
    }
    ++end;
    if (end < s.size() && (s[end] == 'B' || s[end] == 'b')) ++end;
    if (end < s.size() && s[end] == 'i') {
      ++end;
      if (end < s.size() && (s[end] == 'B' || s[end] == 'b')) ++end;
    }
  }
  if (end != s.size() || !std::isfinite(v) || v < 1 || v * unit > 9.2e18) return bad();
  return static_cast<uint64_t>(v * unit);
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0 || v >= 100 || v == std::floor(v)) {
    std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  }
  return buf;
}

uint64_t default_memory_budget() {
  if (const char* env = std::getenv("TESSERA_MEMORY_BUDGET"); env != nullptr && *env != 0) {
    Result<uint64_t> b = parse_byte_count(env);
    if (b.ok()) return *b;
  }
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  return uint64_t{8} << 30;
}

uint64_t resolve_memory_budget(uint64_t budget) {
  return budget != 0 ? budget : default_memory_budget();
}

Status check_memory_budget(uint64_t asked, uint64_t budget, const std::string& what) {
  if (asked <= budget) return Status();
  const char* env = std::getenv("TESSERA_MEMORY_BUDGET");
  const char* source = budget != default_memory_budget() ? " (as given)"
                       : env != nullptr && *env != 0
                           ? " (TESSERA_MEMORY_BUDGET)"
                           : " (the machine's memory; set TESSERA_MEMORY_BUDGET to change)";
  return resource_exhausted(what + ", over the memory budget of " + format_bytes(budget) + source);
}

}  // namespace tessera
