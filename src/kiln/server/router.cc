#include "kiln/server/router.h"

#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/engine.h"
#include "kiln/server/http_error.h"

namespace kiln::server {

namespace {

Handler guarded(Handler handler) {
  return [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
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

void Router::get(const std::string& path, Handler handler) {
  methods_[path].push_back("GET");
  server_.Get(path, guarded(std::move(handler)));
}

void Router::post(const std::string& path, Handler handler) {
  methods_[path].push_back("POST");
  server_.Post(path, guarded(std::move(handler)));
}

std::vector<std::string> Router::methods(const std::string& path) const {
  auto it = methods_.find(path);
  return it == methods_.end() ? std::vector<std::string>{} : it->second;
}

void set_error(httplib::Response& res, int status, const std::string& message,
               const std::string& param) {
  res.status = status;
  res.set_content(dump_json(error_body(status, message, param)), "application/json");
}

void set_json(httplib::Response& res, const nlohmann::json& body, int status) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

nlohmann::json parse_json_body(const httplib::Request& req) {
  if (req.body.empty()) throw HttpError(400, "the request body is empty; expected JSON");
  try {
    return nlohmann::json::parse(req.body);
  } catch (const nlohmann::json::parse_error& e) {
    throw HttpError(400, std::string("the request body is not valid JSON: ") + e.what());
  }
}

}  // namespace kiln::server
