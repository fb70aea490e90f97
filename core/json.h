// Reading and writing the plain-data JSON files of Tessera (platforms, profiles, plans).
//
// JSON parsing is nlohmann::json (Debian nlohmann-json3-dev). Its exceptions stay inside these
// helpers: every getter returns a Result whose message names the field by its path, e.g.
// "devices[2].dvfs[0].mhz: must be > 0, got -5", so a user can find the bad value at once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace tessera::json {

using Json = nlohmann::json;

// Parses `text`; the error names `origin` (a file name) and the byte offset of the syntax error.
Result<Json> parse(std::string_view text, const std::string& origin);
// Reads and parses a file.
Result<Json> parse_file(const std::string& path);
// Writes `j` indented by two spaces with a trailing newline.
Status write_file(const std::string& path, const Json& j);
// Writes `text` to `path` (replacing it); the error names the path and whether opening or
// writing failed.
Status write_text_file(const std::string& path, std::string_view text);

// "devices" + 2 -> "devices[2]"; "" + "name" -> "name"; "devices[2]" + "mhz" -> "devices[2].mhz".
std::string index_path(const std::string& path, size_t i);
std::string member_path(const std::string& path, const char* key);

// Field getters. `path` names `obj` itself; the messages name path.key. A missing required field,
// a field of the wrong JSON type or a value outside [min, max] is an InvalidArgument.
Result<const Json*> object_field(const Json& obj, const std::string& path, const char* key);
Result<const Json*> array_field(const Json& obj, const std::string& path, const char* key,
                                bool required = true);
Result<std::string> string_field(const Json& obj, const std::string& path, const char* key,
                                 bool required = true, const std::string& def = "");
Result<double> number_field(const Json& obj, const std::string& path, const char* key, double min,
                            double max, bool required = true, double def = 0);
Result<int64_t> int_field(const Json& obj, const std::string& path, const char* key, int64_t min,
                          int64_t max, bool required = true, int64_t def = 0);
// Checks `obj` is a JSON object (named `path`).
Status require_object(const Json& obj, const std::string& path);

}  // namespace tessera::json
