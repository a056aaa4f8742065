#include "kiln/model/tokenizer.h"

#include "kiln/base/error.h"
#include "kiln/model/tokenizer_bpe.h"
#include "kiln/model/tokenizer_spm.h"
#include "kiln/model/tokenizer_utf8.h"
#include "kiln/model/tokenizer_wpm.h"

namespace kiln::model {
namespace {

// Control tokens that end a turn in the chat formats kiln knows, whatever id the vocab gives them.
constexpr std::string_view kEndOfTurnNames[] = {
    "<end_of_turn>", "<|eot_id|>",      "<|im_end|>",    "<|eom_id|>",
    "<|end|>",       "<|end_of_text|>", "<|endoftext|>",
};

void check_optional_id(const std::optional<int32_t>& id, size_t n, const char* what) {
  KILN_CHECK(!id || (*id >= 0 && static_cast<size_t>(*id) < n),
             "tokenizer {} id {} is outside the vocabulary of {} tokens", what, id.value_or(-1), n);
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::create(TokenizerVocab vocab) {
  if (vocab.model == "llama") return make_spm_tokenizer(std::move(vocab));
  if (vocab.model == "gpt2" || vocab.model == "gemma4") return make_bpe_tokenizer(std::move(vocab));
  if (vocab.model == "bert") return make_wpm_tokenizer(std::move(vocab));
  fail("tokenizer model '{}' is not supported (supported: llama, gpt2, gemma4, bert)", vocab.model);
}

Tokenizer::Tokenizer(TokenizerVocab vocab) : vocab_(std::move(vocab)) {
  const size_t n = vocab_.tokens.size();
  KILN_CHECK(n > 0, "tokenizer vocabulary is empty");
  KILN_CHECK(n < static_cast<size_t>(INT32_MAX), "tokenizer vocabulary is too large ({})", n);
  KILN_CHECK(vocab_.scores.empty() || vocab_.scores.size() == n,
             "tokenizer has {} scores for {} tokens", vocab_.scores.size(), n);
  KILN_CHECK(vocab_.token_types.empty() || vocab_.token_types.size() == n,
             "tokenizer has {} token types for {} tokens", vocab_.token_types.size(), n);
  check_optional_id(vocab_.bos_id, n, "BOS");
  check_optional_id(vocab_.eos_id, n, "EOS");
  check_optional_id(vocab_.unk_id, n, "unknown-token");
  check_optional_id(vocab_.pad_id, n, "padding");
  for (int32_t id : vocab_.eot_ids) check_optional_id(id, n, "end-of-turn");
  KILN_CHECK(!vocab_.add_bos || vocab_.bos_id, "tokenizer asks to add BOS but has no BOS id");
  KILN_CHECK(!vocab_.add_eos || vocab_.eos_id, "tokenizer asks to add EOS but has no EOS id");

  types_.resize(n, TokenType::kNormal);
  for (size_t i = 0; i < vocab_.token_types.size(); ++i) {
    const int32_t t = vocab_.token_types[i];
    KILN_CHECK(t >= 0 && t <= static_cast<int32_t>(TokenType::kByte),
               "token {} has unknown token type {}", i, t);
    types_[i] = t == 0 ? TokenType::kNormal : static_cast<TokenType>(t);
  }

  token_to_id_.build(vocab_.tokens, [](int32_t) { return true; });
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    switch (types_[i]) {
      case TokenType::kUserDefined:
        special_.add(vocab_.tokens[i], id, /*always=*/true);
        break;
      case TokenType::kControl:
      case TokenType::kUnknown:
        special_.add(vocab_.tokens[i], id, /*always=*/false);
        break;
      default:
        break;
    }
  }

  bos_ = vocab_.bos_id.value_or(kNoToken);
  eos_ = vocab_.eos_id.value_or(kNoToken);
  if (vocab_.eos_id) end_of_generation_.insert(*vocab_.eos_id);
  for (int32_t id : vocab_.eot_ids) end_of_generation_.insert(id);
  for (std::string_view name : kEndOfTurnNames) {
    std::optional<int32_t> id = token_to_id_.find(name);
    if (id && types_[*id] == TokenType::kControl) end_of_generation_.insert(*id);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && vocab_.add_bos) out.push_back(bos_);

  using Scope = TokenizerVocab::SpacePrefixScope;
  const bool sentencepiece_prefix = vocab_.space_prefix_scope == Scope::kSentencePiece;
  auto prefix_here = [&](bool text_start, size_t fragment_start) {
    switch (vocab_.space_prefix_scope) {
      case Scope::kFirstFragment:
        return fragment_start == 0;
      case Scope::kEveryFragment:
        return true;
      default:
        return text_start;
    }
  };
  // Split the text at special-token matches; plain runs between them go to the model.
  size_t fragment_start = 0;
  bool text_start = true;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!special_.may_start(static_cast<unsigned char>(text[pos]))) {
      ++pos;
      continue;
    }
    const SpecialTokenMatcher::Match m = special_.match(text.substr(pos), parse_special);
    if (m.length == 0) {
      ++pos;
      continue;
    }
    // SentencePiece sees user-defined tokens as part of the text: its space prefix still goes
    // before one that opens the text. A control token starts a new text (llama.cpp, HF legacy).
    const bool user_defined = types_[m.id] == TokenType::kUserDefined;
    if (pos > fragment_start || (user_defined && text_start && sentencepiece_prefix)) {
      encode_fragment(text.substr(fragment_start, pos - fragment_start),
                      prefix_here(text_start, fragment_start), out);
    }
    out.push_back(m.id);
    text_start = !user_defined;
    pos += m.length;
    fragment_start = pos;
  }
  if (text.size() > fragment_start) {
    encode_fragment(text.substr(fragment_start), prefix_here(text_start, fragment_start), out);
  }

  if (add_special && vocab_.add_eos) out.push_back(eos_);
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string raw;
  bool at_start = true;
  for (int32_t id : ids) {
    check_id(id);
    if (skip_special && is_special(id)) continue;
    const size_t before = raw.size();
    append_token_bytes(id, raw);
    if (at_start && raw.size() > before) {
      if (vocab_.add_space_prefix && types_[id] == TokenType::kNormal && raw[before] == ' ') {
        raw.erase(before, 1);
      }
      at_start = false;
    }
  }
  std::string out;
  out.reserve(raw.size());
  append_valid_utf8(raw, /*final=*/true, out);
  return out;
}

void Tokenizer::check_id(int32_t id) const {
  KILN_CHECK(id >= 0 && id < vocab_size(), "token id {} is outside the vocabulary of {} tokens", id,
             vocab_size());
}

std::string_view Tokenizer::piece(int32_t id) const {
  check_id(id);
  return vocab_.tokens[id];
}

std::string Tokenizer::token_bytes(int32_t id) const {
  std::string out;
  append_token_bytes_to(id, out);
  return out;
}

void Tokenizer::append_token_bytes_to(int32_t id, std::string& out) const {
  check_id(id);
  append_token_bytes(id, out);
}

TokenType Tokenizer::token_type(int32_t id) const {
  check_id(id);
  return types_[id];
}

bool Tokenizer::is_special(int32_t id) const {
  const TokenType t = token_type(id);
  return t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUnused;
}

std::optional<int32_t> Tokenizer::find_token(std::string_view piece) const {
  return token_to_id_.find(piece);
}

bool Tokenizer::is_end_of_generation(int32_t id) const { return end_of_generation_.count(id) != 0; }

}  // namespace kiln::model
