// Every tokenizer fixture against its independent reference: ids from the sentencepiece library
// (Gemma 3's real vocab) or HF tokenizers (BPEs trained with the Llama 3 / Qwen 2 regexes);
// decode inverts encode; the incremental decoder agrees with decode.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "kiln/model/incremental_decoder.h"
#include "kiln/model/tokenizer.h"
#include "kiln/model/tokenizer_utf8.h"
#include "tokenizer_test_support.h"

namespace kiln::model {
namespace {

using testing::load_cases;
using testing::load_vocab;
using testing::quoted;
using testing::TokenizerCase;

struct Fixture {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Tokenizer> with_space_prefix;  // same vocab, add_space_prefix switched on
  std::vector<TokenizerCase> cases;
};

// Loading the 262k-token Gemma vocab takes a moment: once per test binary.
const Fixture* load_fixture(const std::string& name, std::string* why) {
  static std::map<std::string, std::unique_ptr<Fixture>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  auto vocab_path = testing::fixture_path(name + "_vocab.json", why);
  auto cases_path = testing::fixture_path(name + "_cases.json", why);
  if (!vocab_path || !cases_path) return nullptr;
  auto f = std::make_unique<Fixture>();
  TokenizerVocab vocab = load_vocab(*vocab_path);
  TokenizerVocab prefixed = vocab;
  prefixed.add_space_prefix = true;
  f->tokenizer = Tokenizer::create(std::move(vocab));
  f->with_space_prefix = Tokenizer::create(std::move(prefixed));
  f->cases = load_cases(*cases_path);
  return cache.emplace(name, std::move(f)).first->second.get();
}

class TokenizerReference : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    fixture_ = load_fixture(GetParam(), &why);
    if (fixture_ == nullptr) GTEST_SKIP() << why;
    ASSERT_FALSE(fixture_->cases.empty());
  }
  const Tokenizer& tokenizer_for(const TokenizerCase& c) const {
    return c.space_prefix ? *fixture_->with_space_prefix : *fixture_->tokenizer;
  }
  const Fixture* fixture_ = nullptr;
};

TEST_P(TokenizerReference, EncodeMatchesReference) {
  size_t checked = 0;
  for (const TokenizerCase& c : fixture_->cases) {
    EXPECT_EQ(tokenizer_for(c).encode(c.text, /*add_special=*/false, c.parse_special), c.ids)
        << quoted(c.text) << " parse_special=" << c.parse_special
        << " space_prefix=" << c.space_prefix;
    ++checked;
  }
  EXPECT_GT(checked, 60u);
}

TEST_P(TokenizerReference, AddSpecialPrependsBosWhenTheVocabAsks) {
  const Tokenizer& tok = *fixture_->tokenizer;
  for (const TokenizerCase& c : fixture_->cases) {
    if (c.space_prefix) continue;
    std::vector<int32_t> expected = c.ids;
    if (tok.add_bos()) expected.insert(expected.begin(), tok.bos());
    EXPECT_EQ(tok.encode(c.text, /*add_special=*/true, c.parse_special), expected)
        << quoted(c.text);
  }
}

TEST_P(TokenizerReference, DecodeOfReferenceIdsGivesTheText) {
  for (const TokenizerCase& c : fixture_->cases) {
    EXPECT_EQ(tokenizer_for(c).decode(c.ids, /*skip_special=*/false), c.text)
        << quoted(c.text) << " space_prefix=" << c.space_prefix;
  }
}

TEST_P(TokenizerReference, DecodeInvertsEncode) {
  const Tokenizer& tok = *fixture_->tokenizer;
  for (const TokenizerCase& c : fixture_->cases) {
    if (c.space_prefix) continue;
    EXPECT_EQ(tok.decode(tok.encode(c.text, false, c.parse_special), false), c.text)
        << quoted(c.text);
    // BOS is dropped by skip_special; control tokens parsed from the text would be too.
    if (!c.parse_special) {
      EXPECT_EQ(tok.decode(tok.encode(c.text, true, false), true), c.text) << quoted(c.text);
    }
  }
}

TEST_P(TokenizerReference, IncrementalDecoderEqualsDecode) {
  const Tokenizer& base = *fixture_->tokenizer;
  for (const TokenizerCase& c : fixture_->cases) {
    const Tokenizer& tok = tokenizer_for(c);
    std::vector<int32_t> ids = c.ids;
    if (base.bos() != Tokenizer::kNoToken) ids.insert(ids.begin(), base.bos());
    for (bool skip : {false, true}) {
      IncrementalDecoder dec(tok, skip);
      std::string streamed;
      for (int32_t id : ids) {
        const std::string part = dec.push(id);
        // Every piece handed out is whole, valid UTF-8 on its own.
        std::string valid;
        append_valid_utf8(part, /*final=*/true, valid);
        EXPECT_EQ(valid, part) << quoted(c.text);
        streamed += part;
      }
      streamed += dec.finish();
      EXPECT_EQ(streamed, tok.decode(ids, skip)) << quoted(c.text) << " skip=" << skip;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerReference,
                         ::testing::Values("gemma3", "llama3_bpe", "qwen2_bpe"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kiln::model
