// tokenizer.json -> TokenizerVocab: both supported families on small inline files, what
// tokenizer_config.json and generation_config.json add, and one-line refusals. (Agreement
// with the `tokenizers` library on real text is tests/model/test_hf_tokenizer.py.)
#include "kiln/model/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <limits>

#include "kiln/base/error.h"
#include "kiln/model/tokenizer.h"

namespace kiln::model {
namespace {

using nlohmann::json;

// A byte-level BPE over "a", "b", "ab", with Llama 3's split regex.
json byte_level() {
  return json::parse(R"({
    "added_tokens": [{"id": 4, "content": "<|end|>", "special": true},
                     {"id": 5, "content": "<think>", "special": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
       "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<|end|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]},
    "model": {"type": "BPE", "ignore_merges": true, "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3},
              "merges": [["a", "b"]]}
  })");
}

// A SentencePiece-style BPE: Metaspace, byte fallback, string merges.
json metaspace() {
  return json::parse(R"({
    "added_tokens": [{"id": 0, "content": "<unk>", "special": true},
                     {"id": 1, "content": "<s>", "special": true}],
    "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false},
    "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
              "vocab": {"<unk>": 0, "<s>": 1, "<0x21>": 2, "▁": 3, "h": 4, "i": 5, "▁h": 6, "▁hi": 7},
              "merges": ["▁ h", "▁h i"]}
  })");
}

std::string error_of(const json& tok) {
  try {
    Tokenizer::create(vocab_from_hf_tokenizer(tok, json(), json()));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HfTokenizer, ByteLevelFamily) {
  TokenizerVocab v = vocab_from_hf_tokenizer(byte_level(), json(), json());
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "llama3");
  EXPECT_EQ(v.merges, std::vector<std::string>{"a b"});
  EXPECT_EQ(v.tokens.size(), 6u);
  EXPECT_EQ(v.token_types[4], static_cast<int32_t>(TokenType::kControl));
  EXPECT_EQ(v.token_types[5], static_cast<int32_t>(TokenType::kUserDefined));
  EXPECT_TRUE(v.add_bos);  // from the post-processor's template
  EXPECT_EQ(v.bos_id, 4);
  EXPECT_EQ(v.ignore_merges, true);
  // (A byte-level vocab needs all 256 byte characters to encode: see test_hf_tokenizer.py.)
  EXPECT_NE(error_of(byte_level()).find("no token for byte"), std::string::npos);
}

TEST(HfTokenizer, MetaspaceFamilyMergesByRank) {
  const json config = {{"bos_token", "<s>"}, {"add_bos_token", true}};
  const json gen = {{"eos_token_id", {1}}};
  TokenizerVocab v = vocab_from_hf_tokenizer(metaspace(), config, gen);
  EXPECT_EQ(v.model, "llama");
  EXPECT_TRUE(v.add_space_prefix);
  EXPECT_EQ(v.token_types[2], static_cast<int32_t>(TokenType::kByte));
  EXPECT_EQ(v.token_types[0], static_cast<int32_t>(TokenType::kUnknown));
  EXPECT_EQ(v.unk_id, 0);
  EXPECT_EQ(v.eot_ids, std::vector<int32_t>{1});
  auto tok = Tokenizer::create(v);
  // "hi hi!": ▁hi ▁hi, then '!' by byte fallback; no prefix after <s> ("first" scheme).
  EXPECT_EQ(tok->encode("hi hi!", true, true), (std::vector<int32_t>{1, 7, 7, 2}));
  EXPECT_EQ(tok->encode("<s>hi", false, true), (std::vector<int32_t>{1, 4, 5}));
  EXPECT_EQ(tok->encode(" hi", false, true), (std::vector<int32_t>{7}));
}

TEST(HfTokenizer, ChatTemplate) {
  EXPECT_EQ(chat_template_from_hf(json{{"chat_template", "{{x}}"}}), "{{x}}");
  EXPECT_EQ(chat_template_from_hf(json::parse(
                R"({"chat_template": [{"name": "tool_use", "template": "t"},
                                      {"name": "default", "template": "d"}]})")),
            "d");
  EXPECT_EQ(chat_template_from_hf(json()), "");
}

