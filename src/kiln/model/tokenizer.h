// Text <-> token ids for the tokenizer models GGUF files carry (tokenizer.ggml.model):
//  - "llama": SentencePiece-style BPE driven by piece scores, spaces as U+2581, byte fallback
//    (Gemma 3, Llama 2, Mistral). Matches the sentencepiece library on the same pieces.
//  - "gpt2": BPE driven by merge ranks within the words of a regex pre-tokenizer, one row of
//    tokenizer_pretypes.h per tokenizer.ggml.pre (Llama 3, Qwen, DeepSeek, ...); "gemma4": the
//    same merges on raw UTF-8 with U+2581 spaces. Matches llama.cpp (its vocabulary test set) and
//    HF tokenizers (Split + ByteLevel + BPE) on the same vocab and merges.
//  - "bert": WordPiece after BERT's normalizer (lowercasing, accent stripping, punctuation).
// A Tokenizer is immutable after create(); every const method is safe to call from many threads.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "kiln/model/tokenizer_piece_index.h"
#include "kiln/model/tokenizer_special_matcher.h"
#include "kiln/model/tokenizer_vocab.h"

namespace kiln::model {

class Tokenizer {
 public:
  static constexpr int32_t kNoToken = -1;

  // Throws kiln::Error for an unknown model or pre-tokenizer name, or an inconsistent vocab.
  static std::unique_ptr<Tokenizer> create(TokenizerVocab vocab);
  virtual ~Tokenizer() = default;
  Tokenizer(const Tokenizer&) = delete;  // indexes point into the owned vocab
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: BOS / EOS as the vocab asks (add_bos, add_eos).
  // parse_special: control token text in `text` (e.g. "<start_of_turn>") becomes that token;
  // otherwise it is tokenized as plain text. User-defined tokens are always recognized.
  // Matching is leftmost-longest.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Valid UTF-8 (ill-formed byte sequences become U+FFFD). skip_special drops control, unknown
  // and unused tokens; otherwise they are rendered as their text. When the vocab adds a space
  // prefix, the first visible normal token loses one leading space (as sentencepiece does).
  // Throws kiln::Error for an id out of range.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const;

  // The token as stored in the vocab (SentencePiece "▁the", byte-level "Ġthe", "<0x0A>").
  std::string_view piece(int32_t id) const;
  // The bytes the token contributes to decoded text (may be part of a UTF-8 character).
  std::string token_bytes(int32_t id) const;
  void append_token_bytes_to(int32_t id, std::string& out) const;
  TokenType token_type(int32_t id) const;
  // Control, unknown and unused tokens: the ones decode(skip_special = true) drops.
  bool is_special(int32_t id) const;
  std::optional<int32_t> find_token(std::string_view piece) const;

  int32_t bos() const { return bos_; }  // kNoToken when the vocab has none
  int32_t eos() const { return eos_; }
  int32_t pad() const { return vocab_.pad_id.value_or(kNoToken); }
  bool add_bos() const { return vocab_.add_bos; }  // encode(add_special) prepends bos()
  bool add_eos() const { return vocab_.add_eos; }  // ... and appends eos()
  bool add_space_prefix() const { return vocab_.add_space_prefix; }
  // eos, the vocab's eot ids, and end-of-turn control tokens found by name (<end_of_turn>,
  // <|eot_id|>, <|im_end|>, <|eom_id|>, <|end_of_text|>, <|endoftext|>).
  bool is_end_of_generation(int32_t id) const;
  int32_t vocab_size() const { return static_cast<int32_t>(vocab_.tokens.size()); }
  const std::string& model_name() const { return vocab_.model; }

 protected:
  explicit Tokenizer(TokenizerVocab vocab);

  // Tokenizes plain text (no special tokens in it). `text_start`: the fragment begins the text
  // or follows a control token (where SentencePiece adds its space prefix).
  virtual void encode_fragment(std::string_view text, bool text_start,
                               std::vector<int32_t>& out) const = 0;
  // Appends the decoded bytes of one in-range token.
  virtual void append_token_bytes(int32_t id, std::string& out) const = 0;

  void check_id(int32_t id) const;

  TokenizerVocab vocab_;
  std::vector<TokenType> types_;
  PieceIndex token_to_id_;  // every token; the first id wins on duplicates

 private:
  SpecialTokenMatcher special_;
  std::unordered_set<int32_t> end_of_generation_;
  int32_t bos_ = kNoToken;
  int32_t eos_ = kNoToken;
};

}  // namespace kiln::model
