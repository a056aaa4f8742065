#include "kiln/server/api_key.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "kiln/base/error.h"

namespace kiln::server {

bool constant_time_equals(std::string_view given, std::string_view secret) {
  // The loop runs over `given` only and indexes the secret modulo its length, so neither an
  // early exit nor the secret's length shows in the timing; any difference, in length or in a
  // byte, leaves a bit set in `diff`.
  size_t diff = given.size() ^ secret.size();
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i]) ^
            static_cast<unsigned char>(secret[i % secret.size()]);
  }
  return diff == 0;
}

bool bearer_matches(std::string_view authorization, std::string_view api_key) {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.substr(0, kScheme.size()) != kScheme) return false;
  return constant_time_equals(authorization.substr(kScheme.size()), api_key);
}

std::string read_api_key_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read the API key file {}: {}", path, std::strerror(errno));
  std::string key;
  std::getline(in, key);
  if (!key.empty() && key.back() == '\r') key.pop_back();  // a file written on Windows
  if (key.empty()) fail("the API key file {} is empty (the key is its first line)", path);
  return key;
}

}  // namespace kiln::server
