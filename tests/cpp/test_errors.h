// Shared by the CPU tests that check validation errors: the call must throw b12x::Error with the
// expected status, and the message must name every given fragment (argument, value, what is
// supported), which is the library's error contract.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "b12x/status.h"

namespace b12x::test {

/// Expect an Error with `code` whose message contains every one of `parts`.
template <class F>
void expect_error(F&& f, Status code, std::initializer_list<const char*> parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const char* p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message '" << e.what() << "' lacks '" << p << "'";
  }
}

}  // namespace b12x::test
