#include "kiln/engine/engine.h"

#include <algorithm>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/kv_pool.h"
#include "kiln/engine/scheduler.h"
#include "kiln/engine/step_batch.h"
#include "kiln/engine/tokenizer_text.h"
#include "kiln/model/embedding_pooling.h"

namespace kiln::engine {

// Threading: submit/cancel/flush_cache/stats only touch the mailbox below under `mu`; the
// scheduler thread drains it between steps and is the only thread that touches the Scheduler
// (and so the executor, the KV pool and the prefix cache). Steps run without the lock held,
// so event callbacks may call back into the engine.
struct Engine::Impl {
  struct Submission {
    uint64_t id;
    GenerateRequest request;
    EventCallback on_event;
    uint64_t seed;
  };

  std::unique_ptr<TokenText> owned_tokenizer;  // the adapter, when built from model::Tokenizer
  ModelExecutor& exec;                         // the scheduler's (for the model's limits)
  Scheduler scheduler;
  int max_queued;

  mutable std::mutex mu;
  std::condition_variable wake;
  std::vector<Submission> submissions;
  std::vector<uint64_t> cancels;
  std::vector<std::promise<bool>*> flushes;
  bool stopping = false;
  bool exited = false;         // the thread no longer touches `scheduler`
  bool scheduler_idle = true;  // nothing the scheduler can do until the mailbox changes
  int64_t scheduler_queued = 0;
  EngineStats published;
  std::mt19937_64 rng;
  uint64_t next_id = 1;

  std::mutex join_mu;
  std::thread thread;

  Impl(ModelExecutor& executor, KvPool& pool, const TokenText& tokenizer,
       const EngineConfig& config, const SpeculativeResources& speculative,
       std::unique_ptr<TokenText> owned)
      : owned_tokenizer(std::move(owned)),
        exec(executor),
        scheduler(executor, pool, tokenizer, config, speculative),
        max_queued(config.max_queued_requests),
        rng(config.random_seed ? *config.random_seed : std::random_device{}()) {
    published = scheduler.stats();
    thread = std::thread([this] { loop(); });
  }

