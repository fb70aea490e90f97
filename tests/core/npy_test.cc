#include "core/npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tessera {
namespace {

std::vector<uint8_t> npy_bytes(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  b.push_back(static_cast<uint8_t>(header.size() & 0xff));
  b.push_back(static_cast<uint8_t>(header.size() >> 8));
  b.insert(b.end(), header.begin(), header.end());
  b.resize(b.size() + data_bytes, 0);
  return b;
}

TEST(Npy, RoundTripsEveryDType) {
  const std::string path = ::testing::TempDir() + "npy_roundtrip.npy";
  for (int d = 0; d < kNumDTypes; ++d) {
    Tensor t = Tensor::create(static_cast<DType>(d), Shape{2, 3, 5}).value();
    for (size_t i = 0; i < t.byte_size(); ++i)
      static_cast<uint8_t*>(t.raw())[i] = static_cast<uint8_t>(i * 7 % 2);
    ASSERT_TRUE(write_npy(path, t).ok());
    Tensor r = read_npy(path).value();
    EXPECT_EQ(r.dtype(), t.dtype());
    EXPECT_EQ(r.shape(), t.shape());
    EXPECT_EQ(std::memcmp(r.raw(), t.raw(), t.byte_size()), 0);
  }
  // Scalars and 1-D arrays use Python's tuple syntax "()" and "(n,)".
  for (const Shape& s : {Shape{}, Shape{7}}) {
    Tensor t = Tensor::create(DType::kF32, s).value();
    ASSERT_TRUE(write_npy(path, t).ok());
    EXPECT_EQ(read_npy(path).value().shape(), s);
  }
  std::remove(path.c_str());
}

TEST(Npy, ParsesNumpyWrittenHeader) {
  auto b = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }          \n", 12);
  Tensor t = parse_npy(b).value();
  EXPECT_EQ(t.shape(), (Shape{1, 3}));
}

TEST(Npy, StrictHeaderAcceptsWhatNumpyWrites) {
  for (const char* header : {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n",
                             "{'shape': (3,), 'fortran_order': False, 'descr': '<f4'}",
                             "{'descr':'<f4','fortran_order':False,'shape':(3,)}   \n"}) {
    EXPECT_TRUE(parse_npy(npy_bytes(header, 12)).ok()) << header;
  }
  EXPECT_EQ(
      parse_npy(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4))->shape(),
      Shape{});
  const Status s =
      parse_npy(npy_bytes("{'descr': '<f4', 'fortran_order': False_, 'shape': (3,), }", 12))
          .status();
  EXPECT_NE(s.message().find("expected ',' or '}' after the value of 'fortran_order'"),
            std::string::npos)
      << s.to_string();
}

TEST(Npy, RejectsMalformedFiles) {
  EXPECT_FALSE(parse_npy(std::vector<uint8_t>{}).ok());
  EXPECT_FALSE(parse_npy(std::vector<uint8_t>{'n', 'o', 'p', 'e', 0, 0, 0, 0, 0, 0, 0}).ok());
  // Header length past the end.
  auto b = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 12);
  b[8] = 0xff;
  b[9] = 0xff;
  EXPECT_FALSE(parse_npy(b).ok());
  // Data size mismatch, big-endian, fortran order, object dtype, absurd dims, missing keys.
  const std::vector<std::pair<std::string, size_t>> bad = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8},
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", 12},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", 12},
      {"{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", 24},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1), }", 4},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 4},
      {"{'descr': '<f4', 'shape': (3,), }", 12},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, }", 12},
      {"{'descr': '<f4", 12},
      // Not the dict literal numpy writes: False_, no braces, a key twice, an unknown key, text
      // after the brace, a malformed tuple.
      {"{'descr': '<f4', 'fortran_order': False_, 'shape': (3,), }", 12},
      {"'descr': '<f4', 'fortran_order': False, 'shape': (3,)", 12},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'shape': (3,), }", 12},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'extra': 1, }", 12},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } x", 12},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (,3), }", 12},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3 3), }", 12},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (3,), }", 12},
  };
  for (const auto& [header, n] : bad) {
    Result<Tensor> r = parse_npy(npy_bytes(header, n));
    EXPECT_FALSE(r.ok()) << header;
    EXPECT_FALSE(r.status().message().empty());
  }
}

TEST(Npy, SurvivesRandomCorruption) {
  Tensor t = Tensor::create(DType::kF32, Shape{4, 4}).value();
  const std::string path = ::testing::TempDir() + "npy_fuzz.npy";
  ASSERT_TRUE(write_npy(path, t).ok());
  FILE* f = std::fopen(path.c_str(), "rb");
  std::vector<uint8_t> good(4096);
  good.resize(std::fread(good.data(), 1, good.size(), f));
  std::fclose(f);
  std::remove(path.c_str());
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    if (rng() % 3 == 0) b.resize(rng() % b.size());
    Result<Tensor> r = parse_npy(b);  // must not crash; either outcome is fine
    if (r.ok()) {
      EXPECT_LE(r->byte_size(), b.size());
    }
  }
}

TEST(Npy, MissingFileNamesThePath) {
  Result<Tensor> r = read_npy("/nonexistent/x.npy");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/x.npy"), std::string::npos);
}

}  // namespace
}  // namespace tessera
