// A temporary directory the energy tests fill with files laid out like the real sysfs.
#pragma once

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <gtest/gtest.h>

namespace tessera::testing {

class FixtureTree {
 public:
  FixtureTree() {
    std::random_device rd;
    root_ = std::filesystem::temp_directory_path() /
            ("tessera-sysfs-" + std::to_string(rd()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(root_);
  }
  ~FixtureTree() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  std::string root() const { return root_.string(); }
  std::string path(const std::string& rel) const { return (root_ / rel).string(); }
  // Writes `contents` + "\n" to root/rel, creating directories.
  void write(const std::string& rel, const std::string& contents) const {
    const auto p = root_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream out(p);
    out << contents << "\n";
  }
  std::string read(const std::string& rel) const {
    std::ifstream in(root_ / rel);
    std::string s;
    std::getline(in, s);
    return s;
  }

 private:
  std::filesystem::path root_;
};

}  // namespace tessera::testing
