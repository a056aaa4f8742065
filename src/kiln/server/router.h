// Routes with kiln's conventions: every handler's exceptions become JSON errors with the right
// status (HttpError: its own; engine::QueueFull: 503; kiln::Error and JSON errors: 400;
// anything else: 500), and the router remembers which methods each path has so a wrong method
// gets 405 instead of 404. The transport (http_connection.h) fills the HttpRequest and writes
// the HttpResponse.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "kiln/server/http_message.h"

namespace kiln::server {

using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;

class Router {
 public:
  // `pattern` is matched against the whole path as a regex, so a route with
  // a parameter is e.g. "/v1/models/(.+)"; handlers read the parameter from req.path.
  void get(const std::string& pattern, Handler handler);
  void post(const std::string& pattern, Handler handler);
  // A GET route at one literal path, answered on the I/O thread that read the request, never
  // queued behind the handler threads: health checks and metrics must answer while every
  // handler thread waits on a generation. The handler must not block (no engine queue, no
  // waiting on a step). Throws when `path` is taken by an earlier route.
  void get_quick(const std::string& path, Handler handler);
  // Whether `req` goes to a quick route: a lookup by path, no pattern matching, because every
  // request asks it on the I/O thread.
  bool is_quick(const HttpRequest& req) const;
  // Methods registered for `path` (empty when the path is unknown).
  std::vector<std::string> methods(const std::string& path) const;
  // Runs the route for req.method (HEAD as GET) and req.path; when there is none, writes the
  // 404 or 405 error (with Allow).
  void dispatch(const HttpRequest& req, HttpResponse& res) const;
  // The 404 (unknown path) or 405 (known path, other method; with Allow) error for `req`.
  void set_no_route_error(const HttpRequest& req, HttpResponse& res) const;

 private:
  struct Route {
    std::string method;
    std::regex pattern;
    Handler handler;  // already guarded
  };
  void add(const std::string& method, const std::string& pattern, Handler handler);
  const Route* find(const HttpRequest& req) const;

  std::vector<Route> routes_;
  std::set<std::string> quick_paths_;
};

// Writes the JSON error body and status.
void set_error(HttpResponse& res, int status, const std::string& message,
               const std::string& param = {});
void set_json(HttpResponse& res, const nlohmann::json& body, int status = 200);
// The request body as JSON; a 400 HttpError when it is empty or not valid JSON (invalid UTF-8
// included).
nlohmann::json parse_json_body(const HttpRequest& req);

}  // namespace kiln::server
