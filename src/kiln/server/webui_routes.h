// The chat page (docs/webui.md): `kiln serve` answers GET and HEAD on `/` with webui/index.html
// and on /webui/<name> with the page's other files, all compiled into the binary
// (embedded_file.h). Every answer carries a Content-Security-Policy that lets the page load
// and connect to this server only, and an ETag the browser revalidates with (304 when
// unchanged). `kiln serve --no-webui` turns the page off: `/` then answers 404 naming the flag.
#pragma once
#include <string_view>

namespace kiln::server {

class Router;

// Registers the page's routes (quick routes: static bytes, answered on the I/O thread, so the
// page opens even while every handler thread waits on a generation). When !enabled, only `/`
// is registered, answering the 404.
void add_webui_routes(Router& router, bool enabled);

// Whether `path` is one of the page's files. Those are served without the API key: they hold
// nothing of the server's, and the page asks the user for the key before calling the API.
bool is_webui_path(std::string_view path);

// The Content-Security-Policy of the page's responses: scripts, styles and images from this
// server only, requests to this server only, no frames, no plugins, no forms elsewhere.
extern const char* const kWebuiContentSecurityPolicy;

}  // namespace kiln::server
