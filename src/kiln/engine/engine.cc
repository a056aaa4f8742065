#include "kiln/engine/engine.h"

#include <condition_variable>
#include <future>
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
  struct EmbedJob {
    const std::vector<std::vector<int32_t>>* inputs;
    bool mean;
    bool normalize;
    std::promise<std::vector<float>> result;
  };

  struct Submission {
    uint64_t id;
    GenerateRequest request;
    EventCallback on_event;
    uint64_t seed;
  };

  std::unique_ptr<TokenText> owned_tokenizer;  // the adapter, when built from model::Tokenizer
  ModelExecutor& exec;  // the scheduler's, used directly only for embedding steps
  KvPool& kv;
  Scheduler scheduler;
  int max_queued;

  mutable std::mutex mu;
  std::condition_variable wake;
  std::vector<Submission> submissions;
  std::vector<uint64_t> cancels;
  std::vector<std::promise<bool>*> flushes;
  std::vector<EmbedJob*> embeds;
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
        kv(pool),
        scheduler(executor, pool, tokenizer, config, speculative),
        max_queued(config.max_queued_requests),
        rng(config.random_seed ? *config.random_seed : std::random_device{}()) {
    published = scheduler.stats();
    thread = std::thread([this] { loop(); });
  }

  // One eager step of hidden-state prefills, one sequence per input, on pages borrowed from
  // the pool for the step.
  std::vector<float> run_embedding(const EmbedJob& job) {
    const int page = kv.page_size();
    std::vector<std::vector<int32_t>> pages(job.inputs->size());
    // clang-analyzer takes KvPool::free for libc free (as in kv_pool.cc).
    // NOLINTBEGIN(clang-analyzer-unix.Malloc)
    auto release = [&] {
      for (auto& p : pages)
        if (!p.empty()) kv.free(p);
    };
    // NOLINTEND(clang-analyzer-unix.Malloc)
    // Inputs that could not fit even an idle pool are the request's fault (400), not load.
    int64_t need_all = 0;
    for (const auto& ids : *job.inputs)
      need_all += (static_cast<int64_t>(ids.size()) + page - 1) / page;
    if (need_all > kv.n_pages())
      fail(
          "these embedding inputs need {} tokens of KV cache together, more than the pool's {}: "
          "send fewer inputs per request",
          need_all * page, kv.n_pages() * page);
    StepBatch batch;
    batch.hidden_states = true;
    for (size_t i = 0; i < job.inputs->size(); ++i) {
      const std::vector<int32_t>& ids = (*job.inputs)[i];
      const int64_t need = (static_cast<int64_t>(ids.size()) + page - 1) / page;
      if (!kv.alloc(need, pages[i])) {
        release();
        throw QueueFull("the KV cache has no room for these embedding inputs now; retry later");
      }
      batch.add_sequence(ids, 0, pages[i], page, /*want_logits=*/true, /*all_logits=*/job.mean);
    }
    StepOutput out;
    try {
      exec.forward(batch, out);
    } catch (...) {
      release();
      throw;
    }
    release();
    const int64_t dim = out.hidden_dim;
    std::vector<float> vectors(job.inputs->size() * static_cast<size_t>(dim));
    int64_t row = 0;
    for (size_t i = 0; i < job.inputs->size(); ++i) {
      const auto rows = job.mean ? static_cast<int64_t>((*job.inputs)[i].size()) : 1;
      model::pool_hidden(out.hidden.data() + row * dim, rows, dim,
                         {job.mean ? model::Pooling::kMean : model::Pooling::kLast, job.normalize},
                         vectors.data() + i * static_cast<size_t>(dim));
      row += rows;
    }
    return vectors;
  }

  void loop() {
    for (;;) {
      std::vector<Submission> subs;
      std::vector<uint64_t> cans;
      std::vector<std::promise<bool>*> fls;
      std::vector<EmbedJob*> embs;
      bool stop = false;
      {
        std::unique_lock lk(mu);
        wake.wait(lk, [&] {
          return stopping || !submissions.empty() || !cancels.empty() || !flushes.empty() ||
                 !embeds.empty() || !scheduler_idle;
        });
        subs.swap(submissions);
        cans.swap(cancels);
        fls.swap(flushes);
        embs.swap(embeds);
        stop = stopping;
      }
      for (EmbedJob* job : embs) {
        if (stop) {
          job->result.set_exception(std::make_exception_ptr(Error("the engine is shutting down")));
          continue;
        }
        try {
          job->result.set_value(run_embedding(*job));
        } catch (...) {
          job->result.set_exception(std::current_exception());
        }
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
  Impl::EmbedJob job{&inputs, mean, normalize, {}};
  auto result = job.result.get_future();
  {
    std::lock_guard lk(impl_->mu);
    if (impl_->stopping) fail("the engine is shut down");
    impl_->embeds.push_back(&job);
    impl_->wake.notify_one();
  }
  return result.get();
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
