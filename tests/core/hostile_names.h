// Hostile names for the file readers' error messages: every name that comes from a file is
// printed through quote_name (core/status.h), escaped and bounded. `hostile_names()` lists the
// cases (a name that forges a log line and clears the terminal, a 10 kB name, a name holding a
// NUL) and `expect_safe_message` checks one refusal against one of them.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::testing {

struct HostileName {
  const char* what;   // for the failure message
  std::string raw;    // the bytes of the name (put into JSON with nlohmann, which escapes them)
  std::string shown;  // what the message must show instead
};

inline std::vector<HostileName> hostile_names() {
  return {
      {"newline and escape", "cpu:0\n[ERROR] forged\x1b[2J", "cpu:0\\n[ERROR] forged\\x1b[2J"},
      {"10 kB", std::string(10240, 'x'), std::string(256, 'x') + "..."},
      {"NUL", std::string("cpu\0:0", 6), "cpu\\x00:0"},
  };
}

// `s` is a refusal whose message shows `name` escaped, holds no control byte and stays short.
inline void expect_safe_message(const Status& s, const HostileName& name) {
  ASSERT_FALSE(s.ok()) << name.what << ": accepted";
  const std::string& m = s.message();
  EXPECT_NE(m.find(name.shown), std::string::npos) << name.what << ": " << m.substr(0, 600);
  EXPECT_LT(m.size(), 2048u) << name.what;
  EXPECT_EQ(m.find(std::string(257, 'x')), std::string::npos) << name.what << ": not cut";
  for (char c : m) {
    const unsigned char u = static_cast<unsigned char>(c);
    ASSERT_TRUE(u >= 0x20 && u != 0x7f)
        << name.what << ": control byte " << int{u} << " in " << m.substr(0, 600);
  }
}

}  // namespace tessera::testing
