// A fresh temporary directory per test, removed afterwards (shared by core/storage/applevel tests).
#ifndef REVIVE_TESTS_CORE_TEST_TMPDIR_H_
#define REVIVE_TESTS_CORE_TEST_TMPDIR_H_

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace revive::testing {

class TmpDir {
 public:
  TmpDir() {
    std::string t = (std::filesystem::temp_directory_path() / "revive-test-XXXXXX").string();
    if (!mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
    path_ = t;
  }
  ~TmpDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

}  // namespace revive::testing

#endif  // REVIVE_TESTS_CORE_TEST_TMPDIR_H_
