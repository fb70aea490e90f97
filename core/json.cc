#include "core/json.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace tessera::json {

namespace {

// nlohmann's message quotes the token it last read, which can be the whole of a long string: cut
// it to a bounded length (the token's control bytes nlohmann already shows as <U+000A>).
std::string bounded(const char* what) {
  constexpr size_t kMaxShown = 320;
  std::string s(what);
  if (s.size() > kMaxShown) {
    s.resize(kMaxShown);
    s += "...";
  }
  return s;
}

}  // namespace

Result<Json> parse(std::string_view text, const std::string& origin) {
  // Duplicate keys: nlohmann keeps the last silently; a file saying two things about one field
  // is refused instead. One set of keys per object being parsed, innermost last.
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  auto check_keys = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == Json::parse_event_t::key && !keys.empty() && duplicate.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(key).second) duplicate = key;
    }
    return true;
  };
  try {
    Json j = Json::parse(text.begin(), text.end(), check_keys);
    if (!duplicate.empty()) {
      return invalid_argument(origin + ": key " + quote_name(duplicate) +
                              " appears twice in one object");
    }
    return j;
  } catch (const Json::parse_error& e) {
    return invalid_argument(origin + ": malformed JSON at byte " + std::to_string(e.byte) + ": " +
                            bounded(e.what()));
  } catch (const Json::out_of_range& e) {
    // A number that does not fit a double (1e999): nlohmann refuses it rather than make an
    // infinity, which no Tessera field accepts anyway.
    return invalid_argument(origin + ": number out of range: " + bounded(e.what()));
  } catch (const Json::exception& e) {
    return invalid_argument(origin + ": cannot parse JSON: " + bounded(e.what()));
  }
}

Result<Json> parse_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return io_error(path + ": read failed");
  return parse(ss.str(), path);
}

Status write_text_file(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return io_error(path + ": cannot open for writing");
  out << text;
  out.close();
  if (!out) return io_error(path + ": write failed");
  return Status();
}

Status write_file(const std::string& path, const Json& j) {
  return write_text_file(path, j.dump(2) + "\n");
}

std::string index_path(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

std::string member_path(const std::string& path, const char* key) {
  return path.empty() ? std::string(key) : path + "." + key;
}

Status require_object(const Json& obj, const std::string& path) {
  if (!obj.is_object()) {
    return invalid_argument((path.empty() ? std::string("document") : path) +
                            ": expected a JSON object, got " + obj.type_name());
  }
  return Status();
}

namespace {

Result<const Json*> find(const Json& obj, const std::string& path, const char* key, bool required) {
  RETURN_IF_ERROR(require_object(obj, path));
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) return invalid_argument(member_path(path, key) + ": required field missing");
    return static_cast<const Json*>(nullptr);
  }
  return &*it;
}

}  // namespace

Result<const Json*> object_field(const Json& obj, const std::string& path, const char* key) {
  ASSIGN_OR_RETURN(const Json* v, find(obj, path, key, true));
  if (!v->is_object()) {
    return invalid_argument(member_path(path, key) + ": expected an object, got " + v->type_name());
  }
  return v;
}

Result<const Json*> array_field(const Json& obj, const std::string& path, const char* key,
                                bool required) {
  ASSIGN_OR_RETURN(const Json* v, find(obj, path, key, required));
  if (v != nullptr && !v->is_array()) {
    return invalid_argument(member_path(path, key) + ": expected an array, got " + v->type_name());
  }
  return v;
}

Result<std::string> string_field(const Json& obj, const std::string& path, const char* key,
                                 bool required, const std::string& def) {
  ASSIGN_OR_RETURN(const Json* v, find(obj, path, key, required));
  if (v == nullptr) return def;
  if (!v->is_string()) {
    return invalid_argument(member_path(path, key) + ": expected a string, got " + v->type_name());
  }
  return v->get<std::string>();
}

Result<double> number_field(const Json& obj, const std::string& path, const char* key, double min,
                            double max, bool required, double def) {
  ASSIGN_OR_RETURN(const Json* v, find(obj, path, key, required));
  if (v == nullptr) return def;
  if (!v->is_number()) {
    return invalid_argument(member_path(path, key) + ": expected a number, got " + v->type_name());
  }
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    std::ostringstream ss;
    ss << member_path(path, key) << ": " << d << " is outside [" << min << ", " << max << "]";
    return invalid_argument(ss.str());
  }
  return d;
}

Result<int64_t> int_field(const Json& obj, const std::string& path, const char* key, int64_t min,
                          int64_t max, bool required, int64_t def) {
  ASSIGN_OR_RETURN(const Json* v, find(obj, path, key, required));
  if (v == nullptr) return def;
  if (!v->is_number_integer()) {
    return invalid_argument(member_path(path, key) + ": expected an integer, got " +
                            (v->is_number() ? std::string("a fraction") : v->type_name()));
  }
  const int64_t i = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                        ? INT64_MAX
                        : v->get<int64_t>();
  if (i < min || i > max) {
    return invalid_argument(member_path(path, key) + ": " + std::to_string(i) + " is outside [" +
                            std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return i;
}

}  // namespace tessera::json
