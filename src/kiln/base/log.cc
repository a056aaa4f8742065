#include "kiln/base/log.h"

#include "kiln/base/error.h"

namespace kiln {

void set_log_level(std::string_view level) {
  auto parsed = spdlog::level::from_str(std::string(level));
  KILN_CHECK(parsed != spdlog::level::off || level == "off", "unknown log level '{}'", level);
  spdlog::set_level(parsed);
}

}  // namespace kiln
