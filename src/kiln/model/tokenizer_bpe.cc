// BPE as llama.cpp and HF tokenizers run it: the text is cut into words by the pre-tokenizer
// type's regexes (tokenizer_pretypes.h), each word starts as one symbol per byte (byte-level:
// each byte is the printable character GPT-2 assigns it) or per UTF-8 character (the
// SentencePiece-style rows: spaces escaped to U+2581), and within each word the adjacent pair
// with the lowest merge rank merges first (leftmost on ties) until no pair has a merge.
// Symbols that are not tokens come out as byte tokens.
#include "kiln/model/tokenizer_bpe.h"

#include <array>
#include <queue>
#include <unordered_map>

#include "kiln/base/error.h"
#include "kiln/model/tokenizer_pretokenizer.h"
#include "kiln/model/tokenizer_pretypes.h"
#include "kiln/model/tokenizer_utf8.h"

namespace kiln::model {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581, SentencePiece's space

uint32_t decode_utf8(std::string_view s, size_t len) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  if (len == 1) return b0;
  uint32_t cp = b0 & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) cp = (cp << 6) | (static_cast<uint8_t>(s[i]) & 0x3F);
  return cp;
}

// The length llama.cpp gives the character starting with `lead` (by its high bits alone, not
// checking the continuation bytes), so that symbols cut where its do.
size_t char_length(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// GPT-2's byte -> code point table: printable Latin-1 bytes stand for themselves, the other 68
// bytes (controls, space, DEL, NBSP, soft hyphen) are moved to U+0100 onwards, in byte order.
std::array<uint32_t, 256> byte_code_points() {
  std::array<uint32_t, 256> cps{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    cps[b] = printable ? b : next++;
  }
  return cps;
}

// "<0x41>" -> 0x41; -1 for anything else.
int parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int value = 0;
  for (char c : piece.substr(3, 2)) {
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                             : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

const PreTokenizerType& pretokenizer_type(const std::string& pre) {
  const PreTokenizerType* row = find_pretokenizer_type(pre);
  KILN_CHECK(row != nullptr,
             "tokenizer pre-type '{}' is not supported: llama.cpp (the version kiln follows) "
             "knows no such pre-type (docs/models.md lists the ones kiln runs)",
             pre);
  KILN_CHECK(row->refusal.empty(), "tokenizer pre-type '{}' ({}) is not supported: {}", pre,
             row->type, row->refusal);
  return *row;
}

std::vector<std::string> regexes_of(const TokenizerVocab& vocab, const PreTokenizerType& type) {
  if (!vocab.pre_regexes.empty()) return vocab.pre_regexes;
  return {type.regexes.begin(), type.regexes.end()};
}

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(TokenizerVocab vocab, const PreTokenizerType& type)
      : Tokenizer(std::move(vocab)),
        pre_(regexes_of(vocab_, type)),
        ignore_merges_(vocab_.ignore_merges.value_or(type.ignore_merges)),
        byte_level_(type.byte_level),
        newline_runs_whole_(type.newline_runs_whole) {
    byte_tokens_.fill(kNoToken);
    if (byte_level_) {
      const std::array<uint32_t, 256> cps = byte_code_points();
      for (int b = 0; b < 256; ++b) {
        append_utf8(cps[b], byte_chars_[b]);
        code_point_byte_.emplace(cps[b], static_cast<uint8_t>(b));
        // Some vocabs lack bytes that are rare (controls) or that no UTF-8 text holds (0xC0,
        // 0xF5, ...): such a byte starts a symbol that is no token (see emit_fallback). One
        // without the printable ASCII ones is no byte-level vocab at all.
        byte_tokens_[b] = find_token(byte_chars_[b]).value_or(kNoToken);
        KILN_CHECK(byte_tokens_[b] != kNoToken || b < 0x20 || b > 0x7E,
                   "byte-level BPE vocab has no token for byte 0x{:02X}", b);
      }
    } else {
      for (size_t i = 0; i < vocab_.tokens.size(); ++i) {
        const int b = types_[i] == TokenType::kByte ? parse_byte_piece(vocab_.tokens[i]) : -1;
        if (b >= 0 && byte_tokens_[b] == kNoToken) byte_tokens_[b] = static_cast<int32_t>(i);
      }
    }
    merges_.reserve(vocab_.merges.size());
    for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) {
      const std::string& m = vocab_.merges[rank];
      const size_t space = m.find(' ', 1);
      KILN_CHECK(space != std::string::npos, "BPE merge {} '{}' is not two tokens", rank, m);
      const std::string_view left = std::string_view(m).substr(0, space);
      const std::string_view right = std::string_view(m).substr(space + 1);
      std::optional<int32_t> l = find_token(left);
      std::optional<int32_t> r = find_token(right);
      std::optional<int32_t> merged = find_token(std::string(left) + std::string(right));
      KILN_CHECK(l && r && merged, "BPE merge {} '{}' names tokens missing from the vocab", rank,
                 m);
      merges_.try_emplace(pair_key(*l, *r), Merge{static_cast<int32_t>(rank), *merged});
    }
  }

 protected:
  void encode_fragment(std::string_view text, bool /*text_start*/,
                       std::vector<int32_t>& out) const override {
    std::string escaped;
    if (!byte_level_) {  // SentencePiece-style: the merges see spaces as U+2581
      escaped.reserve(text.size() + text.size() / 2);
      for (char c : text) {
        if (c == ' ') {
          escaped += kSpaceSymbol;
        } else {
          escaped.push_back(c);
        }
      }
      text = escaped;
    }
    std::string encoded;
    std::vector<Symbol> symbols;
    for (std::string_view word : pre_.split(text)) {
      if (ignore_merges_ && emit_whole(word, encoded, out)) continue;
      if (newline_runs_whole_ && word.find_first_not_of('\n') == std::string_view::npos) {
        if (std::optional<int32_t> id = find_token(word)) {
          out.push_back(*id);
          continue;
        }
      }
      merge_word(word, symbols, out);
    }
  }

  void append_token_bytes(int32_t id, std::string& out) const override {
    const std::string& text = vocab_.tokens[id];
    if (types_[id] == TokenType::kControl || types_[id] == TokenType::kUserDefined) {
      out += text;  // stored as plain text, not byte-level encoded
      return;
    }
    if (!byte_level_) {
      const int b = types_[id] == TokenType::kByte ? parse_byte_piece(text) : -1;
      if (b >= 0) {
        out.push_back(static_cast<char>(b));
        return;
      }
      for (size_t pos = 0;;) {
        const size_t hit = text.find(kSpaceSymbol, pos);
        out.append(text, pos, hit == std::string::npos ? std::string::npos : hit - pos);
        if (hit == std::string::npos) return;
        out.push_back(' ');
        pos = hit + kSpaceSymbol.size();
      }
    }
    for (size_t pos = 0; pos < text.size();) {
      const std::string_view rest = std::string_view(text).substr(pos);
      const size_t len = utf8_sequence_length(rest);
      if (len == 0) {  // ill-formed vocab entry: pass the byte through
        out.push_back(rest[0]);
        ++pos;
        continue;
      }
      auto it = code_point_byte_.find(decode_utf8(rest, len));
      if (it != code_point_byte_.end()) {
        out.push_back(static_cast<char>(it->second));
      } else {
        out.append(rest.substr(0, len));
      }
      pos += len;
    }
  }

 private:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  struct Symbol {
    int32_t id;           // kNoToken: text that is no token (comes out as bytes)
    uint32_t start, len;  // bytes of the word; len 0 once merged into the left neighbour
    int32_t prev, next;
  };
  struct Candidate {
    int32_t rank;
    int32_t left, right;
    int32_t left_id, right_id;
    int32_t merged;
  };
  struct Later {
    bool operator()(const Candidate& a, const Candidate& b) const {
      return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
  };

  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  // ignore_merges: a word that is itself a token is that token.
  bool emit_whole(std::string_view word, std::string& encoded, std::vector<int32_t>& out) const {
    std::string_view key = word;
    if (byte_level_) {
      encoded.clear();
      for (unsigned char b : word) encoded += byte_chars_[b];
      key = encoded;
    }
    std::optional<int32_t> id = find_token(key);
    if (id) out.push_back(*id);
    return id.has_value();
  }

  void merge_word(std::string_view word, std::vector<Symbol>& symbols,
                  std::vector<int32_t>& out) const {
    symbols.clear();
    for (size_t i = 0; i < word.size();) {
      const size_t len =
          byte_level_ ? 1 : std::min(word.size() - i, char_length(static_cast<uint8_t>(word[i])));
      const int32_t id = byte_level_ ? byte_tokens_[static_cast<uint8_t>(word[i])]
                                     : find_token(word.substr(i, len)).value_or(kNoToken);
      const auto n = static_cast<int32_t>(symbols.size());
      symbols.push_back(
          Symbol{id, static_cast<uint32_t>(i), static_cast<uint32_t>(len), n - 1, n + 1});
      i += len;
    }
    if (symbols.empty()) return;
    symbols.back().next = -1;

    std::priority_queue<Candidate, std::vector<Candidate>, Later> agenda;
    auto consider = [&](int32_t left, int32_t right) {
      if (left < 0 || right < 0) return;
      const int32_t l = symbols[left].id, r = symbols[right].id;
      if (l == kNoToken || r == kNoToken) return;
      auto it = merges_.find(pair_key(l, r));
      if (it == merges_.end()) return;
      agenda.push(Candidate{it->second.rank, left, right, l, r, it->second.id});
    };
    for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) consider(i - 1, i);

    while (!agenda.empty()) {
      const Candidate top = agenda.top();
      agenda.pop();
      Symbol& left = symbols[top.left];
      Symbol& right = symbols[top.right];
      // Stale candidate: either side has merged since it was queued.
      if (left.len == 0 || right.len == 0 || left.next != top.right || left.id != top.left_id ||
          right.id != top.right_id) {
        continue;
      }
      left.id = top.merged;
      left.len += right.len;
      right.len = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = top.left;
      consider(left.prev, top.left);
      consider(top.left, left.next);
    }
    for (int32_t i = 0; i >= 0; i = symbols[i].next) {
      const Symbol& s = symbols[i];
      if (s.id != kNoToken) {
        out.push_back(s.id);
        continue;
      }
      emit_fallback(word.substr(s.start, s.len), out);
    }
  }

  // Text that is no token, as llama.cpp emits it: SentencePiece-style, each byte's <0xXX>
  // piece; byte-level, each byte of the text's GPT-2 characters that is a one-byte token on its
  // own (the printable ASCII ones; the rest are dropped).
  void emit_fallback(std::string_view bytes, std::vector<int32_t>& out) const {
    if (!byte_level_) {
      for (unsigned char b : bytes) {
        if (byte_tokens_[b] != kNoToken) out.push_back(byte_tokens_[b]);
      }
      return;
    }
    for (unsigned char b : bytes) {
      for (char c : byte_chars_[b]) {
        if (std::optional<int32_t> id = find_token(std::string_view(&c, 1))) out.push_back(*id);
      }
    }
  }

  PreTokenizer pre_;
  bool ignore_merges_;
  bool byte_level_;
  bool newline_runs_whole_;
  std::array<std::string, 256> byte_chars_;  // byte-level only
  // The token of each byte: its GPT-2 character (byte-level) or its <0xXX> piece.
  std::array<int32_t, 256> byte_tokens_{};
  std::unordered_map<uint32_t, uint8_t> code_point_byte_;
  std::unordered_map<uint64_t, Merge> merges_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(TokenizerVocab vocab) {
  const PreTokenizerType& type = pretokenizer_type(vocab.pre);
  return std::make_unique<BpeTokenizer>(std::move(vocab), type);
}

}  // namespace kiln::model
