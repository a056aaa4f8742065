// The server's optional API key: the check of a request's Authorization header, in time that
// does not depend on how much of the key a guess got right, and reading the key from a file
// (`kiln serve --api-key-file`), so it need not appear on the command line, where `ps` and
// shell history show it.
#pragma once
#include <string>
#include <string_view>

namespace kiln::server {

// a == b, looking at every byte of `given` whatever the outcome, so the time taken tells an
// attacker nothing about the secret beyond what `given` (their own input) already does.
// `secret` must not be empty.
bool constant_time_equals(std::string_view given, std::string_view secret);

// True when `authorization` (the header's value) is "Bearer <api_key>".
bool bearer_matches(std::string_view authorization, std::string_view api_key);

// The key in the first line of the file at `path`, without its line ending. Throws kiln::Error
// with one line naming the file when it cannot be read or the key is empty.
std::string read_api_key_file(const std::string& path);

}  // namespace kiln::server
