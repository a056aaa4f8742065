#include "kiln/server/webui_routes.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <string>

#include "kiln/base/error.h"
#include "kiln/server/embedded_file.h"
#include "kiln/server/router.h"

namespace kiln::server {

const char* const kWebuiContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

namespace {

constexpr std::string_view kPagePath = "/";
constexpr std::string_view kIndexFile = "index.html";
constexpr std::string_view kFilePrefix = "/webui/";

// Fails at startup on a file type the table does not know, so a new kind of file in webui/
// cannot go out with a Content-Type the browser refuses (nosniff) or guesses.
std::string content_type(std::string_view name) {
  const std::string_view ext = name.substr(std::min(name.rfind('.'), name.size()));
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".png") return "image/png";
  fail("webui/{}: no Content-Type for this kind of file (add it to webui_routes.cc)", name);
}

// Whether `if_none_match` (the request's If-None-Match) names `etag`: a list of entity tags,
// or "*" (RFC 9110 §13.1.2; the weak prefix W/ compares equal for GET).
bool etag_matches(std::string_view if_none_match, std::string_view etag) {
  if (if_none_match == "*") return true;
  size_t pos = 0;
  while (pos < if_none_match.size()) {
    size_t end = if_none_match.find(',', pos);
    if (end == std::string_view::npos) end = if_none_match.size();
    std::string_view tag = if_none_match.substr(pos, end - pos);
    while (!tag.empty() && tag.front() == ' ') tag.remove_prefix(1);
    while (!tag.empty() && tag.back() == ' ') tag.remove_suffix(1);
    if (tag.substr(0, 2) == "W/") tag.remove_prefix(2);
    if (tag == etag) return true;
    pos = end + 1;
  }
  return false;
}

// The answer for one embedded file. The page changes only with the binary, but a browser
// must not keep an old page after an upgrade, so it revalidates every time (no-cache) and gets
// 304 with no body while the ETag, a hash of the bytes, still matches.
Handler file_handler(const EmbeddedFile& file) {
  const std::string type = content_type(file.name);
  const std::string etag =
      fmt::format("\"{:016x}\"", XXH3_64bits(file.bytes.data(), file.bytes.size()));
  return [&file, type, etag](const HttpRequest& req, HttpResponse& res) {
    res.headers.set("Cache-Control", "no-cache");
    res.headers.set("ETag", etag);
    res.headers.set("Content-Security-Policy", kWebuiContentSecurityPolicy);
    res.headers.set("X-Content-Type-Options", "nosniff");
    res.headers.set("Referrer-Policy", "no-referrer");
    if (etag_matches(req.headers.get("If-None-Match"), etag)) {
      res.status = 304;
      return;
    }
    res.set_content(std::string(file.bytes), type);
  };
}

}  // namespace

void add_webui_routes(Router& router, bool enabled) {
  if (!enabled) {
    router.get_quick(std::string(kPagePath), [](const HttpRequest&, HttpResponse& res) {
      set_error(res, 404,
                "the web UI is turned off (kiln serve --no-webui); the API is served under /v1 "
                "and the native routes");
    });
    return;
  }
  bool has_index = false;
  for (const EmbeddedFile& file : webui_files()) {
    if (file.name == kIndexFile) {
      router.get_quick(std::string(kPagePath), file_handler(file));
      has_index = true;
    } else {
      router.get_quick(std::string(kFilePrefix) + std::string(file.name), file_handler(file));
    }
  }
  KILN_CHECK(has_index, "the embedded web UI has no {}", kIndexFile);
}

bool is_webui_path(std::string_view path) {
  if (path == kPagePath) return true;
  if (path.substr(0, kFilePrefix.size()) != kFilePrefix) return false;
  const std::string_view name = path.substr(kFilePrefix.size());
  for (const EmbeddedFile& file : webui_files()) {
    if (file.name == name && file.name != kIndexFile) return true;
  }
  return false;
}

}  // namespace kiln::server
