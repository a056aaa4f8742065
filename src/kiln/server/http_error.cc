#include "kiln/server/http_error.h"

namespace kiln::server {

const char* error_type_for_status(int status) {
  switch (status) {
    case 400:
    case 404:
    case 405:
    case 413:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 503:
      return "server_overloaded";
    default:
      return status >= 500 ? "internal_server_error" : "invalid_request_error";
  }
}

nlohmann::json error_body(int status, const std::string& message, const std::string& param) {
  nlohmann::json err = {{"message", message},
                        {"type", error_type_for_status(status)},
                        {"param", param.empty() ? nlohmann::json() : nlohmann::json(param)},
                        {"code", status}};
  return {{"error", std::move(err)}};
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kiln::server
