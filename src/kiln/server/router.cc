#include "kiln/server/router.h"

#include <algorithm>
#include <cctype>

#include "kiln/base/bounded_json.h"
#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/engine_config.h"
#include "kiln/server/http_error.h"

namespace kiln::server {

namespace {

Handler guarded(Handler handler) {
  return [handler = std::move(handler)](const HttpRequest& req, HttpResponse& res) {
    try {
      handler(req, res);
    } catch (const HttpError& e) {
      set_error(res, e.status(), e.what(), e.param());
    } catch (const engine::QueueFull& e) {
      set_error(res, 503, e.what());
    } catch (const nlohmann::json::exception& e) {
      set_error(res, 400, std::string("invalid request: ") + e.what());
    } catch (const kiln::Error& e) {
      set_error(res, 400, e.what());
    } catch (const std::exception& e) {
      KILN_LOG_ERROR("{} {}: {}", req.method, req.path, e.what());
      set_error(res, 500, std::string("internal error: ") + e.what());
    }
  };
}

}  // namespace

void Router::add(const std::string& method, const std::string& pattern, Handler handler) {
  routes_.push_back({method, std::regex(pattern), guarded(std::move(handler))});
}

void Router::get(const std::string& pattern, Handler handler) {
  add("GET", pattern, std::move(handler));
}

void Router::post(const std::string& pattern, Handler handler) {
  add("POST", pattern, std::move(handler));
}

void Router::get_quick(const std::string& path, Handler handler) {
  // The path becomes its own pattern, so it must hold no regex syntax but the dot, which is
  // escaped (a file name: /webui/app.js); and an earlier route at this path would win dispatch
  // while the request ran on the I/O thread.
  KILN_CHECK(std::all_of(path.begin(), path.end(),
                         [](char c) {
                           return std::isalnum(static_cast<unsigned char>(c)) || c == '/' ||
                                  c == '_' || c == '-' || c == '.';
                         }),
             "quick route {}: only a literal path (letters, digits, / _ - .)", path);
  HttpRequest probe;
  probe.method = "GET";
  probe.path = path;
  KILN_CHECK(find(probe) == nullptr, "quick route {} is shadowed by an earlier route", path);
  std::string pattern;
  for (char c : path) {
    if (c == '.') pattern += '\\';
    pattern += c;
  }
  add("GET", pattern, std::move(handler));
  quick_paths_.insert(path);
}

const Router::Route* Router::find(const HttpRequest& req) const {
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  for (const auto& r : routes_) {
    if (r.method == method && std::regex_match(req.path, r.pattern)) return &r;
  }
  return nullptr;
}

bool Router::is_quick(const HttpRequest& req) const {
  return (req.method == "GET" || req.method == "HEAD") && quick_paths_.count(req.path) > 0;
}

std::vector<std::string> Router::methods(const std::string& path) const {
  std::vector<std::string> out;
  for (const auto& r : routes_) {
    if (std::regex_match(path, r.pattern) &&
        std::find(out.begin(), out.end(), r.method) == out.end()) {
      out.push_back(r.method);
    }
  }
  return out;
}

void Router::dispatch(const HttpRequest& req, HttpResponse& res) const {
  if (const Route* r = find(req)) {
    r->handler(req, res);
    return;
  }
  set_no_route_error(req, res);
}

void Router::set_no_route_error(const HttpRequest& req, HttpResponse& res) const {
  auto allowed = methods(req.path);
  if (allowed.empty()) {
    set_error(res, 404, "no route " + req.path);
    return;
  }
  std::string allow;
  for (const auto& m : allowed) allow += (allow.empty() ? "" : ", ") + m;
  res.headers.set("Allow", allow);
  set_error(res, 405, req.method + " is not allowed on " + req.path + " (use " + allow + ")");
}

void set_error(HttpResponse& res, int status, const std::string& message,
               const std::string& param) {
  res.status = status;
  res.set_content(dump_json(error_body(status, message, param)), "application/json");
}

void set_json(HttpResponse& res, const nlohmann::json& body, int status) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

nlohmann::json parse_json_body(const HttpRequest& req) {
  if (req.body.empty()) throw HttpError(400, "the request body is empty; expected JSON");
  try {
    return parse_json_bounded(req.body, /*allow_exceptions=*/true);
  } catch (const nlohmann::json::parse_error& e) {
    throw HttpError(400, std::string("the request body is not valid JSON: ") + e.what());
  } catch (const JsonTooDeep& e) {
    throw HttpError(400, std::string("the request body ") + e.what());
  }
}

}  // namespace kiln::server
