// The bytes of an HTTP/1.1 response head and of chunked framing, and the decoded path kiln's
// routes match.
#pragma once
#include <string>
#include <string_view>

#include "kiln/server/http_message.h"

namespace kiln::server {

// The status line and headers of `res`, ending with the blank line. `chunked`: the body follows
// with Transfer-Encoding: chunked; otherwise Content-Length is res.body's size. `close` adds
// "Connection: close", `keep_alive_1_0` "Connection: keep-alive" (what an HTTP/1.0 client that
// asked to keep the connection needs to hear).
std::string response_head(const HttpResponse& res, bool chunked, bool close, bool keep_alive_1_0);

// One chunk of a chunked body (`data` must not be empty) and the last chunk.
std::string chunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// The path of a request target: the part before '?', percent-decoded. Empty when the target
// is not an origin-form path or a %-escape is malformed.
std::string decoded_path(std::string_view target);

}  // namespace kiln::server