TEST(HfTokenizer, RefusesWhatItCannotRun) {
  json t = metaspace();
  t["model"]["type"] = "Unigram";
  EXPECT_NE(error_of(t).find("model type 'Unigram' is not supported"), std::string::npos);
  t = metaspace();
  t["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  EXPECT_NE(error_of(t).find("normalizer 'Precompiled' is not supported"), std::string::npos)
      << error_of(t);
  t = metaspace();
  t["pre_tokenizer"]["split"] = true;
  EXPECT_NE(error_of(t).find("split = true"), std::string::npos);
  t = byte_level();
  t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
  EXPECT_NE(error_of(t).find("regex is not supported"), std::string::npos);
  t = byte_level();
  t["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_NE(error_of(t).find("pre-tokenizer"), std::string::npos) << error_of(t);
  t = byte_level();
  t["added_tokens"][0]["id"] = 9;  // ids 4..8 then have no token
  EXPECT_NE(error_of(t).find("no token has id"), std::string::npos);
  EXPECT_NE(error_of(json::object()).find("no model"), std::string::npos);
}

// Found by fuzz/hf_tokenizer_fuzzer: a field of the wrong type escaped as nlohmann's type_error
// (which names neither file nor key), and an added token's id of -1 (or a vocab id of 2^64-1)
// wrapped the vocabulary size and indexed out of bounds.
TEST(HfTokenizer, RefusesFieldsOfTheWrongTypeNamingThem) {
  json t = byte_level();
  t["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = "no";
  EXPECT_NE(error_of(t).find("'add_prefix_space' must be true or false"), std::string::npos)
      << error_of(t);
  t = byte_level();
  t["pre_tokenizer"]["pretokenizers"][0]["pattern"] = 7;  // no Regex: unsupported
  EXPECT_NE(error_of(t).find("regex is not supported"), std::string::npos) << error_of(t);
  t = byte_level();
  t["model"]["ignore_merges"] = "yes";
  EXPECT_NE(error_of(t).find("'ignore_merges' must be true or false"), std::string::npos);
  t = byte_level();
  t["added_tokens"][0]["special"] = 1;
  EXPECT_NE(error_of(t).find("'special' must be true or false"), std::string::npos);
  t = byte_level();
  t["post_processor"]["single"][0]["SpecialToken"]["id"] = 4;
  EXPECT_NE(error_of(t).find("'id' must be a string"), std::string::npos) << error_of(t);
  t = metaspace();
  t["pre_tokenizer"]["prepend_scheme"] = false;
  EXPECT_NE(error_of(t).find("'prepend_scheme' must be a string"), std::string::npos);
  t = metaspace();
  t["model"]["byte_fallback"] = "true";
  EXPECT_NE(error_of(t).find("'byte_fallback' must be true or false"), std::string::npos);
  t = metaspace();
  t["model"]["merges"] = "\u2581 h";
  EXPECT_NE(error_of(t).find("'merges' must be a list"), std::string::npos);
}

TEST(HfTokenizer, RefusesTokenIdsOutOfRange) {
  json t = metaspace();
  t["added_tokens"][1]["id"] = -1;
  EXPECT_NE(error_of(t).find("an added token needs an id"), std::string::npos) << error_of(t);
  t = metaspace();
  t["added_tokens"][1]["id"] = 1.5;
  EXPECT_NE(error_of(t).find("an added token needs an id"), std::string::npos);
  t = metaspace();
  t["added_tokens"][1] = "<s>";
  EXPECT_NE(error_of(t).find("an added token needs an id"), std::string::npos);
  t = metaspace();
  t["model"]["vocab"]["h"] = std::numeric_limits<uint64_t>::max();
  EXPECT_NE(error_of(t).find("token id 18446744073709551615 is too large"), std::string::npos)
      << error_of(t);
  t = metaspace();
  t["added_tokens"] = {{"id", 0}};
  EXPECT_NE(error_of(t).find("'added_tokens' must be a list"), std::string::npos);
}

TEST(HfTokenizer, ChatTemplateListWithOddEntries) {
  EXPECT_EQ(chat_template_from_hf(json::parse(R"({"chat_template": [5, "x",
              {"name": 3}, {"name": "default", "template": 7}]})")),
            "");
}

}  // namespace
}  // namespace kiln::model
