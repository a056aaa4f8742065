// kiln's one error type. Every user-facing failure (bad file, bad request, bad flag) is an
// Error with a message that names the problem; main() and the server turn it into one line.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace kiln

// KILN_CHECK(cond, "fmt", args...): throws kiln::Error when cond is false. For input validation
// and invariants that bad input can break; never compiled out.
#define KILN_CHECK(cond, ...)    \
  do {                           \
    if (!(cond)) {               \
      ::kiln::fail(__VA_ARGS__); \
    }                            \
  } while (0)
