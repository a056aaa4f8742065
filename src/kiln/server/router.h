// Route registration on the httplib server with kiln's conventions: every handler's exceptions
// become JSON errors with the right status (HttpError: its own; engine::QueueFull: 503;
// kiln::Error and JSON errors: 400; anything else: 500), and the router remembers which
// methods each path has so a wrong method gets 405 instead of 404.
#pragma once
#include <httplib.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kiln::server {

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

class Router {
 public:
  explicit Router(httplib::Server& server) : server_(server) {}
  void get(const std::string& path, Handler handler);
  void post(const std::string& path, Handler handler);
  // Methods registered for `path` (empty when the path is unknown).
  std::vector<std::string> methods(const std::string& path) const;

 private:
  httplib::Server& server_;
  std::map<std::string, std::vector<std::string>> methods_;
};

// Writes the JSON error body and status.
void set_error(httplib::Response& res, int status, const std::string& message,
               const std::string& param = {});
void set_json(httplib::Response& res, const nlohmann::json& body, int status = 200);
// The request body as JSON; a 400 HttpError when it is empty or not valid JSON (invalid UTF-8
// included).
nlohmann::json parse_json_body(const httplib::Request& req);

}  // namespace kiln::server
