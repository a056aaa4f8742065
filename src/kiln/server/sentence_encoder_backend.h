// Serving a sentence-embedding model (a BERT encoder folder, model/sentence_encoder.h):
//  - SentenceEncoderBackend embeds for /v1/embeddings and /encode. Requests that arrive while
//    a batch runs wait and are then run together as one packed batch (one forward pass over
//    all their texts), so concurrent clients share the matmuls instead of queueing one by one.
//  - EncoderOnlyGeneration and EncoderTextCodec stand where a generative model's engine and
//    tokenizer would: generation and chat requests are refused with a 400 naming why (the model
//    only embeds); /tokenize and /detokenize still work on the WordPiece vocabulary.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/base/thread_pool.h"
#include "kiln/model/sentence_encoder.h"
#include "kiln/server/backend.h"
#include "kiln/server/embedding_backend.h"

namespace kiln::server {

class SentenceEncoderBackend final : public EmbeddingBackend {
 public:
  SentenceEncoderBackend(const model::SentenceEncoder& encoder, int threads);

  int64_t dimensions() const override { return encoder_.dim(); }
  size_t max_tokens() const override { return encoder_.max_tokens(); }
  int64_t vocab_size() const override { return encoder_.config().vocab_size; }
  std::vector<int32_t> tokenize(std::string_view text, bool truncate) const override;
  std::vector<float> embed(const std::vector<std::vector<int32_t>>& inputs) override;

 private:
  struct Job {
    const std::vector<std::vector<int32_t>>* inputs;
    std::vector<float> out;
    bool done = false;
  };

  const model::SentenceEncoder& encoder_;
  ThreadPool pool_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> waiting_;
  bool running_ = false;  // a thread is running a batch
};

// The message every generation route answers on an embedding model.
std::string encoder_only_refusal(const std::string& model_id);

class EncoderOnlyGeneration final : public GenerationBackend {
 public:
  explicit EncoderOnlyGeneration(std::string model_id) : model_id_(std::move(model_id)) {}
  uint64_t submit(engine::GenerateRequest request, engine::EventCallback on_event) override;
  void cancel(uint64_t) override {}
  bool flush_cache() override { return true; }
  engine::EngineStats stats() const override { return {}; }

 private:
  std::string model_id_;
};

class EncoderTextCodec final : public TextCodec {
 public:
  EncoderTextCodec(const model::SentenceEncoder& encoder, std::string model_id)
      : encoder_(encoder), model_id_(std::move(model_id)) {}
  std::vector<int32_t> encode(std::string_view text, bool add_special) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override;
  std::string render_chat(const std::vector<ChatMessage>& messages,
                          const std::vector<std::string>& tools) const override;
  std::string tools_refusal() const override { return encoder_only_refusal(model_id_); }
  ToolCallFormat tool_call_format() const override { return ToolCallFormat::kNone; }
  int64_t vocab_size() const override { return encoder_.config().vocab_size; }
  Specials specials() const override { return {}; }

 private:
  const model::SentenceEncoder& encoder_;
  std::string model_id_;
};

}  // namespace kiln::server
