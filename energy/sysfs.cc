#include "energy/sysfs.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tessera::sysfs {

std::string join(const std::string& root, const std::string& rel) {
  if (root.empty()) return rel;
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  size_t start = 0;
  while (start < rel.size() && rel[start] == '/') ++start;
  if (r == "/") return "/" + rel.substr(start);
  return r + "/" + rel.substr(start);
}

bool exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

Result<std::string> read_string(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

Result<int64_t> read_int(const std::string& path) {
  ASSIGN_OR_RETURN(std::string s, read_string(path));
  if (s.empty()) return invalid_argument(path + ": empty, expected an integer");
  size_t pos = 0;
  int64_t v = 0;
  try {
    v = std::stoll(s, &pos);
  } catch (...) {
    return invalid_argument(path + ": " + quote_name(s) + " is not an integer");
  }
  if (pos != s.size()) return invalid_argument(path + ": " + quote_name(s) + " is not an integer");
  return v;
}

Result<std::vector<int64_t>> read_ints(const std::string& path) {
  ASSIGN_OR_RETURN(std::string s, read_string(path));
  std::istringstream in(s);
  std::vector<int64_t> out;
  std::string tok;
  while (in >> tok) {
    size_t pos = 0;
    try {
      out.push_back(std::stoll(tok, &pos));
    } catch (...) {
      pos = 0;
    }
    if (pos != tok.size())
      return invalid_argument(path + ": " + quote_name(tok) + " is not an integer");
  }
  return out;
}

Status write_string(const std::string& path, const std::string& value) {
  std::ofstream out(path);
  if (!out) {
    return failed_precondition(path + ": cannot open for writing (" + std::strerror(errno) + ")");
  }
  out << value;
  out.close();
  if (!out) return failed_precondition(path + ": write of " + quote_name(value) + " refused");
  return Status();
}

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::vector<int>> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part.empty()) continue;
    const size_t dash = part.find('-');
    try {
      size_t p1 = 0, p2 = 0;
      if (dash == std::string::npos) {
        const int c = std::stoi(part, &p1);
        if (p1 != part.size() || c < 0) throw 0;
        cpus.push_back(c);
      } else {
        const std::string a = part.substr(0, dash), b = part.substr(dash + 1);
        const int lo = std::stoi(a, &p1), hi = std::stoi(b, &p2);
        if (p1 != a.size() || p2 != b.size() || lo < 0 || hi < lo || hi - lo > 4096) throw 0;
        for (int c = lo; c <= hi; ++c) cpus.push_back(c);
      }
    } catch (...) {
      return invalid_argument(quote_name(text) + " is not a CPU list such as 0-3,6");
    }
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

}  // namespace tessera::sysfs
