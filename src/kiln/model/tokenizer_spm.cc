// SentencePiece BPE as the sentencepiece library runs it: the whole text (spaces escaped to
// U+2581) starts as one symbol per character; the adjacent pair whose concatenation is the
// highest-scoring vocabulary piece merges first (leftmost on ties), until no pair is a piece.
// Characters left outside the vocabulary fall back to <0xXX> byte tokens.
#include "kiln/model/tokenizer_spm.h"

#include <array>
#include <optional>
#include <queue>
#include <unordered_map>

#include "kiln/base/error.h"
#include "kiln/model/tokenizer_utf8.h"

namespace kiln::model {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// "<0x41>" -> 0x41; -1 for anything else.
int parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int value = 0;
  for (char c : piece.substr(3, 2)) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(TokenizerVocab vocab) : Tokenizer(std::move(vocab)) {
    KILN_CHECK(vocab_.pre.empty() || vocab_.pre == "default",
               "tokenizer pre-type '{}' is not supported for a SentencePiece (llama) vocab",
               vocab_.pre);
    KILN_CHECK(!vocab_.scores.empty() || !vocab_.merges.empty(),
               "SentencePiece tokenizer has neither token scores nor merges");
    byte_ids_.fill(-1);
    const bool typed = !vocab_.token_types.empty();
    // sentencepiece merges into normal, user-defined and unused pieces only; control, unknown
    // and byte pieces never come out of a merge.
    pieces_.build(vocab_.tokens, [&](int32_t id) {
      const TokenType t = types_[id];
      if (t != TokenType::kNormal && t != TokenType::kUserDefined && t != TokenType::kUnused) {
        return false;
      }
      return typed || parse_byte_piece(vocab_.tokens[id]) < 0;
    });
    for (size_t i = 0; i < vocab_.tokens.size(); ++i) {
      const TokenType t = types_[i];
      const auto id = static_cast<int32_t>(i);
      if (t == TokenType::kByte || !typed) {
        const int b = parse_byte_piece(vocab_.tokens[i]);
        if (b >= 0 && byte_ids_[b] < 0) byte_ids_[b] = id;
      }
    }
    unk_ = vocab_.unk_id.value_or(kNoToken);
    for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) add_merge(rank);
  }

 protected:
  void encode_fragment(std::string_view text, bool text_start,
                       std::vector<int32_t>& out) const override;

  void append_token_bytes(int32_t id, std::string& out) const override {
    if (types_[id] == TokenType::kByte) {
      const int b = parse_byte_piece(vocab_.tokens[id]);
      if (b >= 0) {
        out.push_back(static_cast<char>(b));
        return;
      }
    }
    std::string_view piece = vocab_.tokens[id];
    for (size_t pos = 0;;) {
      const size_t hit = piece.find(kSpaceSymbol, pos);
      if (hit == std::string_view::npos) {
        out.append(piece.substr(pos));
        return;
      }
      out.append(piece.substr(pos, hit - pos));
      out.push_back(' ');
      pos = hit + kSpaceSymbol.size();
    }
  }

 private:
  // A run of the normalized text; a merge keeps its two halves so that a merge into an unused
  // piece can be undone, as sentencepiece does.
  struct Node {
    uint32_t start, len;
    int32_t left, right;  // child nodes, -1 for a single character
  };
  struct Symbol {
    uint32_t len;  // 0 once merged into its left neighbour
    int32_t prev, next;
    int32_t node;
  };
  struct Candidate {
    float score;
    int32_t left, right;
    uint32_t len;
  };
  struct Lower {
    bool operator()(const Candidate& a, const Candidate& b) const {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
  };

  // HF tokenizer.json BPE: the pair (left, right) merges with priority -rank. A piece may hold
  // spaces only as U+2581, so the merge's halves are split at its one ASCII space; when there
  // are several, the first split whose halves are both pieces.
  void add_merge(size_t rank) {
    const std::string& m = vocab_.merges[rank];
    for (size_t sp = m.find(' '); sp != std::string::npos; sp = m.find(' ', sp + 1)) {
      const int32_t l = pieces_.find_or(std::string_view(m).substr(0, sp), -1);
      const int32_t r = pieces_.find_or(std::string_view(m).substr(sp + 1), -1);
      if (l < 0 || r < 0) continue;
      merge_rank_.emplace(pair_key(l, r), static_cast<float>(rank));
      return;
    }
  }
  static uint64_t pair_key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  // The priority of merging two adjacent symbols into `id`: its score (sentencepiece), or
  // minus the rank of the pair (tokenizer.json merges); nullopt: they do not merge.
  std::optional<float> merge_priority(std::string_view left, std::string_view right,
                                      int32_t id) const {
    if (merge_rank_.empty()) {
      // A vocabulary without scores (a tokenizer.json may give none, and no merges either):
      // every merge is as good as another, so pairs merge left to right.
      const auto i = static_cast<size_t>(id);
      return i < vocab_.scores.size() ? vocab_.scores[i] : 0.0f;
    }
    const int32_t l = pieces_.find_or(left, -1);
    const int32_t r = pieces_.find_or(right, -1);
    if (l < 0 || r < 0) return std::nullopt;
    auto it = merge_rank_.find(pair_key(l, r));
    if (it == merge_rank_.end()) return std::nullopt;
    return -it->second;
  }

  void emit(std::string_view norm, const std::vector<Node>& nodes, int32_t node,
            std::vector<int32_t>& out) const;

  PieceIndex pieces_;
  std::unordered_map<uint64_t, float> merge_rank_;  // empty: merge by scores
  std::array<int32_t, 256> byte_ids_;
  int32_t unk_ = kNoToken;
};

