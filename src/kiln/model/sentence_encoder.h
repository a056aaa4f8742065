// A sentence-embedding model folder, as sentence-transformers lays it out: a BERT checkpoint
// (config.json, model.safetensors, tokenizer.json) plus modules.json naming the Pooling module
// (its <path>/config.json says which pooling) and an optional Normalize module, and
// sentence_bert_config.json's max_seq_length (the truncation length; else the model's position
// limit). Without modules.json the folder is a plain BERT checkpoint: mean pooling, no
// normalization. Modules kiln does not run (Dense, ...) are refused by name.
//
// Or a GGUF file llama.cpp's converter made from such a folder (architecture "bert"): the
// same encoder over the file's tensors (any type kiln reads, quantized ones dequantized), its
// vocabulary's WPM tokenizer (llama.cpp's: tokenizer_wpm.h), pooling from bert.pooling_type
// and vectors normalized, as llama.cpp's embedding tools do; truncation at the position limit
// (the folder's max_seq_length is not in the file).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/thread_pool.h"
#include "kiln/model/bert_encoder.h"
#include "kiln/model/bert_tokenizer.h"
#include "kiln/model/embedding_pooling.h"

namespace kiln::model {

class SentenceEncoder {
 public:
  // Whether `path` is a folder whose config.json describes a BERT encoder, or a GGUF file of
  // architecture "bert".
  static bool is_encoder_model(const std::string& path);

  // Throws kiln::Error naming the folder and the problem. `precision`: bert_encoder.h.
  explicit SentenceEncoder(const std::string& path,
                           EncoderPrecision precision = EncoderPrecision::kBf16);

  const std::string& dir() const { return dir_; }
  const EncoderTokenizer& tokenizer() const { return *tokenizer_; }
  const BertConfig& config() const { return encoder_->config(); }
  const PoolingSpec& pooling() const { return pooling_; }
  EncoderPrecision precision() const { return encoder_->precision(); }
  int64_t dim() const { return config().hidden; }
  // Tokens of one input at most, the template's [CLS]/[SEP] included.
  size_t max_tokens() const { return max_tokens_; }

  // The model's input for a text: [CLS] tokens [SEP], truncated to max_tokens().
  std::vector<int32_t> tokenize(std::string_view text) const {
    return tokenizer_->encode_for_model(text, max_tokens_);
  }

  // One embedding per sequence (row-major [n, dim]); sequences are model inputs (tokenize()'s,
  // or ids of at most max_tokens()). Runs them in packed batches of a bounded token count.
  std::vector<float> embed(const std::vector<std::vector<int32_t>>& sequences, ThreadPool& pool,
                           const PoolingSpec& spec) const;
  std::vector<float> embed(const std::vector<std::vector<int32_t>>& sequences,
                           ThreadPool& pool) const {
    return embed(sequences, pool, pooling_);
  }

 private:
  std::string dir_;
  std::unique_ptr<EncoderTokenizer> tokenizer_;
  std::unique_ptr<BertEncoder> encoder_;
  PoolingSpec pooling_;
  size_t max_tokens_ = 0;
};

}  // namespace kiln::model