  void loop() {
    for (;;) {
      std::vector<Submission> subs;
      std::vector<uint64_t> cans;
      std::vector<std::promise<bool>*> fls;
      bool stop = false;
      {
        std::unique_lock lk(mu);
        wake.wait(lk, [&] {
          return stopping || !submissions.empty() || !cancels.empty() || !flushes.empty() ||
                 !scheduler_idle;
        });
        subs.swap(submissions);
        cans.swap(cancels);
        fls.swap(flushes);
        stop = stopping;
      }
      for (auto& s : subs) {
        try {
          scheduler.add(s.id, std::move(s.request), std::move(s.on_event), s.seed);
        } catch (const std::exception& e) {  // validated in submit(); belt and braces
          KILN_LOG_ERROR("request {} rejected: {}", s.id, e.what());
        }
      }
      for (uint64_t id : cans) scheduler.cancel(id);
      if (!fls.empty()) {
        const bool flushed = scheduler.flush_cache();
        {
          std::lock_guard lk(mu);  // publish first: the caller's next stats() sees the flush
          published = scheduler.stats();
        }
        for (auto* p : fls) p->set_value(flushed);
      }
      if (stop) {
        scheduler.abort_all("the engine is shutting down");
        std::lock_guard lk(mu);
        published = scheduler.stats();
        scheduler_queued = 0;
        exited = true;
        // Flushes that raced with shutdown are answered by flush_cache() itself now.
        for (auto* p : flushes) p->set_value(scheduler.flush_cache());
        flushes.clear();
        return;
      }
      bool progressed = false;
      try {
        progressed = scheduler.step();
      } catch (const std::exception& e) {
        // The scheduler handles executor errors itself; anything else is a bug: fail every
        // request rather than leave clients hanging, and keep serving.
        KILN_LOG_ERROR("scheduler step failed: {}", e.what());
        scheduler.abort_all(std::string("internal error: ") + e.what());
      }
      std::lock_guard lk(mu);
      published = scheduler.stats();
      scheduler_queued = published.queued;
      // No progress with work pending means nothing can be admitted until something changes
      // (a new submission, a cancel): sleep instead of spinning.
      scheduler_idle = scheduler.idle() || !progressed;
    }
  }
};

Engine::Engine(ModelExecutor& executor, KvPool& pool, const TokenText& tokenizer,
               const EngineConfig& config, const SpeculativeResources& speculative)
    : impl_(std::make_unique<Impl>(executor, pool, tokenizer, config, speculative, nullptr)) {}

Engine::Engine(ModelExecutor& executor, KvPool& pool, const model::Tokenizer& tokenizer,
               const EngineConfig& config, const SpeculativeResources& speculative)
    : impl_([&] {
        auto adapter = std::make_unique<TokenizerText>(tokenizer);
        const TokenText& text = *adapter;
        return std::make_unique<Impl>(executor, pool, text, config, speculative,
                                      std::move(adapter));
      }()) {}

Engine::~Engine() { shutdown(); }

uint64_t Engine::submit(GenerateRequest request, EventCallback on_event) {
  impl_->scheduler.validate(request);
  std::lock_guard lk(impl_->mu);
  if (impl_->stopping) fail("the engine is shut down");
  const auto queued = static_cast<int64_t>(impl_->submissions.size()) + impl_->scheduler_queued;
  if (queued >= impl_->max_queued) throw QueueFull();
  const uint64_t id = impl_->next_id++;
  const uint64_t seed = request.sampling.seed ? *request.sampling.seed : impl_->rng();
  impl_->submissions.push_back({id, std::move(request), std::move(on_event), seed});
  impl_->wake.notify_one();
  return id;
}

std::vector<float> Engine::embed(const std::vector<std::vector<int32_t>>& inputs, bool mean,
                                 bool normalize) {
  const int64_t context = impl_->exec.context_length();
  const int64_t vocab = impl_->exec.vocab_size();
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(!inputs[i].empty(), "embedding input {} is empty", i);
    KILN_CHECK(static_cast<int64_t>(inputs[i].size()) <= context,
               "embedding input {} has {} tokens; the context is {}", i, inputs[i].size(), context);
    for (int32_t id : inputs[i])
      KILN_CHECK(id >= 0 && id < vocab,
                 "embedding input {}: token id {} is outside the "
                 "vocabulary ({})",
                 i, id, vocab);
  }
  // Each input is a request of its own whose prompt rows share steps with generation
  // (scheduler.h); the results are collected here as they finish, in any order.
  struct Collector {
    std::mutex mu;
    std::condition_variable done;
    size_t left = 0;
    std::vector<std::vector<float>> rows;  // each input's pooled hidden state
    int64_t dim = 0;
    std::string error;
  };
  auto collector = std::make_shared<Collector>();
  collector->rows.resize(inputs.size());
  std::vector<GenerateRequest> requests(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    requests[i].prompt_ids = inputs[i];
    requests[i].stop.max_new_tokens = 0;
    requests[i].hidden = mean ? HiddenOutput::kMean : HiddenOutput::kLastRow;
    try {
      impl_->scheduler.validate(requests[i]);
    } catch (const Error& e) {
      fail("embedding input {}: {}", i, e.what());
    }
  }
  std::vector<uint64_t> submitted;
  try {
    for (size_t i = 0; i < inputs.size(); ++i) {
      {
        std::lock_guard lk(collector->mu);
        ++collector->left;
      }
      submitted.push_back(submit(std::move(requests[i]), [collector, i](const RequestEvent& ev) {
        if (!ev.finished) return;
        std::lock_guard lk(collector->mu);
        if (!ev.error.empty() || ev.finish_reason == FinishReason::Abort) {
          if (collector->error.empty())
            collector->error = ev.error.empty() ? "the embedding request was aborted" : ev.error;
        } else {
          collector->rows[i] = ev.hidden;
          collector->dim = ev.hidden_dim;
        }
        if (--collector->left == 0) collector->done.notify_all();
      }));
    }
  } catch (...) {  // a full queue: what was queued is withdrawn, the caller retries
    {
      std::lock_guard lk(collector->mu);
      --collector->left;  // the input whose submit threw
    }
    for (uint64_t id : submitted) cancel(id);
    std::unique_lock lk(collector->mu);
    collector->done.wait(lk, [&] { return collector->left == 0; });
    throw;
  }
  std::unique_lock lk(collector->mu);
  collector->done.wait(lk, [&] { return collector->left == 0; });
  if (!collector->error.empty()) fail("{}", collector->error);
  const int64_t dim = collector->dim;
  std::vector<float> vectors(inputs.size() * static_cast<size_t>(dim));
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(static_cast<int64_t>(collector->rows[i].size()) == dim,
               "embedding input {}: {} hidden values came back for {} dimensions", i,
               collector->rows[i].size(), dim);
    // The scheduler pooled already (last row or mean): one row, normalized here as asked.
    model::pool_hidden(collector->rows[i].data(), 1, dim, {model::Pooling::kLast, normalize},
                       vectors.data() + i * static_cast<size_t>(dim));
  }
  return vectors;
}

void Engine::cancel(uint64_t request_id) {
  std::lock_guard lk(impl_->mu);
  if (impl_->exited) return;
  impl_->cancels.push_back(request_id);
  impl_->wake.notify_one();
}

bool Engine::flush_cache() {
  std::promise<bool> done;
  auto result = done.get_future();
  {
    std::lock_guard lk(impl_->mu);
    // After the thread has exited the scheduler is ours (under mu) to flush directly.
    if (impl_->exited) return impl_->scheduler.flush_cache();
    impl_->flushes.push_back(&done);
    impl_->wake.notify_one();
  }
  return result.get();
}

EngineStats Engine::stats() const {
  std::lock_guard lk(impl_->mu);
  EngineStats s = impl_->published;
  s.queued += static_cast<int64_t>(impl_->submissions.size());
  if (impl_->exited) s = impl_->scheduler.stats();
  return s;
}

void Engine::shutdown() {
  {
    std::lock_guard lk(impl_->mu);
    impl_->stopping = true;
    impl_->wake.notify_one();
  }
  std::lock_guard jl(impl_->join_mu);
  if (impl_->thread.joinable() && impl_->thread.get_id() != std::this_thread::get_id())
    impl_->thread.join();
}

}  // namespace kiln::engine
