#include "ops/attributes.h"

namespace tessera {

const char* attribute_kind_name(const AttributeValue& v) {
  switch (v.index()) {
    case 0:
      return "int";
    case 1:
      return "float";
    case 2:
      return "string";
    case 3:
      return "ints";
    case 4:
      return "floats";
    case 5:
      return "tensor";
  }
  return "?";
}

namespace {

template <typename T>
Result<T> get_typed(const std::map<std::string, AttributeValue>& map, const std::string& name,
                    const char* want) {
  auto it = map.find(name);
  if (it == map.end()) return not_found("missing attribute " + quote_name(name));
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  // ONNX writers sometimes store an integral float as an int and vice versa; accept the
  // lossless direction only.
  if constexpr (std::is_same_v<T, float>) {
    if (const int64_t* i = std::get_if<int64_t>(&it->second)) return static_cast<float>(*i);
  }
  return invalid_argument("attribute " + quote_name(name) + " has type " +
                          attribute_kind_name(it->second) + ", expected " + want);
}

template <typename T>
Result<T> get_or(const std::map<std::string, AttributeValue>& map, const std::string& name,
                 const char* want, T def) {
  if (map.count(name) == 0) return def;
  return get_typed<T>(map, name, want);
}

}  // namespace

Result<int64_t> Attributes::get_int(const std::string& name) const {
  return get_typed<int64_t>(map_, name, "int");
}
Result<float> Attributes::get_float(const std::string& name) const {
  return get_typed<float>(map_, name, "float");
}
Result<std::string> Attributes::get_string(const std::string& name) const {
  return get_typed<std::string>(map_, name, "string");
}
Result<std::vector<int64_t>> Attributes::get_ints(const std::string& name) const {
  return get_typed<std::vector<int64_t>>(map_, name, "ints");
}
Result<std::vector<float>> Attributes::get_floats(const std::string& name) const {
  return get_typed<std::vector<float>>(map_, name, "floats");
}
Result<Tensor> Attributes::get_tensor(const std::string& name) const {
  return get_typed<Tensor>(map_, name, "tensor");
}
Result<int64_t> Attributes::int_or(const std::string& name, int64_t def) const {
  return get_or<int64_t>(map_, name, "int", def);
}
Result<float> Attributes::float_or(const std::string& name, float def) const {
  return get_or<float>(map_, name, "float", def);
}
Result<std::string> Attributes::string_or(const std::string& name, const std::string& def) const {
  return get_or<std::string>(map_, name, "string", def);
}
Result<std::vector<int64_t>> Attributes::ints_or(const std::string& name,
                                                 std::vector<int64_t> def) const {
  return get_or<std::vector<int64_t>>(map_, name, "ints", std::move(def));
}
Result<std::vector<float>> Attributes::floats_or(const std::string& name,
                                                 std::vector<float> def) const {
  return get_or<std::vector<float>>(map_, name, "floats", std::move(def));
}

}  // namespace tessera
