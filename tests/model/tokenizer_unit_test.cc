// Tokenizer behaviour on small hand-made vocabularies, where the expected ids follow from the
// algorithm's definition: score order, unused-piece resegmentation, byte fallback, errors.
#include <gtest/gtest.h>

#include <map>

#include "kiln/base/error.h"
#include "kiln/model/incremental_decoder.h"
#include "kiln/model/tokenizer.h"

namespace kiln::model {
namespace {

constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;

// A SentencePiece-style vocab: <unk> <s> </s>, the 256 byte pieces, then `pieces`.
struct PieceSpec {
  std::string text;
  float score;
  int32_t type = kNormal;
};
TokenizerVocab spm_vocab(const std::vector<PieceSpec>& pieces) {
  TokenizerVocab v;
  v.model = "llama";
  v.pre = "default";
  auto add = [&](std::string text, float score, int32_t type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.token_types.push_back(type);
  };
  add("<unk>", 0, kUnknown);
  add("<s>", 0, kControl);
  add("</s>", 0, kControl);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, kByte);
  for (const PieceSpec& p : pieces) add(p.text, p.score, p.type);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_bos = true;
  return v;
}

std::vector<std::string> pieces_of(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.emplace_back(tok.piece(id));
  return out;
}

using Pieces = std::vector<std::string>;

// "abc": ab and bc are both pieces; the higher score merges first.
TEST(SpmTokenizer, HighestScoringPairMergesFirst) {
  auto ab_first =
      Tokenizer::create(spm_vocab({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -2}, {"bc", -3}}));
  EXPECT_EQ(pieces_of(*ab_first, ab_first->encode("abc", false, false)), (Pieces{"ab", "c"}));
  auto bc_first =
      Tokenizer::create(spm_vocab({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -3}, {"bc", -2}}));
  EXPECT_EQ(pieces_of(*bc_first, bc_first->encode("abc", false, false)), (Pieces{"a", "bc"}));
}

// Equal scores: the leftmost pair wins ("aaa" -> "aa" "a").
TEST(SpmTokenizer, TiesGoToTheLeftmostPair) {
  auto tok = Tokenizer::create(spm_vocab({{"a", -1}, {"aa", -2}}));
  EXPECT_EQ(pieces_of(*tok, tok->encode("aaa", false, false)), (Pieces{"aa", "a"}));
  EXPECT_EQ(pieces_of(*tok, tok->encode("aaaa", false, false)), (Pieces{"aa", "aa"}));
}

TEST(SpmTokenizer, SpacesBecomeLowerBlockAndPrefixFollowsTheFlag) {
  TokenizerVocab v =
      spm_vocab({{"\xE2\x96\x81", -1}, {"h", -1}, {"i", -1}, {"hi", -2}, {"\xE2\x96\x81hi", -3}});
  auto plain = Tokenizer::create(v);
  EXPECT_EQ(pieces_of(*plain, plain->encode("hi hi", false, false)),
            (Pieces{"hi", "\xE2\x96\x81hi"}));
  v.add_space_prefix = true;
  auto prefixed = Tokenizer::create(v);
  EXPECT_EQ(pieces_of(*prefixed, prefixed->encode("hi hi", false, false)),
            (Pieces{"\xE2\x96\x81hi", "\xE2\x96\x81hi"}));
  // decode drops the prefix again; so does the incremental decoder at the start of a text,
  // but not when it continues one.
  const std::vector<int32_t> ids = prefixed->encode("hi hi", false, false);
  EXPECT_EQ(prefixed->decode(ids, false), "hi hi");
  IncrementalDecoder continuing(*prefixed, false, /*at_text_start=*/false);
  EXPECT_EQ(continuing.push(ids[0]), " hi");
  // After a control token the prefix is added again (llama.cpp, HF legacy).
  EXPECT_EQ(pieces_of(*prefixed, prefixed->encode("hi</s>hi", false, true)),
            (Pieces{"\xE2\x96\x81hi", "</s>", "\xE2\x96\x81hi"}));
}

