// GGUF files from bytes: the reader, every typed getter on every key, every tensor's bytes, and
// what a model load reads from the metadata (model config, tokenizer vocab, tokenizer).
#include <string>

#include "fuzz_support.h"
#include "kiln/model/gguf.h"
#include "kiln/model/model_config.h"
#include "kiln/model/tokenizer.h"
#include "kiln/model/tokenizer_loader.h"
#include "tokenizer_exercise.h"

namespace {

using kiln::fuzz::refusing_bad_input;
using kiln::model::GgufFile;

void read_every_key(const GgufFile& file) {
  for (const auto& kv : file.metadata()) {
    const std::string& k = kv.key;
    refusing_bad_input([&] { file.get_string(k); });
    refusing_bad_input([&] { file.get_u32(k); });
    refusing_bad_input([&] { file.get_i64(k); });
    refusing_bad_input([&] { file.get_f32(k); });
    refusing_bad_input([&] { file.get_bool(k); });
    refusing_bad_input([&] { file.get_string_array(k); });
    refusing_bad_input([&] { file.get_f32_array(k); });
    refusing_bad_input([&] { file.get_i32_array(k); });
  }
}

void read_every_tensor(const GgufFile& file) {
  for (const auto& info : file.tensor_infos()) {
    refusing_bad_input([&] {
      kiln::Tensor t = file.tensor(info.name);
      // Touch both ends so that ASan checks the bounds the reader promised.
      const auto* bytes = static_cast<const volatile uint8_t*>(t.data());
      if (t.nbytes() > 0) (void)(bytes[0] + bytes[t.nbytes() - 1]);
    });
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  refusing_bad_input([&] {
    auto file = GgufFile::from_bytes(data, size, nullptr, "fuzz.gguf");
    kiln::model::describe(*file);
    read_every_key(*file);
    read_every_tensor(*file);
    refusing_bad_input([&] { kiln::model::read_model_config(*file); });
    refusing_bad_input([&] {
      auto tok = kiln::model::Tokenizer::create(kiln::model::read_tokenizer_vocab(*file));
      kiln::fuzz::exercise_tokenizer(*tok);
    });
  });
  return 0;
}
