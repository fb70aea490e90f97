// The JSON helpers behind the plan, profile and platform files: errors name the file and field.
#include "core/json.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera {
namespace {

void expect_invalid(const Status& s, const std::string& part) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find(part), std::string::npos) << "'" << part << "' not in " << s.message();
}

// json_number_overflow.*.json (issue 28): nlohmann throws out_of_range for a number no double
// holds; it used to escape the helpers and terminate the process.
TEST(Json, NumberOverflowIsAnErrorNamingTheFile) {
  for (const char* number : {"1e999", "-1e999", "123456789e400"}) {
    SCOPED_TRACE(number);
    const std::string text =
        std::string("{\"format\": \"tessera-plan\", \"version\": ") + number + "}";
    Result<json::Json> r = json::parse(text, "x.plan.json");
    expect_invalid(r.status(), "x.plan.json: number out of range");
    EXPECT_NE(r.status().message().find(number), std::string::npos) << r.status().message();
  }
}

TEST(Json, MalformedTextNamesFileAndByte) {
  Result<json::Json> r = json::parse("{\"a\": [1, 2,}", "p.json");
  expect_invalid(r.status(), "p.json: malformed JSON at byte");
  // Large integers and ordinary doubles still parse.
  Result<json::Json> ok = json::parse("{\"a\": 18446744073709551615, \"b\": 1e300}", "p.json");
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
}

TEST(Json, NumberFieldRejectsOutOfRangeValuesNamingTheField) {
  const json::Json j = json::Json::parse(R"({"d": {"mhz": -5}})");
  Result<double> r = json::number_field(j["d"], "devices[2]", "mhz", 1, 1e6);
  expect_invalid(r.status(), "devices[2].mhz");
}

TEST(Json, DuplicateKeysAreRefusedNamingTheKey) {
  auto r = json::parse(R"({"a": 1, "b": {"c": 2, "c": 3}})", "p.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "p.json: key 'c' appears twice in one object");
  // The same key in different objects, or in an object inside an array, is fine.
  EXPECT_TRUE(json::parse(R"({"c": 1, "b": {"c": 2}, "d": [{"c": 1}, {"c": 2}]})", "p").ok());
  r = json::parse("{\"x\\u0007y\": 1, \"x\\u0007y\": 2}", "p");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'x\\x07y'"), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace tessera
