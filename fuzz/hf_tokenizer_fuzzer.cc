// Hugging Face tokenizer.json documents: the vocab reader, then the tokenizer built from it
// (its validation and its encode/decode), and tokenizer_config.json's chat_template reader.
#include "fuzz_support.h"
#include "kiln/model/hf_tokenizer.h"
#include "kiln/model/tokenizer.h"
#include "tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nlohmann::json;
  auto doc = kiln::fuzz::parse_json(data, size);
  if (!doc) return 0;
  // The two companion files ride along in the document under keys of their own.
  auto companion = [&](const char* key) {
    return doc->is_object() ? doc->value(key, json()) : json();
  };
  kiln::fuzz::refusing_bad_input([&] {
    auto tok = kiln::model::Tokenizer::create(kiln::model::vocab_from_hf_tokenizer(
        *doc, companion("fuzz_tokenizer_config"), companion("fuzz_generation_config")));
    kiln::fuzz::exercise_tokenizer(*tok);
  });
  kiln::fuzz::refusing_bad_input(
      [&] { kiln::model::chat_template_from_hf(companion("fuzz_tokenizer_config")); });
  return 0;
}
