// Files compiled into the binary: the chat page's HTML, CSS and JavaScript (webui/ at the
// repository root), turned into byte arrays at build time by cmake/embed_files.cmake, so a
// copied `kiln` serves the page with no files beside it.
#pragma once
#include <span>
#include <string_view>

namespace kiln::server {

struct EmbeddedFile {
  std::string_view name;   // the file's name in its folder: "index.html"
  std::string_view bytes;  // its content, exactly as committed
};

// The files of webui/, in name order (the definition is generated).
std::span<const EmbeddedFile> webui_files();

}  // namespace kiln::server
