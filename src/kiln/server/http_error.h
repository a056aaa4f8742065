// Errors that become HTTP responses. Handlers throw HttpError; the server turns it (and any
// kiln::Error, which is the client's fault by construction: bad input) into a JSON body
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// which is the OpenAI error object; the native routes use the same shape so every client can
// read error.message whatever route it called.
#pragma once
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace kiln::server {

class HttpError : public std::runtime_error {
 public:
  HttpError(int status, std::string message, std::string param = {})
      : std::runtime_error(std::move(message)), status_(status), param_(std::move(param)) {}
  int status() const { return status_; }
  // The request field at fault ("sampling_params.top_p"), empty when none is.
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string param_;
};

// 400 naming the field: bad_field("top_p", "must be in (0, 1], got {}", x).
template <typename... Args>
[[noreturn]] void bad_field(const std::string& field, fmt::format_string<Args...> format,
                            Args&&... args) {
  throw HttpError(400, field + " " + fmt::format(format, std::forward<Args>(args)...), field);
}

// The OpenAI error type for a status ("invalid_request_error", "authentication_error", ...).
const char* error_type_for_status(int status);

nlohmann::json error_body(int status, const std::string& message, const std::string& param = {});

// Serializes JSON for the wire. Generated text may hold invalid UTF-8 (a random model can emit
// a lone byte token); it is replaced by U+FFFD instead of making dump() throw.
std::string dump_json(const nlohmann::json& j);

}  // namespace kiln::server
