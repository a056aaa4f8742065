#include "kiln/model/tokenizer_vocab.h"

#include "kiln/base/error.h"
#include "kiln/model/tokenizer_pretypes.h"

namespace kiln::model {
namespace {

template <typename T, typename Fn>
std::optional<T> call(const Fn& fn, std::string_view key) {
  if (!fn) return std::nullopt;
  return fn(key);
}

std::optional<int32_t> token_id(const VocabMetadata& md, std::string_view key) {
  std::optional<int64_t> v = call<int64_t>(md.get_int, key);
  if (!v) return std::nullopt;
  // llama.cpp writes -1 (as uint32 0xFFFFFFFF in some files) for "no such token".
  if (*v < 0 || *v >= INT32_MAX) return std::nullopt;
  return static_cast<int32_t>(*v);
}

}  // namespace

TokenizerVocab vocab_from_gguf_metadata(const VocabMetadata& md) {
  TokenizerVocab v;
  std::optional<std::string> model = call<std::string>(md.get_string, "tokenizer.ggml.model");
  KILN_CHECK(model.has_value(), "model file has no tokenizer (key tokenizer.ggml.model missing)");
  v.model = *model;
  v.pre = call<std::string>(md.get_string, "tokenizer.ggml.pre").value_or("default");
  // llama.cpp reads a gemma4 vocab as BPE with the gemma4 pre-type, whatever the file names.
  if (v.model == "gemma4") v.pre = "gemma4";

  std::optional<std::vector<std::string>> tokens =
      call<std::vector<std::string>>(md.get_string_array, "tokenizer.ggml.tokens");
  KILN_CHECK(tokens.has_value(), "model file has no tokenizer.ggml.tokens");
  v.tokens = std::move(*tokens);
  v.scores = call<std::vector<float>>(md.get_f32_array, "tokenizer.ggml.scores")
                 .value_or(std::vector<float>{});
  v.token_types = call<std::vector<int32_t>>(md.get_i32_array, "tokenizer.ggml.token_type")
                      .value_or(std::vector<int32_t>{});
  v.merges = call<std::vector<std::string>>(md.get_string_array, "tokenizer.ggml.merges")
                 .value_or(std::vector<std::string>{});
  KILN_CHECK((v.model != "gpt2" && v.model != "gemma4") || !v.merges.empty(),
             "BPE tokenizer (tokenizer.ggml.model = {}) has no tokenizer.ggml.merges", v.model);

  v.bos_id = token_id(md, "tokenizer.ggml.bos_token_id");
  v.eos_id = token_id(md, "tokenizer.ggml.eos_token_id");
  v.unk_id = token_id(md, "tokenizer.ggml.unknown_token_id");
  v.pad_id = token_id(md, "tokenizer.ggml.padding_token_id");
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (std::optional<int32_t> id = token_id(md, key)) v.eot_ids.push_back(*id);
  }

  const bool spm = v.model == "llama";
  const bool bert = v.model == "bert";
  const PreTokenizerType* type =
      v.model == "gpt2" || v.model == "gemma4" ? find_pretokenizer_type(v.pre) : nullptr;
  const bool bos_default = spm || bert || (type != nullptr && type->add_bos);
  v.add_bos = call<bool>(md.get_bool, "tokenizer.ggml.add_bos_token").value_or(bos_default);
  if (type != nullptr && type->force_add_bos) v.add_bos = true;
  v.add_eos = call<bool>(md.get_bool, "tokenizer.ggml.add_eos_token").value_or(false);
  v.add_space_prefix = call<bool>(md.get_bool, "tokenizer.ggml.add_space_prefix").value_or(spm);
  if (bert) {
    // WordPiece encoders frame the text as [CLS] ... [SEP] (llama.cpp's defaults 101 and 102,
    // BERT's own ids, when the file does not name them).
    if (!v.bos_id) v.bos_id = token_id(md, "tokenizer.ggml.cls_token_id");
    if (!v.bos_id && v.tokens.size() > 101) v.bos_id = 101;
    if (!v.eos_id) v.eos_id = token_id(md, "tokenizer.ggml.seperator_token_id");
    if (!v.eos_id && v.tokens.size() > 102) v.eos_id = 102;
    if (!v.unk_id && v.tokens.size() > 100) v.unk_id = 100;
    v.add_eos = v.eos_id.has_value();
    v.lowercase = call<bool>(md.get_bool, "tokenizer.ggml.normalizer.lowercase").value_or(true);
    v.strip_accents =
        call<bool>(md.get_bool, "tokenizer.ggml.normalizer.strip_accents").value_or(v.lowercase);
  }
  return v;
}

}  // namespace kiln::model
