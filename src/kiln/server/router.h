// Routes with kiln's conventions: every handler's exceptions become JSON errors with the right
// status (HttpError: its own; engine::QueueFull: 503; kiln::Error and JSON errors: 400;
// anything else: 500), and the router remembers which methods each path has so a wrong method
// gets 405 instead of 404. httplib::Request and httplib::Response are used as plain data: the
// transport (http_connection.h) fills the request and writes the response.
#pragma once
#include <httplib.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace kiln::server {

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

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
  bool is_quick(const httplib::Request& req) const;
  // Methods registered for `path` (empty when the path is unknown).
  std::vector<std::string> methods(const std::string& path) const;
  // Runs the route for req.method (HEAD as GET) and req.path; when there is none, writes the
  // 404 or 405 error (with Allow).
  void dispatch(const httplib::Request& req, httplib::Response& res) const;
  // The 404 (unknown path) or 405 (known path, other method; with Allow) error for `req`.
  void set_no_route_error(const httplib::Request& req, httplib::Response& res) const;

 private:
  struct Route {
    std::string method;
    std::regex pattern;
    Handler handler;  // already guarded
  };
  void add(const std::string& method, const std::string& pattern, Handler handler);
  const Route* find(const httplib::Request& req) const;

  std::vector<Route> routes_;
  std::set<std::string> quick_paths_;
};

// Writes the JSON error body and status.
void set_error(httplib::Response& res, int status, const std::string& message,
               const std::string& param = {});
void set_json(httplib::Response& res, const nlohmann::json& body, int status = 200);
// The request body as JSON; a 400 HttpError when it is empty or not valid JSON (invalid UTF-8
// included).
nlohmann::json parse_json_body(const httplib::Request& req);

}  // namespace kiln::server
