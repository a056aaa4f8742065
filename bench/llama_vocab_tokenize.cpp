// llama.cpp's own tokenizer on texts: loads a GGUF's vocabulary only (libllama) and prints one
// line of ids per text of a file whose texts are separated by "\n__ggml_vocab_test__\n", with
// neither BOS/EOS nor special-token parsing (as llama.cpp's tests/test-tokenizer-0.cpp).
// Built and run by bench/tokenizer_pretypes_vs_llama_cpp.sh; not part of kiln.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s VOCAB.gguf TEXTS\n", argv[0]);
    return 2;
  }
  llama_backend_init();
  llama_model_params params = llama_model_default_params();
  params.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], params);
  if (model == nullptr) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::ifstream in(argv[2], std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < all.size();) {
    size_t next = all.find(sep, pos);
    if (next == std::string::npos) next = all.size();
    const std::string text = all.substr(pos, next - pos);
    std::vector<llama_token> ids(text.size() * 4 + 16);
    const int n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                                 static_cast<int32_t>(ids.size()), false, false);
    for (int i = 0; i < n; ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
    pos = next + sep.size();
  }
  llama_model_free(model);
  return 0;
}
