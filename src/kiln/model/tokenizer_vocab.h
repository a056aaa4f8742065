// The tokenizer's vocabulary as plain data: what a GGUF file stores under tokenizer.ggml.*.
// Tokenizer::create() validates it and builds the lookup structures; nothing here checks anything.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::model {

// Token types with the values GGUF (llama.cpp) stores in tokenizer.ggml.token_type.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <bos>, <start_of_turn>, <|eot_id|>: matched in text only on request
  kUserDefined = 4,  // always matched in text as a whole ("\n\n", "<think>" in some vocabs)
  kUnused = 5,
  kByte = 6,  // <0xXX> byte-fallback pieces of SentencePiece vocabs
};

struct TokenizerVocab {
  // "llama" (SentencePiece-style BPE), "gpt2" (BPE after a regex pre-tokenizer), "gemma4" (a
  // SentencePiece-style BPE that llama.cpp runs as gpt2 with the gemma4 pre-type) or "bert"
  // (WordPiece).
  std::string model;
  // Pre-tokenizer name (tokenizer.ggml.pre): "default", "llama-bpe", "qwen2", ... (the rows of
  // tokenizer_pretypes.h for gpt2 and gemma4 vocabs).
  std::string pre;
  // tokenizer.json only: the Split regex as the file gives it, run instead of the pre-type's
  // own (which names the flags).
  std::vector<std::string> pre_regexes;
  std::vector<std::string> tokens;
  std::vector<float> scores;         // SentencePiece merge priorities; may be empty for gpt2
  std::vector<int32_t> token_types;  // TokenType values; empty means every token is normal
  // "left right", highest priority first. gpt2: always. llama: only from HF tokenizer.json,
  // whose SentencePiece-style BPE merges by these ranks instead of by piece scores.
  std::vector<std::string> merges;
  std::optional<int32_t> bos_id;
  std::optional<int32_t> eos_id;
  std::optional<int32_t> unk_id;
  std::optional<int32_t> pad_id;
  std::vector<int32_t> eot_ids;  // extra end-of-turn ids (tokenizer.ggml.eot_token_id, eom)
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // SentencePiece "dummy prefix": a space before the text
  // Which fragments (runs of text between special tokens) get that prefix: sentencepiece's
  // (the start of the text and after each control token) or HF tokenizer.json's (Metaspace
  // "first": only a fragment at the very start; "always" and the Prepend normalizer: every
  // fragment).
  enum class SpacePrefixScope { kSentencePiece, kFirstFragment, kEveryFragment };
  SpacePrefixScope space_prefix_scope = SpacePrefixScope::kSentencePiece;
  bool space_prefix_unless_space = false;  // HF Metaspace: none before text opening with ' '
  std::optional<bool> ignore_merges;       // gpt2: overrides the pre-tokenizer's default
  // bert: BertNormalizer's lowercasing and accent stripping (NFD, combining marks dropped).
  bool lowercase = true;
  bool strip_accents = true;
};

// Typed accessors into a model file's metadata; each returns nullopt when the key is absent.
// The GGUF reader supplies these; the tokenizer does not depend on it.
struct VocabMetadata {
  std::function<std::optional<std::string>(std::string_view key)> get_string;
  std::function<std::optional<int64_t>(std::string_view key)> get_int;
  std::function<std::optional<bool>(std::string_view key)> get_bool;
  std::function<std::optional<std::vector<std::string>>(std::string_view key)> get_string_array;
  std::function<std::optional<std::vector<float>>(std::string_view key)> get_f32_array;
  std::function<std::optional<std::vector<int32_t>>(std::string_view key)> get_i32_array;
};

// Fills a TokenizerVocab from the tokenizer.ggml.* keys, with llama.cpp's defaults for absent
// flags (llama: add BOS, add space prefix; gpt2: BOS as the pre-type's row says; bert: [CLS]
// before and [SEP] after). Throws kiln::Error when the model, tokens or (for gpt2 and gemma4)
// merges are missing.
TokenizerVocab vocab_from_gguf_metadata(const VocabMetadata& metadata);

}  // namespace kiln::model
