// POST /v1/chat/completions bodies through parse_chat_request.
#include "kiln/server/openai_request_parser.h"
#include "server_fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto body = kiln::fuzz::parse_json(data, size);
  if (!body) return 0;
  kiln::fuzz::refusing_bad_request(
      [&] { kiln::server::parse_chat_request(*body, kiln::fuzz::fuzz_parse_limits()); });
  return 0;
}
