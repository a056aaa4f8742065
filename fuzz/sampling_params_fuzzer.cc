// Sampling parameters: SGLang's `sampling_params` object, and the same fields read from the top
// level of an OpenAI body (read_common_sampling + read_max_tokens), as the routes call them.
#include "kiln/server/sampling_parser.h"
#include "server_fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::server;
  auto obj = kiln::fuzz::parse_json(data, size);
  if (!obj) return 0;
  const ParseLimits limits = kiln::fuzz::fuzz_parse_limits();
  kiln::fuzz::refusing_bad_request([&] { parse_sglang_sampling_params(*obj, limits); });
  if (!obj->is_object()) return 0;  // the OpenAI parsers check the body is an object first
  kiln::fuzz::refusing_bad_request([&] {
    GenerationOptions out;
    read_common_sampling(*obj, "", limits, out);
    read_max_tokens(*obj, "max_tokens", "", out);
  });
  return 0;
}
