// Node attributes: named ints, floats, strings, lists and tensors, as in ONNX.
//
// Typed getters return Result so that a wrong type names the attribute; the `_or` variants
// supply a default when the attribute is absent (and still fail on a wrong type).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace tessera {

using AttributeValue =
    std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>, Tensor>;

// "int", "float", "string", "ints", "floats", "tensor".
const char* attribute_kind_name(const AttributeValue& v);

class Attributes {
 public:
  bool has(const std::string& name) const { return map_.count(name) != 0; }
  void set(const std::string& name, AttributeValue v) { map_[name] = std::move(v); }
  void erase(const std::string& name) { map_.erase(name); }
  const std::map<std::string, AttributeValue>& all() const { return map_; }
  bool empty() const { return map_.empty(); }

  Result<int64_t> get_int(const std::string& name) const;
  Result<float> get_float(const std::string& name) const;
  Result<std::string> get_string(const std::string& name) const;
  Result<std::vector<int64_t>> get_ints(const std::string& name) const;
  Result<std::vector<float>> get_floats(const std::string& name) const;
  Result<Tensor> get_tensor(const std::string& name) const;

  Result<int64_t> int_or(const std::string& name, int64_t def) const;
  Result<float> float_or(const std::string& name, float def) const;
  Result<std::string> string_or(const std::string& name, const std::string& def) const;
  Result<std::vector<int64_t>> ints_or(const std::string& name, std::vector<int64_t> def) const;
  Result<std::vector<float>> floats_or(const std::string& name, std::vector<float> def) const;

 private:
  std::map<std::string, AttributeValue> map_;
};

}  // namespace tessera
