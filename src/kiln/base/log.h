// Logging goes through spdlog's default logger; this header adds the level setter behind
// --log-level and kiln's logging macros.
#pragma once
#include <spdlog/spdlog.h>

#include <string_view>

namespace kiln {

// Sets the global level from a name ("trace", "debug", "info", "warn", "error", "off").
void set_log_level(std::string_view level);

}  // namespace kiln

#define KILN_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define KILN_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define KILN_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define KILN_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
