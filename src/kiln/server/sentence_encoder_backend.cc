#include "kiln/server/sentence_encoder_backend.h"

#include <exception>

#include "kiln/server/http_error.h"

namespace kiln::server {

SentenceEncoderBackend::SentenceEncoderBackend(const model::SentenceEncoder& encoder, int threads)
    : encoder_(encoder), pool_(threads) {}

std::vector<int32_t> SentenceEncoderBackend::tokenize(std::string_view text, bool truncate) const {
  return encoder_.tokenizer().encode_for_model(text, truncate ? encoder_.max_tokens() : 0);
}

std::vector<float> SentenceEncoderBackend::embed(const std::vector<std::vector<int32_t>>& inputs) {
  Job job{&inputs, {}, false};
  std::exception_ptr error;
  std::unique_lock lock(mu_);
  waiting_.push_back(&job);
  while (!job.done) {
    if (running_) {
      cv_.wait(lock);
      continue;
    }
    // No batch runs: this thread runs every waiting request's inputs as one batch (its own
    // among them), then wakes the others.
    running_ = true;
    std::vector<Job*> batch(waiting_.begin(), waiting_.end());
    waiting_.clear();
    lock.unlock();
    std::vector<std::vector<int32_t>> all;
    for (Job* j : batch) all.insert(all.end(), j->inputs->begin(), j->inputs->end());
    std::vector<float> vectors;
    std::exception_ptr failure;
    try {
      vectors = encoder_.embed(all, pool_);
    } catch (...) {
      failure = std::current_exception();
    }
    const auto dim = static_cast<size_t>(encoder_.dim());
    size_t offset = 0;
    for (Job* j : batch) {
      const size_t n = j->inputs->size() * dim;
      if (!failure) j->out.assign(vectors.begin() + offset, vectors.begin() + offset + n);
      offset += n;
    }
    lock.lock();
    for (Job* j : batch) j->done = true;
    if (failure) error = failure;  // reported to this request; the others see empty results
    running_ = false;
    cv_.notify_all();
  }
  if (error) std::rethrow_exception(error);
  if (job.out.size() != inputs.size() * static_cast<size_t>(encoder_.dim()))
    throw HttpError(500, "the batch this request was part of failed");
  return std::move(job.out);
}

std::string encoder_only_refusal(const std::string& model_id) {
  return "model '" + model_id +
         "' is an embedding model (a BERT encoder): it cannot generate text; use "
         "/v1/embeddings or /encode";
}

uint64_t EncoderOnlyGeneration::submit(engine::GenerateRequest, engine::EventCallback) {
  throw HttpError(400, encoder_only_refusal(model_id_));
}

std::vector<int32_t> EncoderTextCodec::encode(std::string_view text, bool add_special) const {
  return add_special ? encoder_.tokenizer().encode_for_model(text, 0)
                     : encoder_.tokenizer().encode(text);
}

std::string EncoderTextCodec::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  return encoder_.tokenizer().decode(ids, skip_special);
}

std::string EncoderTextCodec::render_chat(const std::vector<ChatMessage>&,
                                          const std::vector<std::string>&) const {
  throw HttpError(400, encoder_only_refusal(model_id_));
}

}  // namespace kiln::server
