#include "kiln/server/cors.h"

namespace kiln::server {

void answer_preflight(const Router& router, const httplib::Request& req, httplib::Response& res,
                      const std::string& allow_origin) {
  const auto methods = router.methods(req.path);
  if (methods.empty()) {
    router.set_no_route_error(req, res);
    return;
  }
  std::string allow = "OPTIONS";
  for (const auto& m : methods) allow += ", " + m;
  std::string headers = req.get_header_value("Access-Control-Request-Headers");
  // Browser SDKs (OpenAI's included) send headers kiln ignores; allowing what was asked for is
  // harmless, since the server reads none but Authorization and Content-Type.
  if (headers.empty()) headers = "Authorization, Content-Type";
  res.status = 204;
  res.set_header("Access-Control-Allow-Origin", allow_origin.empty() ? "*" : allow_origin);
  res.set_header("Access-Control-Allow-Methods", allow);
  res.set_header("Access-Control-Allow-Headers", headers);
  res.set_header("Access-Control-Max-Age", "600");
  res.set_header("Allow", allow);
  if (!allow_origin.empty() && allow_origin != "*") res.set_header("Vary", "Origin");
}

}  // namespace kiln::server
