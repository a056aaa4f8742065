#include "kiln/server/cors.h"

namespace kiln::server {

void answer_preflight(const Router& router, const HttpRequest& req, HttpResponse& res,
                      const std::string& allow_origin) {
  const auto methods = router.methods(req.path);
  if (methods.empty()) {
    router.set_no_route_error(req, res);
    return;
  }
  std::string allow = "OPTIONS";
  for (const auto& m : methods) allow += ", " + m;
  std::string headers = req.headers.get("Access-Control-Request-Headers");
  // Browser SDKs (OpenAI's included) send headers kiln ignores; allowing what was asked for is
  // harmless, since the server reads none but Authorization and Content-Type.
  if (headers.empty()) headers = "Authorization, Content-Type";
  res.status = 204;
  res.headers.set("Access-Control-Allow-Origin", allow_origin.empty() ? "*" : allow_origin);
  res.headers.set("Access-Control-Allow-Methods", allow);
  res.headers.set("Access-Control-Allow-Headers", headers);
  res.headers.set("Access-Control-Max-Age", "600");
  res.headers.set("Allow", allow);
  if (!allow_origin.empty() && allow_origin != "*") res.headers.set("Vary", "Origin");
}

}  // namespace kiln::server
