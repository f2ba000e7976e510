// Shared helpers of the application-level tests.
#ifndef REVIVE_TESTS_APPLEVEL_APP_UTIL_H_
#define REVIVE_TESTS_APPLEVEL_APP_UTIL_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "../core/test_tmpdir.h"
#include "revive/checkpoint.hpp"

namespace revive::testing {

inline Options Opts(const TmpDir& t) {
  Options o;  // defaults, independent of the environment the test runs in
  o.base_path = t / "cp";
  return o;
}

// Expects `f` to throw revive::Error whose message contains every one of `parts`.
template <class F>
void ExpectError(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no revive::Error thrown";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " / " << p;
  }
}

}  // namespace revive::testing

#endif  // REVIVE_TESTS_APPLEVEL_APP_UTIL_H_
