// The byte-pair-encoding pre-tokenizers GGUF files name in tokenizer.ggml.pre, one row per
// llama.cpp pre-type: how the text is cut into the words BPE merges within, and the flags that
// go with it. The facts are llama.cpp's (src/llama-vocab.cpp, src/unicode.cpp at the version
// bench and tests pin); tests/model/test_llama_vocab.py checks them on llama.cpp's own test set.
#pragma once
#include <string_view>
#include <vector>

namespace kiln::model {

struct PreTokenizerType {
  // llama.cpp's name for the type (LLAMA_VOCAB_PRE_TYPE_...), for messages and docs.
  std::string_view type{};
  // The tokenizer.ggml.pre values that select this row.
  std::vector<std::string_view> names{};
  // Applied in turn: each regex splits every piece the previous one left, and both its matches
  // and the text between them become pieces (an empty match only marks a cut). PCRE2 with
  // UTF + UCP + DOLLAR_ENDONLY runs them; each is matched within its piece alone.
  std::vector<std::string_view> regexes{};
  // The Split regex a tokenizer.json gives for this row ("" for none): the form HF tokenizers
  // runs, which kiln then runs as given. Only one row per regex carries it.
  std::string_view hf_regex{};
  bool ignore_merges = false;  // a word that is itself a token is emitted whole
  bool add_bos = false;        // when the file does not say (tokenizer.ggml.add_bos_token)
  bool force_add_bos = false;  // whatever the file says (llama.cpp's Gemma 4 override)
  // false: SentencePiece-style BPE on raw UTF-8 (spaces as U+2581, <0xXX> byte fallback)
  // instead of GPT-2's byte-to-character mapping.
  bool byte_level = true;
  // A word of newlines only that is itself a token is emitted whole (Gemma 4).
  bool newline_runs_whole = false;
  // Non-empty: kiln refuses this row, and this says why.
  std::string_view refusal{};
};

// The row naming `pre`, or nullptr when no row does.
const PreTokenizerType* find_pretokenizer_type(std::string_view pre);

// Every row, in llama.cpp's order of types.
const std::vector<PreTokenizerType>& pretokenizer_types();

// The row whose hf_regex is `regex`, or nullptr.
const PreTokenizerType* find_pretokenizer_type_by_hf_regex(std::string_view regex);

}  // namespace kiln::model
