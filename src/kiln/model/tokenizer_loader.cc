#include "kiln/model/tokenizer_loader.h"

#include "kiln/model/gguf.h"

namespace kiln::model {

TokenizerVocab read_tokenizer_vocab(const GgufFile& file) {
  VocabMetadata m;
  m.get_string = [&](std::string_view k) { return file.try_get_string(k); };
  m.get_int = [&](std::string_view k) { return file.try_get_i64(k); };
  m.get_bool = [&](std::string_view k) { return file.try_get_bool(k); };
  m.get_string_array = [&](std::string_view k) { return file.try_get_string_array(k); };
  m.get_f32_array = [&](std::string_view k) { return file.try_get_f32_array(k); };
  m.get_i32_array = [&](std::string_view k) { return file.try_get_i32_array(k); };
  return vocab_from_gguf_metadata(m);
}

}  // namespace kiln::model
