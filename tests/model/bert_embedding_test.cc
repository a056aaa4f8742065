// The pieces of the BERT embedding path that need no checkpoint: the tokenizer.json reader's
// refusals, the WordPiece rules on a hand-made vocabulary, decoding, the template and
// truncation, and pooling. (Ids and embeddings against transformers/tokenizers:
// tests/oracle/test_embedding_oracle.py and tests/model/test_bert_tokenizer.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "kiln/model/bert_config.h"
#include "kiln/model/bert_tokenizer.h"
#include "kiln/model/embedding_pooling.h"

namespace kiln::model {
namespace {

using nlohmann::json;

json tokenizer_json() {
  json vocab = {{"[PAD]", 0}, {"[UNK]", 1}, {"[CLS]", 2},  {"[SEP]", 3}, {"hello", 4}, {"world", 5},
                {"un", 6},    {"##aff", 7}, {"##able", 8}, {"!", 9},     {"cafe", 10}, {"中", 11}};
  return {{"added_tokens",
           {{{"id", 0}, {"content", "[PAD]"}, {"special", true}},
            {{"id", 1}, {"content", "[UNK]"}, {"special", true}},
            {{"id", 2}, {"content", "[CLS]"}, {"special", true}},
            {{"id", 3}, {"content", "[SEP]"}, {"special", true}}}},
          {"normalizer",
           {{"type", "BertNormalizer"},
            {"clean_text", true},
            {"handle_chinese_chars", true},
            {"strip_accents", nullptr},
            {"lowercase", true}}},
          {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single",
             {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
              {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}}},
            {"special_tokens",
             {{"[CLS]", {{"id", "[CLS]"}, {"ids", {2}}, {"tokens", {"[CLS]"}}}},
              {"[SEP]", {{"id", "[SEP]"}, {"ids", {3}}, {"tokens", {"[SEP]"}}}}}}}},
          {"model",
           {{"type", "WordPiece"},
            {"unk_token", "[UNK]"},
            {"continuing_subword_prefix", "##"},
            {"max_input_chars_per_word", 10},
            {"vocab", vocab}}}};
}

TEST(BertTokenizer, WordPieceNormalizerAndTemplate) {
  const BertTokenizer t = BertTokenizer::from_json(tokenizer_json());
  EXPECT_EQ(t.encode("Hello WORLD!"), (std::vector<int32_t>{4, 5, 9}));
  EXPECT_EQ(t.encode("unaffable"), (std::vector<int32_t>{6, 7, 8}));
  EXPECT_EQ(t.encode("unaffablex"), (std::vector<int32_t>{1}));    // a part no piece covers
  EXPECT_EQ(t.encode("helloooooooo"), (std::vector<int32_t>{1}));  // > 10 characters
  EXPECT_EQ(t.encode("Café"), (std::vector<int32_t>{10}));         // accent stripped
  EXPECT_EQ(t.encode("hello中world"), (std::vector<int32_t>{4, 11, 5}));
  EXPECT_EQ(t.encode("hello\x01\u200b world"), (std::vector<int32_t>{4, 5}));  // control, format
  EXPECT_EQ(t.encode("hello[SEP]world"), (std::vector<int32_t>{4, 3, 5}));     // raw added token
  EXPECT_EQ(t.encode(""), std::vector<int32_t>{});
  EXPECT_EQ(t.encode_for_model("hello world", 0), (std::vector<int32_t>{2, 4, 5, 3}));
  EXPECT_EQ(t.encode_for_model("hello world hello", 4), (std::vector<int32_t>{2, 4, 5, 3}));
  EXPECT_EQ(t.encode_for_model("", 4), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(t.decode({2, 6, 7, 8, 9, 3}, /*skip_special=*/true), "unaffable !");
  EXPECT_EQ(t.decode({2, 4, 3}, /*skip_special=*/false), "[CLS] hello [SEP]");
}

TEST(BertTokenizer, RefusesWhatItDoesNotImplement) {
  json j = tokenizer_json();
  j["model"]["type"] = "BPE";
  EXPECT_THROW(BertTokenizer::from_json(j), Error);
  j = tokenizer_json();
  j["normalizer"] = {{"type", "NFKC"}};
  EXPECT_THROW(BertTokenizer::from_json(j), Error);
  j = tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_THROW(BertTokenizer::from_json(j), Error);
  j = tokenizer_json();
  j["post_processor"] = {{"type", "RobertaProcessing"}};
  EXPECT_THROW(BertTokenizer::from_json(j), Error);
  j = tokenizer_json();
  j["model"]["unk_token"] = "<unk>";
  EXPECT_THROW(BertTokenizer::from_json(j), Error);
}

TEST(BertConfig, ReadsAndRefuses) {
  json c = {{"model_type", "bert"},          {"vocab_size", 100},        {"hidden_size", 8},
            {"num_hidden_layers", 2},        {"num_attention_heads", 2}, {"intermediate_size", 16},
            {"max_position_embeddings", 32}, {"type_vocab_size", 2},     {"hidden_act", "gelu"}};
  const BertConfig b = bert_config_from_hf(c);
  EXPECT_EQ(b.head_dim(), 4);
  EXPECT_EQ(b.activation, BertActivation::kGeluErf);
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, json>>{{"hidden_act", "relu"},
                                                 {"position_embedding_type", "relative_key"},
                                                 {"num_attention_heads", 3},
                                                 {"hidden_size", 0},
                                                 {"model_type", "roberta"}}) {
    json bad = c;
    bad[key] = value;
    EXPECT_THROW(bert_config_from_hf(bad), Error) << key;
  }
}

TEST(EmbeddingPooling, EveryModeAndNormalize) {
  const std::vector<float> h = {1, 2, 3, -4, 5, 0};  // 3 tokens x 2 dims
  std::vector<float> out(2);
  pool_hidden(h.data(), 3, 2, {Pooling::kMean, false}, out.data());
  EXPECT_EQ(out, (std::vector<float>{3, -2.0f / 3}));
  pool_hidden(h.data(), 3, 2, {Pooling::kCls, false}, out.data());
  EXPECT_EQ(out, (std::vector<float>{1, 2}));
  pool_hidden(h.data(), 3, 2, {Pooling::kLast, false}, out.data());
  EXPECT_EQ(out, (std::vector<float>{5, 0}));
  pool_hidden(h.data(), 3, 2, {Pooling::kMax, false}, out.data());
  EXPECT_EQ(out, (std::vector<float>{5, 2}));
  pool_hidden(h.data(), 3, 2, {Pooling::kCls, true}, out.data());
  EXPECT_NEAR(out[0], 1 / std::sqrt(5.0f), 1e-7);
  EXPECT_NEAR(out[1], 2 / std::sqrt(5.0f), 1e-7);
  const std::vector<float> zero = {0, 0};
  pool_hidden(zero.data(), 1, 2, {Pooling::kMean, true}, out.data());
  EXPECT_EQ(out, (std::vector<float>{0, 0}));  // a zero vector stays zero
  EXPECT_EQ(pooling_from_name("cls"), Pooling::kCls);
  EXPECT_FALSE(pooling_from_name("sum").has_value());
}

}  // namespace
}  // namespace kiln::model