TEST(SpmTokenizer, UnknownCharactersFallBackToBytes) {
  auto tok = Tokenizer::create(spm_vocab({{"a", -1}}));
  const std::vector<int32_t> ids = tok->encode("a\xC3\xA9", false, false);  // "aé"
  EXPECT_EQ(pieces_of(*tok, ids), (Pieces{"a", "<0xC3>", "<0xA9>"}));
  EXPECT_EQ(tok->decode(ids, false), "a\xC3\xA9");
  IncrementalDecoder dec(*tok, false);
  EXPECT_EQ(dec.push(ids[0]), "a");
  EXPECT_EQ(dec.push(ids[1]), "");  // half a character is held back
  EXPECT_EQ(dec.pending_bytes(), 1u);
  EXPECT_EQ(dec.push(ids[2]), "\xC3\xA9");
  EXPECT_EQ(dec.finish(), "");
}

TEST(SpmTokenizer, IllFormedInputRoundTripsThroughBytesAndDecodesToReplacement) {
  auto tok = Tokenizer::create(spm_vocab({{"a", -1}}));
  const std::vector<int32_t> ids = tok->encode(
      "a\xFF"
      "a",
      false, false);
  EXPECT_EQ(pieces_of(*tok, ids), (Pieces{"a", "<0xFF>", "a"}));
  EXPECT_EQ(tok->decode(ids, false),
            "a\xEF\xBF\xBD"
            "a");
}

// A merge into an unused piece is undone afterwards, unless a later merge builds on it.
TEST(SpmTokenizer, UnusedPiecesAreResegmented) {
  auto tok = Tokenizer::create(
      spm_vocab({{"a", -1}, {"b", -1}, {"c", -1}, {"d", -1}, {"ab", -2, kUnused}, {"abc", -3}}));
  EXPECT_EQ(pieces_of(*tok, tok->encode("abc", false, false)), (Pieces{"abc"}));
  EXPECT_EQ(pieces_of(*tok, tok->encode("abd", false, false)), (Pieces{"a", "b", "d"}));
}

TEST(SpmTokenizer, ControlTokensAreMatchedOnlyWhenAsked) {
  auto tok = Tokenizer::create(spm_vocab({{"<", -1}, {">", -1}, {"s", -1}, {"x", -1}}));
  EXPECT_EQ(pieces_of(*tok, tok->encode("x<s>x", false, true)), (Pieces{"x", "<s>", "x"}));
  EXPECT_EQ(pieces_of(*tok, tok->encode("x<s>x", false, false)), (Pieces{"x", "<", "s", ">", "x"}));
  EXPECT_EQ(tok->encode("x", true, false), (std::vector<int32_t>{1, tok->encode("x", 0, 0)[0]}));
  EXPECT_EQ(tok->decode(tok->encode("x<s>x", true, true), true), "xx");
  EXPECT_EQ(tok->decode(tok->encode("x<s>x", true, true), false), "<s>x<s>x");
}

// User-defined tokens are matched whatever parse_special says, longest first.
TEST(SpmTokenizer, UserDefinedTokensAlwaysMatchLongestFirst) {
  auto tok =
      Tokenizer::create(spm_vocab({{"\n", 0, kUserDefined}, {"\n\n", 0, kUserDefined}, {"x", -1}}));
  EXPECT_EQ(pieces_of(*tok, tok->encode("x\n\n\nx", false, false)),
            (Pieces{"x", "\n\n", "\n", "x"}));
}

