// Byte-level BPE as HF tokenizers runs it (Split(regex) + ByteLevel + BPE): the text is cut into
// words by the pre-tokenizer regex, each byte becomes the printable character GPT-2 assigns it,
// and within each word the adjacent pair with the lowest merge rank merges first (leftmost on
// ties) until no pair has a merge.
#include "kiln/model/tokenizer_bpe.h"

#include <array>
#include <queue>
#include <unordered_map>

#include "kiln/base/error.h"
#include "kiln/model/tokenizer_pretokenizer.h"
#include "kiln/model/tokenizer_utf8.h"

namespace kiln::model {
namespace {

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t decode_utf8(std::string_view s, size_t len) {
  const auto b0 = static_cast<uint8_t>(s[0]);
  if (len == 1) return b0;
  uint32_t cp = b0 & (0x7F >> len);
  for (size_t i = 1; i < len; ++i) cp = (cp << 6) | (static_cast<uint8_t>(s[i]) & 0x3F);
  return cp;
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

struct PreSpec {
  PreTokenizerKind kind;
  bool ignore_merges;  // a word that is itself a token is emitted whole (Llama 3's tokenizer.json)
};

PreSpec pre_spec(const std::string& pre) {
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
    return {PreTokenizerKind::kLlama3, true};
  }
  if (pre == "qwen2" || pre == "deepseek-r1-qwen") return {PreTokenizerKind::kQwen2, false};
  if (pre == "gpt-2" || pre == "gpt2") return {PreTokenizerKind::kGpt2, false};
  fail(
      "tokenizer pre-type '{}' is not supported (supported for gpt2 vocabs: llama-bpe, llama3, "
      "qwen2, deepseek-r1-qwen, gpt-2)",
      pre);
}

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(TokenizerVocab vocab, PreSpec spec)
      : Tokenizer(std::move(vocab)), pre_(spec.kind), ignore_merges_(spec.ignore_merges) {
    const std::array<uint32_t, 256> cps = byte_code_points();
    for (int b = 0; b < 256; ++b) {
      append_utf8(cps[b], byte_chars_[b]);
      code_point_byte_.emplace(cps[b], static_cast<uint8_t>(b));
      std::optional<int32_t> id = find_token(byte_chars_[b]);
      KILN_CHECK(id.has_value(), "byte-level BPE vocab has no token for byte 0x{:02X}", b);
      byte_tokens_[b] = *id;
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
    std::string encoded;
    std::vector<Symbol> symbols;
    for (std::string_view word : pre_.split(text)) {
      if (ignore_merges_) {
        encoded.clear();
        for (unsigned char b : word) encoded += byte_chars_[b];
        if (std::optional<int32_t> id = find_token(encoded)) {
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
    int32_t id;  // -1 once merged into its left neighbour
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

  void merge_word(std::string_view word, std::vector<Symbol>& symbols,
                  std::vector<int32_t>& out) const {
    const auto n = static_cast<int32_t>(word.size());
    symbols.resize(n);
    for (int32_t i = 0; i < n; ++i) {
      symbols[i] = Symbol{byte_tokens_[static_cast<unsigned char>(word[i])], i - 1, i + 1};
    }
    symbols[n - 1].next = -1;

    std::priority_queue<Candidate, std::vector<Candidate>, Later> agenda;
    auto consider = [&](int32_t left, int32_t right) {
      if (left < 0 || right < 0) return;
      auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
      if (it == merges_.end()) return;
      agenda.push(Candidate{it->second.rank, left, right, symbols[left].id, symbols[right].id,
                            it->second.id});
    };
    for (int32_t i = 1; i < n; ++i) consider(i - 1, i);

    while (!agenda.empty()) {
      const Candidate top = agenda.top();
      agenda.pop();
      Symbol& left = symbols[top.left];
      Symbol& right = symbols[top.right];
      // Stale candidate: either side has merged since it was queued.
      if (left.id != top.left_id || right.id != top.right_id || left.next != top.right) continue;
      left.id = top.merged;
      right.id = -1;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = top.left;
      consider(left.prev, top.left);
      consider(top.left, left.next);
    }
    for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
  }

  PreTokenizer pre_;
  bool ignore_merges_;
  std::array<std::string, 256> byte_chars_;
  std::array<int32_t, 256> byte_tokens_{};
  std::unordered_map<uint32_t, uint8_t> code_point_byte_;
  std::unordered_map<uint64_t, Merge> merges_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(TokenizerVocab vocab) {
  PreSpec spec = pre_spec(vocab.pre);
  if (vocab.ignore_merges) spec.ignore_merges = *vocab.ignore_merges;
  return std::make_unique<BpeTokenizer>(std::move(vocab), spec);
}

}  // namespace kiln::model
