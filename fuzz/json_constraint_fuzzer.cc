// JSON-constrained decoding: the input is a JSON schema (a request's response_format schema,
// untrusted), a NUL byte, then bytes a model might generate. The schema is compiled (refusals
// are JsonSchemaError), the bytes are fed to the matcher until it refuses one, and at every
// accepted prefix the invariant constrained decoding relies on is checked: the value is
// complete or some next byte is accepted (no dead end, where the mask would allow nothing).
// Every few bytes the token mask over a small fixed vocabulary must equal a token-by-token
// check.
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "kiln/engine/json/json_schema.h"
#include "kiln/engine/json/json_token_mask.h"
#include "kiln/engine/json/token_trie.h"

namespace {

const std::vector<std::string>& pieces() {
  static const std::vector<std::string> p = {
      "{",    "}",   "[",   "]",  ",",  ":",  "\"",   "\":",  "\",\"",    " ",
      "\n",   "a",   "ab",  "1",  "12", "-",  ".",    "e",    "true",     "false",
      "null", "\\",  "\\u", "D8", "DC", "00", "\xC3", "\xA9", "\xC3\xA9", "\xF0\x9F",
      "{\"",  "\"}", "0",   "E+", "n",  "t",  "f"};
  return p;
}

const kiln::engine::TokenTrie& trie() {
  static const kiln::engine::TokenTrie t = kiln::engine::TokenTrie::from_pieces(pieces());
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::engine;
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t schema_size = nul != nullptr ? static_cast<size_t>(nul - data) : size;
  auto doc = kiln::fuzz::parse_json(data, schema_size);
  if (!doc) return 0;
  std::shared_ptr<const JsonSchema> schema;
  try {
    schema = JsonSchema::compile(*doc);
  } catch (const JsonSchemaError&) {
    return 0;
  }
  JsonMatcher m(schema);
  const size_t vocab = pieces().size() + 1;
  const int32_t end_ids[] = {static_cast<int32_t>(pieces().size())};
  std::vector<uint8_t> allowed(vocab);
  const size_t start = nul != nullptr ? schema_size + 1 : size;
  for (size_t i = start; i <= size; ++i) {
    bool any_next = m.complete();
    for (int b = 0; b < 256 && !any_next; ++b) {
      JsonMatchState s = m.state();
      any_next = json_feed(*schema, s, static_cast<uint8_t>(b));
    }
    if (!any_next) __builtin_trap();  // a dead end: nothing could follow this prefix
    if ((i - start) % 8 == 0) {
      json_allowed_tokens(trie(), m, end_ids, allowed);
      for (size_t t = 0; t < pieces().size(); ++t) {
        JsonMatcher copy = m;
        if ((copy.feed(pieces()[t]) ? 1 : 0) != allowed[t]) __builtin_trap();
      }
      if ((m.complete() ? 1 : 0) != allowed[pieces().size()]) __builtin_trap();
    }
    if (i == size || !m.feed(std::string(1, static_cast<char>(data[i])))) break;
  }
  return 0;
}