TEST(Tokenizer, EndOfGenerationIds) {
  TokenizerVocab v = spm_vocab({{"<end_of_turn>", 0, kControl}, {"<eot>", 0, kControl}});
  v.eot_ids = {static_cast<int32_t>(v.tokens.size() - 1)};
  auto tok = Tokenizer::create(v);
  EXPECT_TRUE(tok->is_end_of_generation(2));                                  // eos
  EXPECT_TRUE(tok->is_end_of_generation(*tok->find_token("<end_of_turn>")));  // by name
  EXPECT_TRUE(tok->is_end_of_generation(*tok->find_token("<eot>")));          // eot id
  EXPECT_FALSE(tok->is_end_of_generation(1));
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
}

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Tokenizer, BadInputGivesClearErrors) {
  auto tok = Tokenizer::create(spm_vocab({{"a", -1}}));
  const int32_t n = tok->vocab_size();
  EXPECT_NE(error_of([&] {
              tok->decode({0, n}, false);
            }).find("outside the vocabulary"),
            std::string::npos);
  EXPECT_THROW(tok->decode({-1}, false), Error);
  EXPECT_THROW(tok->piece(n), Error);
  EXPECT_THROW(tok->token_bytes(-5), Error);
  EXPECT_THROW(tok->is_end_of_generation(0) ? throw Error("x") : tok->is_special(n), Error);
  IncrementalDecoder dec(*tok, true);
  EXPECT_THROW(dec.push(n), Error);

  TokenizerVocab v = spm_vocab({});
  v.model = "wordpiece";
  EXPECT_NE(error_of([&] { Tokenizer::create(v); }).find("tokenizer model 'wordpiece'"),
            std::string::npos);
  v = spm_vocab({});
  v.pre = "xyz";
  EXPECT_NE(
      error_of([&] { Tokenizer::create(v); }).find("tokenizer pre-type 'xyz' is not supported"),
      std::string::npos);
  v = spm_vocab({});
  v.model = "gpt2";
  v.pre = "xyz";
  EXPECT_NE(
      error_of([&] { Tokenizer::create(v); }).find("tokenizer pre-type 'xyz' is not supported"),
      std::string::npos);
  v = spm_vocab({});
  v.scores.pop_back();
  EXPECT_THROW(Tokenizer::create(v), Error);
  v = spm_vocab({});
  v.token_types[5] = 42;
  EXPECT_THROW(Tokenizer::create(v), Error);
  v = spm_vocab({});
  v.bos_id = 100000;
  EXPECT_THROW(Tokenizer::create(v), Error);
  v = spm_vocab({});
  v.model = "gpt2";
  v.pre = "qwen2";  // no byte-level alphabet in this vocab
  EXPECT_NE(error_of([&] { Tokenizer::create(v); }).find("no token for byte"), std::string::npos);
}

TEST(TokenizerVocab, FromGgufMetadata) {
  std::map<std::string, std::string> strings = {{"tokenizer.ggml.model", "llama"},
                                                {"tokenizer.ggml.pre", "default"}};
  std::map<std::string, int64_t> ints = {{"tokenizer.ggml.bos_token_id", 2},
                                         {"tokenizer.ggml.eos_token_id", 1},
                                         {"tokenizer.ggml.eot_token_id", 3},
                                         {"tokenizer.ggml.padding_token_id", -1}};
  std::map<std::string, bool> bools = {{"tokenizer.ggml.add_space_prefix", false}};
  VocabMetadata md;
  md.get_string = [&](std::string_view k) -> std::optional<std::string> {
    auto it = strings.find(std::string(k));
    return it == strings.end() ? std::nullopt : std::optional(it->second);
  };
  md.get_int = [&](std::string_view k) -> std::optional<int64_t> {
    auto it = ints.find(std::string(k));
    return it == ints.end() ? std::nullopt : std::optional(it->second);
  };
  md.get_bool = [&](std::string_view k) -> std::optional<bool> {
    auto it = bools.find(std::string(k));
    return it == bools.end() ? std::nullopt : std::optional(it->second);
  };
  md.get_string_array = [](std::string_view k) -> std::optional<std::vector<std::string>> {
    if (k == "tokenizer.ggml.tokens")
      return std::vector<std::string>{"<pad>", "<eos>", "<bos>", "x"};
    return std::nullopt;
  };
  md.get_f32_array = [](std::string_view k) -> std::optional<std::vector<float>> {
    if (k == "tokenizer.ggml.scores") return std::vector<float>{0, 0, 0, -1};
    return std::nullopt;
  };
  md.get_i32_array = [](std::string_view) { return std::optional<std::vector<int32_t>>(); };

  TokenizerVocab v = vocab_from_gguf_metadata(md);
  EXPECT_EQ(v.model, "llama");
  EXPECT_EQ(v.tokens.size(), 4u);
  EXPECT_EQ(v.bos_id, 2);
  EXPECT_EQ(v.eos_id, 1);
  EXPECT_FALSE(v.pad_id.has_value());
  EXPECT_EQ(v.eot_ids, std::vector<int32_t>{3});
  EXPECT_TRUE(v.add_bos);  // llama default
  EXPECT_FALSE(v.add_space_prefix);
  EXPECT_EQ(Tokenizer::create(v)->encode("x", true, false), (std::vector<int32_t>{2, 3}));

  strings.erase("tokenizer.ggml.model");
  EXPECT_THROW(vocab_from_gguf_metadata(md), Error);
  strings["tokenizer.ggml.model"] = "gpt2";
  EXPECT_THROW(vocab_from_gguf_metadata(md), Error);  // gpt2 without merges
}

}  // namespace
}  // namespace kiln::model
