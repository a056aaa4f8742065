// The HTTP request parsers' side of fuzz_support.h: they refuse bad bodies with HttpError(400)
// naming the field (or kiln::Error), and the limits are those of a served model.
#pragma once
#include "fuzz_support.h"
#include "kiln/server/http_error.h"
#include "kiln/server/parsed_requests.h"

namespace kiln::fuzz {

inline server::ParseLimits fuzz_parse_limits() {
  server::ParseLimits limits;
  limits.vocab_size = 32000;
  return limits;
}

template <typename F>
void refusing_bad_request(F&& body) {
  try {
    body();
  } catch (const server::HttpError& e) {
    // A refusal must be a client error that says something.
    if (e.status() != 400 || std::string_view(e.what()).empty()) __builtin_trap();
  } catch (const Error&) {
  }
}

}  // namespace kiln::fuzz
