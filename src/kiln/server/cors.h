// Cross-origin requests from browsers. A browser sends a preflight (OPTIONS with
// Access-Control-Request-Method) before a POST with a JSON body or an Authorization header;
// kiln answers it for every route, without authentication (browsers never send credentials on
// a preflight). Whether the browser may then read the actual response depends on the
// Access-Control-Allow-Origin header of that response, which kiln adds only when the operator
// chose an origin (`kiln serve --cors-allow-origin`): off by default, so a web page the user
// happens to open cannot read a local server's answers.
#pragma once
#include <string>

#include "kiln/server/http_message.h"
#include "kiln/server/router.h"

namespace kiln::server {

// 204 with Access-Control-Allow-Origin (`allow_origin`, or "*" when none is configured: the
// actual response decides), -Methods (the route's methods), -Headers (what the browser asked
// for, else Authorization and Content-Type) and -Max-Age; 404 for an unknown path.
void answer_preflight(const Router& router, const HttpRequest& req, HttpResponse& res,
                      const std::string& allow_origin);

}  // namespace kiln::server
