// The Engine over FakeModel for tests: a collector of each request's events and a harness
// that owns the pool, model and engine and compares outputs with reference_generate.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "engine/fake_model.h"
#include "kiln/engine/engine.h"
#include "kiln/engine/kv_pool.h"

namespace kiln::engine::testing {

using namespace std::chrono_literals;

inline constexpr int64_t kVocab = 512;

struct Result {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<std::string> deltas;
  std::vector<TokenLogprob> logprobs;
  std::vector<TokenLogprob> prompt_logprobs;
  int prompt_logprob_events = 0;  // events that carried prompt logprobs
  FinishReason reason = FinishReason::None;
  std::string matched_stop;
  std::string error;
  int finished_events = 0;
  int cached_tokens = 0;
  int prompt_tokens = 0;
  int completion_tokens = 0;
};

class Collector {
 public:
  EventCallback callback() {
    return [this](const RequestEvent& e) {
      std::lock_guard lk(mu_);
      Result& r = results_[e.request_id];
      EXPECT_EQ(r.finished_events, 0) << "event after the finished event";
      r.tokens.insert(r.tokens.end(), e.new_tokens.begin(), e.new_tokens.end());
      r.text += e.text_delta;
      r.deltas.push_back(e.text_delta);
      r.logprobs.insert(r.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
      if (!e.prompt_logprobs.empty()) {
        ++r.prompt_logprob_events;
        r.prompt_logprobs = e.prompt_logprobs;
      }
      r.cached_tokens = e.cached_tokens;
      r.prompt_tokens = e.prompt_tokens;
      r.completion_tokens = e.completion_tokens;
      if (e.finished) {
        ++r.finished_events;
        r.reason = e.finish_reason;
        r.matched_stop = e.matched_stop;
        r.error = e.error;
        ++finished_;
        cv_.notify_all();
      }
    };
  }
  bool wait(int n, std::chrono::milliseconds timeout = 60s) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, timeout, [&] { return finished_ >= n; });
  }
  Result get(uint64_t id) {
    std::lock_guard lk(mu_);
    return results_[id];
  }
  int finished() {
    std::lock_guard lk(mu_);
    return finished_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Result> results_;
  int finished_ = 0;
};

inline GenerateRequest make_request(int prompt_len, uint64_t seed, int max_new, double temperature,
                                    bool ignore_eos = true) {
  std::mt19937_64 rng(seed * 7919 + 1);
  GenerateRequest r;
  for (int i = 0; i < prompt_len; ++i)
    r.prompt_ids.push_back(3 + static_cast<int32_t>(rng() % (kVocab - 3)));
  r.sampling.temperature = temperature;
  r.sampling.top_k = temperature > 0 ? 50 : -1;
  r.sampling.seed = seed;
  r.stop.max_new_tokens = max_new;
  r.stop.ignore_eos = ignore_eos;
  return r;
}

// Queues `requests` on a scheduler driven directly (ids 1..n, seeded by their id) and steps it
// until every one has finished.
template <typename Scheduler>
void run_to_completion(Scheduler& sched, const std::vector<GenerateRequest>& requests,
                       const std::function<void(const RequestEvent&)>& on_event) {
  uint64_t id = 1;
  for (const GenerateRequest& r : requests) {
    sched.add(id, r, on_event, id);
    ++id;
  }
  for (int guard = 0; !sched.idle() && guard < 100000; ++guard) sched.step();
  EXPECT_TRUE(sched.idle());
}

// Holds every forward() until released, so tests can act while requests are in flight.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int entered = 0;
  void pass() {
    std::unique_lock lk(mu);
    ++entered;
    cv.notify_all();
    cv.wait(lk, [&] { return open; });
  }
  void wait_entered(int n) {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return entered >= n; });
  }
  void release() {
    std::lock_guard lk(mu);
    open = true;
    cv.notify_all();
  }
};

struct Harness {
  explicit Harness(KvPoolConfig pc = {2, 1, 8, 4, 256}, EngineConfig ec = {})
      : pool(pc), model(pool, kVocab), config(ec) {
    config.random_seed = 1;
    engine = std::make_unique<Engine>(model, pool, tok, config);
  }
  ~Harness() {
    engine.reset();
    EXPECT_TRUE(model.errors_copy().empty()) << model.errors_copy().front();
  }
  uint64_t submit(const GenerateRequest& r) {
    const uint64_t id = engine->submit(r, collector.callback());
    requests[id] = r;
    return id;
  }
  void expect_matches_reference(uint64_t id) {
    const GenerateRequest& r = requests.at(id);
    const Generation ref = reference_generate(r, *r.sampling.seed, tok, kVocab);
    const Result got = collector.get(id);
    EXPECT_EQ(got.finished_events, 1) << "request " << id;
    EXPECT_EQ(got.tokens, ref.tokens) << "request " << id;
    EXPECT_EQ(got.text, ref.text) << "request " << id;
    EXPECT_EQ(got.reason, ref.reason) << "request " << id;
    EXPECT_EQ(got.matched_stop, ref.matched_stop) << "request " << id;
    EXPECT_EQ(got.completion_tokens, static_cast<int>(ref.tokens.size()));
    EXPECT_EQ(got.prompt_tokens, static_cast<int>(r.prompt_ids.size()));
    EXPECT_TRUE(got.error.empty()) << got.error;
  }
  // Waits for the scheduler to report nothing queued or running, then checks that every used
  // page is a (evictable) prefix-cache page, and that a flush returns them all.
  // Stats are published after each step, so they can trail the events by one step.
  EngineStats wait_idle() {
    for (int i = 0; i < 5000; ++i) {
      const EngineStats s = engine->stats();
      if (s.queued == 0 && s.running == 0) return s;
      std::this_thread::sleep_for(1ms);
    }
    return engine->stats();
  }
  void expect_no_leak() {
    EngineStats s = wait_idle();
    ASSERT_EQ(s.queued + s.running, 0);
    EXPECT_EQ(s.kv_pages_used, s.kv_pages_cached);
    EXPECT_TRUE(engine->flush_cache());
    s = engine->stats();
    EXPECT_EQ(s.kv_pages_used, 0);
    EXPECT_EQ(s.kv_pages_cached, 0);
  }

  KvPool pool;
  FakeTokenizer tok{kVocab};
  FakeModel model;
  EngineConfig config;
  std::unique_ptr<Engine> engine;
  Collector collector;
  std::map<uint64_t, GenerateRequest> requests;
};

}  // namespace kiln::engine::testing