void SpmTokenizer::encode_fragment(std::string_view text, bool text_start,
                                   std::vector<int32_t>& out) const {
  std::string norm;
  norm.reserve(text.size() + 8);
  const bool opens_with_space = !text.empty() && text[0] == ' ';
  if (vocab_.add_space_prefix && text_start &&
      !(vocab_.space_prefix_unless_space && opens_with_space)) {
    norm += kSpaceSymbol;
  }
  for (char c : text) {
    if (c == ' ') {
      norm += kSpaceSymbol;
    } else {
      norm.push_back(c);
    }
  }
  if (norm.empty()) return;
  KILN_CHECK(norm.size() < UINT32_MAX, "text of {} bytes is too long to tokenize", norm.size());

  std::vector<Node> nodes;
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < norm.size();) {
    // An ill-formed byte is a symbol of its own; it ends as a byte token.
    const size_t len =
        std::max<size_t>(1, utf8_sequence_length(std::string_view(norm).substr(pos)));
    const auto index = static_cast<int32_t>(symbols.size());
    nodes.push_back(Node{static_cast<uint32_t>(pos), static_cast<uint32_t>(len), -1, -1});
    symbols.push_back(Symbol{static_cast<uint32_t>(len), index - 1, index + 1, index});
    pos += len;
  }
  symbols.back().next = -1;

  std::priority_queue<Candidate, std::vector<Candidate>, Lower> agenda;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Node& n = nodes[symbols[left].node];
    const uint32_t len = symbols[left].len + symbols[right].len;
    const std::string_view joined = std::string_view(norm).substr(n.start, len);
    const int32_t id = pieces_.find_or(joined, -1);
    if (id < 0) return;
    const std::optional<float> priority =
        merge_priority(joined.substr(0, symbols[left].len), joined.substr(symbols[left].len), id);
    if (priority) agenda.push(Candidate{*priority, left, right, len});
  };
  for (size_t i = 1; i < symbols.size(); ++i) {
    consider(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  }

  while (!agenda.empty()) {
    const Candidate top = agenda.top();
    agenda.pop();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    // Stale candidate: one side was merged away or grew since it was queued.
    if (left.len == 0 || right.len == 0 || left.next != top.right ||
        left.len + right.len != top.len) {
      continue;
    }
    const Node& ln = nodes[left.node];
    nodes.push_back(Node{ln.start, top.len, left.node, right.node});
    left.node = static_cast<int32_t>(nodes.size() - 1);
    left.len = top.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    consider(left.prev, top.left);
    consider(top.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) emit(norm, nodes, symbols[i].node, out);
}

void SpmTokenizer::emit(std::string_view norm, const std::vector<Node>& nodes, int32_t node,
                        std::vector<int32_t>& out) const {
  const Node& n = nodes[node];
  const std::string_view piece = norm.substr(n.start, n.len);
  const int32_t id = pieces_.find_or(piece, -1);
  if (id >= 0) {
    if (types_[id] == TokenType::kUnused && n.left >= 0) {
      emit(norm, nodes, n.left, out);
      emit(norm, nodes, n.right, out);
    } else {
      out.push_back(id);
    }
    return;
  }
  // Byte fallback; a vocab without byte pieces gives one unknown token per piece instead.
  bool all_bytes = true;
  for (unsigned char b : piece) all_bytes = all_bytes && byte_ids_[b] >= 0;
  if (all_bytes) {
    for (unsigned char b : piece) out.push_back(byte_ids_[b]);
    return;
  }
  KILN_CHECK(unk_ != kNoToken,
             "cannot tokenize '{}': the vocab has neither its bytes nor an "
             "unknown token",
             piece);
  out.push_back(unk_);
}

}  // namespace

std::unique_ptr<Tokenizer> make_spm_tokenizer(TokenizerVocab vocab) {
  return std::make_unique<SpmTokenizer>(std::move(vocab));
}

}  // namespace kiln::model
