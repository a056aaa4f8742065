// Helpers shared by the request parser tests: small parse limits and the field a 400 names.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "kiln/server/http_error.h"
#include "kiln/server/parsed_requests.h"

namespace kiln::server::testing {

inline ParseLimits limits() {
  ParseLimits l;
  l.vocab_size = 300;
  return l;
}

// The field a 400 names, or "<no error>".
template <typename F>
std::string error_field(F&& f) {
  try {
    f();
  } catch (const HttpError& e) {
    EXPECT_EQ(e.status(), 400) << e.what();
    return e.param().empty() ? std::string("<no param>: ") + e.what() : e.param();
  }
  return "<no error>";
}

}  // namespace kiln::server::testing
